"""``--algo dfbnb``: depth-first branch and bound that keeps soft arc consistency at every node.

Where the AND/OR search's bound is static (a mini-bucket pass, computed once along an order), this
one reacts to every decision, as toulbar2's: after each assignment or refutation, the tables are
projected onto their variables and the unary costs onto a global bound ``c0`` (AC*,
:mod:`.propagate`), values that cannot beat the incumbent are removed, and a failure cuts the
branch; variables by dom/wdeg, values by unary cost (:mod:`.branch`).

The run: the exact reduction (:mod:`.reduce`), min-sum diffusion (:mod:`.reparam`: the root's
``c0`` starts at its bound, near the optimum on the Promedas networks), the dives for an incumbent
(:mod:`.guided`), then the walk, in slices between which the deadline is checked and the bounds
are reported. Every exit keeps the best assignment and both bounds; a proved optimum is expanded
and re-evaluated on the original problem.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable

import numpy as np

from dcop.errors import TableTooLarge
from dcop.model import Problem
from dcop.plan.memory import effective_limit, human_bytes
from dcop.results.solve import SolveResult
from dcop.search import branch, guided, propagate, reduce, reparam
from dcop.search.first import FirstAnswer
from dcop.search.ibound import PASS_SECONDS_NO_DEADLINE
from dcop.search.solver import EPS_ABS, EPS_REL, SearchStats

#: bounds(seconds since the start, lower, upper), internal costs.
BoundsFn = Callable[[float, float, float], None]

#: The variable order (:data:`.branch.ORDER_GAP` or ``ORDER_WDEG``). With the nodes'
#: diffusion and the best-first dives, dom/wdeg proves or_chain_113 in 57 nodes (the gap: 221)
#: and or_chain_41/70 in 4-6k (the gap: not in 3000, its incumbent 2-4 units above the optimum).
ORDER = branch.ORDER_WDEG
#: A node's diffusion (:func:`.propagate.diffuse_around`): sweeps at most, and the radius (in
#: tables) around the variables the node's decision and propagation changed. On or_chain_124,
#: AC* alone left the bound near the root's after 20k nodes (not proved in 15 s); three sweeps
#: at radius 2 proved it in 269 nodes. Two sweeps at radius 1 prove or_chain_41/70/117 in
#: 9 s together, where three at radius 2 took 17 s (about as many nodes, each slower).
NODE_SWEEPS = 2
RADIUS = 1
#: Name of the algorithm (``--algo``).
ALGO = "dfbnb"
#: Shares of the time left for the cost shifting and the dives' incumbent (as the AND/OR search's).
DIFFUSE_SHARE = 0.1
GUIDED_SHARE = 0.05
#: ``--algo auto`` runs this search on a reduced problem whose tables have at most this many
#: entries and whose domains at most this many values (:func:`suits`).
SUITS_ENTRIES = 64
SUITS_DOMAIN = 4
#: ``--algo auto`` runs this search on a problem of binary tables with a domain of at least
#: this many values (:func:`suits_large`).
LARGE_DOMAIN = 20
#: Domains of more values than this search without min-sum diffusion (:func:`large_domains`).
DIFFUSE_DOMAIN = 8
#: Backtracks of a dive before its open nodes go back to the frontier (:class:`_Frontier`).
BACKTRACKS = 100
#: Seconds a slice of the walk should take between two looks at the clock.
SLICE_S = 0.05
#: The trail's first capacity: rows per value and table entry, and at least (it doubles when
#: full).
TRAIL_PER_ENTRY = 4
TRAIL_MIN_ROWS = 4096
#: Share of the memory limit the trail may take.
TRAIL_SHARE = 0.5
#: Bytes per trail row.
ROW_BYTES = 40
TIMEOUT = "the deadline came before the search proved the optimum"
OUT_OF_NODES = "the search's node budget ran out"
NO_MEMORY = "the search's trail outgrew its share of the memory limit"
INTERRUPTED = "interrupted"


def large_domains(problem: Problem) -> bool:
    """Whether ``problem`` has a domain of more than DIFFUSE_DOMAIN values: there the search
    keeps AC* alone. Diffusion's shifts cost a domain's values times a variable's tables each
    (its sweeps before the search and at every node): on CELAR6-SUB0 (d = 44) two sweeps a node
    made a node 40 times slower for 15 % fewer nodes, and the dives of :mod:`.guided` took
    seconds past their share."""
    return any(v.size > DIFFUSE_DOMAIN for v in problem.variables.values())


def suits(problem: Problem) -> bool:
    """``--algo auto``'s rule, where BE is not quick: this search, not the AND/OR one, for a
    problem that the exact reduction shrank (``problem`` is the reduced one) to small tables
    (at most SUITS_ENTRIES entries) over small domains (at most SUITS_DOMAIN values). There a
    node's consistency costs little and its bound reacts to every decision; the Promedas
    networks reduce to binary variables and tables of three (toulbar2's ground), where AOBB's
    static heuristic proved 2 of 16 in 15 s and this search 14."""
    if any(v.size > SUITS_DOMAIN for v in problem.variables.values()):
        return False
    return all(int(t.entries) <= SUITS_ENTRIES for t in problem.tables)


def suits_large(problem: Problem) -> bool:
    """``--algo auto``'s second rule, where BE is not quick: a probe of this search (a count of
    nodes: ``dcop.inference.anytime.LARGE_PROBE_NODES``) before the AND/OR one, for a problem
    of tables of at most two variables with a domain of at least LARGE_DOMAIN values
    (toulbar2's ground: the frequency assignments). There the AND/OR search's passes grow as
    d^z and its nodes price d values each: CELAR6-SUB0 (d = 44) took it 3-5 s where this search
    (AC* on the tables summed per pair, no diffusion: :func:`large_domains`) proves it in a
    few tenths. Not on every such problem: on the random network n = 18, d = 24 the AND/OR
    search proved it in 0.6 s of CPU, this one not in 30 s (AC* is weak on dense random
    costs), and on those of d = 10 this search did not prove n = 22 in 15 s: hence a probe."""
    if not problem.variables or max(v.size for v in problem.variables.values()) < LARGE_DOMAIN:
        return False
    return all(len(t.scope) <= 2 for t in problem.tables)


def arrays(problem: Problem, trail_rows: int | None = None) -> tuple[propagate.Net,
                                                                      propagate.Live, float, float]:  # fmt: skip
    """:func:`.propagate.build` of ``problem``'s tables (its unary ones summed per variable; the
    constant left out), in the order of ``problem.variables``."""
    names = list(problem.variables)
    index = {v: i for i, v in enumerate(names)}
    dom = np.array([problem.variables[v].size for v in names], dtype=np.int64)
    u_off = np.concatenate(([0], np.cumsum(dom))).astype(np.int64)
    unary = np.zeros(int(u_off[-1]))
    # tables of the same variables are summed into one, its scope in index order: fewer
    # projections a node, and AC* on the sum is at least as strong (CELAR6-SUB0's 207 tables
    # cover 57 pairs)
    merged: dict[tuple[int, ...], np.ndarray] = {}
    extra = 0.0
    for t in problem.tables:
        c = np.asarray(t.costs, dtype=np.float64)
        if not t.scope:
            extra += float(c)
        elif len(t.scope) == 1:
            i = index[t.scope[0]]
            unary[u_off[i] : u_off[i + 1]] += c
        else:
            at = [index[v] for v in t.scope]
            axes = sorted(range(len(at)), key=at.__getitem__)
            key = tuple(at[a] for a in axes)
            c = np.transpose(c, axes)
            merged[key] = merged[key] + c if key in merged else np.array(c)
    scopes = list(merged)
    tables = list(merged.values())
    entries = int(u_off[-1]) + sum(c.size for c in tables)
    rows = trail_rows if trail_rows is not None else TRAIL_PER_ENTRY * entries + TRAIL_MIN_ROWS
    net, live, base, scale = propagate.build(dom, scopes, tables, unary, u_off, rows)
    return net, live, base + extra, scale


def array_bytes(problem: Problem) -> int:
    """Bytes of :func:`arrays` of ``problem`` (its trail's first rows included), about."""
    entries = sum(int(t.entries) for t in problem.tables)
    coords = sum(int(t.entries) * len(t.scope) for t in problem.tables)
    return 24 * entries + 4 * coords + ROW_BYTES * (TRAIL_PER_ENTRY * entries + TRAIL_MIN_ROWS)


def solve_dfbnb(
    problem: Problem,
    deadline: float | None = None,
    max_bytes: float | None = None,
    seed: int = 0,
    on_bounds: BoundsFn | None = None,
    start: FirstAnswer | None = None,
    started: float | None = None,
    reduction: reduce.Reduction | None = None,
    reduced: bool = True,
    max_nodes: int | None = None,
) -> SolveResult:
    """Solve ``problem`` exactly by branch and bound under AC* (see the module docstring).
    ``deadline`` (a :func:`time.monotonic` instant) stops it with the best assignment and both
    bounds (status ``timeout``); ``on_bounds`` hears of every change; ``start`` is a caller's
    answer of ``problem`` (kept where nothing beats it), ``reduction`` its reduction already made
    (``reduced`` False: none is made). ``max_nodes`` stops the search after about that many
    propagations (a count: the same stop on any machine), as the deadline does."""
    t_start = time.monotonic() if started is None else started
    times: dict[str, float] = {}
    stats = SearchStats()
    stats.ibound_reason = "soft arc consistency (AC*) at every node: no mini-bucket heuristic"

    def room() -> float:
        return (
            PASS_SECONDS_NO_DEADLINE if deadline is None else max(0.0, deadline - time.monotonic())
        )

    t0 = time.monotonic()
    if reduction is None and reduced:
        reduction = reduce.for_search(problem)
    work = problem if reduction is None else reduction.problem
    times["reduce"] = time.monotonic() - t0
    large = large_domains(work)
    shifted, bound, guess = work, -math.inf, None
    if not large:
        t0 = time.monotonic()
        shifted, bound = reparam.diffuse(work, time.monotonic() + DIFFUSE_SHARE * room())
        times["diffuse"] = time.monotonic() - t0
        t0 = time.monotonic()
        guess = guided.shifted_answer(
            shifted, work, bound,
            None if deadline is None else time.monotonic() + GUIDED_SHARE * room(), seed,
            deadline,
        )  # fmt: skip
        times["guided"] = time.monotonic() - t0

    names = list(shifted.variables)
    limit = effective_limit(max_bytes).bytes
    need = array_bytes(shifted)
    if need > TRAIL_SHARE * limit:
        raise TableTooLarge(
            f"the search's integer tables need {human_bytes(need)} > half the memory limit of "
            f"{human_bytes(limit)}; use --algo aobb or raise --max-memory"
        )
    net, live, base, scale = arrays(shifted)
    constant = float(shifted.constant)
    incumbent = np.zeros(len(names), dtype=np.int32)
    cost = math.inf
    candidates = [] if guess is None else [guess.assignment]
    if start is not None:
        mine = start.assignment if reduction is None else reduction.restrict(start.assignment)
        if mine is not None:
            candidates.append(mine)
    for asg in candidates:
        trial = np.array([asg[v] for v in names], dtype=np.int32)
        c = float(propagate.leaf_cost(net, trial))
        if c < cost:
            incumbent, cost = trial, c
    walk = branch.new_walk(net.dom, incumbent, cost, base, scale, EPS_ABS, EPS_REL)
    walk.reg[branch.W_ORDER] = ORDER
    walk.reg[branch.W_DIFFUSE] = 0 if large else NODE_SWEEPS
    walk.reg[branch.W_RADIUS] = RADIUS
    lower = max(bound, constant + base)
    if start is not None:
        lower = max(lower, start.lower)

    def upper() -> float:
        return constant + float(walk.real[branch.F_UB])

    frontier = _Frontier(walk, live)

    def report() -> None:
        nonlocal lower
        low = frontier.low(live)
        now = constant + base + low / scale if low < propagate.TOP else math.inf
        ub = upper()
        mine = min(now, ub)
        if mine > lower or not stats.trace or ub < stats.trace[-1][2]:
            lower = max(lower, mine)
            seconds = time.monotonic() - t_start
            stats.trace.append((seconds, min(lower, ub), ub))
            if on_bounds is not None:
                on_bounds(seconds, min(lower, ub), ub)

    stopped: str | None = None
    t0 = time.monotonic()
    steps = 20
    status = branch.TRAIL_FULL
    try:
        report()
        while status == branch.TRAIL_FULL:
            status = branch.root(net, live, walk)
            if status == branch.TRAIL_FULL:
                live = _grown(live, limit)
        if status == branch.PAUSED:
            frontier.start(live)
        else:  # the root's propagation proved that nothing beats the incumbent
            frontier.started = True
        while frontier.open():
            if deadline is not None and time.monotonic() >= deadline:
                stopped = TIMEOUT
                break
            if max_nodes is not None and walk.reg[branch.W_EXPANDED] >= max_nodes:
                stopped = OUT_OF_NODES
                break
            if not frontier.diving:
                live = frontier.next_dive(net, live, limit)
                continue
            t1 = time.monotonic()
            if max_nodes is not None:
                steps = max(1, min(steps, max_nodes - int(walk.reg[branch.W_EXPANDED])))
            status = branch.search(net, live, walk, steps)
            if status == branch.TRAIL_FULL:
                live = _grown(live, limit)
                continue
            if status != branch.PAUSED:
                frontier.dive_ended(live, status == branch.OVER_BUDGET, limit)
            spent = time.monotonic() - t1
            steps = int(min(max(steps * SLICE_S / max(spent, 1e-6), 10), 10_000_000))
            report()
    except _OutOfMemory:
        stopped = NO_MEMORY
    except KeyboardInterrupt as exc:
        stopped = f"{INTERRUPTED} ({exc})" if str(exc) else INTERRUPTED
    stats.seconds = time.monotonic() - t0
    stats.expanded = int(walk.reg[branch.W_EXPANDED])
    times["search"] = stats.seconds

    found = {v: int(walk.best[i]) for i, v in enumerate(names)}
    full = found if reduction is None else reduction.expand(found)
    best_upper = problem.evaluate(full)
    assignment = full
    if start is not None and start.cost < best_upper:
        assignment, best_upper = dict(start.assignment), start.cost
    if stopped is None:
        lower = best_upper  # proved (an infeasible proof: both inf)
    else:
        report()
        lower = min(lower, best_upper)
    stats.trace.append((time.monotonic() - t_start, lower, best_upper))
    times["total"] = time.monotonic() - t_start
    result = SolveResult(
        problem=problem,
        algo=ALGO,
        assignment=assignment,
        lower_bound=lower,
        upper_bound=best_upper,
        z=None,
        ordering="dynamic",
        induced_width=0,
        largest_table=max((int(t.entries) for t in problem.tables), default=0),
        backend="numpy",
        dtype="float64",
        times=times,
        memory_peak=int(live.trail.nbytes + live.tab.nbytes),
        stopped=stopped,
    )
    if reduction is not None:
        stats.ibound_reason = (
            f"reduced from {problem.n} to {work.n} variables; {stats.ibound_reason}"
        )
    result.search = stats
    return result


def warm() -> None:
    """Run every compiled function of this search once on a small problem (numba compiles on
    the first call and caches the code: :mod:`dcop.search.warm` calls this at install)."""
    from dcop.generators import random_network

    saved = (BACKTRACKS, TRAIL_PER_ENTRY, TRAIL_MIN_ROWS)
    globals().update(BACKTRACKS=1, TRAIL_PER_ENTRY=0, TRAIL_MIN_ROWS=8)
    try:  # dives of one backtrack (replays) on a trail that must grow
        solve_dfbnb(random_network(14, 3, 0.5, 0.3, seed=2))
        # large domains take their own compiled paths (split domains, no diffusion): a fresh
        # H200 host compiled them inside CELAR6-SUB0's run, 19 s for a 0.4 s search
        solve_dfbnb(random_network(8, 24, 0.5, 0.0, seed=1))
    finally:
        globals().update(BACKTRACKS=saved[0], TRAIL_PER_ENTRY=saved[1], TRAIL_MIN_ROWS=saved[2])


class _Frontier:
    """Hybrid best-first search (as toulbar2's HBFS): depth-first dives of at most BACKTRACKS
    backtracks each, from the open node of least bound; a dive over its budget leaves its open
    nodes (the right branches still to come, and the node it stopped at) to the frontier, as
    decision paths replayed from the root. The least bound of the frontier and of the dive is
    a proved lower bound of the whole problem: the trace's, rising as the search goes."""

    def __init__(self, walk: branch.Walk, live: propagate.Live) -> None:
        self.walk = walk
        self.heap: list[tuple[int, int, np.ndarray]] = []
        self.seq = 0
        self.diving = False
        self.path = np.zeros((0, 3), dtype=np.int32)
        self.root_mark = 0
        self.root_c0 = 0
        self.bytes = 0
        self.started = False

    def start(self, live: propagate.Live) -> None:
        """The root propagated: its node is the frontier's first."""
        self.started = True
        self.root_mark = int(live.reg[propagate.R_TRAIL])
        self.root_c0 = int(live.reg[propagate.R_C0])
        self._push(self.root_c0, np.zeros((0, 3), dtype=np.int32))

    def _push(self, bound: int, path: np.ndarray) -> None:
        heapq.heappush(self.heap, (bound, self.seq, path))
        self.seq += 1
        self.bytes += path.nbytes + 64

    def open(self) -> bool:
        """Whether anything below the incumbent may be left."""
        return self.diving or bool(self.heap)

    def low(self, live: propagate.Live) -> int:
        """The least integer bound of what is open (TOP: nothing)."""
        if not self.started:  # the root's c0 before its propagation
            return 0
        low = self.heap[0][0] if self.heap else propagate.TOP
        if self.diving:
            at = int(branch.open_bound(self.walk))
            low = min(low, int(live.reg[propagate.R_C0]) if at < 0 else at)
        return int(low)

    def next_dive(self, net: propagate.Net, live: propagate.Live, limit: float) -> propagate.Live:
        """Start a dive at the open node of least bound (the frontier is dropped where that
        bound reaches the threshold: nothing open can beat the incumbent)."""
        bound, _, path = heapq.heappop(self.heap)
        self.bytes -= path.nbytes + 64
        if bound >= int(live.reg[propagate.R_TOP]):
            self.heap.clear()
            self.bytes = 0
            return live
        w = self.walk
        while True:
            propagate.undo(net, live, self.root_mark)
            live.reg[propagate.R_C0] = self.root_c0
            status = branch.replay(net, live, w, path[:, 0], path[:, 1], path[:, 2])
            if status != branch.TRAIL_FULL:
                break
            live = _grown(live, limit)
        if status == branch.PAUSED:
            self.diving = True
            self.path = path
            w.reg[branch.W_BUDGET] = w.reg[branch.W_BACKTRACKS] + BACKTRACKS
        return live

    def dive_ended(self, live: propagate.Live, over: bool, limit: float) -> None:
        """The dive ended: done (its subtree closed), or over its budget (its open nodes to the
        frontier)."""
        self.diving = False
        if not over:
            return
        w = self.walk
        floor, depth = int(w.reg[branch.W_FLOOR]), int(w.reg[branch.W_DEPTH])
        taken = np.stack([w.var[floor:depth], w.val[floor:depth], w.kind[floor:depth]], axis=1)
        taken = taken.astype(np.int32)
        for d in range(floor, depth):
            if w.kind[d] % 2 == 0:  # its right branch is still to come
                right = np.array([[w.var[d], w.val[d], w.kind[d] + 1]], dtype=np.int32)
                self._push(int(w.c0[d]), np.concatenate([self.path, taken[: d - floor], right]))
        self._push(int(live.reg[propagate.R_C0]), np.concatenate([self.path, taken]))
        if self.bytes > TRAIL_SHARE * limit:
            raise _OutOfMemory


class _OutOfMemory(Exception):
    """The trail would outgrow its share of the memory limit."""


def _grown(live: propagate.Live, limit: float) -> propagate.Live:
    """``live`` with a trail twice as long (its rows kept)."""
    rows = live.trail.shape[0]
    if 2 * rows * ROW_BYTES > TRAIL_SHARE * limit:
        raise _OutOfMemory
    trail = np.zeros((2 * rows, 5), dtype=np.int64)
    trail[:rows] = live.trail
    return live._replace(trail=trail)
