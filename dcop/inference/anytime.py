"""Time-aware solving: ``--algo auto`` (a portfolio) and ``--timeout`` for BE / MBE(z).

``auto`` runs BE when its plan fits the memory limit and is predicted quick (at most
``BE_FIRST_S``); otherwise, on a problem that the exact reduction shrank to small tables over
small domains (:func:`dcop.search.dfbnb.suits`: the diagnosis networks), the branch and bound
under soft arc consistency (:func:`dcop.search.dfbnb.solve_dfbnb`); otherwise the AND/OR search
(:func:`dcop.search.solve_aobb`), whose ladder of
mini-bucket sizes ends with BE's own exact pass when that fits the memory and the time, and else
with the largest z that fits. Both run in this process: no fork, so a GPU backend works, and the
search checks the deadline between slices of a few tens of milliseconds, keeping the best
assignment and bound it has. The result says which ran and why (``choice``).

``--timeout`` with ``--algo be`` or ``mbe`` runs the solve in a forked child killed at the
deadline (:func:`solve_until`); a device backend cannot be used after a fork, so there the solve
runs in this process and the deadline is checked when it ends.

Time is predicted from the plan's work, the joined entries of every mini-bucket
(:attr:`~dcop.plan.bucket_plan.MemoryPlan.total_work`), at a rate in joined entries per second.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from dcop.backends import resolve_backend
from dcop.errors import DcopError, RunTimeout, TableTooLarge
from dcop.inference.elimination import ProgressFn
from dcop.inference.solve import solve
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.orders.greedy import largest_table
from dcop.plan.bucket_plan import MemoryPlan, largest_fitting_z, plan_for, suggestion_bound
from dcop.plan.memory import effective_limit, human_bytes, resident_bytes
from dcop.plan.seconds import cpu_be_seconds
from dcop.results.solve import SolveResult
from dcop.starting import StartingBackend

if TYPE_CHECKING:  # the search's modules load numba: imported where it searches
    from dcop.search.first import FirstAnswer
    from dcop.search.reduce import Reduction

#: Backend names that start a device (their start runs on a thread: :func:`device_start`).
DEVICE_NAMES = ("cupy", "auto")

#: Joined entries per second of the fused join+eliminate (NumPy, float32), the yardstick
#: ``benchmarks/work_rate.py`` reports against (auto predicts BE at the search's own
#: ``seconds_per_entry``, 1e8/s on a core). Calibrated with ``benchmarks/work_rate.py`` on the
#: project's 2-core VM while it was shared with other jobs (results/work_rate.md): steps of
#: 2e7-1e8 entries ran at 6e7-4.6e8/s (median 1.8e8), the largest (4.5e8 entries) at 6.8e7-7.8e7
#: (as MBE(5) on CELAR6-SUB0): the low end is taken, so a first prediction errs long.
DEFAULT_ENTRIES_PER_S = 7.0e7
#: Seconds a bucket costs besides its joined entries (Python and NumPy calls).
BUCKET_OVERHEAD_S = 3e-4
#: A solve is planned to fit the time left when its prediction, times this, does: predictions
#: on a busy machine err by up to ~2x either way.
SAFETY = 0.5
#: ``auto`` runs BE directly when it is predicted within this many seconds (no search, no
#: compiled loops to load): most small and medium problems.
BE_FIRST_S = 1.0
#: ``auto`` on a device not yet started runs BE on the CPU when the CPU is predicted to end it
#: within this many seconds, and a start it has not begun never begins: the device's start takes
#: 0.5-1 s (an H200 host: CuPy's import and the CUDA context, 0.47-0.73 s, then its warm-up), its
#: first kernels more, and a problem this small gains nothing from it. On the H200 host, BE of
#: example, Grids_11 and the grids and scale-free networks of 100-144 variables (predicted
#: 0.08-0.56 s) ended 0.1-0.5 s sooner in a fresh process on the CPU than on the device; the
#: CPU's predictions (1e8 entries/s) err long on domains of 10 (0.19 s for 1.2 s predicted) and
#: are right on binary ones (Grids_11: 0.32 s for 0.31 s).
CPU_BEFORE_DEVICE_S = 0.6
#: Where BE fits, the search's pass budget is BE's prediction times this, so that its exact pass
#: is the ladder's last rung.
EXACT_RUNG_MARGIN = 1.5
#: Seconds between two progress reports a step's child sends.
PROGRESS_EVERY_S = 0.1
#: With a deadline, a problem of at least this many variables gets its first answer
#: (:mod:`dcop.search.first`) before it is ordered and planned: on a 6400-variable grid those
#: take seconds, many more on a loaded machine, and the deadline may come first. A smaller one
#: is ordered in milliseconds (and BE, which needs no first answer, solves most of them).
FIRST_EARLY_VARIABLES = 1000
#: Share of the time left that the ordering engine may search (its greedy orders always run), as
#: the search's own (``dcop.search.solver.ORDER_SHARE``, not imported here: numba loads only to
#: search).
ORDER_SHARE = 0.05
#: Bytes per entry of BE's largest table at the least (float32): a run whose largest table alone
#: exceeds the memory limit is not planned (a plan of thousands of buckets costs a second).
BE_ENTRY_BYTES = 4

#: A reduced problem that suits dfbnb goes to it before the ordering engine and BE's plan where
#: min-degree's order has a table of more entries than this (:func:`_dfbnb_before_order`).
DFBNB_BEFORE_ORDER_ENTRIES = float(1 << 40)
#: A problem of binary tables and large domains (:func:`dcop.search.dfbnb.suits_large`) gets
#: a probe of the search under soft arc consistency of this many nodes (a count: the same path
#: on any machine) before the AND/OR search: CELAR6-SUB0 needs 3443.
LARGE_PROBE_NODES = 6000
#: bounds(seconds, lower, upper) of a search, internal costs (:mod:`dcop.search.solver`).
BoundsFn = Callable[[float, float, float], None]


@dataclass
class Step:
    """One step of an anytime run: BE or MBE(z), its prediction and what it gave."""

    algo: str
    z: int | None
    work: int
    predicted_s: float
    status: str = "planned"  # ok, timeout, too_large, error, skipped
    seconds: float | None = None
    lower: float | None = None
    upper: float | None = None
    message: str | None = None

    def to_json(self, problem: Problem) -> dict[str, Any]:
        """The step for the result document (bounds in the file's sense)."""
        from dcop.results import file_value, json_number

        ends = None
        if self.lower is not None and self.upper is not None:
            ends = sorted((file_value(problem, self.lower), file_value(problem, self.upper)))
        return {
            "algo": self.algo,
            "z": self.z,
            "status": self.status,
            "work": self.work,
            "predicted_s": round(self.predicted_s, 6),
            "seconds": None if self.seconds is None else round(self.seconds, 6),
            "lower_bound": None if ends is None else json_number(ends[0]),
            "upper_bound": None if ends is None else json_number(ends[1]),
            "message": self.message,
        }


@dataclass
class Options:
    """What every step of a run shares (the order chosen once: a :class:`ChosenOrder`)."""

    ordering: str | ChosenOrder = "auto"
    backend: str | Any = "numpy"
    dtype: str = "auto"
    max_bytes: float | None = None
    resident: int | None = None
    progress: ProgressFn | None = None
    order_time: float | None = None


def base_plan(problem: Problem, options: Options, max_order_s: float = math.inf) -> MemoryPlan:
    """BE's plan along the run's order, in the dtype and work model the solve will use; the
    ordering engine's default budget at most ``max_order_s``."""
    options.ordering = choose_order(
        problem, options.ordering, options.order_time, max_budget_s=max_order_s
    )
    order = options.ordering.order
    return plan_for(problem, order, None, options.dtype, options.backend, resident=options.resident)


def device_start(backend: str | Any, begin: bool = True) -> Any:
    """``backend`` as ``auto`` takes it: a device backend named (``cupy``, ``auto``) becomes a
    start on a thread of its own (:class:`dcop.starting.StartingBackend`), begun now or, with
    ``begin=False``, when the solve asks for it; anything else as it is."""
    if isinstance(backend, str) and backend in DEVICE_NAMES:
        return StartingBackend(backend, begin=begin)
    return backend


def choose_by_memory(plan: MemoryPlan, max_bytes: float | None) -> tuple[str, int | None]:
    """``auto`` without a deadline: BE when its planned peak fits the limit, else MBE with the
    largest z whose plan fits (z=1 when none does: that solve then reports ``too_large``)."""
    limit = effective_limit(max_bytes)
    if plan.fits(limit.bytes):
        return "be", None
    fitting = largest_fitting_z(plan, limit.bytes, suggestion_bound(plan))
    return "mbe", fitting.z if fitting is not None and fitting.z is not None else 1


def solve_auto(
    problem: Problem,
    timeout: float | None = None,
    *,
    deadline: float | None = None,
    ordering: str | ChosenOrder = "auto",
    backend: str | Any = "numpy",
    dtype: str = "auto",
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
    on_bounds: BoundsFn | None = None,
    resident: int | None = None,
    order_time: float | None = None,
    threads: int | None = None,
) -> SolveResult:
    """``--algo auto``: BE when its plan fits the memory limit and is predicted within
    ``BE_FIRST_S``, else the search (see the module docstring), until ``timeout`` seconds from
    now or ``deadline`` (:func:`time.monotonic`). The result's ``choice`` says which ran and
    why; a run stopped by the deadline has ``stopped`` set (status ``timeout``) and keeps its
    best assignment and both bounds. ``threads``: the search's
    (:func:`dcop.search.solver.solve_aobb`)."""
    from dcop.planar.auto import planar_first  # first: polynomial where it applies

    t_start = time.monotonic()  # the limit and the trace count from the call, planar's try included
    if timeout is not None:
        deadline = t_start + timeout
    early = planar_first(problem, deadline)
    if early is not None:
        return early
    from dcop.search.ibound import seconds_per_entry  # the solver (numba) loads only to search

    if resident is None:
        resident = resident_bytes()
    limit = effective_limit(max_bytes)
    small = problem.n < FIRST_EARLY_VARIABLES
    probe: str | None = None  # why the large-domain probe did not end the run (_probe_large)
    probe_s = 0.0
    # a small problem's start waits until the CPU's prediction says the device is worth it
    backend = device_start(backend, begin=not small)
    if small and isinstance(backend, StartingBackend) and not backend.ready:
        # the device has not started (CuPy's import, the CUDA context: 0.5-1 s): a problem
        # whose BE the CPU ends sooner runs there, and a start not begun never begins (its
        # import beside the solve would hold the GIL: 0.2 s more for a 0.01 s BE on the H200 host)
        left = math.inf if deadline is None else deadline - time.monotonic()
        ordering = choose_order(problem, ordering, order_time, max_budget_s=ORDER_SHARE * left)
        cpu = Options(ordering, "numpy", dtype, max_bytes, resident, progress, order_time)
        cpu_plan = base_plan(problem, cpu)  # the order is chosen once, for either side
        cpu_s = cpu_be_seconds(cpu_plan)
        if cpu_plan.fits(limit.bytes) and cpu_s <= CPU_BEFORE_DEVICE_S:
            result = solve(
                problem, "be", None, ordering, "numpy", dtype,
                max_bytes=max_bytes, progress=progress, resident=resident,
            )  # fmt: skip
            if backend.ready:
                backend.result()  # a device that could not start says so, as it would have
            result.choice = (
                f"BE on the CPU: predicted {cpu_s:.3g} s there, sooner than the device's start "
                f"({backend.name})"
            )
            return result
        if not cpu_plan.fits(limit.bytes):
            # a search runs (BE cannot): its compiled loops load beside the device's start, not
            # after it (on the H200 host, 0.4 s of numba's load had waited on 0.6 s of CUDA's)
            from dcop.search import preload

            preload.start()
            # the probe of a large-domain problem runs on the CPU: the device's start waits
            # for it (a proof ends the run with no start at all)
            early, probe, probe_s = _probe_large(
                problem, None, problem, deadline, max_bytes, on_bounds, None, t_start, {},
                f"BE's plan needs {human_bytes(cpu_plan.peak_bytes)} > "
                f"{human_bytes(limit.bytes)}, before the device's start ({backend.name})",
            )  # fmt: skip
            if early is not None:
                return early
    if isinstance(backend, StartingBackend):
        backend.begin()  # the device is worth its start: it starts while the solve plans
    first = None
    if deadline is not None and not small:
        # an answer before the order and the plans (see FIRST_EARLY_VARIABLES), on the CPU
        # while a device starts
        from dcop.search.first import first_answer

        first = first_answer(problem, max_bytes=limit.bytes, deadline=deadline)
        if first is not None and on_bounds is not None:
            on_bounds(time.monotonic() - t_start, first.lower, first.cost)
    engine = resolve_backend(backend)
    # a large problem is reduced before it is ordered (:mod:`dcop.search.reduce`): BE's plan and
    # the search's order are of the reduced problem, and the search is handed the reduction
    from dcop.search.reduce import for_search

    t0 = time.monotonic()
    reduction = for_search(problem)  # None at once below its least size
    reduce_s = time.monotonic() - t0
    work = problem if reduction is None else reduction.problem
    options = Options(ordering, engine, dtype, max_bytes, resident, progress)
    options.order_time = order_time
    if first is not None and deadline is not None:
        from dcop.search.solver import setup_fits, solve_aobb

        if not setup_fits(first, deadline - time.monotonic()):
            # the search would not start in time: the local search spends it all
            result = solve_aobb(
                problem,
                backend=engine,
                max_bytes=max_bytes,
                deadline=deadline,
                on_bounds=on_bounds,
                resident=resident,
                start=first,
                started=t_start,
                reduced=reduction is not None,
                reduction=reduction,
                threads=threads,
            )
            result.choice = f"search: {result.search.ibound_reason}"
            return result
    if reduction is not None and _dfbnb_before_order(work):
        return _solve_dfbnb(
            problem, reduction, work, deadline, max_bytes, on_bounds, first, t_start,
            {"reduce": reduce_s},
            f"min-degree's largest BE table has more than {DFBNB_BEFORE_ORDER_ENTRIES:.3g} entries",
        )  # fmt: skip
    left = math.inf if deadline is None else deadline - time.monotonic()
    if reduction is not None and isinstance(options.ordering, ChosenOrder):
        options.ordering = "auto"  # the caller's order is of the original problem
    t0 = time.monotonic()
    options.ordering = choose_order(
        work, options.ordering, options.order_time, max_budget_s=ORDER_SHARE * max(0.0, left)
    )
    order_s = time.monotonic() - t0
    order = options.ordering.order
    limit = effective_limit(max_bytes)
    engine_said = options.ordering.engine
    biggest = (
        engine_said.largest_table_entries
        if engine_said is not None
        else largest_table(work.neighbours(), order, work.domain_sizes())
    )
    plan = None
    if biggest * BE_ENTRY_BYTES <= limit.bytes:
        plan = base_plan(work, options)  # the order is chosen: planning alone
    # the search's exact pass is predicted at its kernels' rate; BE on the CPU by its own model
    per_entry = (
        math.inf
        if plan is None
        else len(plan.buckets) * BUCKET_OVERHEAD_S + plan.total_work * seconds_per_entry(engine)
    )
    predicted = per_entry if plan is None or engine.name != "numpy" else cpu_be_seconds(plan)
    left = math.inf if deadline is None else deadline - time.monotonic()
    fits = plan is not None and plan.fits(limit.bytes)
    in_time = predicted * SAFETY <= left
    # a BE that fits only decoding from argbest tables cannot be the search's last rung (a
    # heuristic keeps every message): it runs itself when predicted within half the time left
    # (it runs in this process, no answer before its end)
    lean_only = (
        plan is not None
        and fits
        and not plan.fits_alone(limit.bytes)
        and predicted <= SAFETY * left
    )
    if plan is not None and fits and in_time and (predicted <= BE_FIRST_S or lean_only):
        result = solve(
            work,
            "be",
            None,
            options.ordering,
            engine,
            dtype,
            max_bytes=max_bytes,
            progress=progress,
            resident=options.resident,
        )
        if reduction is not None:
            from dcop.search.solver import expanded

            result = expanded(result, reduction, first, reduce_s)
        run = plan.within(limit.bytes)  # messages kept, or argbest tables where those do not fit
        lean = "" if run.decode == "messages" else ", decoded from argbest tables"
        result.choice = (
            f"BE: its plan fits the memory limit ({human_bytes(run.peak_bytes)} of "
            f"{human_bytes(limit.bytes)}{lean}) and is predicted at {predicted:.3g} s"
            + ("" if reduction is None else f", on the problem reduced to {work.n} variables")
        )
        return result
    if plan is None:
        why = (
            f"BE's plan needs more than {human_bytes(limit.bytes)}: its largest table alone has "
            f"{biggest:.4g} entries"
        )
    elif not fits:
        least = min((p for p in (plan, plan.lean) if p is not None), key=lambda p: p.peak_bytes)
        why = f"BE's plan needs {human_bytes(least.peak_bytes)} > {human_bytes(limit.bytes)}"
    elif not in_time:
        why = f"BE is predicted at {predicted:.3g} s, past the time left"
    else:
        why = f"BE is predicted at {predicted:.3g} s"
    from dcop.search.dfbnb import suits

    if reduction is not None and suits(work):
        return _solve_dfbnb(
            problem, reduction, work, deadline, max_bytes, on_bounds, first, t_start,
            {"reduce": reduce_s, "ordering": order_s}, why,
        )  # fmt: skip
    if probe is None:
        early, probe, probe_s = _probe_large(
            problem, reduction, work, deadline, max_bytes, on_bounds, first, t_start,
            {"reduce": reduce_s, "ordering": order_s}, why,
        )  # fmt: skip
        if early is not None:
            return early
    from dcop.search.solver import solve_aobb

    # where BE fits, its exact pass is the ladder's last rung: the search ends as BE would
    result = solve_aobb(
        problem,
        ordering=options.ordering,
        backend=engine,
        max_bytes=max_bytes,
        deadline=deadline,
        on_bounds=on_bounds,
        resident=options.resident,
        pass_seconds=per_entry * EXACT_RUNG_MARGIN if fits and in_time else None,
        start=first,
        started=t_start,
        reduced=reduction is not None,
        reduction=reduction,
        threads=threads,
    )
    if reduction is not None:  # made here, not in the search
        result.times.update(reduce=reduce_s, ordering=order_s)
    result.choice = f"search: {why}; {result.search.ibound_reason}"
    if probe is not None:
        result.times["dfbnb_probe"] = probe_s
        result.choice += f"; {probe}"
    return result


def _dfbnb_before_order(work: Problem) -> bool:
    """Whether a reduced problem goes to dfbnb before it is ordered: it suits the search
    (:func:`dcop.search.dfbnb.suits`) and BE cannot be quick on it: min-degree's order (a few
    hundredths of a second) already has a table of more than DFBNB_BEFORE_ORDER_ENTRIES entries,
    which no better order brings near BE_FIRST_S (on or_chain_113: 2.3e18 entries, the
    engine's order 4.5e15). The engine's search and BE's plan took 1.1 of the 3.6 s there."""
    from dcop.orders.greedy import largest_table, min_degree_order
    from dcop.search.dfbnb import suits

    if not suits(work):
        return False
    adjacency = work.neighbours()
    order = min_degree_order(adjacency)
    return largest_table(adjacency, order, work.domain_sizes()) > DFBNB_BEFORE_ORDER_ENTRIES


def _probe_large(
    problem: Problem,
    reduction: Reduction | None,
    work: Problem,
    deadline: float | None,
    max_bytes: float | None,
    on_bounds: BoundsFn | None,
    first: FirstAnswer | None,
    t_start: float,
    spent: dict[str, float],
    why: str,
) -> tuple[SolveResult | None, str | None, float]:
    """Where ``work`` suits the large-domain probe (:func:`dcop.search.dfbnb.suits_large`):
    LARGE_PROBE_NODES nodes of dfbnb. It proves the frequency assignments (CELAR6-SUB0 in 1447
    nodes, a tenth of a second), not the random networks of large domains (the AND/OR search's
    ground: n = 18, d = 24 in 0.6 s of CPU, not this search in 30 s). Returns the result that
    ends the run (a proof, the deadline), else None, why the probe did not end it (None: no
    probe ran), and its seconds."""
    from dcop.search.dfbnb import OUT_OF_NODES, suits_large

    if not suits_large(work):
        return None, None, 0.0
    t0 = time.monotonic()
    try:
        result = _solve_dfbnb(
            problem, reduction, work, deadline, max_bytes, on_bounds, first, t_start, spent, why,
            LARGE_PROBE_NODES,
        )  # fmt: skip
    except TableTooLarge as exc:  # its integer tables past half the memory limit
        return None, f"the soft arc consistency search was refused ({exc})", time.monotonic() - t0
    out_of_time = deadline is not None and time.monotonic() >= deadline
    if result.exact or out_of_time or result.stopped != OUT_OF_NODES:
        return result, None, time.monotonic() - t0
    seconds = time.monotonic() - t0
    return (
        None,
        (
            f"the soft arc consistency search's probe of {LARGE_PROBE_NODES} nodes did not prove it "
            f"({seconds:.3g} s)"
        ),
        seconds,
    )


def _solve_dfbnb(
    problem: Problem,
    reduction: Reduction | None,
    work: Problem,
    deadline: float | None,
    max_bytes: float | None,
    on_bounds: BoundsFn | None,
    first: FirstAnswer | None,
    t_start: float,
    spent: dict[str, float],
    why: str,
    max_nodes: int | None = None,
) -> SolveResult:
    """``auto``'s branch and bound under soft arc consistency (:mod:`dcop.search.dfbnb`) on
    ``problem`` through its ``reduction`` (to ``work``); ``why`` BE did not run."""
    from dcop.search.dfbnb import LARGE_DOMAIN, solve_dfbnb, suits

    result = solve_dfbnb(
        problem,
        deadline=deadline,
        max_bytes=max_bytes,
        on_bounds=on_bounds,
        start=first,
        started=t_start,
        reduction=reduction,
        reduced=reduction is not None,  # None: the reduction was tried, and left it whole
        max_nodes=max_nodes,
    )
    result.times.update(spent)
    sizes = max(v.size for v in work.variables.values())
    arity = max((len(t.scope) for t in work.tables), default=0)
    shape = (
        f"the problem reduced to {work.n} variables of at most {sizes} values and tables of at "
        f"most {max((int(t.entries) for t in work.tables), default=0)} entries"
        if reduction is not None and suits(work)
        else f"tables of at most {arity} variables over domains of up to {sizes} values "
        f"(at least {LARGE_DOMAIN}: the mini-bucket passes and the AND/OR nodes grow with d)"
    )
    result.choice = f"search under soft arc consistency (dfbnb): {why}; {shape}"
    return result


def solve_until(
    problem: Problem,
    algo: str,
    z: int | None,
    deadline: float,
    *,
    ordering: str | ChosenOrder = "auto",
    backend: str | Any = "numpy",
    dtype: str = "auto",
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
    resident: int | None = None,
    order_time: float | None = None,
) -> SolveResult:
    """BE or MBE(z) in a child process killed at ``deadline`` (:func:`time.monotonic`); raises
    :class:`~dcop.errors.RunTimeout` when it is."""
    engine = resolve_backend(backend)
    options = Options(ordering, engine, dtype, max_bytes, resident, progress)
    options.ordering = choose_order(problem, ordering, order_time)  # chosen here, not per step
    if engine.name != "numpy":  # CUDA cannot be used after a fork: solve in this process
        # (it is not stopped at the deadline; its answer, late or not, is kept)
        return solve(
            problem, algo, z, options.ordering, engine, dtype, max_bytes=max_bytes,
            progress=progress, resident=resident,
        )  # fmt: skip
    step = Step(algo, z, 0, 0.0)
    result = _run_step(problem, step, deadline, options)
    if result is None:
        raise RunTimeout(step.message or "out of time")
    return result


def _run_step(
    problem: Problem, step: Step, deadline: float, options: Options
) -> SolveResult | None:
    """Run one step in a forked child, killed at ``deadline``; fill ``step`` with its outcome.
    None when it gave no result (out of time, too large, an error)."""
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(theirs, problem, step, options), daemon=True)
    started = time.monotonic()
    try:
        child.start()
        theirs.close()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                step.seconds = time.monotonic() - started
                label = "BE" if step.z is None else f"MBE(z={step.z})"
                step.status = "timeout"
                step.message = f"{label} did not finish within the time limit (--timeout)"
                return None
            if not ours.poll(min(left, 0.5)):
                continue
            try:
                reply = ours.recv()
            except EOFError:  # the child died without a word (killed from outside, a bug)
                step.status, step.message = "error", _died(child)
                return None
            if reply[0] == "progress":
                if options.progress is not None:
                    options.progress(*reply[1:])
                continue
            step.seconds = time.monotonic() - started
            if reply[0] == "failed":
                step.status, step.message = reply[1], reply[2]
                return None
            result = SolveResult(problem=problem, **reply[1])
            step.status, step.lower, step.upper = "ok", result.lower_bound, result.upper_bound
            return result
    finally:
        ours.close()
        if child.is_alive():
            child.kill()
        if child.pid is not None:
            child.join()


