"""Entry points of centralized inference: BE (exact), MBE(z) (bounds), MPE (BE in -ln p space)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from dcop.backends import backend_name, resolve_backend
from dcop.backends.base import Compiles, capable
from dcop.choices import CentralAlgo, check_z
from dcop.errors import ModelError, TableTooLarge
from dcop.inference.elimination import ProgressFn, eliminate
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.orders.cost import backend_seconds_per_entry
from dcop.orders.engine import CostModel
from dcop.orders.greedy import induced_width, largest_table
from dcop.plan.bucket_plan import largest_fitting_z, plan_for, refusal, suggestion_bound
from dcop.plan.memory import default_limit, effective_limit
from dcop.results.solve import SolveResult
from dcop.tables import choose_dtype

#: What :func:`solve` runs: every centralized algorithm but ``auto`` (:mod:`.anytime`'s).
ALGOS: tuple[str, ...] = tuple(a.value for a in CentralAlgo if a is not CentralAlgo.auto)


def default_max_bytes() -> float:
    """The default memory limit of a run: what the process holds now plus half the memory still
    available to it (see :func:`dcop.plan.memory.default_limit`)."""
    return float(default_limit())


def _fitting_plan(
    problem: Problem,
    order: Sequence[str],
    z: int | None,
    dtype: Any,
    engine: Any,
    max_bytes: float | None,
    resident: int | None,
) -> tuple[Any, Any]:
    """The run's memory plan and limit; TableTooLarge (naming the largest z that fits) when the
    planned peak exceeds the limit. BE keeps its messages for the value phase when that fits,
    else argbest tables when those fit (:meth:`~dcop.plan.bucket_plan.MemoryPlan.within`)."""
    limit = effective_limit(max_bytes)
    plan = plan_for(problem, order, z, dtype, engine, resident=resident)
    if not plan.fits(limit.bytes):
        fitting = largest_fitting_z(plan, limit.bytes, suggestion_bound(plan))
        raise TableTooLarge(refusal(plan, limit, fitting))
    return plan.within(limit.bytes), limit


def check_fits(
    problem: Problem,
    algo: str,
    z: int | None,
    ordering: ChosenOrder,
    backend: str | Any = "numpy",
    dtype: str = "auto",
    max_bytes: float | None = None,
    resident: int | None = None,
) -> None:
    """Raise the TableTooLarge that :func:`solve` with these arguments would raise before any
    table is built: a caller that runs the solve elsewhere (a child process killed at a
    deadline) refuses a plan over the memory limit here, as ``too_large``, not as a timeout."""
    engine = resolve_backend(backend)
    chosen = choose_dtype(problem, dtype)
    _fitting_plan(
        problem, ordering.order, z if algo == "mbe" else None, chosen, engine, max_bytes, resident
    )


def solve(
    problem: Problem,
    algo: str = "be",
    z: int | None = None,
    ordering: str | ChosenOrder = "auto",
    backend: str | Any = "numpy",
    dtype: str = "auto",
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
    resident: int | None = None,
    order_time: float | None = None,
) -> SolveResult:
    """Solve ``problem`` with BE (``algo="be"``), MBE(z) (``algo="mbe"``) or the exact AND/OR
    search guided by MBE(z) (``algo="aobb"``, :func:`dcop.search.solve_aobb`; ``z`` optional),
    or the depth-first search under soft arc consistency (``algo="dfbnb"``,
    :func:`dcop.search.dfbnb.solve_dfbnb`), or the exact solver of planar Ising models without
    field (``algo="planar"``, :func:`dcop.planar.solve_planar`; it refuses other problems).

    ``backend`` is a name for :func:`dcop.backends.get_backend`, a backend object, or one still
    starting (:class:`dcop.starting.StartingBackend`, taken after the ordering).
    ``ordering`` is ``auto`` (the ordering engine, searching ``order_time`` seconds; None: its
    default budget, a tenth of the predicted solve time), a name of
    :data:`dcop.orders.greedy.ORDERINGS`, or an order or ``.td`` file
    (:func:`dcop.orders.choose.choose_order`).

    ``max_bytes`` caps the memory of the whole run (default: what the process holds plus half
    the available memory; never more than the process can have). Before any table is built, the
    run's :func:`~dcop.plan.bucket_plan.plan_memory` peak (``resident`` bytes already held, by
    default this process's resident memory, plus the tables the run makes) is checked against
    it: a run that would not fit raises :class:`~dcop.errors.TableTooLarge` naming the bucket
    that makes the peak and the largest MBE z that fits, or saying that nothing does. An
    allocation that fails anyway (MemoryError, the backend's out-of-memory errors) raises the
    same error.
    """
    if algo not in ALGOS:
        raise ModelError(f"unknown algorithm {algo!r}; use one of {', '.join(ALGOS)}")
    if algo == "aobb":  # exact search: its own heuristic size (z None: the largest that fits)
        from dcop.search import solve_aobb

        if z is not None:
            check_z(z, "AOBB", error=ModelError)
        return solve_aobb(
            problem,
            z=z,
            ordering=ordering,
            backend=backend,
            max_bytes=max_bytes,
            resident=resident,
            order_time=order_time,
        )
    if algo == "dfbnb":  # exact search under soft arc consistency: no order, no heuristic size
        from dcop.search.dfbnb import solve_dfbnb

        return solve_dfbnb(problem, max_bytes=max_bytes)
    if algo == "planar":  # a planar Ising model without field: a minimum T-join of the dual
        from dcop.planar import solve_planar

        return solve_planar(problem)
    if algo == "mbe":
        z = check_z(z, "MBE", error=ModelError)
    else:
        z = None
    times: dict[str, float] = {}

    t0 = time.perf_counter()
    # the engine's default budget is a share of the solve predicted at the backend's speed (a
    # GPU's BE at the CPU's had spent 0.6 s ordering a 24x24 spin glass for 0.3 s of elimination)
    speed = CostModel(seconds_per_entry=backend_seconds_per_entry(backend_name(backend)))
    chosen_order = choose_order(problem, ordering, order_time, speed)
    order = chosen_order.order
    found = chosen_order.engine
    if found is not None and found.largest_table_entries < 2**53:
        # the engine walked its order with these sizes already (two walks less: 3 ms of an
        # 18x18 spin glass's ordering)
        width, biggest = found.width, int(found.largest_table_entries)
    else:
        adjacency = problem.neighbours()
        width = induced_width(adjacency, order)
        biggest = largest_table(adjacency, order, problem.domain_sizes())
    times["ordering"] = time.perf_counter() - t0

    # the backend once the order is known: a device started on its own thread
    # (dcop.starting) has had the reading and the ordering to get ready
    t0 = time.perf_counter()
    engine = resolve_backend(backend)
    times["backend"] = time.perf_counter() - t0
    out_of_memory: tuple[type[BaseException], ...] = (MemoryError, *engine.out_of_memory_errors)
    compiled_before = _compile_seconds(engine)
    t0 = time.perf_counter()
    chosen = choose_dtype(problem, dtype)
    plan, limit = _fitting_plan(problem, order, z, chosen, engine, max_bytes, resident)
    times["plan"] = time.perf_counter() - t0
    try:
        assignment, stats = eliminate(
            problem,
            order,
            engine,
            z=z,
            dtype=chosen,
            max_bytes=limit.bytes,
            progress=progress,
            plan=plan,
        )
    except out_of_memory as exc:
        # the plan fitted, yet an allocation failed (other processes took the memory meanwhile)
        raise TableTooLarge(
            f"{engine.name}: out of memory although the plan fitted ({exc})"
        ) from None
    times["eliminate"] = stats.seconds_eliminate
    times["assign"] = stats.seconds_assign

    t0 = time.perf_counter()
    upper = problem.evaluate(assignment)
    lower = stats.bound
    if problem.upper_bound is not None and lower >= problem.upper_bound:
        lower = math.inf
    times["evaluate"] = time.perf_counter() - t0
    times["total"] = sum(times.values())
    if capable(engine, Compiles):  # inside "eliminate": the kernels compiled (or loaded) there
        times["kernel_compile"] = _compile_seconds(engine) - compiled_before
    return SolveResult(
        problem=problem,
        algo=algo,
        assignment=assignment,
        lower_bound=lower,
        upper_bound=upper,
        z=z,
        ordering=chosen_order.name,
        induced_width=width,
        largest_table=biggest if z is None else stats.largest_joined,
        backend=engine.name,
        dtype=np.dtype(chosen).name,
        times=times,
        memory_peak=plan.peak_bytes,
    )


def _compile_seconds(engine: Any) -> float:
    """Seconds a backend that compiles kernels has spent compiling (or loading) them so far."""
    if not capable(engine, Compiles):
        return 0.0
    return float(engine.setup.as_dict().get("kernels_s", 0.0))


def solve_be(problem: Problem, **kwargs: Any) -> SolveResult:
    """Exact Bucket Elimination: optimum and an optimal assignment."""
    return solve(problem, "be", **kwargs)


def solve_mbe(problem: Problem, z: int, **kwargs: Any) -> SolveResult:
    """Mini-Bucket Elimination: a lower bound and the upper bound of its decoded assignment."""
    return solve(problem, "mbe", z=z, **kwargs)
