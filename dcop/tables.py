"""Cost-table operations on the CPU with NumPy: join (the paper's aggregation), eliminate, and a
fused join+eliminate that never builds the whole joined table.

A backend table is a :class:`Table`: a scope (variable names) and an n-d array whose axes follow
the scope, last variable fastest (C order). The CuPy backend in ``dcop.gpu`` has the same methods;
algorithms obtain either from :func:`dcop.backend.get_backend` and never import an array library.

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

Op = Literal["min", "max", "sum", "logsumexp"]
OPS: tuple[str, ...] = ("min", "max", "sum", "logsumexp")

#: Entries of the joined block a fused CPU join+eliminate materialises at once (8 MiB of float64).
DEFAULT_BLOCK_ENTRIES = 1 << 20


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
    if op not in OPS:
        raise ModelError(f"unknown elimination op {op!r}; use one of {', '.join(OPS)}")


class NumpyBackend:
    """Table operations with NumPy on the host."""

    name = "numpy"
    xp = np

    def __init__(self, block_entries: int = DEFAULT_BLOCK_ENTRIES) -> None:
        self.block_entries = block_entries

    # ---- moving data -------------------------------------------------------------------------
    def asarray(self, array: Any, dtype: Any = np.float64) -> np.ndarray:
        return np.ascontiguousarray(array, dtype=dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        return Table(tuple(scope), self.asarray(array, dtype))

    def synchronize(self) -> None:
        """Nothing to wait for on the host."""

    # ---- single-table operations -------------------------------------------------------------
    def transpose(self, table: Table, scope: Sequence[str]) -> Table:
        """The same table with its axes in ``scope`` order (a permutation of its scope)."""
        scope = tuple(scope)
        if scope == table.scope:
            return table
        axes = [table.scope.index(v) for v in scope]
        return Table(scope, np.ascontiguousarray(np.transpose(table.data, axes)))

    def eliminate(self, table: Table, var: str, op: Op = "min") -> Table:
        """Remove ``var`` from the table by ``op`` over its axis."""
        check_op(op)
        rest = tuple(v for v in table.scope if v != var)
        moved = self.transpose(table, (*rest, var))
        return Table(rest, _reduce_last(moved.data, op))

    def argbest(self, table: Table, var: str, op: Op = "min") -> Table:
        """Index of the best value of ``var`` for every tuple of the other variables."""
        rest = tuple(v for v in table.scope if v != var)
        moved = self.transpose(table, (*rest, var))
        pick = np.argmax if op == "max" else np.argmin
        return Table(rest, pick(moved.data, axis=-1).astype(np.int64))

    def condition(self, table: Table, assignment: Mapping[str, int]) -> Table:
        """Fix the variables of ``assignment`` that the table holds (evidence, or a VALUE message)."""
        index = tuple(int(assignment[v]) if v in assignment else slice(None) for v in table.scope)
        rest = tuple(v for v in table.scope if v not in assignment)
        return Table(rest, np.ascontiguousarray(table.data[index]))

    # ---- joins -------------------------------------------------------------------------------
    def join(self, tables: Sequence[Table], scope: Sequence[str] | None = None) -> Table:
        """The paper's aggregation: the sum of the tables over the union scope (materialised)."""
        if not tables:
            raise ModelError("join needs at least one table")
        full = tuple(scope) if scope is not None else union_scope(t.scope for t in tables)
        sizes = domain_sizes(tables)
        shape = tuple(sizes[v] for v in full)
        dtype = np.result_type(*[t.data.dtype for t in tables])
        out = np.zeros(shape, dtype=dtype)
        for t in tables:
            out += _broadcast_view(t, full)
        return Table(full, out)

    def join_eliminate(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """``eliminate(join(tables), var)`` without building the joined table.

        The output is produced in blocks over its leading axes; each block joins only the slice
        of every input that it needs, so memory stays at the output plus one block.
        """
        check_op(op)
        if not tables:
            raise ModelError("join_eliminate needs at least one table")
        sizes = domain_sizes(tables)
        if var not in sizes:
            raise ModelError(f"variable {var!r} is in none of the tables to eliminate it from")
        out_scope = tuple(scope) if scope is not None else output_scope(tables, var)
        full = (*out_scope, var)
        out_shape = tuple(sizes[v] for v in out_scope)
        dtype = np.result_type(*[t.data.dtype for t in tables])
        out = np.empty(out_shape, dtype=dtype)

        # Lead axes are iterated in Python; the rest of the output and var form one block.
        lead = 0
        block = math.prod(out_shape) * sizes[var]
        while lead < len(out_scope) and block > self.block_entries:
            block //= out_shape[lead]
            lead += 1
        inner = full[lead:]
        inner_shape = tuple(sizes[v] for v in inner)
        prepared = [_prepare_block_source(t, full, lead) for t in tables]
        acc = np.empty(inner_shape, dtype=dtype)
        for lead_index in np.ndindex(*out_shape[:lead]):
            first = True
            for data, lead_axes, view_shape in prepared:
                piece = data[tuple(lead_index[i] for i in lead_axes)].reshape(view_shape)
                if first:
                    np.copyto(acc, piece)
                    first = False
                else:
                    np.add(acc, piece, out=acc)
            out[lead_index] = _reduce_last(acc, op)
        return Table(out_scope, out)

    def best_value(
        self,
        tables: Sequence[Table],
        var: str,
        assignment: Mapping[str, int],
        op: Op = "min",
    ) -> tuple[int, float]:
        """Best value of ``var`` given values of every other variable of the tables, and its cost."""
        total: np.ndarray | None = None
        for t in tables:
            vec = self.condition(t, {v: assignment[v] for v in t.scope if v != var})
            if vec.scope != (var,):
                raise ModelError(f"best_value: table over {t.scope} is not resolved to {var!r}")
            total = vec.data.astype(np.float64) if total is None else total + vec.data
        if total is None:
            raise ModelError(f"best_value: no table holds {var!r}")
        index = int(np.argmax(total) if op == "max" else np.argmin(total))
        return index, float(total[index])


# ---- helpers ---------------------------------------------------------------------------------
def _reduce_last(data: np.ndarray, op: str) -> Any:
    if op == "min":
        return data.min(axis=-1)
    if op == "max":
        return data.max(axis=-1)
    if op == "sum":
        return data.sum(axis=-1)
    # logsumexp with a max shift; an all -inf (or +inf) run keeps its extreme value
    peak = data.max(axis=-1, keepdims=True)
    finite_peak = np.where(np.isfinite(peak), peak, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        summed = np.log(np.exp(data - finite_peak).sum(axis=-1))
    result = summed + finite_peak[..., 0]
    return np.where(np.isfinite(peak[..., 0]), result, peak[..., 0]).astype(data.dtype)


def _broadcast_view(table: Table, full: tuple[str, ...]) -> np.ndarray:
    """The table with its axes ordered as in ``full`` and size-1 axes for missing variables."""
    order = sorted(table.scope, key=full.index)
    data = np.transpose(table.data, [table.scope.index(v) for v in order])
    shape = tuple(table.sizes()[v] if v in table.scope else 1 for v in full)
    return data.reshape(shape)


def _prepare_block_source(
    table: Table, full: tuple[str, ...], lead: int
) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """For the block loop: the table sorted by ``full``, which lead indices select its leading
    axes, and the broadcast shape of the remaining axes over ``full[lead:]``."""
    for v in table.scope:
        if v not in full:
            raise ModelError(f"variable {v!r} of a table is not in the join scope")
    order = sorted(table.scope, key=full.index)
    data = np.ascontiguousarray(np.transpose(table.data, [table.scope.index(v) for v in order]))
    lead_axes = tuple(full.index(v) for v in order if full.index(v) < lead)
    sizes = table.sizes()
    view_shape = tuple(sizes[v] if v in table.scope else 1 for v in full[lead:])
    return data, lead_axes, view_shape
