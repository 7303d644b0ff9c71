"""How many CPU threads the search walks on (``--threads``): a rule without numba.

:mod:`dcop.search.parallel` runs the threads; this module only counts them, so that a command
line (``dcop batch`` sharing the cores among its rows) can ask without loading the search.
"""

from __future__ import annotations

import os

#: Threads of a search without ``threads``: the usable cores, at most this many (a proof's
#: extra nodes grow with the threads, and the benches run other solvers beside it).
MAX_DEFAULT_THREADS = 8


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the system tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def usable_threads(shared_by: int = 1) -> int:
    """The default number of threads: the usable cores shared by ``shared_by`` runs at once,
    at least 1, at most MAX_DEFAULT_THREADS."""
    return max(1, min(MAX_DEFAULT_THREADS, usable_cores() // max(1, shared_by)))


def resolve_threads(threads: int | None) -> int:
    """``threads`` checked (an integer of at least 1; ValueError otherwise), or the default
    (:func:`usable_threads`) for None."""
    if threads is None:
        return usable_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"the number of threads must be an integer of at least 1, not {threads!r}")
    return threads
