"""A computation on a worker thread, so that an agent's event loop keeps answering meanwhile.

NumPy and CuPy release the GIL in their heavy loops, so a long join+eliminate on a worker thread
leaves the loop free to receive frames and send heartbeats: a long UTIL is not a dead agent.

An agent keeps one :class:`Worker` for all its jobs, rehearsed at set-up: a fresh thread per job
cost every bucket ~0.2 ms more than a warm one (its start, and the new thread's first
allocations and library state; ``benchmarks/results/gpu_bucket_context.json``, ``thread`` against
``loop``), on each agent of the critical path.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Worker:
    """One long-lived daemon thread that runs the jobs given to it in turn (a daemon, so that a
    stopped agent exits at once)."""

    def __init__(self, name: str = "dcop-worker") -> None:
        self._queue: queue.SimpleQueue[Job[Any]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, daemon=True, name=name).start()

    def submit(self, fn: Callable[[], T], wake: Callable[[], None] | None = None) -> Job[T]:
        """Queue ``fn``; its :class:`Job` tells when it is done.

        ``wake`` (if given) is called from the worker thread once ``fn`` has finished: the agent's
        transport then ends the wait of its loop at once, instead of at the loop's next poll."""
        job: Job[T] = Job(fn, wake)
        self._queue.put(job)
        return job

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the worker and wait for its value."""
        return self.submit(fn).result()

    def _serve(self) -> None:
        while True:
            self._queue.get().run()


class Job(Generic[T]):
    """One computation handed to a :class:`Worker`: whether it is done, and its value."""

    def __init__(self, fn: Callable[[], T], wake: Callable[[], None] | None = None) -> None:
        self._fn = fn
        self._wake = wake
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Compute (on the worker's thread), then wake whoever waits."""
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
        return self._value  # type: ignore[return-value]  # set by run before _done
