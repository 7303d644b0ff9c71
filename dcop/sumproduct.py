"""Sum-product steps in log space: the partition function and marginals, bucket by bucket.

The same steps serve centralized PR/MAR (:mod:`dcop.inference.partition`, along a bucket tree)
and the agents of distributed PR/MAR (along DPOP's pseudo-tree). Tables hold **natural logs of
potentials** (``-cost`` of a ``neg_ln`` Problem, ``-inf`` for a zero), so no product ever
underflows or overflows: a join is a sum of logs, an elimination is a ``logsumexp`` (shifted by
its peak in every backend).

An agent first turns its own constraints (those whose deepest variable in the pseudo-tree is its
own) into log tables (:func:`log_tables`; the coordinator keeps the Problem's constant). Then, for
one variable ``v`` with its *bucket* (its own tables, whose other variables come later in the order
or are ancestors in the pseudo-tree, plus the UTIL messages of its children):

* :func:`sum_util` — upward: ``λ_v = ln Σ_v exp(Σ bucket)`` over the bucket's other variables
  (its separator); 0-d at a root, where it is the root's share of ``ln Z``.
* :func:`down_messages` — downward: to each child ``c``, the sum of the bucket *without*
  ``λ_c`` and with the parent's message ``π_v``, all but ``c``'s separator summed out:
  ``π_c = ln Σ exp(π_v + own + Σ_{c' ≠ c} λ_{c'})``. Leaving ``λ_c`` out (instead of dividing it
  out) keeps zeros exact.
* :func:`marginal` — the belief ``π_v + own + Σ_c λ_c`` summed down to ``v``, normalised: the
  marginal of ``v`` (given the evidence), and its normaliser, which is ``ln Z`` of ``v``'s
  connected component (without the constant). Given the messages it just sent down, it sums a
  child's separator belief ``π_c + λ_c`` instead of the whole bucket.

Bounds (mini-buckets of at most ``z`` variables, :func:`bound_util`): eliminating one mini-bucket
by ``logsumexp`` and the others by ``max`` gives an upper bound on ``Z``, by ``min`` a lower bound;
``weighted`` (Hölder's inequality with equal weights ``1/m`` on ``m`` mini-buckets: weighted
mini-bucket) gives another upper bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from dcop.backends.base import TableBackend, on_device
from dcop.buckets import OutputCheck, plan_bucket
from dcop.errors import ModelError
from dcop.model import CostTable, Problem
from dcop.tables import Op, Table, domain_sizes, union_scope

#: How a mini-bucket bound eliminates the mini-buckets after the first.
BoundKind = Literal["upper", "lower", "weighted"]
BOUND_KINDS: tuple[str, ...] = ("upper", "lower", "weighted")

#: What each bound kind is, in words (the result document states it).
BOUND_NAMES: dict[str, str] = {
    "upper": "mini-bucket upper bound: sum over one mini-bucket, max over the others",
    "lower": "mini-bucket lower bound: sum over one mini-bucket, min over the others",
    "weighted": "weighted mini-bucket upper bound (Hölder, equal weights 1/m over m mini-buckets)",
}


def log_potentials(
    backend: TableBackend, problem: Problem, dtype: Any = np.float64
) -> tuple[list[Table], float]:
    """The Problem's tables as backend tables of ``ln`` potentials (``-cost``), and the ``ln`` of
    its constant factor. Z is then ``Σ_x exp(-cost(x))``: for a UAI model, the product of its
    entries summed over every assignment.

    Raises ModelError for a Problem with a global upper bound (a WCSP ``top``): that cut is not a
    product of local factors, so it has no partition function of this form.
    """
    constant = log_constant(problem)
    return log_tables(backend, [t for t in problem.tables if t.scope], dtype), constant


def log_constant(problem: Problem) -> float:
    """``ln`` of the Problem's constant factor (its constant and its 0-d tables): the part of
    ``ln Z`` no variable's bucket holds. Raises ModelError for a Problem with a global upper
    bound (a WCSP ``top``): that cut is not a product of local factors."""
    if problem.upper_bound is not None:
        raise ModelError(
            "sum-product inference needs a product of local factors; this model has a global "
            "upper bound (a WCSP top)"
        )
    return -float(problem.constant) - sum(float(t.costs) for t in problem.tables if not t.scope)


def log_tables(
    backend: TableBackend, tables: Sequence[CostTable], dtype: Any = np.float64
) -> list[Table]:
    """Cost tables (``-ln`` of potentials) as backend tables of ``ln`` potentials: what an agent
    turns its own constraints into before its first UTIL."""
    out = []
    for t in tables:
        # in the run's dtype from the start; negated in place where the array is a new one
        dense = t.dense(dtype, own=True)
        out.append(backend.table(t.scope, np.negative(dense, out=dense), dtype))
    return out


#: The name of an axis that stands for several variables at once (never a variable's name).
_MERGED = "\0merged"


def _zeros(
    backend: TableBackend, scope: Sequence[str], sizes: Mapping[str, int], dtype: Any = np.float64
) -> Table:
    """ln 1 over ``scope``: the neutral table of a log-space product."""
    return backend.table(tuple(scope), np.zeros(tuple(sizes[v] for v in scope)), dtype)


def marginalize(
    backend: TableBackend,
    tables: Sequence[Table],
    keep: Sequence[str],
    sizes: Mapping[str, int] | None = None,
    check: OutputCheck | None = None,
) -> Table:
    """``ln Σ exp(Σ tables)`` over every variable not in ``keep``: a table over ``keep`` (in that
    order). The first variable is summed out in one fused join+eliminate (the joined table is never
    built), the others from its output. A variable of ``keep`` that no table holds gets a constant
    axis (``sizes`` gives its domain); with no tables at all the result is ``ln 1 = 0``.
    """
    keep = tuple(keep)
    known = dict(sizes or {})
    known.update(domain_sizes(tables))
    missing = [v for v in keep if v not in union_scope(t.scope for t in tables)]
    for v in missing:
        if v not in known:
            raise ModelError(f"marginalize: no table gives the domain of {v!r}")
    if not tables:
        return _zeros(backend, keep, known)
    present = union_scope(t.scope for t in tables)
    drop = [v for v in present if v not in keep]
    if drop:
        # sum the largest domain out in the fused pass, into a scope with the kept variables
        # first: the rest are then one trailing run of the C-order output, summed out in one
        # reduction over a merged axis (the table viewed with fewer, longer axes)
        first = max(drop, key=known.__getitem__)
        rest = [v for v in drop if v != first]
        kept = tuple(v for v in keep if v in present)
        scope = (*kept, *rest)
        if check is not None:
            check(first, scope, math.prod(known[v] for v in scope))
        out = backend.join_eliminate(tables, first, "logsumexp", scope=scope)
        if rest:
            merged = out.data.reshape((*(known[v] for v in kept), -1))
            out = backend.eliminate(Table((*kept, _MERGED), merged), _MERGED, "logsumexp")
    else:
        out = tables[0] if len(tables) == 1 else backend.join(tables)
    if missing:
        out = backend.join([out, _zeros(backend, missing, known, out.data.dtype)])
    return backend.transpose(out, keep)


def sum_util(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    scope: Sequence[str] | None = None,
    size: int | None = None,
) -> Table:
    """The UTIL message of ``var``'s bucket: ``ln Σ_var exp(Σ tables)`` over the other variables
    (``scope`` orders them; by default in order of first appearance).

    A bucket without tables (a variable in no table) needs its domain ``size``: its UTIL is the
    0-d ``ln size``.
    """
    if not tables:
        if size is None:
            raise ModelError(
                f"sum_util: the bucket of {var!r} is empty and no domain size is given"
            )
        return backend.table((), np.asarray(math.log(size)))
    return backend.join_eliminate(tables, var, "logsumexp", scope=scope)


def bucket_tables(
    own: Sequence[Table], parent_message: Table | None, child_utils: Mapping[str, Table]
) -> list[Table]:
    """Everything in a bucket once the downward pass reached it: own tables, the parent's
    message (absent at a root), and every child's UTIL."""
    tables = list(own)
    if parent_message is not None:
        tables.append(parent_message)
    tables.extend(child_utils.values())
    return tables


