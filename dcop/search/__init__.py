"""Exact search: AND/OR branch and bound guided by mini-bucket heuristics (AOBB-C).

``solve_aobb`` (:mod:`dcop.search.solver`) runs it; :mod:`dcop.search.compile` turns a problem,
an order and its mini-bucket pass (:mod:`dcop.bucketpass`) into flat arrays; the compiled walk is
:mod:`dcop.search.kernel`, the first upper bound's local search :mod:`dcop.search.local`, and
:mod:`dcop.search.jit` the numba switch.
"""

from dcop.search.solver import SearchStats, choose_ibound, solve_aobb

__all__ = ["SearchStats", "choose_ibound", "solve_aobb"]
