"""The result of a centralized solve; it writes the shared result document (:mod:`dcop.results.document`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dcop.model import Problem
from dcop.results.document import Status, problem_size, result_document, status_of


@dataclass
class SolveResult:
    """What BE/MBE found. Costs are internal (minimised) costs; ``to_json`` gives the file's sense.

    ``lower_bound`` is the eliminated bound (the optimum for BE); ``upper_bound`` is the true cost of
    ``assignment`` recomputed on the Problem.
    """

    problem: Problem
    algo: str
    assignment: dict[str, int]
    lower_bound: float
    upper_bound: float
    z: int | None
    ordering: str
    induced_width: int
    largest_table: int
    backend: str
    dtype: str
    times: dict[str, float] = field(default_factory=dict)
    file: str | None = None
    #: the planned peak memory of the run in bytes (:mod:`dcop.plan.memory`)
    memory_peak: int | None = None
    #: ``--algo auto`` with a deadline: every step (:class:`dcop.inference.anytime.Step`)
    steps: list[Any] | None = None
    #: why an anytime run stopped at its deadline (status ``timeout``, bounds kept); None if not
    stopped: str | None = None
    #: ``--algo aobb``: the search's statistics (:class:`dcop.search.solver.SearchStats`)
    search: Any = None
    #: ``--algo auto``: which solver ran and why
    choice: str | None = None
    #: ``--algo planar``: its faces and T-join (:class:`dcop.planar.solver.PlanarStats`)
    planar: Any = None

    @property
    def exact(self) -> bool:
        """BE proves the optimum; MBE gives bounds, which prove it too when they meet."""
        return self.algo == "be" or (  # aobb: lower = upper on a proof
            self.stopped is None
            and math.isfinite(self.upper_bound)
            and self.lower_bound >= self.upper_bound
        )

    @property
    def cost(self) -> float:
        """The value of the returned assignment in the file's own sense, as the result document
        says it (maximised utilities with their sign, log10 of the probability for MPE)."""
        from dcop.results import file_value

        return file_value(self.problem, self.upper_bound)

    @property
    def internal_cost(self) -> float:
        """The minimised (internal) cost of the returned assignment: ``upper_bound``."""
        return self.upper_bound

    @property
    def status(self) -> Status:
        """``ok``, ``infeasible`` (proved), ``timeout`` (an anytime run stopped at its deadline,
        bounds kept), or ``error`` if BE's optimum and its cost disagree."""
        return self._status()[0]

    def _status(self) -> tuple[Status, str | None]:
        if self.stopped is not None:  # a signal, or the deadline; the bounds are kept
            return ("interrupted" if self.stopped.startswith("interrupted") else "timeout"), (
                self.stopped
            )
        return status_of(self.lower_bound, self.exact, self.upper_bound)

    def to_json(self) -> dict[str, Any]:
        """The result document (see :mod:`dcop.results.document`)."""
        p = self.problem
        status, message = self._status()
        return result_document(
            problem=p,
            status=status,
            message=message,
            algo=self.algo,
            exact=self.exact,
            z=self.z,
            task="mpe" if p.cost_kind == "neg_ln" else "min",
            assignment=self.assignment,
            lower=self.lower_bound,
            upper=self.upper_bound,
            file=self.file,
            times=self.times,
            details={
                "solver": {
                    "ordering": self.ordering,
                    "induced_width": self.induced_width,
                    "largest_table": self.largest_table,
                    "backend": self.backend,
                    "dtype": self.dtype,
                    "memory_peak_bytes": self.memory_peak,
                },
                "size": problem_size(p),
            }
            | ({"anytime": [s.to_json(p) for s in self.steps]} if self.steps is not None else {})
            | ({"search": self.search.to_json(p)} if self.search is not None else {})
            | ({"choice": self.choice} if self.choice is not None else {})
            | ({"planar": self.planar.to_json()} if self.planar is not None else {}),
        )
