"""The result of a centralized solve, and its JSON form."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from dcop.model import LN10, Problem


def json_number(x: float) -> float | str:
    """JSON has no infinity: write it as the string "inf" / "-inf"."""
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


@dataclass
class SolveResult:
    """What BE/MBE found. Costs are internal (minimised) costs; see ``to_json`` for the file's sense.

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

    @property
    def exact(self) -> bool:
        return self.algo == "be"

    @property
    def cost(self) -> float:
        """Internal cost of the returned assignment."""
        return self.upper_bound

    def to_json(self) -> dict[str, Any]:
        p = self.problem
        out: dict[str, Any] = {
            "problem": p.name,
            "algo": self.algo,
            "z": self.z,
            "objective": "max" if p.sign < 0 else "min",
            "cost_kind": p.cost_kind,
            # the file's own sense: the value of the returned assignment, and the proven bound
            "value": json_number(p.reported(self.upper_bound)),
            "bound": json_number(p.reported(self.lower_bound)),
            "optimal": self.exact,
            "lower_bound": json_number(self.lower_bound),
            "upper_bound": json_number(self.upper_bound),
            "gap": json_number(self.upper_bound - self.lower_bound)
            if math.isfinite(self.upper_bound) and math.isfinite(self.lower_bound)
            else None,
            "assignment": dict(self.assignment),
            "labels": {k: _plain(v) for k, v in p.labels(self.assignment).items()},
            "n_variables": p.n,
            "max_domain": p.max_domain(),
            "n_tables": len(p.tables),
            "ordering": self.ordering,
            "induced_width": self.induced_width,
            "largest_table": self.largest_table,
            "backend": self.backend,
            "dtype": self.dtype,
            "times": {k: round(v, 6) for k, v in self.times.items()},
        }
        if p.cost_kind == "neg_ln":
            out["log10_probability"] = json_number(-self.upper_bound / LN10)
            out["log10_bound"] = json_number(-self.lower_bound / LN10)
        return out


def _plain(value: object) -> object:
    """Labels as JSON-friendly scalars."""
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)
