"""The solvers the commands run, by name: one name, one function, one place.

As opt_einsum keeps its contraction-path options in one table (a name, the function that finds
that path), :data:`CENTRAL` and :data:`DISTRIBUTED` map each algorithm name of the command line
(:class:`dcop.choices.CentralAlgo`, :class:`dcop.choices.DistributedAlgo`) to a :class:`Solver`:
the function that runs it on a problem, whether it needs a mini-bucket size, whether it stops
by itself at a deadline with its bounds (anytime), and the tasks it computes. ``dcop solve`` and
``dcop batch`` look an algorithm up here instead of branching on its name; a new algorithm is a
new row.

Importing this module loads no solver: each function imports its own when it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from dcop import choices
from dcop.choices import RUN_TASKS, CentralAlgo, DistributedAlgo

if TYPE_CHECKING:
    from dcop.inference.anytime import BoundsFn
    from dcop.inference.elimination import ProgressFn
    from dcop.model import Problem
    from dcop.orders.choose import ChosenOrder
    from dcop.results.run import RunResult
    from dcop.results.solve import SolveResult

R = TypeVar("R")

#: How an algorithm takes ``--z``: ``required`` (mini-buckets of that size), ``optional`` (its
#: own choice without one), ``ignored`` (a warning says so).
ZUse = Literal["required", "optional", "ignored"]


@dataclass(frozen=True)
class Request:
    """How to solve, for any solver of the tables (each reads the fields it takes).

    ``deadline`` is a :func:`time.monotonic` instant (None: no time limit); ``backend`` a name
    for :func:`dcop.backends.get_backend` or a backend; ``timeout`` and ``on_answer`` are a
    distributed run's (its seconds, and who hears of its answer while its agents exit);
    ``threads`` the search's (None: the usable cores, at most 8).
    """

    z: int | None = None
    deadline: float | None = None
    ordering: str | ChosenOrder = "auto"
    order_time: float | None = None
    backend: str | Any = "numpy"
    dtype: str = "auto"
    max_bytes: float | None = None
    progress: ProgressFn | None = None
    on_bounds: BoundsFn | None = None
    timeout: float = 120.0
    on_answer: Callable[[RunResult], None] | None = None
    threads: int | None = None


@dataclass(frozen=True)
class Solver(Generic[R]):
    """One algorithm: its name, how it takes ``--z``, whether it is anytime (it stops at the
    request's deadline with its best assignment and bounds), the tasks it computes
    (:data:`dcop.choices.RUN_TASKS`), the function that runs it, and whether it searches on
    ``--threads``."""

    name: str
    z: ZUse
    anytime: bool
    tasks: tuple[str, ...]
    run: Callable[[Problem, Request], R]
    threads: bool = False


def _eliminate(algo: str) -> Callable[[Problem, Request], SolveResult]:
    """BE or MBE(z): in this process, or with a deadline in a child stopped at it."""

    def run(problem: Problem, request: Request) -> SolveResult:
        if request.deadline is None:
            from dcop.inference import solve

            return solve(
                problem,
                algo=algo,
                z=request.z,
                ordering=request.ordering,
                backend=request.backend,
                dtype=request.dtype,
                max_bytes=request.max_bytes,
                progress=request.progress,
                order_time=request.order_time,
            )
        from dcop.inference.anytime import solve_until
        from dcop.inference.solve import check_fits
        from dcop.orders.choose import choose_order

        # a plan over the memory limit is refused here, as without a deadline (the child's
        # refusal would come back as a step without a result: a timeout)
        ordering = choose_order(problem, request.ordering, request.order_time)
        check_fits(
            problem, algo, request.z, ordering, request.backend, request.dtype, request.max_bytes
        )
        return solve_until(
            problem,
            algo,
            request.z,
            request.deadline,
            ordering=ordering,
            backend=request.backend,
            dtype=request.dtype,
            max_bytes=request.max_bytes,
            progress=request.progress,
            order_time=request.order_time,
        )

    return run


def _auto(problem: Problem, request: Request) -> SolveResult:
    """BE where it fits and is quick, else the search (:mod:`dcop.inference.anytime`)."""
    from dcop.inference.anytime import solve_auto

    return solve_auto(
        problem,
        deadline=request.deadline,
        ordering=request.ordering,
        backend=request.backend,
        dtype=request.dtype,
        max_bytes=request.max_bytes,
        progress=request.progress,
        on_bounds=request.on_bounds,
        order_time=request.order_time,
        threads=request.threads,
    )


def _aobb(problem: Problem, request: Request) -> SolveResult:
    """AND/OR branch and bound guided by MBE(z); numba loads only for a search. It runs in
    float64 (its bound must stay exact): it takes no dtype."""
    from dcop.search import solve_aobb

    return solve_aobb(
        problem,
        z=request.z,
        ordering=request.ordering,
        backend=request.backend,
        max_bytes=request.max_bytes,
        deadline=request.deadline,
        order_time=request.order_time,
        on_bounds=request.on_bounds,
        threads=request.threads,
    )


def _dfbnb(problem: Problem, request: Request) -> SolveResult:
    """Depth-first branch and bound under soft arc consistency (:mod:`dcop.search.dfbnb`); in
    float64 integers of its own: it takes no dtype, no order, no backend."""
    from dcop.search.dfbnb import solve_dfbnb

    return solve_dfbnb(
        problem,
        deadline=request.deadline,
        max_bytes=request.max_bytes,
        on_bounds=request.on_bounds,
    )


def _planar(problem: Problem, request: Request) -> SolveResult:
    """The exact ground state of a planar Ising model without field (:mod:`dcop.planar`):
    polynomial, no order, no backend, no dtype (float64); a one-line refusal elsewhere. With a
    deadline it stops there with a spanning tree's assignment and bounds (status timeout)."""
    from dcop.planar import solve_planar

    return solve_planar(problem, deadline=request.deadline)


def _agents(algo: str) -> Callable[[Problem, Request], RunResult]:
    """One agent process per variable on this machine (:func:`dcop.coordinator.run_local`)."""

    def run(problem: Problem, request: Request) -> RunResult:
        from dcop.coordinator import run_local
        from dcop.protocol import RunSpec

        spec = RunSpec.from_options(algo, request.z)
        return run_local(problem, spec, timeout=request.timeout, on_answer=request.on_answer)

    return run


#: The centralized solvers (``dcop solve``, ``dcop batch``), by name.
CENTRAL: dict[str, Solver[SolveResult]] = {
    s.name: s
    for s in (
        Solver(CentralAlgo.be.value, "ignored", False, RUN_TASKS, _eliminate("be")),
        Solver(CentralAlgo.mbe.value, "required", False, ("min", "pr"), _eliminate("mbe")),
        Solver(CentralAlgo.aobb.value, "optional", True, ("min",), _aobb, threads=True),
        Solver(CentralAlgo.dfbnb.value, "ignored", True, ("min",), _dfbnb),
        Solver(CentralAlgo.planar.value, "ignored", True, ("min",), _planar),
        Solver(CentralAlgo.auto.value, "ignored", True, ("min",), _auto, threads=True),
    )
}
#: The distributed solvers (``dcop run``; ``dcop batch`` rows of those not also central), by
#: name.
DISTRIBUTED: dict[str, Solver[RunResult]] = {
    s.name: s
    for s in (
        Solver(DistributedAlgo.dpop.value, "ignored", False, RUN_TASKS, _agents("dpop")),
        Solver(DistributedAlgo.adpop.value, "required", False, ("min",), _agents("adpop")),
        Solver(DistributedAlgo.mbdpop.value, "ignored", False, ("min",), _agents("mbdpop")),
        Solver(DistributedAlgo.auto.value, "ignored", False, ("min",), _agents("auto")),
    )
}
#: ``dcop batch``'s algorithms: the centralized ones, then the distributed ones (``auto`` is the
#: centralized anytime solve there).
BATCH: tuple[str, ...] = (*CENTRAL, *(name for name in DISTRIBUTED if name not in CENTRAL))


def needs_z(name: str) -> bool:
    """Whether algorithm ``name`` (of either table) needs a mini-bucket size."""
    solver = CENTRAL.get(name) or DISTRIBUTED.get(name)
    return solver is not None and solver.z == "required"


def check_z(algo: str, z: int | None) -> int | None:
    """The mini-bucket size the run uses: required by the algorithms that need one (mbe,
    adpop: :func:`needs_z`; a usage error without it), ignored with a warning on stderr by the
    others (be, dpop; auto picks its own)."""
    if needs_z(algo):
        return choices.check_z(z, f"--algo {algo}")  # the one rule of a mini-bucket size
    if z is not None:
        print(f"dcop: warning: --z {z} is ignored by --algo {algo}", file=sys.stderr)
    return None


def check_threads(algos: Sequence[str], threads: int | None) -> None:
    """A warning on stderr where ``--threads`` is given and none of ``algos`` searches on
    threads (be, mbe, dfbnb and the distributed ones ignore it)."""
    if threads is not None and not any(
        name in CENTRAL and CENTRAL[name].threads for name in algos
    ):  # fmt: skip
        print(f"dcop: warning: --threads {threads} is ignored by --algo {','.join(algos)}",
              file=sys.stderr)  # fmt: skip


def only_distributed(name: str) -> bool:
    """Whether ``name`` is an algorithm of ``dcop run`` that ``dcop solve`` does not have."""
    return name in DISTRIBUTED and name not in CENTRAL
