"""A check that a long table operation calls between the pieces it computes, so that a caller can
stop it (a deadline) inside one large bucket rather than only between two buckets.

A (mini-)bucket pass hears of every bucket through its progress hook, and the search's hook
raises past the deadline (:func:`dcop.bucketpass.bucket_pass`). One bucket of a z = 8 pass on
the random networks takes seconds; on a loaded 2-core machine, a minute: a hook heard only
between buckets held a 60 s run to 86 s. The pass sets its check here while it eliminates a
bucket (:func:`checked_between`), and NumPy's fused join+eliminate calls it between its blocks
and between the values of the eliminated variable within a block
(:meth:`dcop.backends.numpy.NumpyBackend.join_eliminate`). A check that raises stops the
operation; its exception reaches the pass's caller as one raised between two buckets does, and
the output being built is dropped.

A context variable, not a parameter: ``join_eliminate`` is the one contract of every backend
(NumPy, CuPy, the placed and multi-GPU ones, the agents'), and when to stop is the concern of
the pass that runs them. A backend that computes a bucket in device launches queued without
waiting (CuPy) hears of no time passing on the device; under a check it queues a large bucket in
pieces and, once some tens of milliseconds of predicted work are queued, waits for them and runs
the check (:meth:`dcop.gpu.CupyBackend.run`); without one it waits for nothing. A thread the
operation starts does not inherit the variable: the operation reads it once in the caller's
thread (:class:`Pieces`), which calls it, and its other threads stop where it raised.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: A check between two pieces of an operation: returns, or raises to stop it.
Check = Callable[[], None]

_CHECK: ContextVar[Check | None] = ContextVar("dcop_check_between_pieces", default=None)


@contextmanager
def checked_between(check: Check | None) -> Iterator[None]:
    """Table operations run in this block call ``check`` between their pieces (None: none)."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def check_between() -> Check | None:
    """The check of the enclosing :func:`checked_between` block, if any."""
    return _CHECK.get()


class Pieces:
    """The enclosing block's check as the threads of one operation see it: the caller's thread
    runs it before each of its pieces; where it raises, the other threads leave at their next
    piece, and the caller's error is the one the operation raises."""

    def __init__(self) -> None:
        self.check = check_between()
        self.stopped = False

    def stop(self, checks: bool) -> bool:
        """Whether this thread stops before its next piece; ``checks``: the caller's thread,
        which runs the check (and raises its error)."""
        if checks and self.check is not None:
            try:
                self.check()
            except BaseException:
                self.stopped = True
                raise
        return self.stopped

    def poll(self) -> None:
        """The caller's thread between pieces of none of its own (its share done, the others'
        running): the check, and where it raises, the others stop at their next piece."""
        self.stop(True)
