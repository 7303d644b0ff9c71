"""An incumbent for the reduced, cost-shifted problem (:mod:`.reduce`, :mod:`.reparam`): dives
that keep every shifted table near its least cost, then the local search and neighbourhoods
solved exactly.

After min-sum diffusion the sum of each table's least cost is within a few units of the
optimum on the Promedas networks (43.5 against 45.4 on or_chain_43), and the optimum's excess
over the tables' least costs is that gap: it keeps nearly every table near its minimum. Yet the
unary costs are tied (the optimum differs from each variable's cheapest shifted value at 259 of
995 variables there), so a decoding by values breaks the gates' hard zeros, and the plain dive
(:mod:`.dive`, forward checking on the hard tables) on the shifted costs returns 64-74. Here the
dive runs on the shifted tables with each entry more than a *slack* above its table's least
cost made infinite (:func:`tight`), for a ladder of slacks (SLACKS) and once without: the
variables of the largest gap between their two cheapest shifted costs first, each its cheapest
value by the shifted tables it completes, ties by the unshifted ones. Each dive gets ICM and a
round of kicks on the unshifted problem (:class:`LocalSearch`); the best, with a deadline, goes
on to :func:`neighbourhoods`. On or_chain_43/113/135/151 the dives find toulbar2's optimum.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import numpy as np

from dcop.model import CostTable, Problem
from dcop.search import reduce
from dcop.search.dive import DIVE_WORK, dive, dive_tries, hard_tables
from dcop.search.first import FirstAnswer, LocalSearch, problem_model
from dcop.search.kernel import Model
from dcop.search.local import incidence, local_search, total_cost

#: The dives' slacks, relative to the bound's size (at least 1): a dive keeps every table within
#: its slack of the table's least cost (:func:`tight`); one more dive has no slack. On
#: or_chain_43 (bound 43.5, optimum 45.4) the slacks 0.1 and 0.3 (absolute) find 47.8 and the
#: optimum, the dive without slack 63.8; smaller ones find nothing.
SLACKS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
#: An answer within this share of the bound's size (at least 1) of the bound ends the dives.
PROVED = 1e-9
#: The unshifted costs' weight in the dive's value order (ties of the shifted costs only).
TIE_WEIGHT = 1e-6
#: ICM sweeps after each dive.
SWEEPS = 30
#: Variables freed per neighbourhood (a breadth-first ball around a random variable), and the
#: reduction's limits that solve it exactly (elimination of every variable, the fewest
#: neighbours first): a ball whose elimination needs more is skipped.
BALL = 40
BALL_DEGREE = 12
BALL_ENTRIES = 1 << 14


def unaries(problem: Problem) -> dict[str, np.ndarray]:
    """Each variable's unary costs (the sum of its tables of one variable; zeros where none)."""
    out = {v: np.zeros(problem.variables[v].size) for v in problem.variables}
    for t in problem.tables:
        if len(t.scope) == 1:
            out[t.scope[0]] = out[t.scope[0]] + np.asarray(t.costs, dtype=np.float64)
    return out


def dive_model(problem: Problem, names: list[str]) -> Model:
    """``problem``'s tables as a :class:`Model` over ``names`` in which each table labels its
    scope's lowest node: the dive assigns the nodes from the last to the first, so a table's costs
    count at the node that completes it."""
    m = problem_model(problem, names)
    node = {v: i for i, v in enumerate(names)}
    at = np.array(
        [min(node[u] for u in t.scope) for t in problem.tables if t.scope], dtype=np.int64
    )
    funs = np.argsort(at, kind="stable").astype(np.int32)
    off = np.searchsorted(at[funs], np.arange(len(names) + 1)).astype(np.int32)
    return m._replace(lab_off=off, lab_fun=funs)


def _gaps(unary: dict[str, np.ndarray], names: list[str]) -> np.ndarray:
    """Per variable: its second cheapest finite unary cost less its cheapest (0 for one value)."""
    out = np.zeros(len(names))
    for i, v in enumerate(names):
        u = np.sort(unary[v][np.isfinite(unary[v])])
        out[i] = u[1] - u[0] if len(u) > 1 else (np.inf if len(u) else 0.0)
    return out


