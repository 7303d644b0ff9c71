"""AND/OR branch and bound with a mini-bucket heuristic and context caching (AOBB-C).

The run: an order (the ordering engine's), the largest mini-bucket size ``z`` whose pass fits the
memory and a share of the time (:func:`choose_ibound`), the pass itself on the run's backend (a
GPU when there is one: its tables are read on the host once), the search's arrays
(:mod:`dcop.search.compile`), a first upper bound (the pass's own assignment, improved by local
search), then the compiled walk (:mod:`dcop.search.kernel`), one connected part at a time, in
slices of a few tens of milliseconds between which the deadline is checked and the bounds are
reported. Every exit keeps the best assignment found and a proved lower bound; ``exact`` only on
a proof.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.backends import resolve_backend
from dcop.backends.base import Specializes, TableBackend, capable
from dcop.bucketpass import ProgressFn, bucket_pass, decode
from dcop.errors import ModelError, TableTooLarge
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.orders.greedy import induced_width, largest_table
from dcop.plan.bucket_plan import MemoryPlan, plan_for
from dcop.plan.memory import effective_limit, human_bytes
from dcop.results.document import file_value, json_number
from dcop.results.solve import SolveResult
from dcop.search import cores, guided, kernel, parallel, preload, reduce, reparam
from dcop.search.compile import CACHE_ENTRY_BYTES, Compiled, compile_search, new_state
from dcop.search.dive import first_feasible
from dcop.search.first import FirstAnswer, first_answer
from dcop.search.ibound import (
    PASS_SECONDS_NO_DEADLINE,
    PassClock,
    choose_ibound,
    rung_seconds,
)
from dcop.search.improve import Improver, complete
from dcop.search.jit import COMPILED
from dcop.search.local import incidence, local_search, nodes_cost, total_cost
from dcop.search.portfolio import candidate_orders

#: bounds(seconds since the start, lower, upper), internal costs: called as they change.
BoundsFn = Callable[[float, float, float], None]

#: Joined entries from which a bucket of the search's passes gets a kernel of its own on a backend
#: that generates them (:class:`~dcop.backends.base.Specializes`): below, the generic kernel runs
#: with no compile. A generated kernel costs 0.3-1 s of compile per new shape, more than the
#: generic kernel spends on a bucket of 1e10 entries, and a ladder's passes meet many shapes.
SEARCH_SPECIALIZE_ENTRIES = 1 << 38
#: Whether the heuristic's passes match the moments of each bucket's mini-buckets (MBE-MM:
#: a tighter bound for a pass somewhat slower; :mod:`dcop.momentmatch`).
MATCH = True
#: Share of the time left that the reduced problem's incumbent (:mod:`.guided`: dives along the
#: shifted costs, then neighbourhoods solved exactly) may take, after the cost shifting.
GUIDED_SHARE = 0.05
#: Share of the time left that the reduced problem's cost shifting may take (:mod:`.reparam`).
DIFFUSE_SHARE = 0.1
#: Share of the memory limit the heuristic's tables and the cache take together.
CACHE_SHARE = 0.8
#: Share of the time left that the largest mini-bucket pass may take.
PASS_SHARE = 0.35
#: Pruning margin: a branch is cut when its bound reaches best + EPS_ABS + EPS_REL * |best|.
EPS_ABS = 1e-9
EPS_REL = 1e-10
#: Seconds a slice of the walk should take between two looks at the clock.
SLICE_S = 0.05
#: Local search sweeps over all variables for the first upper bound, at most.
LOCAL_SWEEPS = 200
#: A rung's pass is started only when it is predicted within this share of the time left (a later
#: rung's pass is cut at the deadline, its time lost); else the search goes on with the heuristic
#: it has.
PASS_FIT = 0.5
#: Share of the time left that the ordering engine may take.
ORDER_SHARE = 0.05
#: The first rung's pass decodes its own assignment (a walk over every bucket, in Python) only
#: when that is predicted within DECODE_SHARE of the time left, at DECODE_S_PER_VARIABLE: the
#: first answer stands in for it (on an 80x80 grid the decode costs a second or more, and the
#: first answer is as good).
DECODE_SHARE = 0.1
DECODE_S_PER_VARIABLE = 2e-4
#: The search's set-up (the order, the i-bound's plans, the first pass, its arrays) is predicted
#: at SETUP_RATIO times the first answer's flat copy of the tables
#: (:attr:`dcop.search.first.LocalSearch.build_s`, which the machine's load slows alike): 3 s
#: against 0.06 s on a 40x40 grid, 7 s against 0.16 s on an 80x80 grid, unloaded. Where that
#: exceeds SETUP_FIT of the time left, the run spends it all on the local search's rounds: a
#: search that starts late hardly improves the answer (an 80x80 grid's set-up left it 5 of 15 s:
#: 0.2-6 % worse than the rounds alone), and a set-up cut at the deadline is time lost. A 40x40
#: grid's set-up fits: there the search (its own rounds and subtree moves between the walk's
#: slices) did better than the rounds alone (grid40x40.f5: -6379 against -6361).
SETUP_RATIO = 45.0
SETUP_FIT = 0.35
#: Below this many variables the search always runs: its set-up is cheap whatever the flat
#: copy's seconds say (on CELAR6-SUB0's 16 variables a loaded machine's 0.02 s of fixed cost
#: predicted a second of set-up, and the search that proves it was skipped).
SETUP_MIN_VARIABLES = 1000
#: The rungs of a problem of at most PORTFOLIO_MAX_VARIABLES variables compare the pass's bound
#: along several orders (:mod:`dcop.search.portfolio`) where those passes are predicted within
#: PORTFOLIO_SHARE of the time left, each order's pass within PORTFOLIO_WORK times the work of
#: the rung's: on the random networks n = 22-24, min-fill's own order needed 3-10 times the
#: expansions of the best bound's (z = 7: 6e6+ against 1.8e6 on n = 24).
PORTFOLIO_MAX_VARIABLES = 200
PORTFOLIO_SHARE = 0.25
PORTFOLIO_WORK = 2.0
#: The i-bound ladder: work ratio between rungs, the smallest pass worth a rung (entries), rungs.
LADDER_RATIO = 8.0
LADDER_FLOOR = 1e5
LADDER_RUNGS = 4
#: A rung below the last searches for the next pass's predicted seconds, counted in values
#: priced (an expansion prices every value of its variable) at this many seconds each (the
#: walk's speed on a CPU core, give or take), and at least FLOOR_VALUES: a count, not a clock,
#: so that the same input takes the same path on every machine and under any load.
SECONDS_PER_VALUE = 2e-7
FLOOR_VALUES = 500_000
#: ... for this share of the next pass's predicted seconds: a rung that has not proved the
#: optimum in that long rarely does soon after, and the next pass is a far better use of the
#: time (the paper's random network n = 24: z = 7 needs 5e6 expansions, 9 s; z = 8's pass takes
#: 3-4 s and its search 0.3e6 expansions). A rung's search is lost when the next one starts.
RUNG_SHARE = 0.25
#: Work (functions read: an expansion of a node whose heuristic crosses thousands of messages
#: reads thousands) the walk does alone before the first round of moves on the incumbent, then
#: the walk's work between two rounds (each about as long as the walk's share at first):
#: the walk alone proves the easy problems; where it does not, its first solution may come only
#: with its proof, and the moves improve the answer meanwhile (:mod:`dcop.search.improve`).
WALK_ALONE = 200_000
IMPROVE_EVERY = 1_000_000
#: The subtree moves' share of a round, in expansions.
MOVE_EXPANSIONS = 100_000
#: Why a walk stopped: the deadline, its rung's node budget, or a signal (SIGINT, SIGTERM).
TIMEOUT = "the deadline came before the search proved the optimum"
SETUP_LATE = "the deadline came before the search started; the answer is the first one found"
LOCAL_ONLY = (
    "the search's set-up was predicted past the time left: the answer is the local search's"
)
NO_MEMORY = "the search's heuristic did not fit the memory; the answer is the first one found"
OUT_OF_NODES = "the rung's node budget ran out"
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Step:
    """One rung of the i-bound ladder: its z, the pass's and the search's seconds, the nodes it
    expanded, and whether it proved the optimum."""

    z: int
    pass_s: float
    search_s: float
    expanded: int
    heuristic_bound: float
    proved: bool

    def to_json(self) -> dict[str, object]:
        return {
            "z": self.z,
            "pass_s": self.pass_s,
            "search_s": self.search_s,
            "expanded": self.expanded,
            "proved": self.proved,
        }


@dataclass
class SearchStats:
    """What the search did, for the result document: the last rung's z and why, its heuristic,
    every rung, the nodes expanded in all, the cache, and the trace of (seconds, lower, upper)
    in internal costs."""

    ibound: int = 0
    ibound_reason: str = ""
    heuristic_entries: int = 0
    expanded: int = 0
    cache_hits: int = 0
    cached_nodes: int = 0
    uncached_inner: int = 0
    cache_bytes: int = 0
    depth: int = 0
    compiled: bool = COMPILED
    threads: int = 1
    seconds: float = 0.0
    steps: list[Step] = field(default_factory=list)
    trace: list[tuple[float, float, float]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Node expansions per second of search."""
        return self.expanded / self.seconds if self.seconds > 0 else 0.0

    def to_json(self, problem: Problem) -> dict[str, object]:
        """The document's ``search``: bounds in the file's sense (lower and upper swap for a
        maximised file)."""

        def bounds(seconds: float, lower: float, upper: float) -> dict[str, object]:
            ends = sorted((file_value(problem, lower), file_value(problem, upper)))
            return {
                "seconds": seconds,
                "lower_bound": json_number(ends[0]),
                "upper_bound": json_number(ends[1]),
            }

        return {
            "ibound": self.ibound,
            "ibound_reason": self.ibound_reason,
            "heuristic_entries": self.heuristic_entries,
            "expanded": self.expanded,
            "expansions_per_second": self.rate,
            "cache_hits": self.cache_hits,
            "cached_nodes": self.cached_nodes,
            "uncached_inner": self.uncached_inner,
            "cache_bytes": self.cache_bytes,
            "depth": self.depth,
            "compiled": self.compiled,
            "threads": self.threads,
            "steps": [step.to_json() for step in self.steps],
            "trace": [bounds(*point) for point in self.trace],
        }


