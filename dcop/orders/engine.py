"""The ordering engine: the instant greedy orders first, then a tree-decomposition search within
a budget counted in work, keeping the order whose run costs least with the real domain sizes.

:func:`best_order` is the one entry point (BE, MBE, MPE, PR/MAR and the coordinator's elimination
pseudo-tree all take their order from it); its signature is kept stable for the sum-product
engine, which takes its contraction order from it.

The budget is in seconds, but it is spent as a count of runs, never on a clock: a cost model
of each run's seconds from the graph's size (:func:`search_plan`) turns it into so many of
goatd's runs, each to its end with a fixed seed. The same input thus gets the same order on
every call and on a loaded machine (a search on the clock had given Pedigree_12 width 18 in
one run and 17 in the next, and a 28x28 spin glass a different contraction tree on one call of
five). A budget that affords goatd's whole portfolio (every slot and 100 sampled min-fill
refinements; some 0.1 ms per vertex or edge) runs it, seed after seed while a round halves the
best order's work and the rounds have cost less than :data:`SHARE` of the best order's predicted
solve; a smaller one runs that many sampled min-fills.

The default budget follows the predicted solve time ``t`` of the best greedy order: none below
:data:`INSTANT_S` (a problem that solves in a millisecond keeps its greedy order), four times
``t`` up to :data:`SMALL_S`, beyond :data:`SHARE` of ``t``, never more than :data:`CAP_S` or
10 ms per variable (a small graph gains nothing from a long search). It is the whole engine's:
the greedy orders' predicted cost comes off it, the search keeping at least its smaller part.
Ordering thus stays within a fifth of any solve predicted over 0.25 s. An explicit budget
(``--order-time``) is the search's own.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dcop.model import Problem
from dcop.orders import treedec
from dcop.orders.cost import SECONDS_PER_ENTRY, OrderCost, order_cost
from dcop.orders.greedy import Adjacency, min_degree_order, min_fill_order

if TYPE_CHECKING:
    from random import Random

#: Problems predicted to solve faster than this (s) keep the greedy orders: nothing to win.
INSTANT_S = 0.001
#: The default budget is four times the predicted solve up to this (s): goatd's portfolio
#: finds a 10x10 grid's width in some 15-40 ms on a shared core.
SMALL_S = 0.05
#: The default budget's share of a longer predicted solve, and where the portfolio's rounds
#: stop: at this share of the best order's predicted solve.
SHARE = 0.2
#: The longest default search (s); ``--order-time`` may ask for more.
CAP_S = 10.0
#: The default search's cap per variable (s).
CAP_PER_VARIABLE_S = 0.01
#: The least cap (s).
FLOOR_S = 0.1
#: The cost model of the search's runs, in seconds per element (vertex or edge) of the graph,
#: measured on the 2-core VM (the shared instances): one of goatd's sampled min-fills 0.1-1 us
#: (2 us with its ranking and the call); its whole portfolio without a deadline 50-200 us, at least some 10 ms;
#: one of our randomized min-fills (where goatd is missing) 2-24 us; a greedy order 2-24 us.
SAMPLE_S_PER_ELEMENT = 2e-6
PORTFOLIO_S_PER_ELEMENT = 1e-4
PORTFOLIO_S = 0.01
RESTART_S_PER_ELEMENT = 1e-5
GREEDY_S_PER_ELEMENT = 1e-5
#: The portfolio's rounds go on while each one cuts the best order's work below this share of
#: it (seeds of one portfolio differ by a few percent at the same width: grid40 went on for
#: 4 s at 0.9).
SETTLED = 0.5
#: Most sampled min-fills (the portfolio's own refinement count: more is the portfolio's job).
MAX_SAMPLES = 100
#: Most portfolio rounds (seeds) and randomized min-fill restarts of one search.
MAX_ROUNDS = 32
MAX_RESTARTS = 1000


@dataclass(frozen=True)
class CostModel:
    """How orders are compared: ``sizes`` are the domain sizes (default: those of the problem; 2
    for a bare graph); orders whose largest joined table exceeds ``max_entries`` rank last.
    ``seconds_per_entry`` is the solver's speed, which sizes the default search budget and its
    stop (SHARE of the predicted solve): single-core BE's by default; the sum-product engine
    gives its backend's (a GPU's contraction is taken as 500x faster per entry; its search
    had spent 0.74 s ordering ising28x28 for a 0.33 s contraction)."""

    sizes: Mapping[str, int] | None = None
    max_entries: float = math.inf
    seconds_per_entry: float = SECONDS_PER_ENTRY


@dataclass(frozen=True)
class MethodResult:
    """One method's order, its cost and the seconds it took."""

    method: str
    order: tuple[str, ...]
    cost: OrderCost
    seconds: float