def shifted_answer(
    shifted: Problem,
    plain: Problem,
    lower: float,
    deadline: float | None = None,
    seed: int = 0,
    stop: float | None = None,
) -> FirstAnswer | None:
    """The best of the dives along ``shifted``'s tight costs (one per slack of SLACKS; ties by
    ``plain``'s: the same problem, not shifted), improved by ICM and a round of kicks on
    ``plain``, then by :func:`neighbourhoods` until ``deadline`` (none without one); ``lower``:
    a proved bound to report beside it. None where no dive found a feasible assignment, or
    where the local search's set-up (the copy of ``plain``'s tables) has not ended by ``stop``
    (the run's own deadline: the caller's first answer then stands)."""
    names = list(shifted.variables)
    if not names:
        return None
    search = LocalSearch(plain, seed, stop)
    if not search.complete:
        return None
    gaps = _gaps(unaries(shifted), names)
    finite = gaps[np.isfinite(gaps)]
    keys = np.where(np.isfinite(gaps), gaps, finite.max(initial=0.0) + 1.0)
    # the most decided variable is assigned first: the dive starts at the last node
    order = [names[i] for i in np.argsort(keys, kind="stable")]
    # the shifted bound holds for the plain problem too (the same cost for every assignment):
    # the local search's answers report it, where the search's set-up does not fit and its
    # rounds run on alone (or_chain_70: 42.1, not the tables' least costs' 10.9)
    search.lower = max(search.lower, lower)
    index = {v: i for i, v in enumerate(search.names)}
    scale = max(1.0, abs(lower)) if np.isfinite(lower) else 1.0
    best: np.ndarray | None = None
    best_cost = np.inf
    for slack in (*SLACKS, None):
        if best is not None and deadline is not None and time.monotonic() >= deadline:
            break
        if best is not None and best_cost <= lower + PROVED * scale:
            break  # the bound's: nothing cheaper
        guide = tight(shifted, slack * scale if slack is not None else None)
        m = dive_model(_with_ties(guide, plain), order)
        inc_off, inc_fun = incidence(m)
        out = np.zeros(len(order), dtype=np.int32)
        if not dive(m, inc_off, inc_fun, hard_tables(m), out, dive_tries(len(order)), DIVE_WORK):
            continue
        asg = np.empty(len(order), dtype=np.int32)
        for i, v in enumerate(order):
            asg[index[v]] = out[i]
        # each dive ends in ICM and a round of kicks before the comparison: on or_chain_6 the
        # slack 0.01's dive is not the cheapest, yet the only one that reaches the optimum then
        search.asg = local_search(search.model, search.inc_off, search.inc_fun, asg, SWEEPS, seed)
        search.rounds(1, None)
        cost = float(total_cost(search.model, search.asg))
        if cost < best_cost:
            best, best_cost = search.asg.copy(), cost
    if best is None:
        return None
    search.asg = best
    answer = search.answer()
    if deadline is not None and answer.cost > lower + PROVED * scale:
        better = neighbourhoods(plain, answer.assignment, deadline, seed)
        search.asg = np.array([better[v] for v in search.names], dtype=np.int32)
        answer = search.answer()
    return FirstAnswer(answer.assignment, answer.cost, min(lower, answer.cost), answer.rounds,
                       search)  # fmt: skip


def tight(shifted: Problem, slack: float | None) -> Problem:
    """``shifted`` with each entry above its table's least cost by more than ``slack`` made
    infinite (None: unchanged): the dive then keeps every table near its minimum, where the
    optimum mostly is once the shifting has made the bound tight (the bound less the optimum
    is the sum of the optimum's excess over each table's least cost)."""
    if slack is None:
        return shifted
    out = []
    for t in shifted.tables:
        c = np.asarray(t.costs, dtype=np.float64)
        finite = c[np.isfinite(c)]
        least = float(finite.min()) if finite.size else 0.0
        out.append(CostTable(t.scope, np.where(c - least > slack, np.inf, c), t.name))
    return Problem(dict(shifted.variables), out, name=shifted.name)


def neighbourhoods(
    problem: Problem, assignment: Mapping[str, int], deadline: float, seed: int = 0
) -> dict[str, int]:
    """Large neighbourhood search from ``assignment`` (finite cost) until ``deadline``: free a
    ball of BALL variables, the rest held, solve the ball exactly (:func:`.reduce.reduce`
    eliminates it whole), keep it when cheaper. Hard chains that a local search's flips cannot
    mend (a gate's evidence moved along a chain) are mended here in one move."""
    names = list(problem.variables)
    if not names:
        return dict(assignment)
    around = problem.neighbours()
    tables: dict[str, list[CostTable]] = {v: [] for v in names}
    for t in problem.tables:
        for v in t.scope:
            tables[v].append(t)
    asg = dict(assignment)
    cost = problem.evaluate(asg)
    rng = np.random.default_rng(seed)
    while time.monotonic() < deadline and np.isfinite(cost):
        root = names[int(rng.integers(len(names)))]
        ball, inside, head = [root], {root}, 0
        while head < len(ball) and len(ball) < BALL:
            for u in sorted(around[ball[head]]):
                if u not in inside and len(ball) < BALL:
                    inside.add(u)
                    ball.append(u)
            head += 1
        held: dict[int, CostTable] = {id(t): t for v in ball for t in tables[v]}
        parts = []
        for t in held.values():
            at = tuple(slice(None) if u in inside else asg[u] for u in t.scope)
            parts.append(CostTable(tuple(u for u in t.scope if u in inside), np.array(t.costs[at])))
        part = Problem({v: problem.variables[v] for v in ball}, parts)
        try:
            solved = reduce.reduce(part, max_degree=BALL_DEGREE, max_entries=BALL_ENTRIES)
        except reduce.Infeasible:  # pragma: no cover - the held assignment is feasible
            continue
        if solved is None or solved.problem.n:
            continue
        trial = {**asg, **solved.expand({})}
        now = problem.evaluate(trial)
        if now < cost:
            asg, cost = trial, now
    return asg


def _with_ties(shifted: Problem, plain: Problem) -> Problem:
    """``shifted`` with ``plain``'s tables added at TIE_WEIGHT (their infinite costs left to
    ``shifted``'s, which holds them too): the dive's value order, ties broken by the plain costs."""
    ties = [
        CostTable(t.scope, np.where(np.isfinite(c), TIE_WEIGHT * c, 0.0), f"tie{k}")
        for k, t in enumerate(plain.tables)
        if t.scope
        for c in [np.asarray(t.costs, dtype=np.float64)]
    ]
    return Problem(dict(shifted.variables), [*shifted.tables, *ties], name=shifted.name)
