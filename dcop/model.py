"""The problem model: variables with finite domains, cost tables over scopes, and the Problem.

Everything is a minimisation of a sum of costs. Other objectives are mapped onto that at the
edges (readers) and mapped back when a result is reported:

* ``maximize`` DCOPs (pyDCOP ``objective: max``, FRODO ``maximize="true"``) are negated on read;
  ``Problem.sign`` is -1 so that ``reported = sign * cost``.
* MPE on Bayesian/Markov networks uses costs ``-ln p`` (natural log, ``cost_kind="neg_ln"``);
  a probability of 0 becomes ``+inf``. ``log10 p = -cost / ln 10``.

A table is a scope (tuple of variable names) and a C-order array whose axes follow the scope,
last variable fastest: exactly the paper's cost vector. ``+inf`` marks an infeasible tuple.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from dcop.errors import ModelError

CostKind = Literal["cost", "neg_ln"]
FloatArray = npt.NDArray[np.float64]

LN10 = math.log(10.0)


@dataclass(frozen=True)
class Variable:
    """A variable with a finite domain; ``values`` are the labels, indices 0..size-1 are used inside."""

    name: str
    values: tuple[object, ...]
    agent: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ModelError("a variable needs a non-empty name")
        if len(self.values) == 0:
            raise ModelError(f"variable {self.name!r} has an empty domain")

    @property
    def size(self) -> int:
        return len(self.values)

    @staticmethod
    def with_size(name: str, size: int, agent: str | None = None) -> Variable:
        """A variable whose labels are 0..size-1."""
        return Variable(name, tuple(range(size)), agent)


@dataclass(frozen=True, eq=False)
class CostTable:
    """Costs over ``scope``: ``costs.shape == tuple(domain sizes of scope)``, C order."""

    scope: tuple[str, ...]
    costs: FloatArray
    name: str = ""

    def __post_init__(self) -> None:
        if len(set(self.scope)) != len(self.scope):
            raise ModelError(f"table {self.name or self.scope!r} repeats a variable in its scope")
        if self.costs.ndim != len(self.scope):
            raise ModelError(
                f"table {self.name or self.scope!r}: {self.costs.ndim} axes for a scope of "
                f"{len(self.scope)} variables"
            )

    @property
    def arity(self) -> int:
        return len(self.scope)

    def cost_of(self, assignment: Mapping[str, int]) -> float:
        """The cost of this table's tuple under a full assignment (value indices)."""
        index = tuple(assignment[v] for v in self.scope)
        return float(self.costs[index])


@dataclass
class Problem:
    """Variables plus cost tables, to be minimised.

    ``constant`` is added to every assignment (arity-0 tables end up there). ``sign`` maps the
    internal minimisation back to the file's objective; ``cost_kind`` says whether costs are plain
    costs or ``-ln p``. ``upper_bound`` is a WCSP ``top``: costs at or above it are infeasible.
    """

    variables: dict[str, Variable]
    tables: list[CostTable]
    name: str = "problem"
    constant: float = 0.0
    sign: int = 1
    cost_kind: CostKind = "cost"
    upper_bound: float | None = None
    meta: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.validate()

    # ---- structure -------------------------------------------------------------------------
    def validate(self, allow_negative: bool = True) -> None:
        """Raise ModelError on unknown variables, shape mismatches or NaN costs."""
        if self.sign not in (1, -1):
            raise ModelError(f"sign must be +1 or -1, not {self.sign}")
        if math.isnan(self.constant):
            raise ModelError("the constant cost is NaN")
        for table in self.tables:
            label = table.name or "(" + ",".join(table.scope) + ")"
            for v in table.scope:
                if v not in self.variables:
                    raise ModelError(f"table {label} uses unknown variable {v!r}")
            expected = tuple(self.variables[v].size for v in table.scope)
            if table.costs.shape != expected:
                raise ModelError(
                    f"table {label} has shape {table.costs.shape}, domains give {expected}"
                )
            if table.costs.size and np.isnan(table.costs).any():
                raise ModelError(f"table {label} contains NaN costs")
            if not allow_negative and table.costs.size and (table.costs < 0).any():
                raise ModelError(f"table {label} contains negative costs")

    @property
    def n(self) -> int:
        return len(self.variables)

    def domain_sizes(self) -> dict[str, int]:
        return {name: var.size for name, var in self.variables.items()}

    def max_domain(self) -> int:
        return max((v.size for v in self.variables.values()), default=0)

    def neighbours(self) -> dict[str, set[str]]:
        """The primal graph: two variables are neighbours when a table holds both."""
        adjacency: dict[str, set[str]] = {name: set() for name in self.variables}
        for table in self.tables:
            for a in table.scope:
                for b in table.scope:
                    if a != b:
                        adjacency[a].add(b)
        return adjacency

    def tables_of(self, variable: str) -> list[CostTable]:
        return [t for t in self.tables if variable in t.scope]

    # ---- evaluation ------------------------------------------------------------------------
    def evaluate(self, assignment: Mapping[str, int]) -> float:
        """Internal (minimised) cost of a full assignment of value indices; +inf if infeasible."""
        missing = [v for v in self.variables if v not in assignment]
        if missing:
            raise ModelError(f"assignment misses variables {missing[:5]}")
        for name, value in assignment.items():
            var = self.variables.get(name)
            if var is None:
                raise ModelError(f"assignment names unknown variable {name!r}")
            if not 0 <= int(value) < var.size:
                raise ModelError(f"value index {value} out of range for {name!r}")
        total = self.constant
        for table in self.tables:
            total += table.cost_of(assignment)
        if self.upper_bound is not None and total >= self.upper_bound:
            return math.inf
        return total

    def reported(self, cost: float) -> float:
        """Map an internal cost back to the file's objective (maximisation sign)."""
        return self.sign * cost

    def labels(self, assignment: Mapping[str, int]) -> dict[str, object]:
        """Value labels of an assignment of indices."""
        return {name: self.variables[name].values[int(i)] for name, i in assignment.items()}

    def log10_probability(self, cost: float) -> float:
        """For ``neg_ln`` problems: log10 of the (unnormalised) probability of that cost."""
        if self.cost_kind != "neg_ln":
            raise ModelError("log10 probability only exists for MPE problems")
        return -cost / LN10

    # ---- builders --------------------------------------------------------------------------
    @staticmethod
    def build(
        variables: Iterable[Variable],
        tables: Sequence[CostTable],
        **kwargs: object,
    ) -> Problem:
        """Make a Problem from a variable list (names must be unique)."""
        by_name: dict[str, Variable] = {}
        for var in variables:
            if var.name in by_name:
                raise ModelError(f"variable {var.name!r} is declared twice")
            by_name[var.name] = var
        return Problem(by_name, list(tables), **kwargs)  # type: ignore[arg-type]

    def restricted_to(self, names: Iterable[str]) -> Problem:
        """The sub-problem of the tables whose scopes lie within ``names`` (constant dropped)."""
        keep = set(names)
        return Problem(
            {n: v for n, v in self.variables.items() if n in keep},
            [t for t in self.tables if set(t.scope) <= keep],
            name=self.name,
            sign=self.sign,
            cost_kind=self.cost_kind,
        )
