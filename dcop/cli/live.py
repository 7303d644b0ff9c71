"""The live status of a distributed run: a rich display on a terminal, log lines elsewhere.

The coordinator calls the returned function about once a second with a
:class:`~dcop.coordinator.driver.Progress`: agents up, ready, candidate trees reported, UTIL
messages sent, results, bytes so far, phase and elapsed time. Off a terminal (a log file, CI)
each change of phase is one plain line on stderr, and the counts once every few seconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from dcop.cli.common import progress_line
from dcop.coordinator.driver import Progress

if TYPE_CHECKING:
    from rich.table import Table as RichTable

#: Seconds between plain count lines when the phase does not change.
PLAIN_EVERY_S = 5.0


def _line(s: Progress) -> str:
    return (
        f"[{s.elapsed_s:6.1f} s] {s.phase:<6} agents {s.hellos}/{s.agents} up, {s.ready} ready; "
        f"candidate trees {s.trees}/{s.trees_expected}; UTIL {s.utils}/{s.utils_expected}; "
        f"results {s.results}/{s.agents}; {s.sent_bytes / 2**20:.1f} MiB sent"
    )


def _table(s: Progress) -> RichTable:
    from rich.table import Table as RichTable

    table = RichTable(title=f"dcop run: {s.phase} ({s.elapsed_s:.1f} s)", show_header=False)
    table.add_row("agents up / ready", f"{s.hellos}/{s.agents} / {s.ready}")
    table.add_row("candidate trees reported", f"{s.trees}/{s.trees_expected}")
    table.add_row("UTIL messages sent", f"{s.utils}/{s.utils_expected}")
    table.add_row("results", f"{s.results}/{s.agents}")
    table.add_row("bytes sent so far", f"{s.sent_bytes / 2**20:.2f} MiB")
    if s.phases:
        table.add_row("agents by phase", ", ".join(f"{k} {v}" for k, v in sorted(s.phases.items())))
    return table


@contextmanager
def live_status(enabled: bool = True) -> Iterator[Callable[[Progress], None] | None]:
    """A status callback for the coordinator (None when ``enabled`` is False)."""
    if not enabled:
        yield None
        return
    if sys.stderr.isatty():
        from rich.console import Console  # only on a terminal (~20 ms of start-up)
        from rich.live import Live

        with Live(console=Console(stderr=True), transient=True, refresh_per_second=4) as live:
            yield lambda status: live.update(_table(status))
        return
    last_phase = [""]
    last_at = [0.0]

    def plain(status: Progress) -> None:
        now = time.monotonic()
        if status.phase != last_phase[0] or now - last_at[0] >= PLAIN_EVERY_S:
            last_phase[0], last_at[0] = status.phase, now
            progress_line(f"dcop: {_line(status)}")

    yield plain
