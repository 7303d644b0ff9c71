"""Compile the search's loops ahead of time: ``python -m dcop.search.warm``.

numba compiles a function on its first call and caches the machine code beside the module; the
install step (``make install``, ``make test``) runs this once, so that no user's first search pays
the compile (seconds per function on a small machine). Without numba it does nothing.
"""

from __future__ import annotations

import time

from dcop.generators import random_network
from dcop.model import Problem
from dcop.search.jit import COMPILED


def warm() -> float:
    """Run one small search through every compiled function; the seconds it took."""
    from dcop.search import improve, parallel, solve_aobb, solver
    from dcop.search.first import first_answer

    started = time.monotonic()
    problem = random_network(12, 3, 0.4, 0.2, seed=0)
    first_answer(problem)  # an anytime run's answer before its planning
    for z in (2, 3):  # a rung below the last (node budget) and the last
        solve_aobb(problem, z=z, ordering="minfill")
    solve_aobb(problem, ordering="minfill")
    # the anytime rounds (local search kicks, subtree moves, tightening) start only on a search
    # that runs a while: force them on the small one, so their loops compile here too
    paced = {
        (solver, "WALK_ALONE"): 3,
        (solver, "IMPROVE_EVERY"): 5,
        (solver, "MOVE_EXPANSIONS"): 5,
        (improve, "MOVE_FLOOR"): 4,
        (improve, "MOVE_STEPS_PER_NODE"): 2,
        (improve, "KICKS"): 3,
        (parallel, "PARALLEL_AFTER"): 0,  # the split's pricing, and the threads' walks
    }
    saved = {key: getattr(*key) for key in paced}
    try:
        for (module, name), value in paced.items():
            setattr(module, name, value)
        solve_aobb(random_network(16, 3, 0.5, 0.2, seed=1), z=2, ordering="minfill")
        solve_aobb(random_network(16, 3, 0.5, 0.2, seed=1), z=2, ordering="minfill", threads=2)
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)
    _warm_dive(problem)
    _warm_diffusion(problem)
    from dcop.search import dfbnb

    dfbnb.warm()  # the branch and bound under soft arc consistency (auto's on diagnosis networks)
    return time.monotonic() - started


def _warm_diffusion(problem: Problem) -> None:
    """The cost shifting runs only on a reduced large problem: call it on the small one."""
    from dcop.search.reparam import diffuse

    diffuse(problem, sweeps=2)


def _warm_dive(problem: Problem) -> None:
    """The dive for a feasible start runs only where the pass's assignment breaks a hard
    constraint: call it directly on the small problem's arrays, so that it compiles here too."""
    import numpy as np

    from dcop.backends import resolve_backend
    from dcop.plan.bucket_plan import plan_for
    from dcop.search.dive import first_feasible
    from dcop.search.local import incidence
    from dcop.search.solver import _heuristic

    engine = resolve_backend("numpy")
    order = list(problem.variables)
    plan = plan_for(problem, order, 2, np.float64, engine)
    compiled, _, first = _heuristic(problem, order, engine, plan, 1e9, True)
    assert first is not None
    inc_off, inc_fun = incidence(compiled.model)
    first_feasible(compiled.model, inc_off, inc_fun, first)


if __name__ == "__main__":
    if COMPILED:
        print(f"dcop: the search's loops compiled in {warm():.1f} s")
