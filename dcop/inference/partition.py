"""Centralized probabilistic inference: the partition function (PR) and marginals (MAR).

Bucket elimination with ``logsumexp`` instead of ``min``, in log space on any table backend:

* **PR** (:func:`infer` with ``task="pr"``): one upward pass along the elimination order; each
  bucket's UTIL goes to the bucket of its earliest later variable, and the 0-d UTILs of the roots
  (plus ``ln d`` per variable in no table, plus the constant) add up to ``ln Z``. With evidence
  (conditioned by the reader) this is ``ln(P(e) Z)``.
* **MAR** (``task="mar"``): the same upward pass, then one downward pass over the bucket tree
  it built (:func:`dcop.sumproduct.down_messages`): every bucket's belief gives its variable's
  marginal. Two passes in all, never one elimination per variable.
* **Bounds** (``z`` given, PR only): mini-bucket passes (:func:`dcop.sumproduct.bound_util`) give
  an upper bound on ``Z`` (sum over one mini-bucket, max over the others; or weighted
  mini-bucket) and a lower bound (min over the others).

``Z = 0`` (no assignment with a positive weight, e.g. a model whose factors are all zero, or
impossible evidence) is the status ``infeasible``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from dcop.backends import resolve_backend
from dcop.backends.base import Planned, TableBackend, capable
from dcop.buckets import OutputCheck
from dcop.choices import SUM_TASKS, check_z
from dcop.errors import ModelError, TableTooLarge
from dcop.inference.elimination import ProgressFn
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.orders.greedy import induced_width, largest_table
from dcop.plan.bucket_plan import largest_fitting_z, plan_for, refusal, suggestion_bound
from dcop.plan.memory import Limit, effective_limit, human_bytes
from dcop.results.partition import PartitionResult
from dcop.sumproduct import (
    BOUND_NAMES,
    BoundKind,
    bound_util,
    down_messages,
    log_constant,
    log_potentials,
    marginal,
    sum_util,
)
from dcop.tables import Table

Task = Literal["pr", "mar"]
#: How exact PR/MAR run: tree contraction (default) or bucket elimination in log space.
METHODS: tuple[str, ...] = ("contract", "buckets")
TASKS: tuple[str, ...] = SUM_TASKS
#: Upper-bound kinds of a mini-bucket PR (the lower bound is always ``lower``).
UPPER_KINDS: tuple[str, ...] = ("upper", "weighted")


@dataclass
class BucketTree:
    """What the upward pass built: each bucket's own tables, its UTIL, and who sent to whom."""

    order: list[str]
    own: dict[str, list[Table]]
    utils: dict[str, Table] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    #: variables that no table holds (ln Z gets ln d from each, their marginal is uniform)
    empty: list[str] = field(default_factory=list)


def place_tables(tables: Sequence[Table], order: Sequence[str]) -> dict[str, list[Table]]:
    """Each table in the bucket of its earliest variable along ``order``."""
    position = {v: i for i, v in enumerate(order)}
    buckets: dict[str, list[Table]] = {v: [] for v in order}
    for table in tables:
        buckets[min(table.scope, key=position.__getitem__)].append(table)
    return buckets


def upward(
    backend: TableBackend,
    tables: Sequence[Table],
    order: Sequence[str],
    sizes: dict[str, int],
    check: OutputCheck | None = None,
    progress: ProgressFn | None = None,
    total: int | None = None,
) -> tuple[float, BucketTree]:
    """Exact sum-product elimination along ``order``: ``ln Z`` without the constant, and the
    bucket tree (every UTIL kept for a downward pass)."""
    position = {v: i for i, v in enumerate(order)}
    tree = BucketTree(list(order), place_tables(tables, order))
    tree.children = {v: [] for v in order}
    pending: dict[str, list[Table]] = {v: [] for v in order}
    ln_z = 0.0
    for done, var in enumerate(order):
        if progress is not None:
            progress(done, total or len(order), var)
        bucket = tree.own[var] + pending.pop(var)
        if not bucket:
            tree.empty.append(var)
            ln_z += math.log(sizes[var])
            continue
        scope = tuple(
            sorted({v for t in bucket for v in t.scope if v != var}, key=position.__getitem__)
        )
        if check is not None:
            check(var, scope, math.prod(sizes[v] for v in scope))
        util = sum_util(backend, bucket, var, scope=scope)
        if util.scope:
            tree.utils[var] = util
            parent = util.scope[0]
            tree.children[parent].append(var)
            pending[parent].append(util)
        else:
            ln_z += float(backend.to_numpy(util.data))
    return ln_z, tree


