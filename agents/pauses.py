"""The Python collector's pauses in an agent: kept out of the solve, and measured.

An agent that has imported CuPy holds hundreds of thousands of long-lived objects; a full
collection walks all of them, tens of milliseconds in the middle of a bucket that itself takes
one. :func:`freeze_heap` moves everything alive at the end of set-up into the permanent
generation (``gc.freeze``), so later collections walk only what the solve allocated; forked
agents also keep the template's pages shared. :class:`GcPauses` adds up the pauses that remain,
reported with the agent's figures (``gc_pause_s``, ``gc_collections``).
"""

from __future__ import annotations

import gc
import time
from typing import Any


def freeze_heap() -> None:
    """Collect once, then exempt every surviving object from later collections."""
    gc.collect()
    gc.freeze()


class GcPauses:
    """Seconds spent in the collector since :meth:`start` (a ``gc.callbacks`` hook)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._began: float | None = None

    def _hook(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        elif self._began is not None:
            self.seconds += time.perf_counter() - self._began
            self.collections += 1
            self._began = None

    def start(self) -> GcPauses:
        """Begin counting (once per process)."""
        if self._hook not in gc.callbacks:
            gc.callbacks.append(self._hook)
        return self

    def stop(self) -> None:
        """Stop counting."""
        if self._hook in gc.callbacks:
            gc.callbacks.remove(self._hook)

    def figures(self) -> dict[str, float]:
        """``gc_pause_s`` and ``gc_collections`` for an agent's metrics."""
        return {"gc_pause_s": self.seconds, "gc_collections": float(self.collections)}
