"""``--algo planar``: the exact ground state of a planar Ising model without field.

Barahona (1982), after Kasteleyn and Fisher: with the cost ``constant + sum_e K_e [x_a != x_b]``
(:mod:`.ising`), an edge is unsatisfied when it pays ``|K_e|`` more than its best: its two spins
differ while ``K_e > 0``, or are equal while ``K_e < 0``. Around every face the number of
unequal edges is even, so the unsatisfied set U has, on each face, the parity of that face's
negative edges: U is a T-join of the dual graph with T the frustrated faces (:mod:`.dual`), and
every T-join is the unsatisfied set of two assignments (one the other flipped). The faces'
boundaries span the cycle space of a plane graph, so nothing else constrains U. Hence

    optimum = constant + sum_{K_e < 0} K_e + w(minimum T-join),  w_e = |K_e|,

the join from :mod:`.tjoin`. The assignment comes from a walk of the primal graph: each tree
edge sets its far spin equal to, or unequal from, the near one as U and the sign of ``K`` say.
It is checked twice: its field-free cost equals the join's value, and ``problem.evaluate`` of it
stays within the dropped noise of that. Only then do the bounds meet.

A proof is a proof up to the search's margin (``EPS_ABS + EPS_REL * |upper|``, as
:mod:`dcop.search.solver`): the lower bound is the join's value less the model's slack (fields
and couplings dropped as noise) and the join's (its weights' rounding); where the two bounds
are within that margin the optimum is proved and the lower bound is set to the upper one.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from dcop.errors import ModelError
from dcop.model import Problem
from dcop.planar.dual import Dual, dual_from_successors
from dcop.planar.embed import planar_successors
from dcop.planar.ising import IsingModel, PlanarLate, ising_form
from dcop.planar.tjoin import TJoin, min_tjoin
from dcop.results.solve import SolveResult

#: The proof margin, as the search's (``dcop.search.solver.EPS_ABS`` / ``EPS_REL``; not
#: imported: that module loads numba).
EPS_ABS = 1e-9
EPS_REL = 1e-10


@dataclass(frozen=True)
class PlanarStats:
    """What the planar solver found: the graph's size, its faces, the frustrated ones, how the
    join was found (:data:`dcop.planar.tjoin.METHODS`), the weights' common unit, the slack of
    the lower bound (fields dropped as noise, the weights' rounding)."""

    edges: int
    faces: int
    frustrated: int
    tjoin: str
    unit: float | None
    slack: float

    def to_json(self) -> dict[str, Any]:
        return {
            "edges": self.edges,
            "faces": self.faces,
            "frustrated_faces": self.frustrated,
            "tjoin": self.tjoin,
            "unit": self.unit,
            "slack": self.slack,
        }


def solve_planar(
    problem: Problem, use_pymatching: bool | None = None, deadline: float | None = None
) -> SolveResult:
    """The optimum of a planar Ising model without field (see the module docstring), or
    :class:`~dcop.planar.ising.NotPlanar` saying in one line why the problem is not one.
    ``use_pymatching``: None uses PyMatching where it is installed, False the exact fallback
    (networkx), True requires PyMatching.

    ``deadline`` (a :func:`time.monotonic` instant): the solver looks at it between its steps and
    in its own loops, and does not begin a step that cannot be stopped (networkx's planarity
    test, its matching) where that is predicted to end past it. Stopped, it answers what it has
    (status ``timeout``, :func:`stopped_answer`): no spin is known before the join, so the
    assignment satisfies the couplings of a spanning tree, and the lower bound is the join's
    least weight (zero, or half the lightest edge at each frustrated face once the faces are
    known)."""
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    model = ising_form(problem)
    dual: Dual | None = None
    try:
        successor, _how = planar_successors(model, deadline)
        times["recognise"] = time.perf_counter() - t0
        _late(deadline, "the faces")
        t0 = time.perf_counter()
        dual = dual_from_successors(model, successor)
        times["faces"] = time.perf_counter() - t0
        _late(deadline, "the T-join")
        t0 = time.perf_counter()
        weights = np.abs(model.coupling)
        join = min_tjoin(dual, weights, use_pymatching, deadline)
        times["tjoin"] = time.perf_counter() - t0
    except PlanarLate as exc:
        return stopped_answer(problem, model, dual, times, str(exc))
    t0 = time.perf_counter()
    spins = spins_of(model, join)
    value = model.constant + float(model.coupling[model.coupling < 0].sum())
    value += float(weights[join.chosen].sum())
    form = model.energy(spins)
    tolerance = EPS_ABS + EPS_REL * (abs(model.constant) + float(weights.sum()))
    if abs(form - value) > tolerance:  # the walk and the join disagree: a bug, never an answer
        raise ModelError(f"planar: the assignment's cost {form!r} is not the join's {value!r}")
    assignment = {name: int(s) for name, s in zip(model.names, spins.tolist(), strict=True)}
    upper = problem.evaluate(assignment)
    if math.isfinite(upper) and abs(upper - form) > model.slack + tolerance:
        raise ModelError(
            f"planar: the assignment costs {upper!r}, its Ising form {form!r} (noise {model.slack!r})"
        )
    lower = value - model.slack - join.slack
    if math.isfinite(upper) and upper - lower <= EPS_ABS + EPS_REL * abs(upper):
        lower = upper  # proved, up to the search's margin
    elif problem.upper_bound is not None and lower >= problem.upper_bound:
        lower = upper = math.inf  # every assignment reaches the WCSP's top: infeasible
    times["assign"] = time.perf_counter() - t0
    times["total"] = sum(times.values())
    result = _result(problem, assignment, lower, upper, times)
    result.planar = PlanarStats(
        edges=len(model.a),
        faces=dual.faces,
        frustrated=dual.frustrated,
        tjoin=join.method,
        unit=join.unit,
        slack=model.slack + join.slack,
    )
    return result


def stopped_answer(
    problem: Problem, model: IsingModel, dual: Dual | None, times: dict[str, float], why: str
) -> SolveResult:
    """The answer of a solve stopped at its deadline before its join (``why``: the step it did
    not end): spins that satisfy every coupling of a spanning tree (the walk of
    :func:`spins_of` with an empty join), and the lower bound ``constant + sum_{K < 0} K`` plus
    a least weight of any join: every frustrated face has an edge of the join, and an edge has
    two faces, so a join weighs at least half the sum over the frustrated faces of their
    lightest edge (0 before the faces are known), less the model's slack."""
    t0 = time.perf_counter()
    empty = TJoin(np.zeros(len(model.a), dtype=bool), "none", None, 0.0)
    spins = spins_of(model, empty)
    assignment = {name: int(s) for name, s in zip(model.names, spins.tolist(), strict=True)}
    upper = problem.evaluate(assignment)
    lower = model.constant + float(model.coupling[model.coupling < 0].sum()) - model.slack
    if dual is not None:
        lower += least_join(dual, np.abs(model.coupling))
    times["assign"] = time.perf_counter() - t0
    times["total"] = sum(times.values())
    result = _result(problem, assignment, min(lower, upper), upper, times)
    result.stopped = f"planar: {why}; the answer satisfies a spanning tree's couplings"
    return result


def least_join(dual: Dual, weights: np.ndarray) -> float:
    """A lower bound on the weight of any T-join of ``dual``: half the sum, over its odd faces,
    of the lightest edge (not a loop) at each."""
    if not dual.odd.any():
        return 0.0
    lightest = np.full(dual.faces, np.inf)
    proper = dual.left != dual.right
    np.minimum.at(lightest, dual.left[proper], weights[proper])
    np.minimum.at(lightest, dual.right[proper], weights[proper])
    at_odd = lightest[dual.odd]
    return float(at_odd[np.isfinite(at_odd)].sum()) / 2


def _late(deadline: float | None, step: str) -> None:
    """Raise :class:`PlanarLate` before ``step`` where ``deadline`` has passed."""
    if deadline is not None and time.monotonic() >= deadline:
        raise PlanarLate(f"the deadline came before {step}")


def _result(
    problem: Problem,
    assignment: dict[str, int],
    lower: float,
    upper: float,
    times: dict[str, float],
) -> SolveResult:
    return SolveResult(
        problem=problem,
        algo="planar",
        assignment=assignment,
        lower_bound=lower,
        upper_bound=upper,
        z=None,
        ordering="planar",
        induced_width=0,
        largest_table=0,
        backend="numpy",
        dtype="float64",
        times=times,
    )


def spins_of(model: IsingModel, join: TJoin) -> np.ndarray:
    """Values (0/1, in ``model.names`` order) whose unsatisfied edges are the join's: a walk of
    each connected part from its first variable (value 0). Edge ``e`` keeps its two ends equal
    where ``(K_e > 0) != chosen[e]``."""
    n = len(model.names)
    equal = (model.coupling > 0) != join.chosen
    ends = np.concatenate([model.a, model.b])
    other = np.concatenate([model.b, model.a])
    flips = np.concatenate([~equal, ~equal]).astype(np.int8)
    order = np.argsort(ends, kind="stable")
    starts = np.searchsorted(ends[order], np.arange(n + 1))
    neighbour, flip = other[order].tolist(), flips[order].tolist()
    bounds = starts.tolist()
    spins = [-1] * n
    for root in range(n):
        if spins[root] >= 0:
            continue
        spins[root] = 0
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for k in range(bounds[u], bounds[u + 1]):
                v = neighbour[k]
                if spins[v] < 0:
                    spins[v] = spins[u] ^ flip[k]
                    queue.append(v)
    return np.array(spins, dtype=np.int8)


__all__ = ["Dual", "PlanarStats", "solve_planar", "spins_of", "stopped_answer"]
