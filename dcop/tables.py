"""Cost tables as every backend holds them: :class:`Table` (a scope and an n-d array whose axes
follow the scope, last variable fastest: C order), the elimination ops, the one check of a
join+eliminate's inputs, and the dtype a problem's tables take.

The backends that operate on tables (NumPy, CuPy, placed) and the contract they keep are in
:mod:`dcop.backends`; algorithms obtain one from :func:`dcop.backends.get_backend` and never import
an array library.

Elimination ops (over the eliminated variable's axis):

* ``min``  min-sum (WCSP optimum, MPE in ``-ln p`` space)
* ``max``  max-sum
* ``sum``  plain sum
* ``logsumexp``  ``log(sum(exp(c)))`` (sum-product in log space: negate in and out for ``-ln p``)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dcop.errors import ModelError
from dcop.model import Problem

Op = Literal["min", "max", "sum", "logsumexp"]
OPS: tuple[str, ...] = ("min", "max", "sum", "logsumexp")


@dataclass(frozen=True, eq=False)
class Table:
    """A scope and an array (NumPy or CuPy) with one axis per scope variable."""

    scope: tuple[str, ...]
    data: Any

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.data.shape)

    @property
    def size(self) -> int:
        return int(math.prod(self.shape))

    def sizes(self) -> dict[str, int]:
        return dict(zip(self.scope, self.shape, strict=True))


def union_scope(scopes: Iterable[Sequence[str]]) -> tuple[str, ...]:
    """Variables of all scopes, in order of first appearance."""
    seen: dict[str, None] = {}
    for scope in scopes:
        for v in scope:
            seen.setdefault(v, None)
    return tuple(seen)


def domain_sizes(tables: Iterable[Table]) -> dict[str, int]:
    """Domain size of every variable in the tables; raises if two tables disagree."""
    sizes: dict[str, int] = {}
    for t in tables:
        for v, s in zip(t.scope, t.shape, strict=True):
            if sizes.setdefault(v, s) != s:
                raise ModelError(
                    f"variable {v!r} has domain {sizes[v]} in one table and {s} in another"
                )
    return sizes


def entries(scope: Sequence[str], sizes: Mapping[str, int]) -> int:
    """Number of entries of a table over ``scope``."""
    return math.prod(sizes[v] for v in scope)


def output_scope(tables: Sequence[Table], var: str) -> tuple[str, ...]:
    """The scope of ``join_eliminate(tables, var)`` when none is given."""
    return tuple(v for v in union_scope(t.scope for t in tables) if v != var)


def check_op(op: str) -> None:
    """Raise ModelError unless ``op`` is one of :data:`OPS`."""
    if op not in OPS:
        raise ModelError(f"unknown elimination op {op!r}; use one of {', '.join(OPS)}")


def check_join_eliminate(
    tables: Sequence[Table], var: str, op: str, scope: Sequence[str] | None
) -> tuple[dict[str, int], tuple[str, ...]]:
    """The one check of a join+eliminate's inputs, shared by every backend (see
    :func:`check_join_eliminate_scopes`; this one takes the tables themselves)."""
    return check_join_eliminate_scopes(
        [t.scope for t in tables], [t.shape for t in tables], var, op, scope
    )


def check_join_eliminate_scopes(
    scopes: Sequence[Sequence[str]],
    shapes: Sequence[Sequence[int]],
    var: str,
    op: str,
    scope: Sequence[str] | None,
) -> tuple[dict[str, int], tuple[str, ...]]:
    """Check a join+eliminate of tables with these scopes and shapes (data not needed).

    Returns the domain size of every variable and the output scope (``scope`` when given, else
    the tables' variables but ``var`` in order of first appearance); raises ModelError on an
    unknown op, no tables, a shape that does not fit its scope, two tables that disagree on a
    domain, ``var`` in none of them, or a ``scope`` that is not exactly the tables' other variables.
    """
    check_op(op)
    if not scopes:
        raise ModelError("join_eliminate needs at least one table")
    if len(scopes) != len(shapes):
        raise ModelError(f"{len(scopes)} scopes but {len(shapes)} shapes")
    sizes: dict[str, int] = {}
    for table_scope, shape in zip(scopes, shapes, strict=True):
        if len(table_scope) != len(shape):
            raise ModelError(f"a table over {tuple(table_scope)} has shape {tuple(shape)}")
        for v, n in zip(table_scope, shape, strict=True):
            if sizes.setdefault(v, int(n)) != int(n):
                raise ModelError(
                    f"variable {v!r} has domain {sizes[v]} in one table and {n} in another"
                )
    if var not in sizes:
        raise ModelError(f"variable {var!r} is in none of the tables to eliminate it from")
    out_scope = (
        tuple(scope) if scope is not None else tuple(v for v in union_scope(scopes) if v != var)
    )
    if var in out_scope:
        raise ModelError(f"the output scope of eliminating {var!r} cannot hold {var!r}")
    if len(set(out_scope)) != len(out_scope) or set(out_scope) != set(sizes) - {var}:
        raise ModelError(f"output scope {out_scope} does not match the tables' variables")
    return sizes, out_scope


FLOAT32_EXACT_LIMIT = 2**24


def choose_dtype(problem: Problem, requested: str = "auto") -> Any:
    """float32 when every cost is an integer and any total stays below 2**24 (so integer optima are
    exact), float64 otherwise; ``requested`` may force either. What the costs stand for does not
    matter: a .uai model's ``-ln`` potentials are integers too where the potentials are powers of
    e (a ±J spin glass's costs are exactly ±1), and min-sum over them is then exact in float32.
    Sum-product (PR/MAR) does not ask: it computes in float64."""
    if requested == "float64":
        return np.float64
    if requested == "float32":
        return np.float32
    bound = abs(problem.constant)
    for table in problem.tables:
        finite = table.finite_costs()  # a sparse table is not materialised for this
        if finite.size == 0:
            continue
        if not np.array_equal(finite, np.round(finite)):
            return np.float64
        bound += float(np.abs(finite).max())
    return np.float32 if bound < FLOAT32_EXACT_LIMIT else np.float64
