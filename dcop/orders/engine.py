"""The ordering engine: the instant greedy orders first, then a tree-decomposition search within
a time budget, keeping the order whose run costs least with the real domain sizes.

:func:`best_order` is the one entry point (BE, MBE, MPE, PR/MAR and the coordinator's elimination
pseudo-tree all take their order from it); its signature is kept stable for the sum-product
engine, which takes its contraction order from it.

The default budget follows the predicted solve time ``t`` of the best greedy order: none below
:data:`INSTANT_S` (a problem that solves in a millisecond keeps its greedy order), up to
:data:`FLOOR_S` twice ``t`` but between :data:`SMALL_S` and :data:`FLOOR_S` (goatd needs tens of
milliseconds to find a 10x10 grid's width), beyond it a tenth of ``t`` but at least
:data:`FLOOR_S`, and never more than :data:`CAP_S` or 10 ms per variable (a small graph gains
nothing from a long search). The default budget is the whole engine's: the search gets what
the greedy orders (some 30 ms at n = 400) left of it, but never less than its floor. Ordering
thus stays under ~0.2 s for any problem that solves in under 2 s, and under a tenth of longer
solves. An explicit budget (``--order-time``) is the search's own.

The floor is spent even where min-fill's width meets a treewidth lower bound (minor-min-width):
at the same width goatd still cut the joined entries by 4-5 % on spot5-404 and pdb2fdn, and the
greedy orders are too fast now for the floor to break the time target.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dcop.model import Problem
from dcop.orders import treedec
from dcop.orders.cost import SECONDS_PER_ENTRY, OrderCost, order_cost
from dcop.orders.greedy import Adjacency, min_degree_order, min_fill_order

#: Problems predicted to solve faster than this (s) keep the greedy orders: nothing to win.
INSTANT_S = 0.001
#: The shortest search of a problem predicted to solve in under FLOOR_S (s): goatd's portfolio
#: needs some 10-50 ms on a shared core to find a 10x10 grid's or Segmentation_11's width.
SMALL_S = 0.05
#: The shortest search of a problem predicted to solve in FLOOR_S or more (s).
FLOOR_S = 0.1
#: The longest default search (s); ``--order-time`` may ask for more.
CAP_S = 10.0
#: The default search's cap per variable (s).
CAP_PER_VARIABLE_S = 0.01
#: Searches shorter than this are not started (s): goatd cannot use them.
MIN_SEARCH_S = 0.002


@dataclass(frozen=True)
class CostModel:
    """How orders are compared: ``sizes`` are the domain sizes (default: those of the problem; 2
    for a bare graph); orders whose largest joined table exceeds ``max_entries`` rank last.
    ``seconds_per_entry`` is the solver's speed, which sizes the default search budget and its
    stop (a tenth of the predicted solve): single-core BE's by default; the sum-product engine
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
    whole engine took, its search budget and every method tried (for ``dcop info``)."""

    order: list[str]
    width: int
    largest_table_entries: float
    total_entries: float
    method: str
    seconds: float
    budget_s: float = 0.0
    tried: tuple[MethodResult, ...] = field(default=())


def default_budget(predicted_s: float, variables: int) -> float:
    """The search budget for a solve of ``variables`` predicted to take ``predicted_s`` s."""
    if predicted_s < INSTANT_S:
        return 0.0
    if predicted_s < FLOOR_S:
        return min(FLOOR_S, max(SMALL_S, 2 * predicted_s))
    cap = min(CAP_S, max(FLOOR_S, CAP_PER_VARIABLE_S * variables))
    return min(cap, max(FLOOR_S, 0.1 * predicted_s))


def best_order(
    problem_or_graph: Problem | Adjacency,
    budget_s: float | None = None,
    cost_model: CostModel | None = None,
    max_budget_s: float = math.inf,
) -> OrderResult:
    """The best elimination order found for ``problem_or_graph`` within ``budget_s`` seconds of
    search (None: :func:`default_budget` of the greedy order's predicted solve time, at most
    ``max_budget_s``; 0: the greedy orders only).

    Candidates: greedy min-fill and min-degree, for a Problem its variables' own order both ways
    (row by row on a grid file), then goatd's portfolio (randomized min-fill restarts where goatd
    is missing). The result is never costlier than min-fill's order under ``cost_model``.
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
        # hopeless order (the file order of a Bayesian network) can take seconds to walk
        cap = 1000 * min((r.cost.total for r in tried), default=math.inf)
        cost = order_cost(adjacency, order, sizes, cap)
        tried.append(MethodResult(method, order, cost, time.perf_counter() - t))

    attempt("minfill", lambda: min_fill_order(adjacency))
    attempt("mindegree", lambda: min_degree_order(adjacency))
    if natural:
        attempt("natural", lambda: natural)
        attempt("reverse-natural", lambda: natural[::-1])

    def best() -> MethodResult:
        return min(tried, key=lambda r: r.cost.key(model.max_entries))  # first on ties

    n = len(adjacency)
    adaptive = budget_s is None
    if budget_s is None:
        predicted = best().cost.predicted_seconds(n, model.seconds_per_entry)
        budget_s = min(default_budget(predicted, n), max(0.0, max_budget_s))
        # the default budget bounds the whole engine: beyond the search's floor, the greedy
        # orders' seconds come off it (a tenth of the solve is a tenth, all ordering included)
        search_s = max(min(budget_s, FLOOR_S), budget_s - (time.perf_counter() - t0))
    else:
        search_s = budget_s
    if search_s >= MIN_SEARCH_S and n > 2:
        if treedec.available():
            # should goatd refuse this graph, the greedy orders stand
            with contextlib.suppress(RuntimeError):
                incumbent = best().cost
                attempt(
                    "goatd",
                    lambda: search(
                        adjacency, sizes, search_s, adaptive, incumbent, t0, model.seconds_per_entry
                    ),
                )
        else:
            attempt("minfill-restarts", lambda: restarts(adjacency, sizes, search_s))
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
    )