def downward(
    backend: TableBackend,
    tree: BucketTree,
    sizes: dict[str, int],
    check: OutputCheck | None = None,
    progress: ProgressFn | None = None,
) -> dict[str, np.ndarray]:
    """The marginal of every variable from one downward pass over ``tree`` (parents first)."""
    messages: dict[str, Table] = {}
    marginals: dict[str, np.ndarray] = {}
    n = len(tree.order)
    for done, var in enumerate(reversed(tree.order)):
        if progress is not None:
            progress(n + done, 2 * n, var)
        parent_message = messages.pop(var, None)
        if var in tree.empty:
            marginals[var] = np.full(sizes[var], 1.0 / sizes[var])
            continue
        child_utils = {c: tree.utils[c] for c in tree.children[var]}
        own = tree.own[var]
        sent = down_messages(backend, own, parent_message, child_utils, sizes=sizes, check=check)
        marginals[var], _ = marginal(
            backend, own, parent_message, child_utils, var, sizes[var], down=sent
        )
        messages.update(sent)
    return marginals


def bound_pass(
    backend: TableBackend,
    tables: Sequence[Table],
    order: Sequence[str],
    sizes: dict[str, int],
    z: int,
    kind: BoundKind,
    check: OutputCheck | None = None,
) -> tuple[float, int]:
    """One mini-bucket pass: a bound on ``ln Z`` without the constant, and the entries of its
    largest joined mini-bucket (output entries times the eliminated domain)."""
    position = {v: i for i, v in enumerate(order)}
    buckets = place_tables(tables, order)
    ln_bound = 0.0
    largest = 0
    for var in order:
        bucket = buckets[var]
        if not bucket:
            ln_bound += math.log(sizes[var])
            continue
        outputs, scalar = bound_util(backend, bucket, var, z, kind, order=position, check=check)
        ln_bound += scalar
        largest = max(largest, sizes[var])
        for message in outputs:
            buckets[message.scope[0]].append(message)
            largest = max(largest, message.size * sizes[var])
    return ln_bound, largest


def check_memory(
    problem: Problem,
    engine: TableBackend,
    order: Sequence[str],
    sizes: dict[str, int],
    task: str,
    z: int | None,
    itemsize: int,
    limit: Limit,
) -> None:
    """Refuse a run whose planned peak exceeds ``limit``, before any table is built.

    The upward pass is BE's (:func:`dcop.plan.bucket_plan.plan_memory`: every message is kept);
    MAR adds its downward messages (each the size of its child's UTIL, all counted as if live at
    once) and one bucket's marginalisation output.
    """
    plan = plan_for(problem, order, z, np.dtype(f"float{8 * itemsize}"), engine, task=task)
    if task == "mar":
        peak = plan.peak_bytes + plan.message_bytes + plan.largest_output * itemsize
        if peak > limit.bytes:
            raise TableTooLarge(
                f"MAR keeps every message for its downward pass: a planned peak of "
                f"{human_bytes(peak)} (the upward pass {human_bytes(plan.peak_bytes)}, the "
                f"downward messages {human_bytes(plan.message_bytes)}) exceeds {limit.text}; "
                "--task pr with --algo mbe --z N bounds Z instead"
            )
    elif not plan.fits(limit.bytes):
        fitting = largest_fitting_z(plan, limit.bytes, suggestion_bound(plan))
        raise TableTooLarge(refusal(plan, limit, fitting))