def down_messages(
    backend: TableBackend,
    own: Sequence[Table],
    parent_message: Table | None,
    child_utils: Mapping[str, Table],
    separators: Mapping[str, Sequence[str]] | None = None,
    sizes: Mapping[str, int] | None = None,
    check: OutputCheck | None = None,
) -> dict[str, Table]:
    """The downward message to every child: ``π_c = ln Σ exp(π_v + own + Σ_{c' ≠ c} λ_{c'})``
    over ``c``'s separator (``separators[c]``, by default the scope of ``child_utils[c]``).

    ``π_c`` times ``λ_c`` is then the marginal of ``c``'s separator (times ``Z``).
    """
    known = dict(sizes or {})
    known.update(domain_sizes(bucket_tables(own, parent_message, child_utils)))
    out: dict[str, Table] = {}
    for child, util in child_utils.items():
        others = {c: u for c, u in child_utils.items() if c != child}
        keep = tuple(separators[child]) if separators is not None else util.scope
        tables = bucket_tables(own, parent_message, others)
        out[child] = marginalize(backend, tables, keep, known, check)
    return out


def normalize(log_values: np.ndarray) -> tuple[np.ndarray, float]:
    """Probabilities from unnormalised log values, and the log normaliser (``-inf`` when every
    value is ``-inf``: then the probabilities are NaN and the caller reports infeasibility)."""
    values = np.asarray(log_values, dtype=np.float64).ravel()
    peak = float(values.max()) if values.size else -math.inf
    if not math.isfinite(peak):
        return np.full(values.shape, math.nan), peak
    weights = np.exp(values - peak)
    total = float(weights.sum())
    return weights / total, peak + math.log(total)


