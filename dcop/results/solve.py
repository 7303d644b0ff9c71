"""The result of a centralized solve; it writes the shared result document (:mod:`dcop.results.document`)."""

from __future__ import annotations

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
    #: the planned peak memory of the run in bytes (:mod:`dcop.inference.memory`)
    memory_peak: int | None = None

    @property
    def exact(self) -> bool:
        """BE proves the optimum; MBE gives bounds."""
        return self.algo == "be"

    @property
    def cost(self) -> float:
        """Internal cost of the returned assignment."""
        return self.upper_bound

    @property
    def status(self) -> Status:
        """``ok``, ``infeasible`` (proved), or ``error`` if BE's optimum and its cost disagree."""
        return status_of(self.lower_bound, self.exact, self.upper_bound)[0]

    def to_json(self) -> dict[str, Any]:
        """The result document (see :mod:`dcop.results.document`)."""
        p = self.problem
        status, message = status_of(self.lower_bound, self.exact, self.upper_bound)
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
            },
        )