def ladder(
    problem: Problem,
    order: list[str],
    backend: Any,
    top: MemoryPlan,
    resident: int | None,
    check: Callable[[], None] | None = None,
    plans: dict[int, MemoryPlan] | None = None,
) -> list[MemoryPlan]:
    """The rungs below ``top`` (a plan of the largest z), smallest first: each z about
    LADDER_RATIO times less work than the next, down to a pass of LADDER_FLOOR entries, at most
    LADDER_RUNGS in all. A small z proves easy problems before a large pass could end; a hard
    one pays at most a constant share more for the rungs below its last. ``check`` is called
    before each plan (it may raise to stop); ``plans`` holds the plans made already, by z."""
    assert top.z is not None
    step = max(1, math.ceil(math.log(LADDER_RATIO) / math.log(typical_domain(problem))))
    known = {} if plans is None else plans
    rungs = [top]
    z = top.z - step
    while z >= 1 and len(rungs) < LADDER_RUNGS and rungs[-1].total_work > LADDER_FLOOR:
        if z not in known:
            if check is not None:
                check()
            known[z] = plan_for(problem, order, z, np.float64, backend, resident=resident)
        rungs.append(known[z])
        z -= step
    return rungs[::-1]


@contextmanager
def generic_kernels(backend: TableBackend) -> Iterator[None]:
    """While the search's passes run: buckets below SEARCH_SPECIALIZE_ENTRIES on the generic
    kernel (a backend that generates kernels per shape), the backend's own size restored after."""
    if not capable(backend, Specializes):
        yield
        return
    saved = backend.specialize_entries
    backend.specialize_entries = max(saved, SEARCH_SPECIALIZE_ENTRIES)
    try:
        yield
    finally:
        backend.specialize_entries = saved


