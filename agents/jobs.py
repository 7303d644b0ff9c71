"""A computation on a worker thread, so that an agent's event loop keeps answering meanwhile.

NumPy and CuPy release the GIL in their heavy loops, so a long join+eliminate on a worker thread
leaves the loop free to receive frames and send heartbeats: a long UTIL is not a dead agent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Job(Generic[T]):
    """Runs ``fn`` on a daemon thread (a daemon, so that a stopped agent exits at once).

    ``wake`` (if given) is called from the worker thread once ``fn`` has finished: the agent's
    transport then ends the wait of its loop at once, instead of at the loop's next poll."""

    def __init__(
        self, fn: Callable[[], T], name: str = "dcop-job", wake: Callable[[], None] | None = None
    ) -> None:
        self._fn = fn
        self._wake = wake
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._work, daemon=True, name=name).start()

    def _work(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # handed to the waiting thread by result()
            self._error = exc
        finally:
            self._done.set()
            if self._wake is not None:
                self._wake()

    def done(self) -> bool:
        """Whether the computation has finished (or failed)."""
        return self._done.is_set()

    def result(self) -> T:
        """The computation's value; re-raises what it raised. Waits if it is still running."""
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by _work before _done
