"""Time-aware solving: ``--algo auto`` and ``--timeout`` for BE / MBE(z).

Without a deadline ``auto`` is one step: BE when its planned peak memory fits the limit, else MBE
with the largest z whose plan fits (:func:`choose_by_memory`). With a deadline it is *anytime*:
it raises z step by step (from the largest table arity up to BE), plans every step by memory
*and* predicted time, and keeps the best lower bound and the best assignment (upper bound) found
so far. Each step runs in a forked child process that is killed at the deadline, so a long
bucket cannot hold the answer back; the parent only plans, waits and keeps the bounds.

Time is predicted from the plan's work, the joined entries of every mini-bucket
(:attr:`~dcop.plan.bucket_plan.MemoryPlan.total_work`), at a rate in joined entries per second:
:data:`DEFAULT_ENTRIES_PER_S` until a step of this run has been timed, then the rate that step
reached on this problem and machine.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from multiprocessing.connection import Connection
from typing import Any

from dcop.errors import DcopError, RunTimeout, TableTooLarge
from dcop.inference.elimination import ProgressFn
from dcop.inference.solve import solve
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.plan.bucket_plan import MemoryPlan, largest_fitting_z, plan_for, refusal, suggestion_bound
from dcop.plan.memory import effective_limit, resident_bytes
from dcop.results.solve import SolveResult

#: Joined entries per second of the fused join+eliminate (NumPy, float32), the prediction's rate
#: before a step of the run has been timed. Calibrated with ``benchmarks/work_rate.py`` on the
#: project's 2-core VM while it was shared with other jobs (results/work_rate.md): steps of
#: 2e7-1e8 entries ran at 6e7-4.6e8/s (median 1.8e8), the largest (4.5e8 entries) at 6.8e7-7.8e7
#: (as MBE(5) on CELAR6-SUB0): the low end is taken, so a first prediction errs long.
DEFAULT_ENTRIES_PER_S = 7.0e7
#: Seconds a bucket costs besides its joined entries (Python and NumPy calls).
BUCKET_OVERHEAD_S = 3e-4
#: A step is started when its prediction, times this, fits in the time left: predictions on a
#: busy machine err by up to ~2x either way, and a step that runs over is only killed at the
#: deadline (its bounds lost, the earlier ones kept), so a step likely to fit is tried.
SAFETY = 0.5
#: Seconds between two progress reports a step's child sends.
PROGRESS_EVERY_S = 0.1

#: on_step(event, step): ``start`` before a step runs, ``done`` after (``step`` holds its
#: outcome), ``skip`` for a step not run (its message says why).
StepFn = Callable[[str, "Step"], None]


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
class Rate:
    """Joined entries per second, learnt from the steps of the run."""

    entries_per_s: float = DEFAULT_ENTRIES_PER_S
    measured: bool = False

    def predict(self, plan: MemoryPlan) -> float:
        """Predicted seconds of a run along ``plan``."""
        return len(plan.buckets) * BUCKET_OVERHEAD_S + plan.total_work / self.entries_per_s

    def learn(self, plan: MemoryPlan, seconds: float) -> None:
        """Take the rate of a finished step when it ran long enough to be timed."""
        busy = seconds - len(plan.buckets) * BUCKET_OVERHEAD_S
        if busy >= 0.05 and plan.total_work > 0:
            self.entries_per_s = plan.total_work / busy
            self.measured = True


@dataclass
class Options:
    """What every step of a run shares (the order chosen once: a :class:`ChosenOrder`)."""

    ordering: str | ChosenOrder = "auto"
    backend: str | Any = "numpy"
    dtype: str = "auto"
    max_bytes: float | None = None
    resident: int | None = None
    progress: ProgressFn | None = None
    on_step: StepFn | None = None
    steps: list[Step] = field(default_factory=list)
    order_time: float | None = None


def base_plan(problem: Problem, options: Options) -> MemoryPlan:
    """BE's plan along the run's order, in the dtype and work model the solve will use."""
    options.ordering = choose_order(problem, options.ordering, options.order_time)
    order = options.ordering.order
    return plan_for(problem, order, None, options.dtype, options.backend, resident=options.resident)


def choose_by_memory(plan: MemoryPlan, max_bytes: float | None) -> tuple[str, int | None]:
    """``auto`` without a deadline: BE when its planned peak fits the limit, else MBE with the
    largest z whose plan fits (z=1 when none does: that solve then reports ``too_large``)."""
    limit = effective_limit(max_bytes)
    if plan.fits(limit.bytes):
        return "be", None
    fitting = largest_fitting_z(plan, limit.bytes, suggestion_bound(plan))
    return "mbe", fitting.z if fitting is not None and fitting.z is not None else 1


def z_ladder(plan: MemoryPlan, start: int) -> list[MemoryPlan]:
    """MBE plans from z=``start`` up, one per distinct amount of work, ending with BE's plan
    (the first z whose mini-buckets are whole buckets is BE itself)."""
    ladder: list[MemoryPlan] = []
    z = max(1, start)
    while True:
        step = plan.with_z(z)
        if step.total_work >= plan.total_work:
            break
        if not ladder or step.total_work != ladder[-1].total_work:
            ladder.append(step)
        z += 1
    ladder.append(plan)
    return ladder


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
    on_step: StepFn | None = None,
    resident: int | None = None,
    order_time: float | None = None,
) -> SolveResult:
    """``--algo auto``: without a time limit, BE if its plan fits the memory limit, else MBE with
    the largest fitting z; with one (``timeout`` seconds from now, or ``deadline`` on
    :func:`time.monotonic`), anytime: z raised step by step, each step planned by memory and
    time, the best bounds kept.

    Returns the best result: its ``lower_bound`` the best bound proved, its ``upper_bound`` and
    ``assignment`` the best assignment found, ``steps`` every step. A run that hit the deadline
    after a step finished has ``stopped`` set (status ``timeout``, bounds kept); one that hit it
    before any finished raises :class:`~dcop.errors.RunTimeout`, and one where nothing fits the
    memory limit :class:`~dcop.errors.TableTooLarge`.
    """
    options = Options(ordering, backend, dtype, max_bytes, resident, progress, on_step)
    options.order_time = order_time
    if options.resident is None:
        options.resident = resident_bytes()
    plan = base_plan(problem, options)
    if timeout is not None:
        deadline = time.monotonic() + timeout
    if deadline is None:
        algo, z = choose_by_memory(plan, max_bytes)
        return solve(
            problem,
            algo,
            z,
            options.ordering,
            backend,
            dtype,
            max_bytes=max_bytes,
            progress=progress,
            resident=options.resident,
        )
    return _anytime(problem, plan, deadline, options)


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
    options = Options(ordering, backend, dtype, max_bytes, resident, progress)
    options.ordering = choose_order(problem, ordering, order_time)  # chosen here, not per step
    step = Step(algo, z, 0, 0.0)
    result = _run_step(problem, step, deadline, options)
    if result is None:
        raise RunTimeout(step.message or "out of time")
    return result


def _anytime(problem: Problem, plan: MemoryPlan, deadline: float, options: Options) -> SolveResult:
    limit = effective_limit(options.max_bytes)
    start_z = max((len(t.scope) for t in problem.tables), default=1)
    ladder = [p for p in z_ladder(plan, max(2, start_z)) if p.fits(limit.bytes)]
    if not ladder:
        fitting = largest_fitting_z(plan, limit.bytes, suggestion_bound(plan))
        raise TableTooLarge(refusal(plan, limit, fitting))
    rate = Rate()
    best: SolveResult | None = None
    lower = -math.inf
    stopped: str | None = None
    k = 0
    while k < len(ladder):
        step_plan = ladder[k]
        if best is not None and ladder[-1].z is None and ladder[-1] is not step_plan:
            be_s = rate.predict(ladder[-1])
            if be_s * SAFETY <= deadline - time.monotonic():
                step_plan, k = ladder[-1], len(ladder) - 1  # BE fits the time left: go there
        step = Step(
            "be" if step_plan.z is None else "mbe",
            step_plan.z,
            step_plan.total_work,
            rate.predict(step_plan),
        )
        options.steps.append(step)
        left = deadline - time.monotonic()
        if best is not None and step.predicted_s * SAFETY > left:
            step.status = "skipped"
            step.message = (
                f"predicted {step.predicted_s:.3g} s, too long for the {max(left, 0):.3g} s left"
            )
            _tell(options, "skip", step)
            break
        _tell(options, "start", step)
        result = _run_step(problem, step, deadline, options)
        _tell(options, "done", step)
        if result is None:
            if step.status == "timeout":
                stopped = step.message
                break
            k += 1
            continue
        rate.learn(step_plan, result.times.get("eliminate", step.seconds or 0.0))
        lower = max(lower, result.lower_bound)
        if best is None or result.upper_bound <= best.upper_bound:  # later steps win ties
            best = result
        if lower >= best.upper_bound or math.isinf(lower):
            break  # proved: the bounds meet (or nothing is feasible)
        k += 1
    if best is None:
        raise RunTimeout(stopped or "no step of --algo auto finished in time")
    best.lower_bound = min(lower, best.upper_bound) if not math.isinf(lower) else lower
    if math.isinf(lower) and lower > 0:
        best.upper_bound = lower
    best.steps = options.steps
    best.stopped = stopped
    return best


def _tell(options: Options, event: str, step: Step) -> None:
    if options.on_step is not None:
        options.on_step(event, step)


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