def _died(child: Any) -> str:
    child.join(5)
    code = child.exitcode
    if code is not None and code < 0:
        return f"the solver process was killed by signal {-code} (out of memory?)"
    return f"the solver process ended without a result (exit code {code})"


#: The SolveResult fields a child sends back (the problem stays with the parent).
_SENT = tuple(f.name for f in fields(SolveResult) if f.name not in ("problem", "steps"))


def _child(conn: Connection, problem: Problem, step: Step, options: Options) -> None:
    """A step's process: solve, report progress now and then, send the result's fields."""
    last = [0.0]

    def progress(done: int, total: int, var: str) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            conn.send(("progress", done, total, var))

    try:
        result = solve(
            problem,
            step.algo,
            step.z,
            options.ordering,
            options.backend,
            options.dtype,
            max_bytes=options.max_bytes,
            progress=progress if options.progress is not None else None,
            resident=options.resident,
        )
        conn.send(("done", {name: getattr(result, name) for name in _SENT}))
    except (DcopError, MemoryError) as exc:
        too_large = isinstance(exc, TableTooLarge | MemoryError)
        conn.send(("failed", "too_large" if too_large else "error", str(exc) or "out of memory"))
    except KeyboardInterrupt:
        os._exit(130)
    finally:
        conn.close()