@dataclass(frozen=True)
class OrderResult:
    """The engine's answer: the best order and its cost, which method found it, the seconds the
    whole engine took, its search budget (and the runs it bought) and every method tried (for
    ``dcop info``)."""

    order: list[str]
    width: int
    largest_table_entries: float
    total_entries: float
    method: str
    seconds: float
    budget_s: float = 0.0
    tried: tuple[MethodResult, ...] = field(default=())
    #: the search's runs (goatd's, or randomized min-fills): the budget as work
    work: int = 0
    #: the predicted seconds of the work done (the greedy orders' charge and the runs made, by
    #: :func:`search_plan`'s model): what a caller that budgets in work is charged, the same on
    #: every call
    work_s: float = 0.0


def default_budget(predicted_s: float, variables: int) -> float:
    """The search budget for a solve of ``variables`` predicted to take ``predicted_s`` s."""
    if predicted_s < INSTANT_S:
        return 0.0
    cap = min(CAP_S, max(FLOOR_S, CAP_PER_VARIABLE_S * variables))
    return min(cap, max(min(SMALL_S, 4 * predicted_s), SHARE * predicted_s))


@dataclass(frozen=True)
class SearchPlan:
    """What a budget buys on one graph: goatd's portfolio ``rounds`` (seeds 0, 1, ...) or else
    ``samples`` sampled min-fills, or (goatd missing) ``restarts`` randomized min-fills; and the
    predicted seconds of one of those runs."""

    rounds: int = 0
    samples: int = 0
    restarts: int = 0
    run_s: float = 0.0

    @property
    def runs(self) -> int:
        return self.rounds + self.samples + self.restarts


def elements(adjacency: Adjacency) -> int:
    """The graph's vertices plus edges: what the search's cost model counts."""
    return len(adjacency) + sum(len(n) for n in adjacency.values()) // 2


def search_plan(size: int, budget_s: float, goatd: bool) -> SearchPlan:
    """The runs ``budget_s`` buys on a graph of ``size`` elements (:func:`elements`): a function
    of the two alone, so the search repeats exactly."""
    if budget_s <= 0 or size <= 0:
        return SearchPlan()
    if not goatd:
        run_s = RESTART_S_PER_ELEMENT * size
        return SearchPlan(restarts=min(MAX_RESTARTS, int(budget_s / run_s)), run_s=run_s)
    portfolio_s = PORTFOLIO_S + PORTFOLIO_S_PER_ELEMENT * size
    if budget_s >= portfolio_s:
        return SearchPlan(rounds=min(MAX_ROUNDS, int(budget_s / portfolio_s)), run_s=portfolio_s)
    sample_s = SAMPLE_S_PER_ELEMENT * size
    return SearchPlan(samples=min(MAX_SAMPLES, int(budget_s / sample_s)), run_s=sample_s)


