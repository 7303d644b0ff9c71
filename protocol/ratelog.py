"""Rate-limited log lines: a flood of refused frames must not flood the log (or slow the loop)."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

from dcop.protocol.constants import REFUSAL_LOG_INTERVAL_S


class RateLimitedLog:
    """At most one line per key (e.g. a peer's address and a reason) per ``interval_s``; the lines
    held back meanwhile are counted and the count is added to the next line for that key.

    Thread-safe: the ZAP handler logs from its own thread.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval_s: float = REFUSAL_LOG_INTERVAL_S,
        max_keys: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.max_keys = max_keys
        self.clock = clock
        # key -> (time of the last line, lines held back since)
        self._seen: OrderedDict[Hashable, tuple[float, int]] = OrderedDict()
        self._lock = threading.Lock()

    def log(self, level: int, key: Hashable, msg: str, *args: object) -> bool:
        """Log ``msg % args`` at ``level`` unless ``key`` was logged less than ``interval_s``
        ago; return whether a line was written."""
        now = self.clock()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last[0] < self.interval_s:
                self._seen[key] = (last[0], last[1] + 1)
                return False
            held = last[1] if last is not None else 0
            self._seen[key] = (now, 0)
            self._seen.move_to_end(key)
            while len(self._seen) > self.max_keys:  # a flood from many addresses stays bounded
                self._seen.popitem(last=False)
        if held:
            msg += " (and %d more like it in the last %.0f s)"
            args = (*args, held, now - last[0]) if last is not None else args
        self.logger.log(level, msg, *args)
        return True

    def warning(self, key: Hashable, msg: str, *args: object) -> bool:
        """:meth:`log` at WARNING."""
        return self.log(logging.WARNING, key, msg, *args)