def marginal(
    backend: TableBackend,
    own: Sequence[Table],
    parent_message: Table | None,
    child_utils: Mapping[str, Table],
    var: str,
    size: int | None = None,
    down: Mapping[str, Table] | None = None,
) -> tuple[np.ndarray, float]:
    """The marginal of ``var`` from its bucket's belief (own tables, the parent's message and the
    children's UTILs), as host probabilities in value order, and the belief's log normaliser
    (``ln Z`` of ``var``'s connected component). ``size`` is needed when no table holds ``var``.

    With ``down`` (the messages :func:`down_messages` sent to the children), the belief of a
    child's separator, ``π_c + λ_c``, gives the same marginal from a table over that separator
    (which holds ``var`` and is part of the bucket's scope) instead of the whole bucket.
    """
    usable = [c for c in child_utils if down is not None and c in down]
    if usable:
        child = min(usable, key=lambda c: child_utils[c].size)
        tables = [child_utils[child], down[child]]  # type: ignore[index]
    else:
        tables = bucket_tables(own, parent_message, child_utils)
    sizes = {var: size} if size is not None else None
    belief = marginalize(backend, tables, (var,), sizes)
    return normalize(backend.to_numpy(belief.data))


def bound_util(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    z: int,
    kind: BoundKind = "upper",
    order: Mapping[str, int] | None = None,
    check: OutputCheck | None = None,
) -> tuple[list[Table], float]:
    """Mini-bucket elimination of ``var`` for a bound on ``Z``: the bucket split into mini-buckets
    of at most ``z`` variables (:func:`dcop.buckets.plan_bucket`); the first (widest) is summed out,
    the others maximised (``upper``) or minimised (``lower``); ``weighted`` sums each mini-bucket
    ``k`` of the ``m`` at temperature ``w = 1/m``: ``w ln Σ exp(Σ tables / w)``.

    Returns the output tables over some variables and the sum of the 0-d outputs (log space).
    """
    if kind not in BOUND_KINDS:
        raise ModelError(f"unknown bound kind {kind!r}; use one of {', '.join(BOUND_KINDS)}")
    sizes = domain_sizes(tables)
    plans = plan_bucket([t.scope for t in tables], var, sizes, z, order)
    weight = 1.0 / len(plans) if plans else 1.0
    out: list[Table] = []
    scalar = 0.0
    for k, plan in enumerate(plans):
        if check is not None:
            check(var, plan.out_scope, plan.out_entries)
        members = [tables[i] for i in plan.members]
        op: Op = "logsumexp"
        weighted = kind == "weighted" and len(plans) > 1
        if weighted:
            with on_device(backend):  # on the backend's stream, before its kernel reads them
                members = [Table(t.scope, t.data / weight) for t in members]
        elif k > 0:
            op = "max" if kind == "upper" else "min"
        message = backend.join_eliminate(members, var, op, scope=plan.out_scope)
        if weighted:
            with on_device(backend):
                message = Table(message.scope, message.data * weight)
        if message.scope:
            out.append(message)
        else:
            scalar += float(backend.to_numpy(message.data))
    return out, scalar