def best_order(
    problem_or_graph: Problem | Adjacency,
    budget_s: float | None = None,
    cost_model: CostModel | None = None,
    max_budget_s: float = math.inf,
    known: Mapping[str, Sequence[str]] | None = None,
) -> OrderResult:
    """The best elimination order found for ``problem_or_graph`` within ``budget_s`` seconds of
    search, counted in work (:func:`search_plan`; None: :func:`default_budget` of the greedy
    order's predicted solve time, at most ``max_budget_s``; 0: the greedy orders only). The same
    input and budget give the same order on every call.

    Candidates: greedy min-fill and min-degree, for a Problem its variables' own order both ways
    (row by row on a grid file), then goatd's portfolio or sampled min-fills (randomized
    min-fill restarts where goatd is missing). The result is never costlier than min-fill's
    order under ``cost_model``. ``known`` holds greedy orders a caller made of the same graph
    already (``minfill``, ``mindegree``): they are taken, not made again.
    """
    t0 = time.perf_counter()
    model = cost_model or CostModel()
    if isinstance(problem_or_graph, Problem):
        adjacency: Adjacency = problem_or_graph.neighbours()
        natural = list(problem_or_graph.variables)
        sizes = dict(model.sizes or problem_or_graph.domain_sizes())
    else:
        adjacency = problem_or_graph
        natural = []
        sizes = dict(model.sizes or {v: 2 for v in adjacency})
    tried: list[MethodResult] = []

    def attempt(method: str, make: Callable[[], Sequence[str]]) -> None:
        t = time.perf_counter()
        order = tuple(make())
        # a candidate 1000x costlier than the best so far is cut short (its cost: infinite): a
        # hopeless order (the file order of a Bayesian network) can take seconds to walk; a
        # search's order comes with its cost (walked there already)
        cap = 1000 * min((r.cost.total for r in tried), default=math.inf)
        cost = walked.pop(order, None) or order_cost(adjacency, order, sizes, cap)
        tried.append(MethodResult(method, order, cost, time.perf_counter() - t))

    walked: dict[tuple[str, ...], OrderCost] = {}

    given = known or {}
    attempt("minfill", lambda: given.get("minfill") or min_fill_order(adjacency))
    attempt("mindegree", lambda: given.get("mindegree") or min_degree_order(adjacency))
    if natural:
        attempt("natural", lambda: natural)
        attempt("reverse-natural", lambda: natural[::-1])

    def best() -> MethodResult:
        return min(tried, key=lambda r: r.cost.key(model.max_entries))  # first on ties

    n = len(adjacency)
    size = elements(adjacency)
    adaptive = budget_s is None
    if budget_s is None:
        predicted = best().cost.predicted_seconds(n, model.seconds_per_entry)
        budget_s = min(default_budget(predicted, n), max(0.0, max_budget_s))
        # the default budget bounds the whole engine: the greedy orders' predicted cost comes
        # off it (a share of the solve is that share, all ordering included), the search
        # keeping at least its smaller part
        greedy_s = 2 * GREEDY_S_PER_ELEMENT * size
        search_s = max(min(budget_s, SMALL_S), budget_s - greedy_s)
    else:
        greedy_s = 0.0
        search_s = budget_s
    # goatd is loaded only for a search (its import is start-up a tiny problem need not pay)
    searching = n > 2 and search_s > 0
    plan = search_plan(size, search_s, treedec.available()) if searching else SearchPlan()
    made = 0  # the search's runs made (an adaptive portfolio stops before its plan's)
    if plan.rounds or plan.samples:
        # should goatd refuse this graph, the greedy orders stand
        with contextlib.suppress(RuntimeError):
            incumbent = best().cost
            runs: list[int] = []

            def goatd() -> list[str]:
                found = search(
                    adjacency, sizes, plan, adaptive, incumbent, model.seconds_per_entry, greedy_s
                )
                runs.append(found.runs)
                if found.cost is not None:
                    walked[tuple(found.order)] = found.cost
                return found.order

            attempt("goatd", goatd)
            made = sum(runs)
    elif plan.restarts:
        attempt("minfill-restarts", lambda: restarts(adjacency, sizes, plan.restarts))
        made = plan.restarts
    chosen = best()
    return OrderResult(
        order=list(chosen.order),
        width=chosen.cost.width,
        largest_table_entries=chosen.cost.largest,
        total_entries=chosen.cost.total,
        method=chosen.method,
        seconds=time.perf_counter() - t0,
        budget_s=budget_s,
        tried=tuple(tried),
        work=made,
        work_s=2 * GREEDY_S_PER_ELEMENT * size + made * plan.run_s,
    )


