"""When this process started, on the monotonic clock: the origin of a command's times.

``dcop run``'s ``times.total`` and ``--timeout`` count from the command's start, with the
interpreter's start-up, the imports and the agents' launch included: that is what a user waits.
"""

from __future__ import annotations

import os
import time


def process_started() -> float:
    """The monotonic time at which this process started (Linux: from /proc, to the clock tick;
    elsewhere: when this module was imported)."""
    try:
        with open(f"/proc/{os.getpid()}/stat", "rb") as f:
            stat = f.read()
        # field 22, counted after the command name's closing parenthesis (names may hold spaces)
        ticks = int(stat[stat.rindex(b")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return _FIRST_CALL
    now = time.monotonic()
    return now - max(0.0, min(age, now))


_FIRST_CALL = time.monotonic()
