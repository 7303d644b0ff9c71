"""Entry points of centralized inference: BE (exact), MBE(z) (bounds), MPE (BE in -ln p space)."""

from __future__ import annotations

import math
import os
import time
from typing import Any

import numpy as np

from dcop.backend import get_backend
from dcop.errors import ModelError, TableTooLarge
from dcop.inference.elimination import ProgressFn, eliminate
from dcop.inference.result import SolveResult
from dcop.model import Problem
from dcop.ordering import elimination_order, induced_width, largest_table
from dcop.tables import choose_dtype

ALGOS = ("be", "mbe")


def default_max_bytes() -> float:
    """A safe share of this machine's RAM for one bucket table: half of what is available."""
    try:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        available = 8 * 2**30
    return float(available) * 0.5


def solve(
    problem: Problem,
    algo: str = "be",
    z: int | None = None,
    ordering: str = "minfill",
    backend: str | Any = "numpy",
    dtype: str = "auto",
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
) -> SolveResult:
    """Solve ``problem`` with BE (``algo="be"``) or MBE(z) (``algo="mbe"``).

    ``backend`` is a name for :func:`dcop.backend.get_backend` or a backend object. ``max_bytes``
    caps the size of one bucket output table (default: half the available RAM).
    """
    if algo not in ALGOS:
        raise ModelError(f"unknown algorithm {algo!r}; use one of {', '.join(ALGOS)}")
    if algo == "mbe":
        if z is None or z < 1:
            raise ModelError("MBE needs a mini-bucket size z >= 1 (--z)")
    else:
        z = None
    engine = get_backend(backend) if isinstance(backend, str) else backend
    times: dict[str, float] = {}

    t0 = time.perf_counter()
    adjacency = problem.neighbours()
    order = elimination_order(ordering, adjacency)
    width = induced_width(adjacency, order)
    biggest = largest_table(adjacency, order, problem.domain_sizes())
    times["ordering"] = time.perf_counter() - t0

    chosen = choose_dtype(problem, dtype)
    limit = default_max_bytes() if max_bytes is None else max_bytes
    try:
        assignment, stats = eliminate(
            problem, order, engine, z=z, dtype=chosen, max_bytes=limit, progress=progress
        )
    except getattr(engine, "out_of_memory_errors", ()) as exc:
        # the device ran out before the table limit did (other tables held at the same time)
        raise TableTooLarge(f"{engine.name}: out of device memory ({exc})") from None
    times["eliminate"] = stats.seconds_eliminate
    times["assign"] = stats.seconds_assign

    t0 = time.perf_counter()
    upper = problem.evaluate(assignment)
    lower = stats.bound
    if problem.upper_bound is not None and lower >= problem.upper_bound:
        lower = math.inf
    times["evaluate"] = time.perf_counter() - t0
    times["total"] = sum(times.values())
    return SolveResult(
        problem=problem,
        algo=algo,
        assignment=assignment,
        lower_bound=lower,
        upper_bound=upper,
        z=z,
        ordering=ordering,
        induced_width=width,
        largest_table=biggest if z is None else stats.largest_joined,
        backend=engine.name,
        dtype=np.dtype(chosen).name,
        times=times,
    )


def solve_be(problem: Problem, **kwargs: Any) -> SolveResult:
    """Exact Bucket Elimination: optimum and an optimal assignment."""
    return solve(problem, "be", **kwargs)


def solve_mbe(problem: Problem, z: int, **kwargs: Any) -> SolveResult:
    """Mini-Bucket Elimination: a lower bound and the upper bound of its decoded assignment."""
    return solve(problem, "mbe", z=z, **kwargs)