def search(
    adjacency: Adjacency,
    sizes: Mapping[str, int],
    budget_s: float,
    adaptive: bool,
    incumbent: OrderCost,
    started: float | None = None,
    seconds_per_entry: float = SECONDS_PER_ENTRY,
) -> list[str]:
    """goatd's portfolio within ``budget_s``: in one call, or ``adaptive`` (the default budget,
    over 2 FLOOR_S) in rounds of growing length (1/32 of the budget but at least FLOOR_S / 2, then doubling,
    a new seed each) that end once a round cuts the predicted work (joined entries plus largest
    table) of the best order so far, ``incumbent`` (the best greedy order) at first, by less
    than a tenth, or once the time spent since ``started`` (the engine's start, a
    :func:`time.perf_counter` reading; default: the search's) reaches a tenth of the best order's
    predicted solve time (at ``seconds_per_entry``): a grid whose min-fill order predicts minutes
    is ordered in a fraction of a second once goatd finds its width."""
    if not adaptive or budget_s <= 2 * FLOOR_S:  # short searches: one call finds more
        return treedec.decompose_order(adjacency, budget_s)
    t0 = time.perf_counter()
    started = t0 if started is None else started
    best: list[str] = []
    work = incumbent.total + incumbent.largest
    round_s, seed = max(FLOOR_S / 2, budget_s / 32), 0
    while (left := budget_s - (time.perf_counter() - t0)) >= MIN_SEARCH_S:
        order = treedec.decompose_order(adjacency, min(round_s, left), seed)
        cost = order_cost(adjacency, order, sizes)
        found = cost.total + cost.largest
        if not best or found < work:
            best = order
        if found > 0.9 * work:
            break  # the portfolio has settled
        work = found
        spent = time.perf_counter() - started
        if spent >= 0.1 * OrderCost(0, 0.0, work).predicted_seconds(len(sizes), seconds_per_entry):
            break
        round_s, seed = 2 * round_s, seed + 1
    return best


def restarts(adjacency: Adjacency, sizes: Mapping[str, int], budget_s: float) -> list[str]:
    """Min-fill with seeded random tie-breaks, restarted until ``budget_s`` is spent; the
    cheapest order (the search where goatd is not installed)."""
    deadline = time.perf_counter() + budget_s
    best_order_: list[str] = min_fill_order(adjacency)
    best_key = order_cost(adjacency, best_order_, sizes).key()
    seed = 0
    while time.perf_counter() < deadline:
        order = randomized_min_fill(adjacency, random.Random(seed))
        key = order_cost(adjacency, order, sizes).key()
        if key < best_key:
            best_order_, best_key = order, key
        seed += 1
    return best_order_


def randomized_min_fill(adjacency: Adjacency, rng: random.Random) -> list[str]:
    """Greedy min-fill whose ties (fill, then degree) are broken at random: the incremental
    min-fill breaks its ties by the variables' rank, so it runs over them in a shuffled order."""
    names = list(adjacency)
    rng.shuffle(names)
    return min_fill_order({v: adjacency[v] for v in names})