def infer(
    problem: Problem,
    task: str = "pr",
    z: int | None = None,
    ordering: str | ChosenOrder = "auto",
    backend: str | Any = "numpy",
    dtype: str = "auto",
    max_bytes: float | None = None,
    upper: str = "upper",
    progress: ProgressFn | None = None,
    method: str = "contract",
    space: str = "auto",
    order_time: float | None = None,
) -> PartitionResult:
    """The partition function (``task="pr"``) or the marginals (``task="mar"``) of ``problem``.

    ``z`` asks for mini-bucket bounds on ``Z`` instead of the exact value (PR only); ``upper``
    picks the upper bound's kind (``upper``: max over the mini-buckets but one; ``weighted``).
    ``ordering`` is ``auto`` (the ordering engine, searching ``order_time`` seconds; None: its
    default budget), a name of :data:`dcop.orders.greedy.ORDERINGS`, or an order or ``.td`` file
    (:func:`dcop.orders.choose.choose_order`).
    ``dtype`` is float64 unless ``float32`` is asked for (``auto`` is float64: sums of logs of
    probabilities need its precision). ``max_bytes`` caps the memory of the whole run, as for BE
    (:func:`check_memory`; default: what the process holds plus half the available memory).

    ``method`` runs exact PR/MAR by tree contraction (``contract``, the default:
    :func:`dcop.contraction.contract`, in ``space`` ``auto``/``scaled``/``log``, sliced to fit the
    device's memory) or by bucket elimination in log space (``buckets``).
    """
    if task not in TASKS:
        raise ModelError(f"unknown inference task {task!r}; use one of {', '.join(TASKS)}")
    if z is not None:
        z = check_z(z, "mini-bucket bounds on Z", error=ModelError)
        if task == "mar":
            raise ModelError("MAR needs exact elimination: mini-bucket marginals are not bounds")
        if upper not in UPPER_KINDS:
            raise ModelError(f"unknown upper bound {upper!r}; use one of {', '.join(UPPER_KINDS)}")
    if method not in METHODS:
        raise ModelError(f"unknown inference method {method!r}; use one of {', '.join(METHODS)}")
    engine = resolve_backend(backend)
    oom: tuple[type[BaseException], ...] = (MemoryError, *engine.out_of_memory_errors)
    chosen = np.float32 if dtype == "float32" else np.float64
    times: dict[str, float] = {}
    if capable(engine, Planned):
        # the contraction engine runs on one device; several devices split the buckets instead
        method = "buckets"
    if z is None and method == "contract" and isinstance(ordering, str):
        # (an order chosen beforehand, a ChosenOrder, runs by bucket elimination along it)
        return _by_contraction(problem, task, engine, chosen, max_bytes, ordering, space)

    t0 = time.perf_counter()
    adjacency = problem.neighbours()
    sizes = problem.domain_sizes()
    chosen_order = choose_order(problem, ordering, order_time)
    order = chosen_order.order
    width = induced_width(adjacency, order)
    biggest = largest_table(adjacency, order, sizes)
    times["ordering"] = time.perf_counter() - t0

    itemsize = np.dtype(chosen).itemsize
    limit = effective_limit(max_bytes)
    check_memory(problem, engine, order, sizes, task, z, itemsize, limit)

    def check(var: str, scope: tuple[str, ...], entries: int) -> None:
        # a second guard, per table, should the plan have missed one
        if entries * itemsize > limit.bytes:
            raise TableTooLarge(
                f"bucket of {var!r}: its table over {len(scope)} variables "
                f"({human_bytes(entries * itemsize)}) exceeds {limit.text}"
            )

    result = PartitionResult(
        problem=problem,
        task=task,
        algo="be" if z is None else "mbe",
        z=z,
        ordering=chosen_order.name,
        induced_width=width,
        largest_table=biggest,
        backend=engine.name,
        dtype=np.dtype(chosen).name,
        times=times,
    )
    try:
        tables, constant = log_potentials(engine, problem, chosen)
        if z is None:
            t0 = time.perf_counter()
            total = 2 * len(order) if task == "mar" else len(order)
            ln_z, tree = upward(engine, tables, order, sizes, check, progress, total)
            engine.synchronize()
            times["eliminate"] = time.perf_counter() - t0
            result.ln_lower = result.ln_upper = ln_z + constant
            if task == "mar" and result.ln_upper > -math.inf:
                t0 = time.perf_counter()
                result.marginals = downward(engine, tree, sizes, check, progress)
                engine.synchronize()
                times["downward"] = time.perf_counter() - t0
        else:
            t0 = time.perf_counter()
            ln_up, joined_up = bound_pass(engine, tables, order, sizes, z, upper, check)  # type: ignore[arg-type]
            times["upper"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            ln_low, joined_low = bound_pass(engine, tables, order, sizes, z, "lower", check)
            times["lower"] = time.perf_counter() - t0
            result.ln_upper = min(ln_up + constant, result.ln_upper)
            result.ln_lower = ln_low + constant
            result.bound_kinds = {"upper": BOUND_NAMES[upper], "lower": BOUND_NAMES["lower"]}
            result.largest_table = max(joined_up, joined_low)
    except oom as exc:
        # the plan fitted, yet an allocation failed (other processes took the memory meanwhile)
        raise TableTooLarge(
            f"{engine.name}: out of memory although the plan fitted ({exc})"
        ) from None
    if progress is not None:
        progress(1, 1, "")
    times["total"] = sum(times.values())
    return result


def _by_contraction(
    problem: Problem,
    task: str,
    engine: TableBackend,
    dtype: Any,
    max_bytes: float | None,
    ordering: str,
    space: str,
) -> PartitionResult:
    """Exact PR/MAR by :func:`dcop.contraction.contract`."""
    from dcop.contraction import contract

    log_constant(problem)  # a WCSP top has no partition function: refused before any work
    oom: tuple[type[BaseException], ...] = (MemoryError, *engine.out_of_memory_errors)
    try:
        out = contract(problem, task, engine, dtype, max_bytes, ordering, space, fallback=False)
        if out.space == "underflow":
            # scaled linear space cannot hold the range: log space, by bucket elimination where
            # its plan fits (its fused log-space kernels), else along the same tree
            attempt = out.times["contract"]
            try:
                result = infer(
                    problem,
                    task,
                    None,
                    ordering,
                    engine,
                    np.dtype(dtype).name,
                    max_bytes,
                    method="buckets",
                )
                result.space = "log (bucket elimination; scaled linear space underflowed)"
                result.times["scaled_attempt"] = attempt
                return result
            except TableTooLarge:
                out = contract(problem, task, engine, dtype, max_bytes, ordering, "log")
                out.space = "log (contraction tree; scaled linear space underflowed)"
                out.times["scaled_attempt"] = attempt
    except oom as exc:
        raise TableTooLarge(
            f"{engine.name}: out of memory although the plan fitted ({exc})"
        ) from None
    times = dict(out.times)
    times["total"] = sum(times.values())
    tree = out.plan.summary() | {"pruned_tables": out.pruned}
    if out.on_host:
        tree["on_host"] = True  # a tree this small ran on the host (engine.HOST_LARGEST)
    return PartitionResult(
        problem=problem,
        task=task,
        algo="be",
        z=None,
        ordering=out.plan.source,
        induced_width=max(0, out.plan.width - 1)
        if out.plan.source.startswith("order:")
        else out.plan.width,
        largest_table=out.plan.stats.largest,
        backend=engine.name,
        dtype=np.dtype(dtype).name,
        ln_lower=out.ln_z,
        ln_upper=out.ln_z,
        marginals=out.marginals,
        times=times,
        space=out.space,
        tree=tree,
    )


def solve_pr(problem: Problem, **kwargs: Any) -> PartitionResult:
    """``ln Z`` (exact, or bounds with ``z``): :func:`infer` with ``task="pr"``."""
    return infer(problem, "pr", **kwargs)


def solve_mar(problem: Problem, **kwargs: Any) -> PartitionResult:
    """The marginal of every variable: :func:`infer` with ``task="mar"``."""
    return infer(problem, "mar", **kwargs)
