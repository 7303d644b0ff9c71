"""The problem model: variables with finite domains, cost tables over scopes, and the Problem.

Everything is a minimisation of a sum of costs. Other objectives are mapped onto that at the
edges (readers) and mapped back when a result is reported:

* ``maximize`` DCOPs (pyDCOP ``objective: max``, FRODO ``maximize="true"``) are negated on read;
  ``Problem.sign`` is -1 so that ``reported = sign * cost``.
* MPE on Bayesian/Markov networks uses costs ``-ln p`` (natural log, ``cost_kind="neg_ln"``);
  a probability of 0 becomes ``+inf``. ``log10 p = -cost / ln 10``.

A table is a scope (tuple of variable names) and a C-order array whose axes follow the scope,
last variable fastest: exactly the paper's cost vector. ``+inf`` marks an infeasible tuple. A
table given by a default cost plus listed tuples may stay sparse until something needs its dense
array (see :class:`CostTable`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dcop.errors import ModelError, TableTooLarge

CostKind = Literal["cost", "neg_ln"]
FloatArray = npt.NDArray[np.float64]
IndexArray = npt.NDArray[np.integer[Any]]

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


class CostTable:
    """Costs over ``scope`` (variable names), in a dense or a sparse form.

    * Dense: ``CostTable(scope, costs)`` with ``costs.shape == (domain sizes of scope)``, C order,
      last variable fastest (the paper's cost vector).
    * Sparse: :meth:`CostTable.sparse` ``(scope, shape, default, index, values)``: every tuple
      costs ``default`` except the listed ones (rows of value indices in ``index``), which cost
      ``values``. Readers use it for tables given by a default cost plus tuples (WCSP functions,
      FRODO soft relations, pyDCOP extensional constraints), so a tiny file declaring a huge
      table stays tiny until a join needs it.

    ``shape``, ``entries``, ``cost_of``, ``cost_values``, ``finite_costs``, ``restrict``,
    ``map_costs`` and ``on_scope`` work on either form without building the dense array.
    ``costs`` is the dense array; for a sparse table it is built on first access and cached
    (read-only), which allocates ``entries`` float64 values: check ``entries`` first where size
    matters. Tables are immutable; treat ``costs`` as read-only in both forms.
    """

    __slots__ = ("_default", "_dense", "_index", "_shape", "_values", "name", "scope")

    scope: tuple[str, ...]
    name: str
    _dense: FloatArray | None
    _shape: tuple[int, ...]
    _default: float
    _index: IndexArray | None
    _values: FloatArray | None

    def __init__(self, scope: Sequence[str], costs: npt.ArrayLike, name: str = "") -> None:
        array = np.asarray(costs, dtype=np.float64)
        self._init(tuple(scope), name, array.shape)
        if array.ndim != len(self.scope):
            raise ModelError(
                f"table {self.label}: {array.ndim} axes for a scope of {len(self.scope)} variables"
            )
        object.__setattr__(self, "_dense", array)
        object.__setattr__(self, "_default", math.nan)
        object.__setattr__(self, "_index", None)
        object.__setattr__(self, "_values", None)

    def _init(self, scope: tuple[str, ...], name: str, shape: tuple[int, ...]) -> None:
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_shape", tuple(int(s) for s in shape))
        if len(set(scope)) != len(scope):
            raise ModelError(f"table {self.label} repeats a variable in its scope")

    @classmethod
    def sparse(
        cls,
        scope: Sequence[str],
        shape: Sequence[int],
        default: float,
        index: npt.ArrayLike,
        values: npt.ArrayLike,
        name: str = "",
    ) -> CostTable:
        """A table where every tuple costs ``default`` except the rows of ``index`` (value
        indices, one column per scope variable), which cost ``values``. A tuple listed twice
        keeps its last cost."""
        table = cls.__new__(cls)
        table._init(tuple(scope), name, tuple(shape))
        k = len(table.scope)
        if len(table._shape) != k:
            raise ModelError(f"table {table.label}: {len(table._shape)} sizes for {k} variables")
        if any(s < 1 for s in table._shape):
            raise ModelError(f"table {table.label}: every domain size must be at least 1")
        costs = np.asarray(values, dtype=np.float64).ravel()
        rows = np.asarray(index)
        if rows.size == 0:
            rows = rows.reshape(len(costs), k)
        if rows.ndim != 2 or rows.shape != (len(costs), k):
            raise ModelError(
                f"table {table.label}: {rows.shape} index rows for {len(costs)} costs over "
                f"{k} variables"
            )
        if rows.size and rows.dtype.kind not in "iu":
            raise ModelError(f"table {table.label}: value indices must be integers")
        dtype = np.int32 if max(table._shape, default=1) < 2**31 else np.int64
        rows = rows.astype(dtype, copy=False)
        if rows.size and ((rows < 0).any() or (rows >= np.array(table._shape)).any()):
            raise ModelError(f"table {table.label}: a listed value index is out of its domain")
        rows, costs = _sorted_unique(rows, costs)
        return cls._from_parts(table.scope, table._shape, default, rows, costs, name)

    @classmethod
    def _from_parts(
        cls,
        scope: tuple[str, ...],
        shape: tuple[int, ...],
        default: float,
        rows: IndexArray,
        costs: FloatArray,
        name: str,
    ) -> CostTable:
        """A sparse table from rows already sorted and unique (no checks: internal use)."""
        table = cls.__new__(cls)
        table._init(scope, name, shape)
        object.__setattr__(table, "_dense", None)
        object.__setattr__(table, "_default", float(default))
        object.__setattr__(table, "_index", np.asfortranarray(rows))
        object.__setattr__(table, "_values", costs)
        return table

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"CostTable is immutable (cannot set {key!r})")

    def __delattr__(self, key: str) -> None:
        raise AttributeError(f"CostTable is immutable (cannot delete {key!r})")

    def __repr__(self) -> str:
        form = "sparse" if self.is_sparse else "dense"
        return f"CostTable({self.scope!r}, shape={self._shape}, {form}, name={self.name!r})"

    # ---- shape -------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """The table's name, or its scope in parentheses."""
        return self.name or "(" + ",".join(self.scope) + ")"

    @property
    def arity(self) -> int:
        return len(self.scope)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def entries(self) -> int:
        """Number of entries of the dense form (a Python int: never overflows)."""
        return math.prod(self._shape)

    @property
    def is_sparse(self) -> bool:
        """True for a table built by :meth:`sparse` (even once its dense form is cached)."""
        return self._index is not None

    def sparse_form(self) -> tuple[float, IndexArray, FloatArray] | None:
        """``(default, index, values)`` of a sparse table (rows sorted, unique); None if dense."""
        if self._index is None or self._values is None:
            return None
        return self._default, self._index, self._values

    # ---- costs -------------------------------------------------------------------------------
    @property
    def costs(self) -> FloatArray:
        """The dense array (built on first access for a sparse table, then cached)."""
        if self._dense is None:
            dense = self._materialise()
            dense.flags.writeable = False
            object.__setattr__(self, "_dense", dense)
        assert self._dense is not None
        return self._dense

    def dense(self, dtype: Any = np.float64, *, own: bool = False) -> np.ndarray:
        """The dense array in ``dtype``, for a run that makes its own copy in its dtype. A dense
        table gives its array (cast when the dtype differs); a sparse one a new array built in
        ``dtype`` directly and not cached: a float64 array cached besides the run's float32
        copy was three times the memory the run's plan counted (issue 33: a 145-byte file
        with one default-only function peaked at 2 GiB under a 1.2 GB limit). ``own``: the
        caller gets an array of its own, to change in place."""
        if self._dense is not None:
            same = self._dense.dtype == np.dtype(dtype)
            return self._dense.copy() if same and own else self._dense.astype(dtype, copy=not same)
        return self._materialise(dtype)

    def dense_chunks(
        self, dtype: Any = np.float64, chunk_entries: int = 1 << 20
    ) -> Iterator[np.ndarray]:
        """The dense array in C order as consecutive flat chunks of at most ``chunk_entries``
        (a digest of a default-only table need not hold it whole: issue 33)."""
        if self._dense is not None or self.arity == 0:
            flat = self.dense(dtype).reshape(-1)
            for start in range(0, flat.size, chunk_entries):
                yield flat[start : start + chunk_entries]
            return
        assert self._index is not None and self._values is not None
        where = np.ravel_multi_index(tuple(self._index.T), self._shape)
        for start in range(0, self.entries, chunk_entries):
            stop = min(start + chunk_entries, self.entries)
            chunk = np.full(stop - start, self._default, dtype=dtype)
            inside = (where >= start) & (where < stop)
            chunk[where[inside] - start] = self._values[inside]  # as _materialise: last wins
            yield chunk

    def _materialise(self, dtype: Any = np.float64) -> np.ndarray:
        assert self._index is not None and self._values is not None
        itemsize = np.dtype(dtype).itemsize
        need = self.entries * itemsize
        if need > _available_bytes():
            raise TableTooLarge(
                f"table {self.label} over {self.arity} variables has {self.entries} entries "
                f"({need / 2**30:.1f} GiB as {np.dtype(dtype).name}), more than the memory "
                "available"
            )
        try:
            dense = np.full(self._shape, self._default, dtype=dtype)
        except (ValueError, MemoryError) as exc:
            raise TableTooLarge(
                f"table {self.label} with {self.entries} entries cannot be built densely ({exc})"
            ) from None
        if len(self._values) and self.arity == 0:
            dense[()] = self._values[-1]
        elif len(self._values):
            dense[tuple(self._index.T)] = self._values
        return dense

    def cost_of(self, assignment: Mapping[str, int]) -> float:
        """The cost of this table's tuple under a full assignment (value indices)."""
        index = tuple(int(assignment[v]) for v in self.scope)
        if self._dense is not None:
            return float(self._dense[index])
        assert self._index is not None and self._values is not None
        found = _find_row(self._index, index)
        return self._default if found is None else float(self._values[found])

    def cost_values(self) -> FloatArray:
        """Every cost that occurs in the table, each at least once (no counts): the dense array
        flattened, or the listed costs plus the default when some tuple is not listed."""
        if self._index is None:
            return self.costs.ravel()
        assert self._values is not None
        if len(self._values) < self.entries:
            return np.append(self._values, self._default)
        return self._values

    def finite_costs(self) -> FloatArray:
        """The finite costs that occur (see :meth:`cost_values`), e.g. to choose a dtype."""
        values = self.cost_values()
        return values[np.isfinite(values)]

    # ---- derived tables ----------------------------------------------------------------------
    def restrict(self, fixed: Mapping[str, int], keep_axes: bool = False) -> CostTable:
        """The table with the variables of ``fixed`` (those in its scope) set to those value
        indices. Their axes are dropped, or kept with size 1 when ``keep_axes``."""
        hit = {v: int(fixed[v]) for v in self.scope if v in fixed}
        for v, i in hit.items():
            size = self._shape[self.scope.index(v)]
            if not 0 <= i < size:
                raise ModelError(
                    f"table {self.label}: value index {i} of {v!r} out of 0..{size - 1}"
                )
        if keep_axes:
            scope = self.scope
            shape = tuple(
                1 if v in hit else s for v, s in zip(self.scope, self._shape, strict=True)
            )
        else:
            scope = tuple(v for v in self.scope if v not in hit)
            shape = tuple(s for v, s in zip(self.scope, self._shape, strict=True) if v not in hit)
        if self._index is None:
            select = tuple(
                (slice(hit[v], hit[v] + 1) if keep_axes else hit[v]) if v in hit else slice(None)
                for v in self.scope
            )
            return CostTable(scope, np.array(self.costs[select], order="C"), self.name)
        assert self._values is not None
        rows, values = self._index, self._values
        if hit and len(rows):
            columns = [self.scope.index(v) for v in hit]
            mask = np.all(rows[:, columns] == np.array([hit[v] for v in hit]), axis=1)
            rows, values = rows[mask], values[mask]
        if keep_axes:
            rows = rows.copy()
            for v in hit:
                rows[:, self.scope.index(v)] = 0
        else:
            rows = rows[:, [i for i, v in enumerate(self.scope) if v not in hit]]
        # filtering rows on fixed columns keeps them sorted and unique
        return CostTable._from_parts(scope, shape, self._default, rows, values, self.name)

    def map_costs(
        self, fn: Callable[[FloatArray], FloatArray], name: str | None = None
    ) -> CostTable:
        """The table with ``fn`` (an element-wise array function) applied to every cost."""
        new_name = self.name if name is None else name
        if self._index is None:
            return CostTable(self.scope, fn(self.costs), new_name)
        assert self._values is not None
        default = float(fn(np.array([self._default]))[0])
        return CostTable._from_parts(
            self.scope, self._shape, default, self._index, fn(self._values), new_name
        )

    def on_scope(self, scope: Sequence[str], name: str | None = None) -> CostTable:
        """The same costs over another scope of the same domain sizes (arrays are shared)."""
        new_name = self.name if name is None else name
        if self._index is None:
            if len(tuple(scope)) != self.arity:
                raise ModelError(f"table {self.label}: scope {tuple(scope)} has another arity")
            return CostTable(scope, self.costs, new_name)
        assert self._values is not None
        if len(tuple(scope)) != self.arity:
            raise ModelError(f"table {self.label}: scope {tuple(scope)} has another arity")
        return CostTable._from_parts(
            tuple(scope), self._shape, self._default, self._index, self._values, new_name
        )


def _sorted_unique(rows: IndexArray, costs: FloatArray) -> tuple[IndexArray, FloatArray]:
    """Rows in lexicographic order (= the dense C order), one per tuple: the last listed wins."""
    n, k = rows.shape
    if k == 0:
        return rows[-1:], costs[-1:]
    if n > 1:
        order = np.lexsort(rows.T[::-1])  # stable, column 0 primary
        rows, costs = rows[order], costs[order]
        last = np.ones(n, dtype=bool)
        last[:-1] = np.any(rows[1:] != rows[:-1], axis=1)
        if not last.all():
            rows, costs = rows[last], costs[last]
    # columns contiguous: the lookups below search one column of a row range at a time
    return np.asfortranarray(rows), np.ascontiguousarray(costs)


def _find_row(rows: IndexArray, index: tuple[int, ...]) -> int | None:
    """Position of ``index`` among lexicographically sorted unique ``rows``, or None."""
    lo, hi = 0, len(rows)
    for j, value in enumerate(index):
        column = rows[lo:hi, j]
        first = int(np.searchsorted(column, value, side="left"))
        past = int(np.searchsorted(column, value, side="right"))
        lo, hi = lo + first, lo + past
        if lo >= hi:
            return None
    return lo if lo < hi else None


def _available_bytes() -> int:
    """Memory this process may still take (MemAvailable on Linux), for the materialising guard."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62


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
            label = table.label
            for v in table.scope:
                if v not in self.variables:
                    raise ModelError(f"table {label} uses unknown variable {v!r}")
            expected = tuple(self.variables[v].size for v in table.scope)
            if table.shape != expected:
                raise ModelError(f"table {label} has shape {table.shape}, domains give {expected}")
            values = table.cost_values()  # no dense array is built for a sparse table
            if values.size and np.isnan(values).any():
                raise ModelError(f"table {label} contains NaN costs")
            if not allow_negative and values.size and (values < 0).any():
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
