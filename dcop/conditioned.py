"""MB-DPOP's table work: a bucket conditioned on many contexts at once, and a cluster root's best
over contexts.

A *context* is one assignment of a cluster's cut variables (:mod:`dcop.trees.cutset`). A chunk
of contexts becomes one more axis, :data:`CTX`, so that the whole chunk is one join and one
elimination on any backend (one batched kernel on a GPU): a table that holds cut variables is
gathered at every context of the chunk (:func:`gather`), the others broadcast along it.
:func:`chunk_util_loop` is the same computation one context at a time (the reference the tests
hold the batched one to). :class:`Fold` keeps a cluster root's best UTIL per value of its own
separator, and which context gave it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from dcop.backends.base import Streamed, TableBackend, capable, on_device
from dcop.buckets import eliminate_bucket
from dcop.tables import Op, Table

#: The contexts axis of a chunk's tables: a name with a NUL, which no variable of a text file
#: carries (an agent whose tables name it refuses the run: :func:`check_names`).
CTX = "\x00ctx"


def check_names(names: Sequence[str]) -> None:
    """Refuse a problem whose variables take the contexts axis' name."""
    if CTX in names:
        raise ValueError("a variable is named like MB-DPOP's contexts axis (a NUL character)")


def contexts(domains: Sequence[int], start: int, stop: int) -> np.ndarray:
    """Contexts ``start`` to ``stop`` (C order over the cut's variables): one row each."""
    index = np.arange(start, stop, dtype=np.int64)
    if not domains:
        return np.zeros((len(index), 0), dtype=np.int64)
    return np.stack(np.unravel_index(index, tuple(domains)), axis=1).astype(np.int64)


def gather(backend: TableBackend, table: Table, cut: Sequence[str], ctx: np.ndarray) -> Table:
    """``table`` at every context of the chunk: a table over (CTX, its other variables), or the
    table itself when it holds no cut variable (it is the same at every context)."""
    held = [k for k, v in enumerate(cut) if v in table.scope]
    if not held:
        return table
    names = [cut[k] for k in held]
    rest = [v for v in table.scope if v not in names]
    moved = backend.transpose(table, [*names, *rest])
    # one index array per cut axis: advanced indexing puts the chunk's axis first (a CuPy array
    # takes NumPy index arrays as well), on the backend's stream, behind the transpose; a device
    # table of a backend without one stream (the placed backend's, handed over by CUDA IPC) is
    # gathered on the host, where the bucket's placement takes it from
    index = tuple(np.ascontiguousarray(ctx[:, k]) for k in held)
    if capable(backend, Streamed) or isinstance(moved.data, np.ndarray):
        with on_device(backend):
            data = moved.data[index]
    else:
        data = backend.to_numpy(moved.data)[index]
    return Table((CTX, *rest), data)


def _ctx_axis(backend: TableBackend, count: int, like: Sequence[Table]) -> Table:
    """A zero table over CTX alone: joined in, it keeps the chunk's axis in every output."""
    dtype = like[0].data.dtype if like else np.float64
    return backend.table((CTX,), np.zeros(count, dtype=dtype), dtype)


def chunk_util(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    cut: Sequence[str],
    ctx: np.ndarray,
    op: Op = "min",
) -> Table:
    """The UTIL over (CTX, separator less the cut) of a bucket at every context of a chunk:
    ``tables`` are the agent's own and its children's (a child of the cluster sends tables with
    the CTX axis already). ``var`` is eliminated, unless it is itself a cut variable (its value is
    then the context's)."""
    batched = [gather(backend, t, cut, ctx) for t in tables]
    batched.append(_ctx_axis(backend, len(ctx), tables))
    if var in cut:
        return backend.join(batched)
    out = eliminate_bucket(backend, batched, var, op=op)
    (table,) = out.tables  # one bucket (no z), and the CTX axis keeps it a table
    return table


def chunk_util_loop(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    cut: Sequence[str],
    ctx: np.ndarray,
    op: Op = "min",
) -> Table:
    """:func:`chunk_util` one context at a time (conditioning each table, then the bucket's join
    and elimination): the reference for the batched computation."""
    rows = []
    scope: tuple[str, ...] | None = None
    for b, row in enumerate(ctx):
        at = dict(zip(cut, (int(x) for x in row), strict=True)) | {CTX: b}
        conditioned = [
            backend.condition(t, {v: x for v, x in at.items() if v in t.scope}) for t in tables
        ]
        if var in cut:  # nothing to eliminate: the tables over variables, and the rest's sum
            scoped = [t for t in conditioned if t.scope]
            extra = sum(float(backend.to_numpy(t.data)) for t in conditioned if not t.scope)
        else:
            out = eliminate_bucket(backend, conditioned, var, op=op)
            scoped, extra = list(out.tables), out.scalar
        if scoped:
            joined = backend.join(scoped)
            with on_device(backend):
                value = Table(joined.scope, joined.data + extra)
        else:
            value = Table((), backend.asarray(np.float64(extra)))
        if scope is None:
            scope = value.scope
        rows.append(backend.to_numpy(backend.transpose(value, scope).data))
    assert scope is not None
    return Table((CTX, *scope), np.stack(rows))


class Fold:
    """A cluster root's best UTIL per value of its separator over the contexts so far, and the
    context that gave it.

    The cut lists the root's separator variables first (:func:`dcop.trees.cutset.choose_cut`), so
    the contexts of one value of those variables are one run of ``inner`` consecutive contexts:
    each chunk folds a few runs, never a scatter."""

    def __init__(
        self,
        separator: Sequence[str],
        domains: Mapping[str, int],
        cut: Sequence[str],
        cut_domains: Sequence[int],
    ) -> None:
        sep = set(separator)
        self.first = [v for v in cut if v in sep]
        self.rest = [v for v in separator if v not in set(cut)]
        self.scope = (*self.first, *self.rest)
        lead = [d for v, d in zip(cut, cut_domains, strict=True) if v in sep]
        if [v for v in cut[: len(self.first)]] != self.first:
            raise ValueError("the cut must list the root's separator variables first")
        self.inner = math.prod(cut_domains[len(self.first) :])
        shape = (math.prod(lead), *(domains[v] for v in self.rest))
        self.lead_shape = tuple(lead)
        self.best = np.full(shape, np.inf)
        self.arg = np.zeros(shape, dtype=np.int64)

    def add(self, start: int, values: np.ndarray) -> None:
        """Fold the UTIL of contexts ``start``, ``start + 1``... (``values``: one row per context
        over ``self.rest``)."""
        b = 0
        while b < len(values):
            p = (start + b) // self.inner
            end = min(len(values), (p + 1) * self.inner - start)
            run = values[b:end]
            low = run.min(axis=0)
            better = low < self.best[p]
            if better.any():
                self.best[p] = np.where(better, low, self.best[p])
                self.arg[p] = np.where(better, run.argmin(axis=0) + start + b, self.arg[p])
            b = end

    def table(self) -> tuple[tuple[str, ...], np.ndarray]:
        """The root's UTIL over its separator (the first cut variables, then the rest)."""
        return self.scope, self.best.reshape(self.lead_shape + self.best.shape[1:])

    def best_context(self, values: Mapping[str, int]) -> int:
        """The context of the best UTIL at these values of the root's separator."""
        lead = (
            int(np.ravel_multi_index(tuple(values[v] for v in self.first), self.lead_shape))
            if self.first
            else 0
        )
        return int(self.arg[(lead, *(values[v] for v in self.rest))])
