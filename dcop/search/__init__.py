"""Exact search: AND/OR branch and bound guided by mini-bucket heuristics (AOBB-C).

``solve_aobb`` (:mod:`dcop.search.solver`) runs it; :mod:`dcop.search.compile` turns a problem,
an order and its mini-bucket pass (:mod:`dcop.bucketpass`) into flat arrays; the compiled walk is
:mod:`dcop.search.kernel`, the first upper bound's local search :mod:`dcop.search.local`, and
:mod:`dcop.search.jit` the numba switch; :mod:`dcop.search.ibound` chooses the mini-bucket size
from the plan alone. ``--algo dfbnb`` (:mod:`dcop.search.dfbnb`) is the other exact search: a
depth-first branch and bound that keeps soft arc consistency at every node
(:mod:`dcop.search.propagate`, :mod:`dcop.search.branch`).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dcop.search.ibound import choose_ibound
    from dcop.search.solver import SearchStats, solve_aobb


def __getattr__(name: str) -> Any:
    # the solver (and numba with it) loads on first use: ``dcop.search.ibound`` plans without it
    if name in ("SearchStats", "solve_aobb"):
        from dcop.search import solver

        return getattr(solver, name)
    if name == "choose_ibound":
        from dcop.search import ibound

        return ibound.choose_ibound
    raise AttributeError(f"module 'dcop.search' has no attribute {name!r}")


__all__ = ["SearchStats", "choose_ibound", "solve_aobb"]
