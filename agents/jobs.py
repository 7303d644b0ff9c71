"""A computation on a worker thread, so that an agent's event loop keeps answering meanwhile.

NumPy and CuPy release the GIL in their heavy loops, so a long join+eliminate on a worker thread
leaves the loop free to receive frames and send heartbeats: a long UTIL is not a dead agent.

An agent keeps one :class:`Worker` for all its jobs: a fresh thread per job cost every bucket
~0.2 ms more than a warm one (its start, and the new thread's first allocations and library
state; ``benchmarks/probes/gpu_bucket_context.py``, ``thread`` against ``loop``), on each agent
of the critical path.

A job that ends within milliseconds runs on the loop's own thread (``inline``, see
:func:`runs_inline`): handing it to the worker cost more than it saves. The worker sleeps until
the job arrives, and a thread woken from sleep runs the bucket on cold caches, on whichever core
the system gives it, while the loop thread has just decoded the bucket's tables: measured on the
H100 machine, GPU agents at n = 15 went from 0.018 to 0.012 s simulated, CPU agents at n = 12 from
0.0066 to 0.0057 s (medians of 3 seeds, an A/B in fresh processes on one machine).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Joined entries up to which a bucket's job runs inline, by where it runs: ~2 ms of NumPy on the
#: CPU, a few ms on the GPU (which the job waits for). Longer jobs go to the worker, so that the
#: loop keeps answering and heartbeating while they run.
INLINE_MAX_ENTRIES = {"cpu": 1_000_000, "gpu": 100_000_000}


def runs_inline(joined_entries: int, where: str) -> bool:
    """Whether a bucket of ``joined_entries`` run on ``where`` ("cpu"/"gpu") is short enough to
    run on the loop's thread."""
    return joined_entries <= INLINE_MAX_ENTRIES.get(where, 0)


class Worker:
    """One long-lived daemon thread that runs the jobs given to it in turn (a daemon, so that a
    stopped agent exits at once). The thread starts with the first job that does not run inline:
    the agents of a small problem never need it, and its start, stack and allocator arena were 20
    page faults of each forked agent's ~1550 (30 agents, ``benchmarks/distributed.py``)."""

    def __init__(self, name: str = "dcop-worker") -> None:
        self._queue: queue.SimpleQueue[Job[Any]] = queue.SimpleQueue()
        self._name = name
        self._thread: threading.Thread | None = None

    def submit(
        self, fn: Callable[[], T], wake: Callable[[], None] | None = None, inline: bool = False
    ) -> Job[T]:
        """Queue ``fn``; its :class:`Job` tells when it is done.

        ``wake`` (if given) is called once ``fn`` has finished (from the worker thread): the
        agent's transport then ends the wait of its loop at once, instead of at the loop's next
        poll. ``inline`` runs ``fn`` now, on the caller's thread (the job is done, and ``wake``
        called, when this returns)."""
        job: Job[T] = Job(fn, wake)
        if inline:
            job.run()
        else:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True, name=self._name)
                self._thread.start()
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
        """Compute (on the worker's thread, or the caller's for an inline job), then wake whoever
        waits."""
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