@dataclass(frozen=True)
class Found:
    """A search's best order, the runs it made, and the order's cost where the search walked
    it (with the engine's sizes)."""

    order: list[str]
    runs: int
    cost: OrderCost | None = None


def search(
    adjacency: Adjacency,
    sizes: Mapping[str, int],
    plan: SearchPlan,
    adaptive: bool,
    incumbent: OrderCost,
    seconds_per_entry: float = SECONDS_PER_ENTRY,
    already_s: float = 0.0,
) -> Found:
    """goatd's runs that ``plan`` affords, each to its end with a fixed seed, and the cheapest
    order they found (by work plus largest table). ``plan.samples`` sampled min-fills run all;
    ``plan.rounds`` portfolio runs, ``adaptive`` (the default budget), stop once a round cuts
    the work of the best order so far (``incumbent``, the best greedy order, at first) by less
    than half, or where one more round would take the rounds' predicted seconds, and the
    ``already_s`` the engine spent before them, past :data:`SHARE` of the best order's predicted
    solve at ``seconds_per_entry``: a grid whose min-fill order predicts minutes is ordered in a
    few rounds once goatd finds its width. Nothing here reads a clock. Returns the order and
    the runs made."""
    decomposer = treedec.Decomposer(adjacency)
    best: list[str] = []
    work = incumbent.total + incumbent.largest
    if plan.samples:
        # ranked by goatd's own width and bag mass (no walk of ours per sample: that walk cost
        # 5-10x the sample); the winner is ranked against the greedy orders by its real cost
        runs = (decomposer.run("minfill", seed, sample=True) for seed in range(plan.samples))
        order = decomposer.order(min(runs, key=lambda td: (td.treewidth, td.bag_mass)))
        return Found(order, plan.samples)
    made = 0
    best_cost: OrderCost | None = None
    for seed in range(plan.rounds):
        made += 1
        order = decomposer.order(decomposer.run("portfolio", seed))
        cost = order_cost(adjacency, order, sizes)
        found = cost.total + cost.largest
        if not best or found < work:
            best, best_cost = order, cost
        if not adaptive:
            work = min(work, found)
            continue
        if found > SETTLED * work:
            break  # the portfolio has settled
        work = found
        # the next round only where it keeps the whole engine (the greedy orders' charge, the
        # rounds so far and it) within SHARE of the best order's predicted solve: a round is
        # not started on the strength of the worse orders before it (an 18x18 spin glass's BE
        # had spent a second round, 29 % of its 0.46 s, after the first found its width)
        spent = already_s + (seed + 2) * plan.run_s
        if spent > SHARE * OrderCost(0, 0.0, work).predicted_seconds(len(sizes), seconds_per_entry):
            break
    return Found(best, made, best_cost if best else None)


def restarts(adjacency: Adjacency, sizes: Mapping[str, int], count: int) -> list[str]:
    """Min-fill with seeded random tie-breaks (seeds ``0 .. count - 1``); the cheapest order
    (the search where goatd is not installed)."""
    import random

    best_order_: list[str] = min_fill_order(adjacency)
    best_key = order_cost(adjacency, best_order_, sizes).key()
    for seed in range(count):
        order = randomized_min_fill(adjacency, random.Random(seed))
        key = order_cost(adjacency, order, sizes).key()
        if key < best_key:
            best_order_, best_key = order, key
    return best_order_


def randomized_min_fill(adjacency: Adjacency, rng: Random) -> list[str]:
    """Greedy min-fill whose ties (fill, then degree) are broken at random: the incremental
    min-fill breaks its ties by the variables' rank, so it runs over them in a shuffled order."""
    names = list(adjacency)
    rng.shuffle(names)
    return min_fill_order({v: adjacency[v] for v in names})
