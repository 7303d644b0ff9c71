"""``--algo auto``'s first rule: a planar Ising model without field is solved by the planar solver.

Checked before BE's plan, the ordering and the search, so it must be cheap where it does not
apply: a variable of other than two values or a table over three is seen at once
(:func:`suits`), a field within milliseconds on a thousand variables; the planarity test runs
only on a pairwise binary model without field, and its embedding serves the solve.
"""

from __future__ import annotations

import time

from dcop.model import Problem
from dcop.planar.ising import NotPlanar
from dcop.planar.solver import solve_planar
from dcop.results.solve import SolveResult


def suits(problem: Problem) -> bool:
    """Whether ``problem`` may be a planar Ising model: two values per variable, tables of at
    most two variables (the rest is :func:`dcop.planar.ising.ising_form`'s)."""
    return all(v.size == 2 for v in problem.variables.values()) and all(
        t.arity <= 2 for t in problem.tables
    )


def planar_first(problem: Problem, deadline: float | None = None) -> SolveResult | None:
    """The planar solver's proof where it applies and proves the optimum, with ``choice`` saying
    so; None elsewhere (``auto`` goes on with BE's plan and the search).

    With a ``deadline`` (a :func:`time.monotonic` instant) the solver stops as
    :func:`~dcop.planar.solver.solve_planar` says. Where it stopped with time left (it did not
    begin a step predicted past the deadline), ``auto`` goes on with that time; where the
    deadline itself stopped it, its answer is the run's (status ``timeout``): the other solvers
    would start with no time left, and their start (numba's load) alone takes seconds."""
    if not problem.variables or not suits(problem):
        return None
    try:
        result = solve_planar(problem, deadline=deadline)
    except NotPlanar:
        return None
    if result.stopped is not None:
        if deadline is not None and time.monotonic() < deadline:
            return None
        result.choice = f"planar: a planar Ising model without field, stopped ({result.stopped})"
        return result
    if not result.exact:  # weights of no common unit, too many frustrated faces: bounds only
        return None
    stats = result.planar
    result.choice = (
        f"planar: a planar Ising model without field ({stats.edges} edges, {stats.frustrated} "
        f"frustrated faces of {stats.faces}); its minimum T-join ({stats.tjoin}) is the optimum"
    )
    return result
