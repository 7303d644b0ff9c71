"""The search's compiled loops loaded on a thread while the solver orders and runs its pass.

numba keeps the loops' machine code on disk (``python -m dcop.search.warm`` compiles it once), but
a process still pays to load it at each loop's first call: numba's compiler and LLVM start, then
every cached function is read and linked. On an H200 host that was 0.4-0.5 s of each ``dcop solve
--algo auto`` of a random network (the "local" time, the first compiled call), a third of a
search that proves n = 22 in 1.3 s. None of it needs the problem, so :func:`start` runs one tiny
search on a thread of its own as soon as a search is decided; the solver's first call of a loop
then finds it loaded (or waits on numba's own lock for the load under way). The thread is not a
daemon: an early exit waits for it (under a second) rather than end a process mid-link.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from dcop.model import CostTable, Problem, Variable

_lock = threading.Lock()
_thread: threading.Thread | None = None
#: seconds the load took on its thread (0 until it ended, or where nothing was compiled)
loaded_s = 0.0


def start() -> None:
    """Begin loading the compiled loops, once per process (later calls do nothing)."""
    global _thread
    with _lock:
        if _thread is not None:
            return
        _thread = threading.Thread(target=_load, name="dcop-search-preload")
        _thread.start()


def join() -> None:
    """Wait for a started load to end (nothing to wait for when none was started)."""
    if _thread is not None:
        _thread.join()


def _load() -> None:
    global loaded_s
    t0 = time.monotonic()
    from dcop.search.jit import COMPILED

    if not COMPILED:  # plain Python: nothing to load
        return
    from dcop.search.solver import solve_aobb

    # the walk, the local search and the pass's decoding (the same loops and argument types as
    # any problem's) on a problem too small to cost anything
    solve_aobb(_tiny(), z=2, ordering="minfill", improve=False)
    loaded_s = time.monotonic() - t0


def _tiny() -> Problem:
    """A cycle of six ternary variables with a unary and a hard cost: every loop gets a turn."""
    names = [f"v{k}" for k in range(6)]
    rng = np.random.default_rng(0)
    tables = [
        CostTable((a, b), rng.integers(0, 9, (3, 3)))
        for a, b in zip(names, names[1:] + names[:1], strict=True)
    ]
    tables.append(CostTable((names[0],), np.array([0.0, 1.0, np.inf])))
    return Problem({v: Variable.with_size(v, 3) for v in names}, tables)
