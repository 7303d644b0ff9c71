"""Exact PR and MAR by contracting the factor tables pairwise along a contraction tree.

:func:`plan_contraction` picks the tree (the cheapest in predicted flops among the trees of the
candidate elimination orders and opt_einsum's optimizers, within a time budget, the path search
timed apart) and slices it (cotengra) until its planned peak fits the device's room
(:func:`dcop.contraction.memory.contraction_room`). :func:`contract` runs it in scaled linear space
and, where that cannot hold the range, in log space along the same tree; the outcome says which.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path as PathLike
from typing import Any

import numpy as np

from dcop.backends.base import on_device
from dcop.contraction.barren import barren_tables
from dcop.contraction.execute import DeviceScaled, LogSpace, Node, Scaled, TreeRun, run_sliced
from dcop.contraction.memory import contraction_room
from dcop.contraction.tree import (
    RANDOM_REPEATS,
    Path,
    TreeStats,
    analyse,
    load_slicer,
    optimizer_path,
    order_path,
    slice_vars,
)
from dcop.errors import TableTooLarge
from dcop.model import Problem
from dcop.orders.engine import CostModel
from dcop.orders.files import read_order
from dcop.orders.greedy import ORDERINGS, elimination_order, level_order
from dcop.plan.memory import Limit, human_bytes
from dcop.plan.reuse import PlanMemo, memo, structure_key

#: Spaces a run may ask for: ``auto`` is scaled linear, log space where that underflows.
SPACES: tuple[str, ...] = ("auto", "scaled", "log")
#: Most seconds the tree search may take (``budget_s``); it stops earlier once it has spent
#: SEARCH_SHARE of the predicted contraction time of the best tree so far.
DEFAULT_BUDGET_S = 2.0
SEARCH_SHARE = 0.25
#: Predicted flops (entries of the pairs' joint scopes) per second, by backend: the search's
#: yardstick only (2-core VM, NumPy/OpenBLAS ~2e9; CuPy on an H200, a 28x28 spin glass's PR as
#: benchmarks/startup.py --gpu measures it, 1.3e11: at the 5e10 it had, the search made six trees
#: of that PR where three gave the same one).
FLOP_RATE = {"numpy": 2e9, "cupy": 1.3e11}
#: Seconds per entry and axis of a tree's intermediates (TreeStats.strided) that a run of it
#: may take beyond its predicted flops (Promedus_15's greedy tree, 2^20 entries over 20 axes, ran
#: 0.18 s against a predicted 0.04 s; 279_ASP's, 1.3M entries over few axes, 0.02 s as
#: predicted): the search gets SEARCH_SHARE of that much time too, so such a tree is searched
#: further and a small model is not (a fixed 0.1 s of search had cost ising16x16, largest 2^16
#: entries, twice its contraction).
AXIS_ENTRY_S = 1e-8
#: Scaled space with its reads deferred to the run's end (:class:`DeviceScaled`): None picks it
#: for device backends (an array module other than NumPy); tests force it on NumPy.
DEFERRED: bool | None = None
#: A tree whose planned peak is at most this many bytes is taken without reading the memory
#: room (on the host: five /proc and cgroup files, 0.1-0.3 ms, a third of a small model's run).
SMALL_PLAN_BYTES = 64 << 20
#: The search goes on to the ordering engine's search or to opt_einsum's random-greedy (whose
#: first trial runs whatever its max_time) only with this many times the greedy tree's own
#: search time left (an elimination order, one pass over the graph, with any time left).
SEARCH_MULTIPLE = 4.0
#: The ordering engine's candidate is searched only with this many seconds left at least: its
#: tree-decomposition search needs some 10-50 ms to find a width (dcop.orders.engine.SMALL_S),
#: and with less it spent 12 ms of 279_ASP's 7 ms contraction on orders min-fill had found.
ENGINE_MIN_S = 0.05
#: A network whose variables' joint table has at most this many entries is contracted in
#: table order with no search (every intermediate is at most that large; on test_Z, 32 entries,
#: opt_einsum's greedy search and its analysis took 0.45 ms, the whole contraction 10 us as one
#: ``einsum``): its PR on the host is that one ``einsum`` call.
TINY_JOINT = 4096
#: A narrow network's PR on a device is one opt_einsum call (True) or the engine's own steps
#: (False; benchmarks/probes/contraction_ops.py --plain compares them). Steps: in four GPU runs of
#: pr.py, ising16x16's PR through opt_einsum on CuPy (0.078-0.154 s) took longer than its MAR
#: through the steps (0.071-0.129 s), which holds the same upward pass and a backward one: CuPy's
#: einsum and tensordot cost more on the host per pair than the strided kernels.
PLAIN_ON_DEVICE = False
#: The search starts at min-fill (and the band order, FIRST_ORDERS), then opt_einsum's greedy if
#: time is left (False: greedy first):
#: a fast contraction's search share leaves room for one or two candidates, and min-fill's pass
#: cost 2-7x less than greedy's (2-core VM: Grids_11 5 vs 12 ms, DBN_11 7 vs 39 ms, network 2 vs
#: 8 ms, GEOM40_3 1.0 vs 2.1 ms; slower on Promedus_13 and ObjectDetection_56), for a tree as
#: cheap on 16 of 19 models. Whole PR on the VM: 10-50 % faster on 9 of 14 small models, 20-35 %
#: slower on Segmentation_11, ising16x16 and Promedus_13 (whose greedy tree, up to half
#: min-fill's flops, is then searched second).
ORDER_FIRST = True
#: How many of the candidate orders come before opt_einsum's greedy (with ORDER_FIRST), each
#: where its pass fits in the share left: min-fill's and the band order's (default_orders).
#: The band order second: on a lattice its tree is the ordering engine's, below greedy's (a 24x24
#: spin glass 7.5e9 against 3.7e10, 28x28 1.4e11 against 3.7e12), and where greedy's tree would
#: have left no share for the engine, the device got greedy's (24x24 on CuPy: 5x the flops).
#: On the shared UAI models it changed no tree at 2e9 or 1.3e11 flops/s; at 5e10 one
#: (ObjectDetection_56: min-fill's, 4 % more cost, 38 % fewer flops than greedy's).
FIRST_ORDERS = 2
#: A tree whose largest intermediate has at most this many entries runs on the host whatever
#: the backend: a device's few launches per step cost more than such a step's work (on an H100,
#: water's MAR took 24 ms on the device; Promedus_13, largest 256 entries: MAR 0.35 s on the
#: device, 0.074 s on the 2-core CPU). The numbers are the same; the result's tree says so.
HOST_LARGEST = 4096
#: Times a tree is re-fitted to the room read again after the planner's own memory (see
#: plan_contraction); still over it, the run is refused.
REFITS = 2
#: At most this many slices: a plan that needs more is refused.
MAX_SLICES = 1 << 16

#: The path searches kept for reuse (plan_contraction's ``reuse``): each candidate's path and
#: stats by structure key.
_SEARCHES: PlanMemo[tuple[dict[str, Path], dict[str, TreeStats]]] = memo()

#: Candidate elimination orders by name, each made only when the search gets to it.
#: Each is called with the predicted seconds the search has left for it (the ordering engine's
#: budget is capped there: its default, sized from the predicted contraction, may exceed what a
#: planner that predicts by trees leaves) and returns the order with the predicted seconds its
#: own search spent (0 for one pass over the graph): the search counts work, not a clock.
OrderSource = Callable[
    [Mapping[str, set[str]], Sequence[str], CostModel],
    dict[str, Callable[[float], tuple[list[str], float]]],
]


def default_orders(
    adjacency: Mapping[str, set[str]], names: Sequence[str], model: CostModel
) -> dict[str, Callable[[float], tuple[list[str], float]]]:
    """The candidate elimination orders: min-fill first (the usual winner where greedy's tree
    is poor: Promedus_15 512 entries against 2^20, CSP_12; the file's orders there reach 2^37
    and cost a short search its time), the band order of breadth-first levels
    (:func:`dcop.orders.greedy.level_order`: one pass over the graph that, on a lattice, gives
    the tree the engine's search finds, where that search costs a fast device's whole
    contraction: a 28x28 spin glass's portfolio round took 0.3 s on the H200's host for a
    0.46 s PR; the engine is then skipped, its share spent), the ordering engine's
    (:func:`dcop.orders.best_order`:
    its tree decomposition search within its default budget, ``model`` giving the domain sizes
    and the contraction's speed; it takes the min-fill order made here), then the file's order
    both ways and min-degree (the engine's, where it ran)."""
    from dcop.orders import best_order

    graph = {v: set(n) for v, n in adjacency.items()}
    made: dict[str, list[str]] = {}  # the greedy orders, made once for the engine and the trees

    def greedy(name: str) -> list[str]:
        if name not in made:
            made[name] = elimination_order(name, graph)
        return made[name]

    def engine(left: float) -> tuple[list[str], float]:
        # its default budget (a share of the predicted contraction, none for a fast one), at
        # most what the search has left; charged the work it did (its greedy orders and the
        # rounds it ran, predicted: the same on every call)
        result = best_order(graph, cost_model=model, max_budget_s=left, known=made)
        made["mindegree"] = next(list(r.order) for r in result.tried if r.method == "mindegree")
        return result.order, result.work_s

    return {
        "minfill": lambda left: (greedy("minfill"), 0.0),
        "levels": lambda left: (level_order(graph), 0.0),
        "engine": engine,
        "natural": lambda left: (list(names), 0.0),
        "reverse-natural": lambda left: (list(names)[::-1], 0.0),
        "mindegree": lambda left: (greedy("mindegree"), 0.0),
    }


@dataclass
class ContractionPlan:
    """The chosen tree: its source, SSA path, sliced variables and costs (one slice's), the time
    its search took, and what every candidate would have cost."""

    source: str
    path: Path
    sliced: tuple[str, ...]
    stats: TreeStats
    slices: int
    itemsize: int
    search_s: float
    limit: Limit
    candidates: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def width(self) -> int:
        """Variables of the largest node (the induced width of an order's tree)."""
        return max((len(n) for n in self.stats.nodes), default=0)

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "flops": self.stats.flops * self.slices,
            "largest_intermediate": self.stats.largest,
            "peak_bytes_pr": self.stats.peak_pr * self.itemsize,
            "peak_bytes_mar": self.stats.peak_mar * self.itemsize,
            "sliced": list(self.sliced),
            "slices": self.slices,
            "search_s": self.search_s,
        }


def _sliced_scopes(
    scopes: Sequence[tuple[str, ...]], sliced: Sequence[str]
) -> list[tuple[str, ...]]:
    cut = set(sliced)
    return [tuple(v for v in s if v not in cut) for s in scopes]


def plan_contraction(
    scopes: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
    adjacency: Mapping[str, set[str]],
    names: Sequence[str],
    task: str,
    limit: Limit | Callable[[], Limit],
    itemsize: int = 8,
    ordering: str = "auto",
    budget_s: float = DEFAULT_BUDGET_S,
    orders: OrderSource = default_orders,
    rate: float = FLOP_RATE["numpy"],
    order_first: bool | None = None,
    small_unread: bool = True,
    reuse: bool = False,
) -> ContractionPlan:
    """The tree to contract ``scopes`` along (see the module docstring); raises TableTooLarge when
    no slicing of it fits ``limit``. A callable ``limit`` (the room the process has) is read after
    the search (only when the cheapest tree's peak is above SMALL_PLAN_BYTES, unless
    ``small_unread`` is False: a cap below that), and again once a tree is chosen, which is
    re-fitted to what the planner's own memory left (at most REFITS times).
    With ``ordering="auto"`` the candidates are tried in turn (the first FIRST_ORDERS of
    ``orders``, min-fill's and the band order's, where ``order_first`` says so (None:
    ORDER_FIRST), opt_einsum's greedy,
    the ordering engine's search where there is time for it, the other orders, then
    opt_einsum's random-greedy) while the search has spent less than
    ``budget_s`` and less than SEARCH_SHARE of the best candidate's predicted time (its flops at
    ``rate``), and the next candidate's predicted cost fits in what is left (the ordering
    engine's search and random-greedy's trials: SEARCH_MULTIPLE times a pass). What the
    search has spent is the candidates' predicted seconds (:func:`search_cost`), never a clock:
    the same network gets the same tree on every call. With ``reuse`` (``adjacency`` then being
    the scopes' own) the search is kept for the next call on the same structure and settings,
    which takes its trees without searching again."""
    t0 = time.perf_counter()
    # the budget is spent as predicted work (search_cost), never on a clock: the same network
    # gets the same tree on every call and on a loaded machine (on the clock, a 28x28 spin glass
    # got a slower tree on one call of five)
    cost = search_cost(scopes)
    spent = [0.0]
    paths: dict[str, Path] = {}
    stats: dict[str, TreeStats] = {}

    def add(name: str, path: Path, seconds: float) -> None:
        paths[name] = path
        stats[name] = analyse(scopes, sizes, path)
        spent[0] += seconds

    held = {v for s in scopes for v in s}
    if ordering == "auto" and math.prod(sizes[v] for v in held) <= TINY_JOINT:
        m = len(scopes)  # table order: (0, 1), then each next table into the last result
        add("joint", [(0, 1), *((m + k, k + 2) for k in range(m - 2))] if m > 1 else [], 0.0)
    elif ordering != "auto":
        if ordering in ORDERINGS:
            order = elimination_order(ordering, {v: set(n) for v, n in adjacency.items()})
        else:  # an order or .td file (dcop info --write-order)
            order = read_order(PathLike(ordering), names)
        add(f"order:{ordering}", order_path(scopes, sizes, order), 0.0)
    else:
        # a search made before in this process on the same structure and settings is taken
        # as it is: it would find the same trees (dcop.plan.reuse)
        key = (structure_key(names, sizes, scopes), budget_s, rate, order_first) if reuse else None
        kept = None if key is None else _SEARCHES.get(key)
        if kept is not None:
            paths.update(kept[0])
            stats.update(kept[1])
        else:
            sources = orders(adjacency, names, CostModel(sizes=sizes, seconds_per_entry=1.0 / rate))
            # a candidate is made only where its predicted cost fits in the share left (the
            # first always): a 28x28 spin glass on CuPy had made greedy's tree (0.19 s predicted,
            # 0.1 s of CPU on the VM, half the search) with 0.12 s left, after the band order's
            # tree, 26x cheaper than greedy's, had been found. Before, any share left let the
            # next candidate start; on the shared UAI models at 2e9 and 1.3e11 flops/s the rule
            # changed no tree (Grids_11 at 2e9: one candidate fewer, the same tree)
            if (ORDER_FIRST if order_first is None else order_first) and sources:
                for first in list(sources)[:FIRST_ORDERS]:
                    if stats and _left(stats, spent[0], budget_s, rate) < cost.order:
                        break
                    order, searched = sources.pop(first)(budget_s)
                    add(f"order:{first}", order_path(scopes, sizes, order), cost.order + searched)
            if not stats or _left(stats, spent[0], budget_s, rate) >= cost.greedy:
                add("opt_einsum:greedy", optimizer_path(scopes, sizes, "greedy"), cost.greedy)
            # one pass of the search's own kind: what the next candidate will cost at least
            unit = cost.greedy if "opt_einsum:greedy" in stats else cost.order
            for name, make in sources.items():
                # the ordering engine's order is a search of its own, skipped without the time for
                # it; the others one graph pass each, made while their pass fits in the share
                # left. The engine comes before them: where it runs, its tree (a grid's
                # treewidth, 7-36x below min-fill's flops on a spin glass) lowers the best tree's
                # predicted time, and with it the share left for them (22x22 spin glass: their
                # trees were 0.1 s of 0.4 s of search, for trees 3-27x the engine's)
                left = _left(stats, spent[0], budget_s, rate)
                if name == "engine" and left <= max(SEARCH_MULTIPLE * unit, ENGINE_MIN_S):
                    continue
                if left < cost.order:
                    break
                order, searched = make(left)
                add(f"order:{name}", order_path(scopes, sizes, order), cost.order + searched)
            # random-greedy lowers flops only: its time is a share of the flops' predicted time
            left = _left(stats, spent[0], budget_s, rate, flops_only=True)
            if left >= SEARCH_MULTIPLE * unit:
                repeats = min(RANDOM_REPEATS, int(left / cost.trial))
                add(
                    "opt_einsum:random-greedy",
                    optimizer_path(scopes, sizes, "random-greedy", repeats=repeats),
                    repeats * cost.trial,
                )
            if key is not None:
                _SEARCHES.put(key, (dict(paths), dict(stats)))
    read: Callable[[], Limit] | None = None
    if callable(limit):
        cheapest = min(stats.values(), key=lambda st: st.cost)
        if small_unread and cheapest.peak(task) * itemsize <= SMALL_PLAN_BYTES:
            limit = Limit(
                SMALL_PLAN_BYTES, f"{human_bytes(SMALL_PLAN_BYTES)} (not read: a small plan)"
            )
        else:
            read = limit
            limit = read()
    ranked = sorted(stats, key=lambda k: stats[k].cost)
    if read is not None and all(stats[k].peak(task) * itemsize > limit.bytes for k in ranked):
        # slicing will run: its library stays loaded (some 10 MiB), so the room is read after it
        load_slicer()
        limit = read()
    choice = _choose(scopes, sizes, paths, stats, ranked, task, limit.bytes / itemsize)
    # A room read from the process is read again once the tree is chosen: the search and the
    # slicer keep memory of their own (cotengra's caches stay in the heap), so the arrays get
    # what is left, and the tree is re-fitted to that (round 4, finding 13: 1.2x over a cap
    # near the process's own size).
    for attempt in range(REFITS + 1):
        if read is None or choice is None:
            break
        limit = read()
        if choice.planned <= limit.bytes / itemsize:
            break
        choice = (
            None
            if attempt == REFITS
            else _choose(scopes, sizes, paths, stats, ranked, task, limit.bytes / itemsize)
        )
    search_s = time.perf_counter() - t0
    candidates = {
        k: {"flops": s.flops, "cost": s.cost, "largest_intermediate": float(s.largest)}
        for k, s in stats.items()
    }
    if choice is None:
        least = min(stats.values(), key=lambda s: s.peak(task))
        raise TableTooLarge(
            f"{task.upper()} by contraction: the best tree's planned peak of "
            f"{human_bytes(least.peak(task) * itemsize)} (largest intermediate "
            f"{human_bytes(least.largest * itemsize)}) exceeds {limit.text}, and no slicing into "
            f"at most {MAX_SLICES} slices fits it"
        )
    return ContractionPlan(
        choice.name,
        paths[choice.name],
        choice.sliced,
        choice.stats,
        choice.slices,
        itemsize,
        search_s,
        limit,
        candidates,
    )


@dataclass(frozen=True)
class _Fit:
    """One candidate tree fitted to a room: its slicing, one slice's stats, the slices, and the
    planned peak in entries (the whole inputs plus one slice's intermediates)."""

    name: str
    sliced: tuple[str, ...]
    stats: TreeStats
    slices: int
    planned: float

    @property
    def total(self) -> float:
        return self.stats.cost * self.slices


def _choose(
    scopes: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
    paths: Mapping[str, Path],
    stats: Mapping[str, TreeStats],
    ranked: Sequence[str],
    task: str,
    room: float,
) -> _Fit | None:
    """The cheapest tree that fits ``room`` entries whole; where none does, the cheapest once
    sliced to fit; None when no slicing fits."""
    choice: _Fit | None = None
    whole = [k for k in ranked if stats[k].peak(task) <= room]
    inputs = sum(math.prod(sizes[v] for v in s) for s in scopes)
    for name in ranked:
        if whole and name not in whole:
            # slicing splits the peak above the inputs at best evenly: skip a tree whose fewest
            # slices already cost more than the cheapest tree that fits whole
            fewest = (stats[name].peak(task) - inputs) / max(room - inputs, 1.0)
            if stats[name].cost * fewest >= stats[whole[0]].cost:
                continue
        got = _fit(scopes, sizes, paths[name], stats[name], task, room)
        if got is None:
            continue
        if choice is None or got.total < choice.total:
            choice = _Fit(name, got.sliced, got.stats, got.slices, got.planned)
        if not got.sliced:
            break  # the cheapest tree that fits whole: slicing another cannot beat it
    return choice


def _left(
    stats: Mapping[str, TreeStats],
    spent: float,
    budget_s: float,
    rate: float,
    flops_only: bool = False,
) -> float:
    """The search's predicted seconds left for more candidate trees: SEARCH_SHARE of the best
    tree's predicted time (at least what laying out its intermediates may cost, AXIS_ENTRY_S:
    the flops miss it; Promedus_15's greedy tree, 2^20 entries over 20 axes, ran 0.18 s;
    min-fill's, 512 entries, 0.016 s), at most ``budget_s``, less the predicted seconds of the
    candidates made so far (``spent``, :class:`SearchCost`)."""
    predicted = (
        min(s.cost for s in stats.values()) / rate if flops_only else _worst_time(stats, rate)
    )
    return min(budget_s, SEARCH_SHARE * predicted) - spent


@dataclass(frozen=True)
class SearchCost:
    """The predicted seconds of each kind of candidate on one network: an elimination order's
    tree (the order, its path and analysis), opt_einsum's greedy, and one random-greedy trial.
    The search counts these, not a clock (:func:`search_cost`)."""

    order: float
    greedy: float
    trial: float


#: Seconds per element (a variable of a leaf, or a variable) of each candidate, measured on the
#: 2-core VM over the shared UAI models: an order's tree 7-40 us, opt_einsum's greedy 14-240 us,
#: a random-greedy trial 12-600 us (wide networks cost most).
ORDER_S_PER_ELEMENT = 2e-5
GREEDY_S_PER_ELEMENT = 5e-5
TRIAL_S_PER_ELEMENT = 1e-4


def search_cost(scopes: Sequence[Sequence[str]]) -> SearchCost:
    """:class:`SearchCost` of a network from its size alone."""
    size = max(1, sum(len(s) for s in scopes) + len({v for s in scopes for v in s}))
    return SearchCost(
        ORDER_S_PER_ELEMENT * size, GREEDY_S_PER_ELEMENT * size, TRIAL_S_PER_ELEMENT * size
    )


def _worst_time(stats: Mapping[str, TreeStats], rate: float) -> float:
    """The best tree's predicted time, or what laying out its intermediates may cost if more
    (AXIS_ENTRY_S was measured on the host: a device lays them out faster by as much as it
    multiplies faster, FLOP_RATE; at the host's figure the GPU's ising24x24 searched 1.7 s for
    a 0.5 s contraction)."""
    axis_entry_s = AXIS_ENTRY_S * FLOP_RATE["numpy"] / rate
    return min(max(s.cost / rate, s.strided * axis_entry_s) for s in stats.values())


def _fit(
    scopes: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
    path: Path,
    stats: TreeStats,
    task: str,
    room: float,
) -> _Fit | None:
    """The variables to slice so that ``path``'s peak fits ``room`` entries (none when it fits
    whole), the stats of one slice, the number of slices and the planned peak; None when
    nothing fits (the fit's ``name`` is left empty)."""
    if stats.peak(task) <= room:
        return _Fit("", (), stats, 1, stats.peak(task))
    target = stats.largest
    inputs = sum(math.prod(sizes[v] for v in s) for s in scopes)
    if inputs > room:
        return None
    # a sliced variable of d values divides an intermediate by d at most: a tree whose largest
    # intermediate is over MAX_SLICES times the room needs more slices than that, whatever is
    # sliced (cotengra's slicer had spent 28 s finding so on a 300-variable scale-free network)
    if stats.largest > MAX_SLICES * room:
        return None
    # no slice can fit while its largest intermediate is over the room: start there
    while target > room:
        target //= 2
    target *= 2
    while target > 1:
        target //= 2
        sliced = slice_vars(scopes, sizes, path, target)
        slices = math.prod(sizes[v] for v in sliced)
        if slices > MAX_SLICES:
            return None
        cut = _sliced_scopes(scopes, sliced)
        one = analyse(cut, sizes, path)
        # the leaves stay whole on the device; each slice's views of them are copied as used
        planned = one.peak(task) - sum(math.prod(sizes[v] for v in s) for s in cut) + inputs
        if planned <= room:
            return _Fit("", sliced, one, slices, planned)
    return None


@dataclass
class ContractionOutcome:
    """``ln Z`` (the Problem's constant included), the marginals of a MAR run, and how it ran."""

    ln_z: float
    marginals: dict[str, np.ndarray] | None
    plan: ContractionPlan
    space: str
    times: dict[str, float]
    pruned: int = 0
    #: a device backend was asked for and the tree ran on the host (see HOST_LARGEST)
    on_host: bool = False


def _narrow(
    spans: Sequence[float],
    nodes: Sequence[frozenset[str]],
    sizes: Mapping[str, int],
    limit: float,
) -> bool:
    """Whether no intermediate can leave float's range even unscaled: the leaves' ranges and the
    logs of all domain sizes add up below ``limit`` (every leaf is at most 1 after its peak is
    divided out, so an entry is at most the product of the sizes summed, and a positive one at
    least the product of the leaves' smallest positive entries)."""
    total = sum(math.log(sizes[v]) for v in frozenset().union(*nodes[: len(spans)]))
    for span in spans:
        total += span
        if total >= limit:
            return False
    return True


def _plain(backend: Any, leaves: Sequence[Node], path: Path, sizes: Mapping[str, int]) -> TreeRun:
    """PR of a network whose range fits float unscaled: one ``opt_einsum.contract`` along the
    plan's path on the backend's array library (no per-step scaling or checks; device
    backends)."""
    import opt_einsum as oe
    from opt_einsum.paths import ssa_to_linear

    symbol = {v: oe.get_symbol(i) for i, v in enumerate(sizes)}
    eq = ",".join("".join(symbol[v] for v in leaf.scope) for leaf in leaves) + "->"
    linear = [tuple(int(i) for i in step) for step in ssa_to_linear(path)] or None
    z = oe.contract(
        eq, *[leaf.data for leaf in leaves], optimize=linear or "auto", backend=backend.name
    )
    value = float(backend.to_numpy(z))
    with np.errstate(divide="ignore"):
        return TreeRun(
            ln_z=math.log(value) + sum(float(leaf.ln) for leaf in leaves)
            if value > 0
            else -math.inf
        )


def _joint(leaves: Sequence[Node], mar: bool) -> TreeRun:
    """PR (and MAR) of a tiny network whose range fits float unscaled: one ``numpy.einsum`` over
    the whole joint (no path: NumPy loops over the joint's entries in C); MAR sums the joint
    table down to each variable."""
    letters: dict[str, str] = {}
    for leaf in leaves:
        for v in leaf.scope:
            letters.setdefault(v, _LETTERS[len(letters)])
    out = "".join(letters.values()) if mar else ""
    eq = ",".join("".join(letters[v] for v in leaf.scope) for leaf in leaves) + "->" + out
    joint = np.einsum(eq, *[leaf.data for leaf in leaves])
    ln = sum(float(leaf.ln) for leaf in leaves)
    value = float(np.sum(joint))
    run = TreeRun(ln_z=math.log(value) + ln if value > 0 else -math.inf)
    if mar and value > 0:
        names = list(letters)
        with np.errstate(divide="ignore"):
            for k, v in enumerate(names):
                axes = tuple(i for i in range(len(names)) if i != k)
                run.log_marginals[v] = np.log(np.sum(joint, axis=axes)) + ln
    return run


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: NumPy's einsum takes at most 32 operands on NumPy 1 (64 on 2).
MAX_EINSUM_OPERANDS = 32


def _frames(
    leaf_spans: Sequence[float],
    peaks: Sequence[float],
    scopes: Sequence[tuple[str, ...]],
    path: Path,
    nodes: Sequence[frozenset[str]],
    sizes: Mapping[str, int],
    limit: float,
) -> list[float | None]:
    """Each node's frame for the precision bound of :class:`Scaled` (None where its entries
    cannot leave float's range: an upper bound on ``ln(peak / smallest positive entry)``, the
    leaves' own ranges added up plus the log of the entries summed, stays below ``limit``).

    The frame is what multiplies a tiny entry on its way to ``Z``, in logs: the peaks of the
    leaves outside the node's subtree, and the domain sizes of the variables outside it."""
    m = len(leaf_spans)
    ln = {v: math.log(d) for v, d in sizes.items()}
    spans = list(leaf_spans)
    inside = [float(p) if math.isfinite(p) else 0.0 for p in peaks]
    # the logs of the sizes summed inside each subtree (a variable is summed at one step only:
    # siblings' sums are disjoint); its variables are those plus the node's own
    inner = [0.0] * m
    for k, (i, j) in enumerate(path):
        summed = sum(ln[v] for v in (nodes[i] | nodes[j]) - nodes[m + k])
        spans.append(spans[i] + spans[j] + summed)
        inside.append(inside[i] + inside[j])
        inner.append(inner[i] + inner[j] + summed)
    held = [inner[k] + sum(ln[v] for v in nodes[k]) for k in range(len(inner))]
    all_peaks = sum(inside[:m])
    all_sizes = held[-1] if held else 0.0
    return [
        None if span <= limit else (all_peaks - peak) + (all_sizes - vars_)
        for span, peak, vars_ in zip(spans, inside, held, strict=True)
    ]


def contract(
    problem: Problem,
    task: str,
    backend: Any,
    dtype: Any = np.float64,
    max_bytes: float | None = None,
    ordering: str = "auto",
    space: str = "auto",
    budget_s: float = DEFAULT_BUDGET_S,
    orders: OrderSource = default_orders,
    room: Limit | None = None,
    fallback: bool = True,
    prune: bool = True,
) -> ContractionOutcome:
    """PR (``task="pr"``) or MAR of ``problem`` by tree contraction on the table ``backend``;
    ``room`` overrides the memory the arrays may take (default: :func:`contraction_room`); PR
    drops a BAYES model's barren tables unless ``prune`` is False (benchmarks/pr.py times both:
    without evidence every table is barren, and MAR's cost is compared with the whole network's).
    Where scaled linear space underflows (``space="auto"``), log space runs along the same tree,
    or with ``fallback=False`` the outcome's space is ``underflow`` (its numbers unusable) and
    the caller picks the log-space engine."""
    from dcop.sumproduct import log_constant

    if space not in SPACES:
        raise ValueError(f"unknown space {space!r}; use one of {', '.join(SPACES)}")
    times: dict[str, float] = {}
    constant = log_constant(problem)
    sizes = problem.domain_sizes()
    tables = (
        barren_tables(problem) if task == "pr" and prune else [t for t in problem.tables if t.scope]
    )
    pruned = sum(1 for t in problem.tables if t.scope) - len(tables)
    held = {v for t in tables for v in t.scope}
    # a variable in no (kept) table multiplies Z by its domain size (a barren one by one)
    barren = {v for t in problem.tables if t.scope for v in t.scope} - held if pruned else set()
    free = [v for v in problem.variables if v not in held and v not in barren]
    constant += sum(math.log(sizes[v]) for v in free)
    t0 = time.perf_counter()
    scopes, logs = absorb(
        [tuple(t.scope) for t in tables], [-np.asarray(t.costs, np.float64) for t in tables]
    )
    times["prepare"] = time.perf_counter() - t0
    itemsize = np.dtype(dtype).itemsize
    limit: Limit | Callable[[], Limit]
    if room is not None:
        limit = room
    elif backend.name == "numpy":
        # read after the search (its memory and the slicer's are held then, and count), and
        # without a cap only for a large plan: the reads cost a small model a third of its run
        limit = lambda: contraction_room(backend, max_bytes)  # noqa: E731
    else:  # a device's free memory is one call; --max-memory is always a cap
        limit = contraction_room(backend, max_bytes)
    adjacency = _adjacency(scopes, [v for v in problem.variables if v in held])
    plan = plan_contraction(
        scopes,
        sizes,
        adjacency,
        [v for v in problem.variables if v in held],
        task,
        limit,
        itemsize,
        ordering,
        budget_s,
        orders,
        FLOP_RATE.get(backend.name, FLOP_RATE["numpy"]),
        small_unread=max_bytes is None,
        reuse=orders is default_orders,
    )
    times["path"] = plan.search_s
    marginals: dict[str, np.ndarray] | None = None
    on_host = backend.xp is not np and plan.stats.largest <= HOST_LARGEST
    if on_host:
        from dcop.backends import get_backend

        backend = get_backend("numpy")
    t0 = time.perf_counter()
    if not scopes:
        run = TreeRun(ln_z=0.0)
        used = "scaled"
    else:
        with on_device(backend):
            run, used = _run(backend, dtype, sizes, logs, scopes, plan, task, space, fallback)
    backend.synchronize()
    times["contract"] = time.perf_counter() - t0
    ln_z = run.ln_z + constant
    if task == "mar" and ln_z > -math.inf:
        marginals = {}
        for v in problem.variables:
            if v in run.log_marginals:
                vec = run.log_marginals[v]
                peak = float(np.max(vec))
                weights = np.exp(vec - peak)
                marginals[v] = weights / weights.sum()
            else:
                marginals[v] = np.full(sizes[v], 1.0 / sizes[v])
    return ContractionOutcome(ln_z, marginals, plan, used, times, pruned, on_host)


def hosts(scopes: Sequence[tuple[str, ...]]) -> dict[int, int]:
    """For every table, the table it goes into: itself, or the first larger table holding all its
    variables (see :func:`absorb`)."""
    order = sorted(range(len(scopes)), key=lambda k: -len(scopes[k]))
    holders: dict[str, list[int]] = {}
    host: dict[int, int] = {}
    for k in order:
        scope = scopes[k]
        candidates = holders.get(scope[0], []) if scope else []
        found = next((h for h in candidates if set(scope) <= set(scopes[h])), None)
        host[k] = k if found is None else found
        if found is None:
            for v in scope:
                holders.setdefault(v, []).append(k)
    return host


def absorb(
    scopes: Sequence[tuple[str, ...]], logs: Sequence[np.ndarray]
) -> tuple[list[tuple[str, ...]], list[np.ndarray]]:
    """Each table whose variables another table holds, added (in log space) into the first such
    larger table: fewer leaves, the same product (on an Ising grid, the fields go into the
    couplings: a third fewer pairs to contract)."""
    host = hosts(scopes)
    kept = sorted(k for k, h in host.items() if h == k)
    merged = {k: np.array(logs[k], np.float64) for k in kept}
    for k, h in host.items():
        if h == k:
            continue
        big, scope = scopes[h], scopes[k]
        shape = tuple(logs[k].shape[scope.index(v)] if v in scope else 1 for v in big)
        axes = [scope.index(v) for v in big if v in scope]
        merged[h] += np.transpose(logs[k], axes).reshape(shape)
    return [scopes[k] for k in kept], [merged[k] for k in kept]


def describe_tree(problem: Problem, backend: Any = None) -> dict[str, Any]:
    """What ``dcop info`` shows of the contraction tree an exact MAR (and PR) run would take on
    ``backend`` (default NumPy): its source, predicted flops, largest intermediate, planned peaks,
    slices and search time."""
    from dcop.backends import get_backend

    engine = backend if backend is not None else get_backend("numpy")
    scopes = [tuple(t.scope) for t in problem.tables if t.scope]
    host = hosts(scopes)
    scopes = [scopes[k] for k in sorted(k for k, h in host.items() if h == k)]
    held = {v for s in scopes for v in s}
    names = [v for v in problem.variables if v in held]
    if not scopes:
        return {"source": "none", "flops": 0.0, "largest_intermediate": 0, "slices": 1}
    plan = plan_contraction(
        scopes,
        problem.domain_sizes(),
        _adjacency(scopes, names),
        names,
        "pr",
        contraction_room(engine, None),
        rate=FLOP_RATE.get(engine.name, FLOP_RATE["numpy"]),
    )
    return plan.summary()


def _adjacency(scopes: Sequence[tuple[str, ...]], names: Sequence[str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {v: set() for v in names}
    for scope in scopes:
        for v in scope:
            graph[v].update(u for u in scope if u != v)
    return graph


def _run(
    backend: Any,
    dtype: Any,
    sizes: Mapping[str, int],
    logs: Sequence[np.ndarray],
    scopes: Sequence[tuple[str, ...]],
    plan: ContractionPlan,
    task: str,
    space: str,
    fallback: bool = True,
) -> tuple[TreeRun, str]:
    from dcop.contraction.tree import node_scopes

    nodes = plan.stats.nodes  # of one slice
    full = node_scopes(scopes, plan.path) if plan.sliced else nodes
    mar = task == "mar"
    if space in ("auto", "scaled"):
        device = DEFERRED if DEFERRED is not None else backend.xp is not np
        scaled = (DeviceScaled if device else Scaled)(backend, dtype, sizes)
        scaled.host_leaves = mar  # small leaves' host copies: MAR's beliefs only
        leaves = scaled.leaves(scopes, logs)
        spans = [-leaf.lo for leaf in leaves]  # each leaf's ln(peak / least positive entry)
        narrow = not plan.sliced and _narrow(spans, full, sizes, -scaled.ln_tiny)
        if (
            narrow
            and plan.source == "joint"
            and backend.xp is np
            and len(leaves) <= MAX_EINSUM_OPERANDS
            and len(sizes) <= len(_LETTERS)
        ):
            return _joint(
                leaves, mar
            ), "scaled"  # one einsum over a joint of a few thousand entries
        if narrow and not mar and PLAIN_ON_DEVICE and backend.name != "numpy":
            # on a device, one opt_einsum call launches fewer kernels than our steps; on the
            # host our steps ran 1.1-2x faster than it (ising16x16: 12 vs 25 ms, test_Z 0.15 vs
            # 0.2 ms: its path parsing and checks cost more than our per-step overhead)
            return _plain(backend, leaves, plan.path, sizes), "scaled"
        peaks = [float(leaf.ln) for leaf in leaves]
        checks: list[float | None] = (
            [None] * len(full)  # no entry can leave float's range: nothing to check
            if narrow
            else _frames(spans, peaks, scopes, plan.path, full, sizes, -scaled.ln_tiny)
        )
        for leaf, h in zip(leaves, checks, strict=False):
            scaled.account_leaf(leaf, h)
        if isinstance(scaled, DeviceScaled):
            # an adjoint's entries span at most the whole network's range: where no node can
            # leave float's range, neither can they
            scaled.check_adjoints = any(h is not None for h in checks)
        run = run_sliced(scaled, leaves, plan.path, nodes, checks, mar, plan.sliced)
        if not run.underflow or space == "scaled":
            return run, "scaled"
        if not fallback:
            return run, "underflow"
        del leaves
    logspace = LogSpace(backend, dtype, sizes)
    leaves_log: list[Node] = [logspace.leaf(s, x) for s, x in zip(scopes, logs, strict=True)]
    run = run_sliced(logspace, leaves_log, plan.path, nodes, [None] * len(nodes), mar, plan.sliced)
    return run, "log" if space == "log" else "log (scaled linear space underflowed)"
