"""NumPy's table backend: the table operations on the host, the fused join+eliminate in blocks
over all cores.

Elimination ops (over the eliminated variable's axis):

* ``min``  min-sum (WCSP optimum, MPE in ``-ln p`` space)
* ``max``  max-sum
* ``sum``  plain sum
* ``logsumexp``  ``log(sum(exp(c)))`` (sum-product in log space: negate in and out for ``-ln p``)
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dcop.allocator import keep_freed_memory
from dcop.backends.base import BackendInfo, TableBackend
from dcop.backends.between import Pieces
from dcop.errors import ModelError
from dcop.tables import (
    Op,
    Table,
    check_join_eliminate,
    check_op,
    domain_sizes,
    union_scope,
)

#: Seconds between two calls of :func:`in_threads`' ``waiting`` while the caller waits.
WAIT_S = 0.01
#: Output entries one fused CPU join+eliminate block covers (cache-sized; measured best here).
DEFAULT_BLOCK_ENTRIES = 1 << 18
#: Output entries from which a sum-product bucket runs in linear space (``_logsumexp_linear``):
#: below, planning the einsum costs more than it saves (test_Z's 5 buckets: 1.0 ms against 0.46).
DEFAULT_LINEAR_MIN_ENTRIES = 1 << 12


#: The host's CPUs, read once: ``os.cpu_count`` took 27 us a call on the 2-core VM, and ``infer``
#: makes a backend per call (7 % of pdb1etl's 0.4 ms PR).
HOST_CPUS = os.cpu_count() or 1


class NumpyBackend(TableBackend):
    """Table operations with NumPy on the host."""

    name = "numpy"
    xp: Any = np
    #: NumPy signals a failed allocation with MemoryError (numpy's _ArrayMemoryError subclasses it)
    out_of_memory_errors: tuple[type[BaseException], ...] = (MemoryError,)

    def __init__(
        self,
        block_entries: int = DEFAULT_BLOCK_ENTRIES,
        threads: int | None = None,
        linear_min_entries: int = DEFAULT_LINEAR_MIN_ENTRIES,
    ) -> None:
        self.block_entries = block_entries
        self.threads = threads if threads is not None else HOST_CPUS
        self.linear_min_entries = linear_min_entries
        self.info = BackendInfo(None, self.block_entries, self.threads)
        keep_freed_memory()  # a call's tables reuse the last call's pages (see dcop.allocator)

    # ---- moving data -------------------------------------------------------------------------
    def asarray(self, array: Any, dtype: Any = np.float64) -> np.ndarray:
        return np.asarray(array, dtype=dtype, order="C")

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        np.copyto(out, array)

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        return Table(tuple(scope), self.asarray(array, dtype))

    def synchronize(self) -> None:
        """Nothing to wait for on the host."""

    # ---- single-table operations -------------------------------------------------------------
    def transpose(self, table: Table, scope: Sequence[str]) -> Table:
        scope = tuple(scope)
        if scope == table.scope:
            return table
        axes = [table.scope.index(v) for v in scope]
        return Table(scope, np.ascontiguousarray(np.transpose(table.data, axes)))

    def eliminate(self, table: Table, var: str, op: Op = "min") -> Table:
        check_op(op)
        rest = tuple(v for v in table.scope if v != var)
        moved = self.transpose(table, (*rest, var))
        return Table(rest, _reduce_last(moved.data, op))

    def argbest(self, table: Table, var: str, op: Op = "min") -> Table:
        rest = tuple(v for v in table.scope if v != var)
        moved = self.transpose(table, (*rest, var))
        pick = np.argmax if op == "max" else np.argmin
        return Table(rest, pick(moved.data, axis=-1).astype(np.int64))

    def condition(self, table: Table, assignment: Mapping[str, int]) -> Table:
        index = tuple(int(assignment[v]) if v in assignment else slice(None) for v in table.scope)
        rest = tuple(v for v in table.scope if v not in assignment)
        return Table(rest, np.asarray(table.data[index], order="C"))

    # ---- joins -------------------------------------------------------------------------------
    def join(self, tables: Sequence[Table], scope: Sequence[str] | None = None) -> Table:
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
        """The output is produced in blocks over its leading axes. Within a block, the slices of the
        inputs at each value of ``var`` are summed and folded into the block with the op's
        element-wise form (``minimum``, ``maximum``, ``add``, ``logaddexp``), so neither the joined
        table nor a reduction over a short last axis is ever needed; tables without ``var`` are
        hoisted out of that loop and added once after the fold. Memory stays at the output plus one
        block per thread and contiguous copies of the inputs of at most one block's entries
        (larger inputs are read through strided views: a copy of a large message would cost as
        much memory as the message itself). The check of an enclosing
        :func:`~dcop.backends.between.checked_between` runs before each block's slice at each
        value of ``var`` (a deadline inside one large bucket).
        """
        sizes, out_scope = check_join_eliminate(tables, var, op, scope)
        out_shape = tuple(sizes[v] for v in out_scope)
        dtype = np.result_type(*[t.data.dtype for t in tables])
        out_entries = math.prod(out_shape)
        if op == "logsumexp" and out_entries >= self.linear_min_entries:
            linear = _logsumexp_linear(tables, var, out_scope, out_entries, self.block_entries)
            if linear is not None:  # already in the tables' dtype
                return Table(out_scope, linear)
        out = np.empty(out_shape, dtype=dtype)

        d = sizes[var]
        # logsumexp keeps the d slices of a block and 3 scratch rows (see fill): blocks of
        # 4 / d times the size, so at most 4 + 12 / d blocks of working memory per thread
        # (smaller blocks cost more in Python than they save: d = 16 ran 2.5x slower at 1 / d)
        limit = self.block_entries if op != "logsumexp" else max(1, 4 * self.block_entries // d)
        lead = 0  # leading output axes iterated in Python; the rest of the output is one block
        block = math.prod(out_shape)
        while lead < len(out_scope) and block > limit:
            block //= out_shape[lead]
            lead += 1
        inner_shape = out_shape[lead:]
        copy_below = self.block_entries
        with_var = [
            _prepare_block_source(t, out_scope, var, lead, copy_below)
            for t in tables
            if var in t.scope
        ]
        without_var = [
            _prepare_block_source(t, out_scope, var, lead, copy_below)
            for t in tables
            if var not in t.scope
        ]
        fold = _FOLDS[op]
        between = Pieces()
        # a block far smaller than the limit (a large domain eliminated into a small output: a
        # hub of 200,000 values took 13 s, a Python step per value) sums the slices of ``batch``
        # values at once and folds them with the op's reduce
        batch = max(1, min(d, limit // max(1, math.prod(inner_shape)))) if with_var else 1

        def fill(share: tuple[Iterable[tuple[int, ...]], bool]) -> None:
            lead_indices, checks = share  # checks: the caller's thread, which runs the check
            acc = np.empty(inner_shape, dtype=dtype)
            acc_batch = np.empty((batch, *inner_shape), dtype=dtype) if batch > 1 else acc
            slabs = np.empty((d, *inner_shape), dtype=dtype) if op == "logsumexp" else None
            for lead_index in lead_indices:
                target = out[(*lead_index, Ellipsis)]  # type: ignore[arg-type]  # a view, also 0-d
                if slabs is not None:
                    # all d slices first, then one shift by their peak and d exps: several times
                    # faster than folding with logaddexp (an exp and a log1p per slice)
                    for x in range(d):
                        if between.stop(checks):
                            return
                        _sum_slices(slabs[x, ...], with_var, lead_index, (x,))
                    _logsumexp_slabs(slabs, target, acc)
                if slabs is None and batch > 1:
                    for x in range(0, d, batch):
                        if between.stop(checks):
                            return
                        values = acc_batch[: min(batch, d - x)]
                        _sum_value_slabs(values, with_var, lead_index, x)
                        if x == 0:
                            fold.reduce(values, axis=0, out=target)
                        else:
                            fold.reduce(values, axis=0, out=acc)
                            fold(target, acc, out=target)
                for x in range(d if slabs is None and batch == 1 else 0):
                    if between.stop(checks):
                        return
                    _sum_slices(acc, with_var, lead_index, (x,))
                    if x == 0:
                        target[...] = acc
                    else:
                        fold(target, acc, out=target)
                if without_var:
                    _sum_slices(acc, without_var, lead_index, ())
                    if op == "sum":  # a term without var is counted once per value of var
                        np.multiply(acc, d, out=acc)
                    np.add(target, acc, out=target)

        blocks = list(np.ndindex(*out_shape[:lead]))
        workers = min(self.threads, len(blocks))
        if workers <= 1:
            fill((blocks, True))
        else:  # NumPy releases the GIL in these loops: blocks run in parallel threads
            taken = TakenInTurn(blocks)  # each thread takes the next block when it is free
            # the first share runs in this thread (in_threads), runs the check (and while it
            # waits for the others) and, where it raises, is the error raised
            shares = [(taken, k == 0) for k in range(workers)]
            in_threads(fill, shares, between.poll)
        return Table(out_scope, out)

    def best_value(
        self,
        tables: Sequence[Table],
        var: str,
        assignment: Mapping[str, int],
        op: Op = "min",
    ) -> tuple[int, float]:
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
def in_threads(
    work: Callable[[Any], None],
    shares: Sequence[Any],
    waiting: Callable[[], None] | None = None,
) -> None:
    """``work(share)`` for every share at once: the first in this thread, each other in a thread
    of its own; raises the first share's error (in share order) once all have ended. Plain
    threads: a pool's module (concurrent.futures loads logging) was 7 ms of a small solve's
    start (example.wcsp's one bucket over a block). ``waiting`` is called every WAIT_S while
    this thread waits for the others once its own share is done (a check between pieces, where
    the others took the pieces left: on a loaded machine, all of them); where it raises, that
    is the first share's error, and the others are waited for as before."""
    import threading

    errors: list[BaseException | None] = [None] * len(shares)

    def run(k: int) -> None:
        try:
            work(shares[k])
        except BaseException as exc:  # handed to the caller below
            errors[k] = exc

    threads = [threading.Thread(target=run, args=(k,)) for k in range(1, len(shares))]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        while True:
            polling = waiting is not None and errors[0] is None
            thread.join(WAIT_S if polling else None)
            if not thread.is_alive():
                break
            if polling and waiting is not None:
                try:
                    waiting()
                except BaseException as exc:  # raised below, once the others have ended
                    errors[0] = exc
    for error in errors:
        if error is not None:
            raise error


class TakenInTurn:
    """The items of a list, each handed to one of the threads iterating this object at once, in
    turn as they ask. Threads that share out blocks this way end together: with a fixed share
    each (every other block), a thread the machine left waiting (2 cores, other processes)
    held the whole call up by its unfinished share."""

    def __init__(self, items: Sequence[Any]) -> None:
        import threading

        self._items = items
        self._next = 0
        self._lock = threading.Lock()

    def __iter__(self) -> TakenInTurn:
        return self

    def __next__(self) -> Any:
        with self._lock:
            k = self._next
            if k >= len(self._items):
                raise StopIteration
            self._next = k + 1
        return self._items[k]


def _reduce_last(data: np.ndarray, op: str) -> Any:
    if op == "min":
        return data.min(axis=-1)
    if op == "max":
        return data.max(axis=-1)
    if op == "sum":
        return data.sum(axis=-1)
    # logsumexp with a max shift; an all -inf (or +inf) run keeps its extreme value: a run with
    # a +inf entry is shifted by 0, may overflow in exp, and is replaced by its peak below
    peak = data.max(axis=-1, keepdims=True)
    finite_peak = np.where(np.isfinite(peak), peak, 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        summed = np.log(np.exp(data - finite_peak).sum(axis=-1))
    result = summed + finite_peak[..., 0]
    return np.where(np.isfinite(peak[..., 0]), result, peak[..., 0]).astype(data.dtype)


#: einsum subscripts: one letter per variable of a bucket (larger buckets take the log-space path)
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _logsumexp_linear(
    tables: Sequence[Table],
    var: str,
    out_scope: tuple[str, ...],
    out_entries: int,
    block_entries: int,
) -> np.ndarray | None:
    """``log Σ_var exp(Σ tables)`` as a sum of products in linear space, or None where that is
    not exact enough or would cost too much memory (the caller then takes the log-space path).

    Each table is shifted by its own peak before ``exp`` (every factor is then at most 1: nothing
    overflows) and the shifts are added back after the ``log``. The products and the sum are one
    ``np.einsum`` along a greedy pairwise path (BLAS where a pair allows it, intermediates no
    larger than the largest of the inputs and the output). That is one ``exp`` per input entry and
    one ``log`` per output entry instead of ``d`` exps per output entry: 4-7x faster than the
    blocked log-space loop on one bucket of an Ising grid (2^20 x 2 entries in, 2^22 out).

    Refused: more variables than einsum letters; inputs of more than twice the output's entries
    (their linear copies would cost memory the blocked loop never needs); a largest input that
    does not hold ``var`` as its leading axis (a UTIL up the bucket tree does: its scope follows
    the order; elsewhere, as in a downward MAR message, NumPy's pairwise products copied
    transposes of it with 18 axes of 2 and ran 5x slower than the log space); a table whose peak is
    infinite or NaN; and an output entry that underflowed (below ``tiny / eps``, where precision
    is lost) although some assignment under it has a positive weight, i.e. products of factors far
    from their peaks, which only log space holds. Exact zeros (every product has a zero factor)
    come out as ``-inf``, as in log space.
    """
    names: dict[str, str] = {}
    for t in tables:
        for v in t.scope:
            if v not in names:
                if len(names) == len(_LETTERS):
                    return None
                names[v] = _LETTERS[len(names)]
    if sum(t.data.size for t in tables) > 2 * max(out_entries, block_entries):
        return None
    if max(tables, key=lambda t: t.data.size).scope[:1] != (var,):
        return None
    dtype = np.result_type(*[t.data.dtype for t in tables])
    weights, shift = [], 0.0
    for t in tables:
        peak = float(np.max(t.data)) if t.data.size else -math.inf
        if not math.isfinite(peak):
            return None
        shift += peak
        weights.append(np.exp(t.data - peak))
    spec = ",".join("".join(names[v] for v in t.scope) for t in tables)
    spec += "->" + "".join(names[v] for v in out_scope)
    path = ("greedy", max(out_entries, *(t.data.size for t in tables)))
    total = np.asarray(np.einsum(spec, *weights, optimize=path), dtype=dtype)
    info = np.finfo(dtype)
    small = total < info.tiny / info.eps
    if small.any():
        support = [(t.data > -np.inf).astype(dtype) for t in tables]
        reachable = np.asarray(np.einsum(spec, *support, optimize=path))
        if np.any(reachable[small] > 0):
            return None
    with np.errstate(divide="ignore"):
        np.log(total, out=total)
    total += shift
    return total


def _logsumexp_slabs(slabs: np.ndarray, target: np.ndarray, scratch: np.ndarray) -> None:
    """target = log(sum_x exp(slabs[x])), shifted by the peak over x; an infinite peak (every
    slice -inf, or one +inf) comes out as that peak. ``slabs`` is overwritten."""
    peak = np.copy(slabs[0, ...])
    for x in range(1, len(slabs)):
        np.maximum(peak, slabs[x, ...], out=peak)
    shift = np.where(np.isfinite(peak), peak, 0.0).astype(slabs.dtype, copy=False)
    np.subtract(slabs, shift, out=slabs)
    with np.errstate(over="ignore"):  # a +inf peak (left unshifted) stays +inf
        np.exp(slabs, out=slabs)
    np.copyto(scratch, slabs[0, ...])
    for x in range(1, len(slabs)):
        np.add(scratch, slabs[x, ...], out=scratch)
    with np.errstate(divide="ignore"):
        np.log(scratch, out=scratch)
    np.add(scratch, shift, out=target)


def _broadcast_view(table: Table, full: tuple[str, ...]) -> np.ndarray:
    """The table with its axes ordered as in ``full`` and size-1 axes for missing variables."""
    order = sorted(table.scope, key=full.index)
    data = np.transpose(table.data, [table.scope.index(v) for v in order])
    shape = tuple(table.sizes()[v] if v in table.scope else 1 for v in full)
    return data.reshape(shape)


_FOLDS = {"min": np.minimum, "max": np.maximum, "sum": np.add, "logsumexp": np.logaddexp}


def _prepare_block_source(
    table: Table, out_scope: tuple[str, ...], var: str, lead: int, copy_below: int
) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """For the block loop: the table with its axes as (lead variables, ``var``, the rest), which
    lead indices select its leading axes, and its broadcast shape over ``out_scope[lead:]``.

    Tables of at most ``copy_below`` entries are made contiguous in that layout (cache-friendly
    slices); larger ones stay strided views, never copied."""
    for v in table.scope:
        if v != var and v not in out_scope:
            raise ModelError(f"variable {v!r} of a table is not in the join scope")
    position = {v: i for i, v in enumerate(out_scope)}
    lead_vars = sorted(
        (v for v in table.scope if v != var and position[v] < lead), key=position.__getitem__
    )
    rest = sorted(
        (v for v in table.scope if v != var and position[v] >= lead), key=position.__getitem__
    )
    order = [*lead_vars, *([var] if var in table.scope else []), *rest]
    data = np.transpose(table.data, [table.scope.index(v) for v in order])
    if data.size <= copy_below:
        data = np.ascontiguousarray(data)
    sizes = table.sizes()
    view_shape = tuple(sizes[v] if v in table.scope else 1 for v in out_scope[lead:])
    return data, tuple(position[v] for v in lead_vars), view_shape


def _sum_value_slabs(
    values: np.ndarray,
    sources: list[tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]],
    lead_index: tuple[int, ...],
    first: int,
) -> None:
    """values[k] = sum of every source's slice at ``lead_index`` and value ``first + k`` of the
    eliminated variable (the axis after a source's lead axes), broadcast."""
    span = slice(first, first + values.shape[0])
    for k, (data, lead_axes, view_shape) in enumerate(sources):
        index: tuple[int | slice, ...] = (*(lead_index[i] for i in lead_axes), span)
        piece = data[index]
        piece = piece.reshape((piece.shape[0], *view_shape))
        if k == 0:
            np.copyto(values, piece)
        else:
            np.add(values, piece, out=values)


def _sum_slices(
    acc: np.ndarray,
    sources: list[tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]],
    lead_index: tuple[int, ...],
    var_index: tuple[int, ...],
) -> None:
    """acc = sum of every source's slice at ``lead_index`` (and ``var_index``), broadcast."""
    for k, (data, lead_axes, view_shape) in enumerate(sources):
        piece = data[(*(lead_index[i] for i in lead_axes), *var_index)].reshape(view_shape)
        if k == 0:
            np.copyto(acc, piece)
        else:
            np.add(acc, piece, out=acc)