def rung_budget(
    following: MemoryPlan,
    backend: TableBackend,
    typical_domain: int,
    passes: int = 1,
    threads: int = 1,
) -> int:
    """The node budget of a rung whose next rung runs ``passes`` passes of ``following``: a
    share of their predicted seconds, its tables' reading on the host included (on a GPU that
    reading is most of a pass: counted without it, a z = 8 rung of the random network n = 22
    had the floor's 50k nodes before z = 9's 4 s pass, where 28k-300k nodes at z = 8 prove
    n = 22-24), and at least FLOOR_VALUES. The floor is the rung's, not each pass's: multiplied
    by the orders compared, it gave the random network n = 22 on the H200 200k nodes at z = 6
    (0.9 s) before a z = 7 pass of 0.09 s that proved it in 118k. The budget counts every
    thread's expansions: ``threads`` walk that many times as many in the passes' seconds, but
    the floor is not raised (where the next pass is cheap, as on a GPU, a rung that has not
    proved in the floor's nodes gives way sooner on more threads)."""
    seconds = RUNG_SHARE * passes * rung_seconds(following, backend)
    values = max(FLOOR_VALUES, int(threads * seconds / SECONDS_PER_VALUE))
    return max(1, values // max(1, typical_domain))


def typical_domain(problem: Problem) -> int:
    """The median domain size (at least 2)."""
    sizes = sorted(problem.domain_sizes().values())
    return max(2, sizes[len(sizes) // 2]) if sizes else 2


def solve_aobb(
    problem: Problem,
    z: int | None = None,
    ordering: str | ChosenOrder = "auto",
    backend: str | Any = "numpy",
    max_bytes: float | None = None,
    deadline: float | None = None,
    order_time: float | None = None,
    seed: int = 0,
    on_bounds: BoundsFn | None = None,
    resident: int | None = None,
    pass_seconds: float | None = None,
    improve: bool = True,
    start: FirstAnswer | None = None,
    started: float | None = None,
    reduced: bool = True,
    reduction: reduce.Reduction | None = None,
    threads: int | None = None,
) -> SolveResult:
    """Solve ``problem`` exactly by AND/OR branch and bound guided by MBE(z).

    ``z`` None climbs a ladder of mini-bucket sizes (:func:`ladder`) up to the largest that fits
    (:func:`choose_ibound`): each rung but the last searches for a number of nodes in
    proportion to the next rung's pass, and hands its best assignment and bound on. ``deadline``
    (a ``time.monotonic`` instant) stops the search with the best assignment and both bounds
    (status ``timeout``); ``on_bounds`` hears of every improvement. ``pass_seconds`` is the
    largest pass's predicted seconds (default: a share of the time left). ``improve`` False
    leaves out the subtree moves that improve the incumbent while the walk runs.

    With a deadline, a first answer (``start``, else :func:`dcop.search.first.first_answer`
    here) comes before any planning, and every phase after it (the order, the i-bound's plans,
    each pass, the search's arrays) stops at the deadline with the best answer found so far.
    ``started`` (a ``time.monotonic`` instant, default now) is where the trace's seconds and
    ``times["total"]`` count from: a caller's own start (``--algo auto``'s).

    ``reduced`` True: a large problem is first shrunk exactly (:mod:`dcop.search.reduce`), and
    searched reduced where that removes enough (``reduction``: the caller's, already made, with
    ``ordering`` an order of its reduced problem), cost-shifted (:mod:`dcop.search.reparam`),
    from the incumbent of :mod:`dcop.search.guided`.

    ``threads`` (None: the usable cores, at most 8; :func:`dcop.search.cores.usable_threads`)
    walk a part that one thread does not prove quickly on that many threads
    (:mod:`dcop.search.parallel`), each with its share of the cache's memory. One thread gives
    the same result for the same input every time; with more, the optimum is the same, but
    the expansions, the trace and, between optimal assignments, the one returned may differ.
    """
    try:
        threads = cores.resolve_threads(threads)
    except ValueError as exc:
        raise ModelError(str(exc)) from None
    t_start = time.monotonic() if started is None else started
    if reduced:
        t0 = time.monotonic()
        given = reduction is not None  # the caller's: its order is of the reduced problem
        if reduction is None:
            reduction = reduce.for_search(problem)
        if reduction is not None:
            times_before = {"reduce": time.monotonic() - t0}
            t1 = time.monotonic()
            # the cost shifting's share of the time (without a deadline: of the pass's seconds)
            room = PASS_SECONDS_NO_DEADLINE if deadline is None else deadline - time.monotonic()
            searched, bound = reparam.diffuse(
                reduction.problem, time.monotonic() + DIFFUSE_SHARE * room
            )
            times_before["diffuse"] = time.monotonic() - t1
            t1 = time.monotonic()
            # an incumbent from the shifted costs (:mod:`.guided`), improved for GUIDED_SHARE
            # of the time left; the caller's first answer where it is better
            room = PASS_SECONDS_NO_DEADLINE if deadline is None else deadline - time.monotonic()
            guess = guided.shifted_answer(
                searched, reduction.problem, bound,
                None if deadline is None else time.monotonic() + GUIDED_SHARE * room, seed,
                deadline,
            )  # fmt: skip
            times_before["guided"] = time.monotonic() - t1
            inner = solve_aobb(
                searched, z, ordering if given or isinstance(ordering, str) else "auto",
                backend, max_bytes, deadline, order_time, seed, on_bounds, resident,
                pass_seconds, improve, guess, t_start, reduced=False, threads=threads,
            )  # fmt: skip
            return expanded(inner, reduction, start, times_before)
    preload.start()  # the compiled loops load beside the ordering and the pass
    engine = resolve_backend(backend)
    times: dict[str, float] = {}
    stats = SearchStats(threads=threads)

    def left() -> float:
        return math.inf if deadline is None else deadline - time.monotonic()

    first = start
    if first is None and deadline is not None:
        t0 = time.monotonic()
        first = first_answer(
            problem, seed, max_bytes=effective_limit(max_bytes).bytes, deadline=deadline
        )
        times["first"] = time.monotonic() - t0  # first None where the tables are too large
    if first is not None:
        stats.trace.append((time.monotonic() - t_start, first.lower, first.cost))
        if on_bounds is not None:
            on_bounds(time.monotonic() - t_start, first.lower, first.cost)

    def check() -> None:
        """Raise :class:`_Late` past the deadline, where a first answer stands."""
        if first is not None and deadline is not None and time.monotonic() >= deadline:
            raise _Late

    if first is not None and not setup_fits(first, left()):
        t0 = time.monotonic()
        base = first.search.base  # the problem's cost less the tables'
        lowest = first.lower

        def report(cost: float) -> None:
            now = time.monotonic() - t_start
            stats.trace.append((now, lowest, base + cost))
            if on_bounds is not None:
                on_bounds(now, lowest, base + cost)

        first.search.rounds(sys.maxsize, deadline, report=report)
        first = first.search.answer()
        times["local"] = time.monotonic() - t0
        stats.ibound_reason = LOCAL_ONLY
        return _first_result(problem, first, engine, stats, times, t_start, "none", 0, 0,
                             LOCAL_ONLY)  # fmt: skip

    chosen_name, width, biggest = "none", 0, 0
    try:
        t0 = time.monotonic()
        # the engine's own budget (in proportion to the problem's predicted solve: none for a
        # problem solved in a millisecond) capped by a share of the time left; a 3-variable file
        # with --timeout 10 searched orders for 0.6 s when that share was the budget itself
        cap = math.inf if deadline is None else max(0.0, ORDER_SHARE * left())
        chosen_order = choose_order(problem, ordering, order_time, max_budget_s=cap)
        order = chosen_order.order
        chosen_name = chosen_order.name
        if chosen_order.engine is not None:  # the engine measured them
            width = chosen_order.engine.width
            biggest = int(chosen_order.engine.largest_table_entries)
        else:
            adjacency = problem.neighbours()
            width = induced_width(adjacency, order)
            biggest = largest_table(adjacency, order, problem.domain_sizes())
        times["ordering"] = time.monotonic() - t0
        check()

        limit = effective_limit(max_bytes)
        t0 = time.monotonic()
        plans: dict[int, MemoryPlan] = {}
        if z is None:
            share = PASS_SECONDS_NO_DEADLINE if deadline is None else PASS_SHARE * max(0.0, left())
            if pass_seconds is not None:
                share = pass_seconds
            z, top, stats.ibound_reason = choose_ibound(
                problem, order, engine, limit.bytes, share, resident, check, plans
            )
            rungs = ladder(problem, order, engine, top, resident, check=check, plans=plans)
        else:
            if z < 1:
                raise ModelError(f"the mini-bucket size must be at least 1, not {z}")
            rungs = [plan_for(problem, order, z, np.float64, engine, resident=resident)]
            stats.ibound_reason = f"z = {z} as asked"
        if not rungs[-1].fits(limit.bytes):
            raise TableTooLarge(
                f"the search's heuristic with z = {z} needs {human_bytes(rungs[-1].peak_bytes)}"
                f" > the memory limit of {human_bytes(limit.bytes)}; use a smaller --z or "
                "--max-memory"
            )
        times["plan"] = time.monotonic() - t0
        check()
    except _Late:
        return _first_result(problem, first, engine, stats, times, t_start, chosen_name, width,
                             biggest, SETUP_LATE)  # fmt: skip

    names = list(order)
    # other orders to compare at each rung (an order the caller named is searched as it is)
    others = (
        candidate_orders(problem, names, seed)[1:]
        if chosen_name.startswith("auto") and problem.n <= PORTFOLIO_MAX_VARIABLES
        else []
    )
    typical = typical_domain(problem)
    incumbent: np.ndarray | None = None
    if first is not None:
        incumbent = np.array([first.assignment[v] for v in order], dtype=np.int32)
    lower = -math.inf if first is None else first.lower
    stopped: str | None = "no rung ran"
    walk: _Walk | None = None
    due = WALK_ALONE  # the walks' work until the next round of moves, across the rungs
    clock = PassClock()

    def search(walk: _Walk, z: int, pass_s: float, budget: int | None) -> str | None:
        """Run ``walk`` (until ``budget`` nodes, or the deadline) and count what it did."""
        t0 = time.monotonic()
        before = walk.expanded()
        hits = walk.hits()
        stopped = walk.run(deadline, budget)
        spent = time.monotonic() - t0
        expanded = walk.expanded() - before
        times["search"] = times.get("search", 0.0) + spent
        stats.steps.append(Step(z, pass_s, spent, expanded, walk.heuristic, stopped is None))
        stats.expanded += expanded
        stats.cache_hits += walk.hits() - hits
        stats.seconds += spent
        return stopped

    try:
        for k, plan in enumerate(rungs):
            last = k == len(rungs) - 1
            # a rung whose passes (one per order compared) are predicted within PORTFOLIO_SHARE
            # of the time left compares the orders; a later rung's budget counts its passes
            passes = 1 + len(others)
            compare = others if (
                passes * clock.predict(rung_seconds(plan, engine))
                <= PORTFOLIO_SHARE * (PASS_SECONDS_NO_DEADLINE if deadline is None else left())
            ) else []  # fmt: skip
            budget = None if last else rung_budget(rungs[k + 1], engine, typical, passes, threads)
            # the next pass, predicted from the passes run so far (PassClock): where there is no
            # time to search after it, the search goes on with the heuristic it has
            if (
                walk is not None
                and deadline is not None
                and (1 + len(compare)) * clock.predict(rung_seconds(plan, engine))
                > PASS_FIT * left()
            ):
                stopped = search(walk, stats.steps[-1].z, 0.0, None)
                break
            t0 = time.monotonic()
            failed: str | None = None
            # a pass is abandoned at the deadline (between two buckets) where an answer stands
            # (a walk's, or the first one): a pass that overran it would hold the answer past
            # --timeout (a batch row's kill then lost it)
            watch = _deadline_watch(deadline) if incumbent is not None else None
            memory_errors: tuple[type[BaseException], ...] = (
                TableTooLarge,
                MemoryError,
                *engine.out_of_memory_errors,
            )
            decode_first = incumbent is None or (
                walk is None and len(names) * DECODE_S_PER_VARIABLE <= DECODE_SHARE * left()
            )
            try:
                # each rung starts from the chosen order, not the last rung's best (a bound at a
                # smaller z ranks the orders poorly: on CELAR6-SUB0, z = 4 along z = 3's best
                # expanded 462,736 nodes, 61,531 along the chosen order)
                compiled, bound, decoded = _heuristic(
                    problem, order, engine, plan, limit.bytes, decode_first, watch, compare,
                    resident, threads,
                )  # fmt: skip
                state = new_state(compiled.model, compiled.width, compiled.cache_entries)
            except _PassLate:
                stats.ibound_reason += f"; the pass of z = {plan.z} was cut at the deadline"
                stopped = TIMEOUT if walk is not None else SETUP_LATE
                break
            except memory_errors as exc:
                if incumbent is None:  # nothing found yet: the command's too_large document
                    raise
                # a later rung's memory failed (other processes took it meanwhile): its
                # heuristic is lost, not the search, which goes on with the rung it has (out of
                # this handler: the failed pass's frames go with it)
                failed = f"; the pass of z = {plan.z} failed ({exc or 'out of memory'})"
                if walk is not None:
                    failed += f", the search went on with z = {stats.steps[-1].z}"
            if failed is not None:
                stats.ibound_reason += failed
                stopped = (
                    search(walk, stats.steps[-1].z, 0.0, None) if walk is not None else NO_MEMORY
                )
                break
            if compiled.names != names:  # another order than the last rung's: the incumbent follows
                at = {v: i for i, v in enumerate(names)}
                if incumbent is not None:
                    incumbent = incumbent[[at[v] for v in compiled.names]]
                names = compiled.names
                if names != order:  # the plan along the order searched (memory, the clock)
                    plan = plan_for(problem, names, plan.z, np.float64, engine, resident=resident)
            lower = max(lower, bound)  # the pass's own bound, proved already
            model = compiled.model
            if decoded is not None and (
                incumbent is None or total_cost(model, decoded) < total_cost(model, incumbent)
            ):
                incumbent = decoded
            assert incumbent is not None  # the first answer, or the first pass's decoded one
            stats.ibound = int(plan.z or 0)
            pass_s = time.monotonic() - t0  # the pass and reading its tables
            clock.observe((1 + len(compare)) * rung_seconds(plan, engine), pass_s)
            times["heuristic"] = times.get("heuristic", 0.0) + time.monotonic() - t0

            t0 = time.monotonic()
            inc_off, inc_fun = incidence(model)
            sweeps = (
                LOCAL_SWEEPS if deadline is None else max(1, min(LOCAL_SWEEPS, int(left() * 20)))
            )
            # a dive along this rung's heuristic that keeps the hard tables arc consistent:
            # where most assignments break a hard constraint, the pass's assignment and the
            # local search from it stay infeasible, and a later rung's dive is often better
            dived = first_feasible(model, inc_off, inc_fun, incumbent)
            if dived is not None and total_cost(model, dived) < total_cost(model, incumbent):
                incumbent = dived
            improved = local_search(model, inc_off, inc_fun, incumbent, sweeps, seed + k)
            if total_cost(model, improved) < total_cost(model, incumbent):
                incumbent = improved
            times["local"] = times.get("local", 0.0) + time.monotonic() - t0

            walk = _Walk(
                compiled, state, incumbent, _constant(problem), stats, t_start, on_bounds,
                seed + k, improve, due, threads,
            )  # fmt: skip
            walk.lower = max(walk.lower, lower)
            stats.heuristic_entries = compiled.heuristic_entries
            stats.cached_nodes = compiled.cached_nodes
            stats.uncached_inner = compiled.uncached_inner
            stats.cache_bytes = compiled.cache_entries * CACHE_ENTRY_BYTES
            stats.depth = compiled.depth
            stopped = search(walk, int(plan.z or 0), pass_s, budget)
            due = max(0, walk.next_improve - int(walk.s.reg[kernel.R_WORK]))
            incumbent = walk.incumbent
            lower = max(lower, walk.lower)
            if stopped != OUT_OF_NODES:
                break
    except KeyboardInterrupt as exc:
        if incumbent is None:  # nothing found yet: the command's failure document says so
            raise
        stopped = f"{INTERRUPTED} ({exc})" if str(exc) else INTERRUPTED
    if walk is not None:  # a walk stopped by a signal in its last slice kept what it found
        incumbent, names = walk.incumbent, walk.c.names
        lower = max(lower, walk.lower)

    assert incumbent is not None
    node = {v: i for i, v in enumerate(names)}
    assignment = {v: int(incumbent[node[v]]) for v in problem.variables}
    upper = problem.evaluate(assignment)
    if first is not None and first.cost < upper:  # the first answer stands where none beat it
        assignment, upper = dict(first.assignment), first.cost
    lower = min(lower, upper)
    if stopped is None:
        lower = upper  # proved (an infeasible proof: both inf)
    stats.trace.append((time.monotonic() - t_start, lower, upper))
    times["total"] = time.monotonic() - t_start
    result = SolveResult(
        problem=problem,
        algo="aobb",
        assignment=assignment,
        lower_bound=lower,
        upper_bound=upper,
        z=stats.ibound or None,  # no rung built its heuristic: none
        ordering=chosen_name,
        induced_width=width,
        largest_table=biggest,
        backend=engine.name,
        dtype="float64",
        times=times,
        memory_peak=rungs[-1].peak_bytes + stats.cache_bytes,
        stopped=stopped,
    )
    result.search = stats
    return result


def expanded(
    inner: SolveResult,
    reduction: reduce.Reduction,
    start: FirstAnswer | None,
    spent: float | dict[str, float],
) -> SolveResult:
    """The result on the original problem of a solve of its reduction (the search's, or BE's
    under ``--algo auto``; ``spent``: seconds of the reduction, or of each phase before the
    solve by name): the assignment expanded and re-evaluated, the caller's first answer where
    it is better. Exact where the inner solve was (the reduction keeps the optimum)."""
    problem = reduction.original
    assignment = reduction.expand(inner.assignment)
    upper = problem.evaluate(assignment)
    if start is not None and start.cost < upper:
        assignment, upper = dict(start.assignment), start.cost
    proved = inner.stopped is None
    lower = upper if proved else min(inner.lower_bound, upper)
    times = dict(inner.times)
    times.update({"reduce": spent} if isinstance(spent, float) else spent)
    stats = inner.search
    shrunk = (
        f"reduced from {problem.n} to {reduction.problem.n} variables ({len(reduction.fixed)}"
        f" fixed, {len(reduction.eliminated)} eliminated)"
    )
    if stats is not None:
        stats.ibound_reason = f"{shrunk}; {stats.ibound_reason}"
    result = SolveResult(
        problem=problem,
        algo=inner.algo,
        assignment=assignment,
        lower_bound=lower,
        upper_bound=upper,
        z=inner.z,
        ordering=inner.ordering,
        induced_width=inner.induced_width,
        largest_table=inner.largest_table,
        backend=inner.backend,
        dtype=inner.dtype,
        times=times,
        memory_peak=inner.memory_peak,
        stopped=inner.stopped,
    )
    result.search = stats
    return result


def setup_fits(first: FirstAnswer, left: float) -> bool:
    """Whether the search's set-up is predicted within SETUP_FIT of ``left`` seconds (see
    SETUP_RATIO); always on fewer than SETUP_MIN_VARIABLES variables."""
    if len(first.search.names) < SETUP_MIN_VARIABLES:
        return True
    return SETUP_RATIO * first.search.build_s <= SETUP_FIT * left


class _Late(Exception):
    """The deadline came during the set-up (the order, the plans), where a first answer stands."""


def _first_result(
    problem: Problem,
    first: FirstAnswer | None,
    engine: TableBackend,
    stats: SearchStats,
    times: dict[str, float],
    t_start: float,
    ordering: str,
    width: int,
    biggest: int,
    stopped: str,
) -> SolveResult:
    """The result of a run that ended before its search (``stopped`` says why): the first
    answer."""
    assert first is not None
    stats.trace.append((time.monotonic() - t_start, first.lower, first.cost))
    stats.ibound_reason = stats.ibound_reason or "no i-bound was chosen before the deadline"
    times["total"] = time.monotonic() - t_start
    result = SolveResult(
        problem=problem,
        algo="aobb",
        assignment=dict(first.assignment),
        lower_bound=min(first.lower, first.cost),
        upper_bound=first.cost,
        z=None,  # no heuristic was built
        ordering=ordering,
        induced_width=width,
        largest_table=biggest,
        backend=engine.name,
        dtype="float64",
        times=times,
        memory_peak=None,
        stopped=stopped,
    )
    result.search = stats
    return result


class _PassLate(Exception):
    """A later rung's pass reached the deadline (raised between two of its buckets)."""


def _deadline_watch(deadline: float | None) -> ProgressFn | None:
    """A pass's progress hook that raises :class:`_PassLate` once ``deadline`` has passed."""
    if deadline is None:
        return None

    def watch(done: int, total: int, var: str) -> None:
        if time.monotonic() >= deadline:
            raise _PassLate

    return watch


def _heuristic(
    problem: Problem,
    order: list[str],
    engine: TableBackend,
    plan: MemoryPlan,
    max_bytes: float,
    decode_first: bool,
    progress: ProgressFn | None = None,
    others: list[list[str]] | None = None,
    resident: int | None = None,
    threads: int = 1,
) -> tuple[Compiled, float, np.ndarray | None]:
    """One rung's mini-bucket pass read into the search's arrays: the compiled search (its
    ``names``: the order searched), the pass's bound, and (``decode_first``) the pass's own
    assignment in that order; ``progress`` hears of every bucket. ``others``: orders whose pass
    at the same z is run too (:mod:`dcop.search.portfolio`), where its plan fits ``max_bytes``
    beside the best so far and its work is within PORTFOLIO_WORK of ``order``'s; the best bound
    is searched (``order``'s on a tie). The passes' tables are freed on return, or with this
    frame when it fails. Each of ``threads`` walks gets its share of the cache's memory."""
    with generic_kernels(engine):
        buckets = bucket_pass(problem, order, engine, plan.z, dtype=np.float64,
                              max_bytes=max_bytes, progress=progress, match=MATCH)  # fmt: skip
        for other in others or []:
            alt = plan_for(problem, other, plan.z, np.float64, engine, resident=resident)
            if alt.total_work > PORTFOLIO_WORK * plan.total_work or not alt.fits(
                max_bytes - plan.peak_bytes
            ):
                continue
            candidate = bucket_pass(problem, other, engine, plan.z, dtype=np.float64,
                                    max_bytes=max_bytes, progress=progress, match=MATCH)  # fmt: skip
            if candidate.stats.bound > buckets.stats.bound:
                buckets, order, plan = candidate, other, alt
            del candidate  # freed before the next candidate's pass
    first = None
    if decode_first:
        mbe = decode(problem, buckets, engine)
        first = np.array([mbe[v] for v in order], dtype=np.int32)
    cache_room = max(0.0, CACHE_SHARE * max_bytes - plan.peak_bytes) / threads

    def check() -> None:
        if progress is not None:
            progress(0, 0, "")

    compiled = compile_search(problem, order, buckets, engine, cache_room, check, plan.z)
    return compiled, float(buckets.stats.bound), first


#: :meth:`_Walk.run_parallel`'s answer where the part's top is not a chain.
_NOT_SPLIT = "not split"


def _constant(problem: Problem) -> float:
    return float(problem.constant) + sum(float(t.costs) for t in problem.tables if not t.scope)


class _Walk:
    """The search over the connected parts, one root at a time, with the incumbent patched as
    each part is proved. With ``threads`` > 1, a part not proved after PARALLEL_AFTER expansions
    is split and walked on that many threads (:mod:`dcop.search.parallel`)."""

    def __init__(
        self,
        compiled: Compiled,
        state: kernel.State,
        incumbent: np.ndarray,
        base: float,
        stats: SearchStats,
        t_start: float,
        on_bounds: BoundsFn | None,
        seed: int = 0,
        improve: bool = True,
        due: int = WALK_ALONE,
        threads: int = 1,
    ) -> None:
        self.c = compiled
        self.s = state
        self.threads = threads
        # the other threads' states (made at the first split), each one's moves (made at its
        # first round) and the work at which its next round is due, and the part walked on them
        self.extra: list[kernel.State] = []
        self.extra_improvers: dict[int, Improver] = {}
        self.extra_due: list[int] = []
        self.seed = seed
        self.part: parallel.ParallelPart | None = None
        self.incumbent = incumbent.copy()
        self.base = base
        self.stats = stats
        self.t_start = t_start
        self.on_bounds = on_bounds
        # each part's proved value, or None while open
        self.proved: dict[int, float] = {}
        self.budget = math.inf  # the incumbent's cost on the part being searched
        self.improver = Improver(compiled, state.cache, seed) if improve else None
        self.upper = base + float(total_cost(compiled.model, self.incumbent))
        # the walk's work until the first round of moves: none where the incumbent breaks a
        # hard constraint (the walk cannot prune until one is found)
        self.next_improve = due if math.isfinite(self.upper) else 0
        self.heuristic = base + sum(compiled.root_h.values())
        self.lower = self.heuristic

    def expanded(self) -> int:
        """The walk's expansions, on every thread."""
        return sum(int(st.reg[kernel.R_EXPANDED]) for st in (self.s, *self.extra))

    def hits(self) -> int:
        """The walk's cache hits, on every thread."""
        return sum(int(st.reg[kernel.R_HITS]) for st in (self.s, *self.extra))

    def part_cost(self, root: int) -> float:
        """The incumbent's cost on the part of ``root``."""
        return float(nodes_cost(self.c.model, self.incumbent, self.c.preorder[root]))

    def bounds(self, current: int | None) -> float:
        """The proved lower bound now (``current``: the root being searched)."""
        m, s, c = self.c.model, self.s, self.c
        total = self.base
        for r in c.roots:
            if r in self.proved:
                total += self.proved[r]
            elif r == current and self.part is not None:
                total += self.part.lower()
            elif r == current:
                total += min(self.budget, kernel.stack_bound(m, s, r, c.width, c.root_h[r]))
            else:
                total += c.root_h[r]
        return total

    def report(self, current: int | None) -> None:
        lower = min(self.bounds(current), self.upper)
        if lower > self.lower or not self.stats.trace or self.upper < self.stats.trace[-1][2]:
            self.lower = max(self.lower, lower)
            now = time.monotonic() - self.t_start
            self.stats.trace.append((now, self.lower, self.upper))
            if self.on_bounds is not None:
                self.on_bounds(now, self.lower, self.upper)

    def run(self, deadline: float | None, max_expanded: int | None) -> str | None:
        """Search every part; the reason it stopped early (TIMEOUT, OUT_OF_NODES), or None when
        all are proved. After WALK_ALONE units of work (functions read), every IMPROVE_EVERY
        of the walk are followed by a round of moves on the incumbent
        (:mod:`dcop.search.improve`), the walk's budget lowered to each better incumbent."""
        m, s, c = self.c.model, self.s, self.c
        steps = 2000
        self.report(None)
        for r in c.roots:
            if r in self.proved:
                continue
            self.budget = self.part_cost(r)
            kernel.start(s, r, self.budget)
            began = self.expanded()
            split = self.threads > 1
            while True:
                if split and self.expanded() - began >= parallel.PARALLEL_AFTER:
                    split = False  # tried once a part
                    stopped = self.run_parallel(r, deadline, max_expanded)
                    if stopped != _NOT_SPLIT:
                        if stopped is not None:
                            return stopped
                        break
                work = int(s.reg[kernel.R_WORK])
                if self.improver is not None and work >= self.next_improve:
                    self.next_improve = work + IMPROVE_EVERY
                    if self.improver.run(
                        self.incumbent, MOVE_EXPANSIONS, deadline, set(self.proved)
                    ):  # fmt: skip
                        self.budget = min(self.budget, self.part_cost(r))
                        kernel.tighten(m, s, r, self.budget)
                        self.upper = self.base + float(total_cost(m, self.incumbent))
                    self.report(r)
                if deadline is not None and time.monotonic() >= deadline:
                    self.report(r)
                    return TIMEOUT
                if max_expanded is not None and self.expanded() >= max_expanded:
                    self.report(r)
                    return OUT_OF_NODES
                t0 = time.monotonic()
                if max_expanded is not None:
                    steps = max(1, min(steps, max_expanded - self.expanded()))
                if self.improver is not None:  # the walk pauses where the moves are due
                    s.reg[kernel.R_WORK_LIMIT] = self.next_improve
                try:
                    done = kernel.search(m, s, r, steps, c.width, EPS_ABS, EPS_REL)
                except KeyboardInterrupt as exc:  # between two slices: the walk is intact
                    self.report(r)
                    return f"{INTERRUPTED} ({exc})" if str(exc) else INTERRUPTED
                spent = time.monotonic() - t0
                if done:
                    break
                # aim each slice at SLICE_S
                steps = int(min(max(steps * SLICE_S / max(spent, 1e-6), 100), 10_000_000))
                self.report(r)
            if r in self.proved:  # by the threads
                continue
            value = float(s.fre[0])
            if s.reg[kernel.R_EXACT] == 1 and value < self.budget:
                self.proved[r] = value  # a bound of the part's, at least
                if not self.patch(r, deadline):  # the deadline came first: not proved
                    self.report(r)
                    return TIMEOUT
            else:  # nothing below the incumbent's own cost: that part of it is optimal
                self.proved[r] = self.budget
            self.upper = self.base + float(total_cost(m, self.incumbent))
            self.report(None)
        return None

    def run_parallel(self, r: int, deadline: float | None, max_expanded: int | None) -> str | None:
        """Walk the part of ``r`` on the threads (its one-thread walk so far is dropped, its
        cache entries kept): the reason it stopped, None when proved, or _NOT_SPLIT where its top
        is not a chain (the one-thread walk, intact, goes on)."""
        m, c = self.c.model, self.c
        scratch = new_state(m, c.width, 0)  # the paused walk's frames stay as they are
        want = parallel.SPLIT_PER_THREAD * self.threads
        plan = parallel.split(c, scratch, r, self.budget, want, EPS_ABS, EPS_REL)
        if plan is None:
            return _NOT_SPLIT
        if plan.guess_cost < self.budget:  # a subproblem's greedy completion is better
            self.incumbent[c.preorder[r]] = plan.guess
            self.budget = plan.guess_cost
            self.upper = self.base + float(total_cost(m, self.incumbent))
        count = max(1, min(self.threads, len(plan.subs)))
        while len(self.extra) < count - 1:
            self.extra.append(new_state(m, c.width, c.cache_entries))
            # its first round as far off in its own work (from 0) as the first thread's is
            self.extra_due.append(max(0, self.next_improve - int(self.s.reg[kernel.R_WORK])))
        part = parallel.ParallelPart(
            c, r, plan, [self.s, *self.extra[: count - 1]], self.incumbent, EPS_ABS, EPS_REL
        )
        open_parts = {q: c.preorder[q] for q in c.roots if q not in self.proved}
        root_of = np.empty(m.dom.shape[0], dtype=np.int64)
        for q, nodes in c.preorder.items():
            root_of[nodes] = q

        def report() -> None:
            if part.changed:
                with part.lock:
                    part.changed = False
                    self.upper = self.base + float(total_cost(m, self.incumbent))
            self.report(r)

        def between(k: int, st: kernel.State) -> None:
            """Thread ``k``'s rounds of moves, as the one-thread walk's: each thread's own, at
            its own work's pace (its own state, sharing its own cache), so that the moves keep
            their share of the work (the moves of the first thread alone: 3.4M expansions to
            prove random n = 22 s1 at z = 6 on two threads, 1.4M with each thread's)."""
            due = self.next_improve if k == 0 else self.extra_due[k - 1]
            work = int(st.reg[kernel.R_WORK])
            if work >= due:
                due = work + IMPROVE_EVERY
                improver = self.improver if k == 0 else self.extra_improvers.get(k)
                if improver is None:
                    improver = Improver(c, st.cache, self.seed + 7919 * k)
                    self.extra_improvers[k] = improver
                assert improver is not None
                candidate = part.snapshot()
                if improver.run(candidate, MOVE_EXPANSIONS, deadline, set(self.proved)):
                    part.offer(candidate, open_parts, root_of)
            if k == 0:
                self.next_improve = due
            else:
                self.extra_due[k - 1] = due
            st.reg[kernel.R_WORK_LIMIT] = due

        self.part = part
        try:
            stop = part.run(deadline, max_expanded, report,
                            between if self.improver is not None else None)  # fmt: skip
            if part.changed:
                self.upper = self.base + float(total_cost(m, self.incumbent))
            self.report(r)
        finally:
            self.part = None
        if stop is None:
            self.proved[r] = part.upper
            self.report(None)
            return None
        if stop is parallel.Stop.DEADLINE:
            return TIMEOUT
        if stop is parallel.Stop.NODES:
            return OUT_OF_NODES
        return f"{INTERRUPTED} ({part.interrupt})" if part.interrupt else INTERRUPTED

    def patch(self, root: int, deadline: float | None) -> bool:
        """Copy the proved optimum of ``root``'s part into the incumbent; False (the incumbent
        left as it was) where its completion reaches ``deadline``."""
        s, c = self.s, self.c
        order = c.preorder[root]
        s.reg[kernel.R_WORK_LIMIT] = 0  # the solves below run to their end
        # order[0] is the root, whose value the walk left in s.asg
        if not complete(c, s, order, deadline):
            return False
        for v in order:
            self.incumbent[v] = s.asg[v]
        return True
