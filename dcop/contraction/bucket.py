"""One bucket of a sum-product elimination by the contraction engine: what an agent of distributed
PR/MAR runs for its own bucket where that pays.

``ln Σ_var exp(Σ tables)`` over the bucket's other variables, with the tables (logs) turned into
linear tables scaled by their peaks and multiplied pairwise (smallest first) by
:func:`dcop.contraction.execute.pair_product`: matrix products on the backend's array module, one
``exp`` per input entry and one ``log`` per output entry, where the fused log-space kernel spends
``d`` of each per output entry. Where an output entry falls below ``tiny / eps`` although an
assignment under it has a positive weight (support tables, multiplied the same way), scaled
linear space cannot hold the bucket's range and :func:`sum_bucket` returns None: the caller runs
its log-space join+eliminate instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dcop.backends.base import TableBackend, on_device
from dcop.buckets import BucketOutput, eliminate_bucket, plan_bucket
from dcop.contraction.execute import pair_product
from dcop.tables import Table

#: Output entries from which a bucket goes through the engine (below, the fused kernel's single
#: pass costs less than the engine's few array calls per pair).
MIN_ENTRIES = 1 << 12


def pays(tables: Sequence[Table], out_entries: int) -> bool:
    """Whether the engine is worth it for this bucket (it runs on any backend's array module):
    more than one table, and an output of at least :data:`MIN_ENTRIES` entries."""
    return len(tables) > 1 and out_entries >= MIN_ENTRIES


def sum_bucket(
    backend: TableBackend, tables: Sequence[Table], var: str, scope: Sequence[str]
) -> Table | None:
    """``ln Σ_var exp(Σ tables)`` over ``scope`` (the tables' other variables, in that order), or
    None where scaled linear space cannot hold the bucket's range."""
    xp = backend.xp
    dtype = np.result_type(*[t.data.dtype for t in tables])
    info = np.finfo(dtype)
    tiny = float(info.tiny / info.eps)
    keep = frozenset(scope)
    items: list[tuple[tuple[str, ...], Any, Any]] = []
    shift = 0.0
    zeros = False
    for t in tables:
        peak = float(backend.to_numpy(xp.max(t.data))) if t.data.size else -math.inf
        if not math.isfinite(peak):
            return None  # a table of zeros or a +inf: the log-space path says what it means
        shift += peak
        linear = xp.exp(t.data - peak)
        support = t.data > -np.inf
        zeros = zeros or not bool(backend.to_numpy(xp.all(support)))
        items.append((t.scope, linear, support))
    items.sort(key=lambda it: int(it[1].size))
    scope_a, acc, sup_a = items[0]
    for k, (scope_b, data_b, sup_b) in enumerate(items[1:], start=2):
        want = keep if k == len(items) else keep | {var}
        before = scope_a
        acc, scope_a = pair_product(xp, acc, before, data_b, scope_b, want)
        sup, _ = pair_product(xp, sup_a.astype(dtype), before, sup_b.astype(dtype), scope_b, want)
        sup_a = sup > 0
        peak = xp.max(acc)
        acc /= xp.where(peak > 0, peak, 1)
        shift += float(backend.to_numpy(xp.log(xp.where(peak > 0, peak, 1))))
    if var in scope_a:  # a bucket of one table ends here
        index = scope_a.index(var)
        acc, sup_a = xp.sum(acc, axis=index), xp.any(sup_a, axis=index)
        scope_a = tuple(v for v in scope_a if v != var)
    small = acc < tiny
    if bool(backend.to_numpy(xp.any(small & sup_a if zeros else small))):
        return None
    with np.errstate(divide="ignore"):
        out = xp.log(acc) + shift
    order = [scope_a.index(v) for v in scope]
    return Table(tuple(scope), xp.ascontiguousarray(xp.transpose(out, order)))


def eliminate_sum_bucket(backend: TableBackend, tables: Sequence[Table], var: str) -> BucketOutput:
    """:func:`dcop.buckets.eliminate_bucket` with ``logsumexp`` (exact, no mini-buckets), by the
    engine where that pays (:func:`pays`) and scaled linear space holds the bucket's range."""
    sizes = {v: s for t in tables for v, s in zip(t.scope, t.shape, strict=True)}
    plans = plan_bucket([t.scope for t in tables], var, sizes, None, None)
    if len(plans) == 1 and plans[0].out_scope and pays(tables, plans[0].out_entries):
        with on_device(backend):
            out = sum_bucket(backend, tables, var, plans[0].out_scope)
        if out is not None:
            return BucketOutput((out,), 0.0, tuple(plans))
    return eliminate_bucket(backend, tables, var, op="logsumexp")
