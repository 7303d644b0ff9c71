"""The (mini-)bucket pass: eliminate every bucket along an order and keep what each produced.

BE is MBE with an unbounded mini-bucket size. Variables are processed in the given order; each
bucket goes through the shared bucket step (:mod:`dcop.buckets`): split into mini-buckets of at
most ``z`` variables (one for BE), each joined and eliminated in one fused pass, its output placed
in the bucket of its earliest variable. The pass keeps every bucket's tables, and for each message
the bucket it came from: BE's value-assignment phase (:mod:`dcop.inference.elimination`) reads the
buckets again, and the AND/OR search (:mod:`dcop.search`) compiles the messages into its heuristic.

A BE run whose plan keeps argbest tables instead (``plan.decode == "argbest"``, where keeping
every message would not fit: :meth:`dcop.plan.bucket_plan.MemoryPlan.within`) eliminates each
bucket with :func:`eliminate_keeping_argbest`, keeps its argbest table (a bit per entry for a
binary variable, else the smallest unsigned dtype that holds its values) and drops the bucket's
tables at once; :func:`decode` then reads one entry of each argbest table.

A progress hook hears of each bucket before it is eliminated, and again between the pieces of
its fused join+eliminate (:mod:`dcop.backends.between`: NumPy's blocks; CuPy's pieces of about
50 ms of queued work, each waited for before the hook); a hook that raises stops the pass, inside
a large bucket too (the search's deadline).

The sum of the scalar outputs (and of the problem's constant) is the optimum (BE) or a lower
bound (MBE). This module sits below ``dcop.inference``: the search uses it without importing the
inference room.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.backends.base import Planned, TableBackend, capable, on_device
from dcop.backends.between import Check, checked_between
from dcop.buckets import (
    BucketOutput,
    OutputCheck,
    choose_value,
    eliminate_bucket,
    plan_bucket,
)
from dcop.errors import TableTooLarge
from dcop.model import Problem
from dcop.plan.bucket_plan import (
    MemoryPlan,
    largest_fitting_z,
    plan_memory,
    suggestion_bound,
)
from dcop.plan.memory import argbest_dtype, human_bytes, work_model_of
from dcop.tables import Op, Table

#: progress(done, total, variable): work done so far of the run's total, in joined entries (the
#: plan's :attr:`~dcop.plan.bucket_plan.MemoryPlan.total_work`), and the bucket now eliminated.
#: Heard before each bucket, and again while a bucket is eliminated (at most every
#: :data:`PROGRESS_WITHIN_S`): a hook that raises stops the pass there too.
ProgressFn = Callable[[int, int, str], None]

#: Seconds between two calls of the progress hook inside one bucket: the table operations call
#: it between their pieces (:mod:`dcop.backends.between`), thousands of times a second.
PROGRESS_WITHIN_S = 0.01


@dataclass
class EliminationStats:
    """What the elimination phase did: sizes, times and the bound it proves."""

    bound: float = 0.0
    largest_output: int = 0
    largest_joined: int = 0
    messages: int = 0
    seconds_eliminate: float = 0.0
    seconds_assign: float = 0.0
    bucket_seconds: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ArgbestTable:
    """A bucket's best value of its variable for every tuple of its output's scope (C order),
    where the pass keeps it: one bit per entry for a binary variable (``packed``, in
    ``packbits``' big-endian order), else one entry of :func:`~dcop.plan.memory.argbest_dtype`
    of the domain."""

    scope: tuple[str, ...]
    shape: tuple[int, ...]
    data: Any
    packed: bool

    @property
    def nbytes(self) -> int:
        return int(self.data.size) * int(self.data.dtype.itemsize)

    def value(self, backend: TableBackend, assignment: Mapping[str, int]) -> int:
        """The best value given the values of the scope's variables (one entry downloaded)."""
        index = 0
        for v, size in zip(self.scope, self.shape, strict=True):  # C order: the last fastest
            index = index * size + int(assignment[v])
        if not self.packed:
            return int(backend.to_numpy(self.data[index : index + 1])[0])
        byte = int(backend.to_numpy(self.data[index >> 3 : (index >> 3) + 1])[0])
        return (byte >> (7 - (index & 7))) & 1


@dataclass
class Buckets:
    """Every bucket after the pass: its tables (problem tables, then messages in arrival order),
    for each of them the bucket that made it (None: a problem table), and the scalar each bucket
    produced (the part of the bound that no later bucket holds). A pass with argbest decoding
    keeps no tables: ``argbest`` holds each bucket's best value per tuple of its output's scope
    (a table, or the value itself for a bucket with a scalar output)."""

    order: list[str]
    tables: dict[str, list[Table]]
    origins: dict[str, list[str | None]]
    scalars: dict[str, float]
    stats: EliminationStats
    argbest: dict[str, ArgbestTable | int] | None = None


def bucket_pass(
    problem: Problem,
    order: Sequence[str],
    backend: TableBackend,
    z: int | None = None,
    op: Op = "min",
    dtype: Any = np.float64,
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
    plan: MemoryPlan | None = None,
    match: bool = False,
) -> Buckets:
    """Run (mini-)bucket elimination along ``order`` on ``backend`` and keep every bucket.

    ``plan`` is this run's :func:`~dcop.plan.bucket_plan.plan_memory` (made here when not given):
    progress is reported in its work units. ``max_bytes`` is checked again before each output is
    built, against the bytes actually held (the plan's resident part, the input tables and every
    message so far): a second line of defence behind the caller's check of the plan. ``match``
    shifts costs between each bucket's mini-buckets before they are eliminated (MBE-MM,
    :mod:`dcop.momentmatch`): a tighter bound, the same tables' shapes.
    """
    position = {v: i for i, v in enumerate(order)}
    itemsize = np.dtype(dtype).itemsize
    if plan is None:
        plan = plan_memory(
            [t.scope for t in problem.tables],
            problem.domain_sizes(),
            order,
            z,
            itemsize,
            work=work_model_of(backend),
        )
    stats = EliminationStats(bound=float(problem.constant))
    tables: dict[str, list[Table]] = {v: [] for v in order}
    origins: dict[str, list[str | None]] = {v: [] for v in order}
    scalars: dict[str, float] = {}
    held = plan.resident_bytes
    # with several GPUs (plan.devices) only the tables in host memory count against max_bytes
    on_devices = plan.devices is not None
    lands_on_host = backend.output_on_host if capable(backend, Planned) else None

    def host_bytes(table: Table) -> int:
        if on_devices and not isinstance(table.data, np.ndarray):
            return 0
        return int(table.size * itemsize)

    for cost_table in problem.tables:
        if not cost_table.scope:
            stats.bound += float(cost_table.costs)
            continue
        first = min(cost_table.scope, key=position.__getitem__)
        table = backend.table(cost_table.scope, cost_table.dense(dtype), dtype)
        tables[first].append(table)
        origins[first].append(None)
        held += host_bytes(table)

    def check(var: str, scope: tuple[str, ...], out_entries: int) -> None:
        out_bytes = out_entries * itemsize if scope else 0  # a scalar is summed on the host
        if on_devices and callable(lands_on_host) and not lands_on_host(out_bytes):
            out_bytes = 0
        if max_bytes is not None and held + out_bytes > max_bytes:
            raise TableTooLarge(too_large_message(var, scope, out_bytes, held, max_bytes, plan))

    lean = plan.decode == "argbest"
    if lean and (z is not None or match or on_devices):
        raise ValueError("argbest decoding is BE's on one device or the host")
    argbest: dict[str, ArgbestTable | int] = {}

    def lean_check(var: str, scope: tuple[str, ...], out_entries: int) -> None:
        # a running best, one slice of the join, a mask and the argbest table being filled
        out_bytes = out_entries * (2 * itemsize + 1 + argbest_dtype(sizes[var]).itemsize)
        if max_bytes is not None and held + out_bytes > max_bytes:
            raise TableTooLarge(too_large_message(var, scope, out_bytes, held, max_bytes, plan))

    sizes = problem.domain_sizes()
    work = {b.var: b.work for b in plan.buckets}
    done = 0
    start = time.perf_counter()
    for var in order:
        if not tables[var]:  # a variable no table mentions: any value will do
            continue
        if progress is not None:
            progress(done, plan.total_work, var)
        t0 = time.perf_counter()
        if lean:
            with checked_between(within(progress, done, plan.total_work, var)):
                output, best = eliminate_keeping_argbest(
                    backend, tables[var], var, op=op, order=position, check=lean_check
                )
            argbest[var] = best
            held += (0 if isinstance(best, int) else best.nbytes) - _message_bytes(
                tables[var], origins[var], host_bytes
            )
            tables[var], origins[var] = [], []  # read no more: the argbest table decodes var
        else:
            with checked_between(within(progress, done, plan.total_work, var)):
                output = eliminate_bucket(
                    backend, tables[var], var, z=z, op=op, order=position, check=check,
                    match=match,
                )  # fmt: skip
        for mini in output.plans:
            stats.largest_output = max(stats.largest_output, mini.out_entries)
            stats.largest_joined = max(stats.largest_joined, mini.joined_entries)
        stats.messages += len(output.plans)
        stats.bound += output.scalar
        scalars[var] = output.scalar
        held += _place(output.tables, var, position, tables, origins, host_bytes)
        # nothing here may hold a message past the bucket that consumes it (argbest decoding
        # frees it there: a loop variable kept one 8 MiB message of a 20x20 spin glass alive)
        del output
        done += work.get(var, 0)
        stats.bucket_seconds[var] = time.perf_counter() - t0
    backend.synchronize()
    stats.seconds_eliminate = time.perf_counter() - start
    if progress is not None:
        progress(plan.total_work, plan.total_work, "")
    return Buckets(list(order), tables, origins, scalars, stats, argbest if lean else None)


def within(progress: ProgressFn | None, done: int, total: int, var: str) -> Check | None:
    """The check inside the bucket of ``var``: ``progress`` as heard before it, at most every
    PROGRESS_WITHIN_S (a bar's update, or a deadline's raise, costs more than a piece)."""
    if progress is None:
        return None
    last = time.monotonic()

    def check() -> None:
        nonlocal last
        now = time.monotonic()
        if now - last >= PROGRESS_WITHIN_S:
            last = now
            progress(done, total, var)

    return check


def _place(
    messages: Sequence[Table],
    var: str,
    position: Mapping[str, int],
    tables: dict[str, list[Table]],
    origins: dict[str, list[str | None]],
    host_bytes: Callable[[Table], int],
) -> int:
    """Put each message of bucket ``var`` in the bucket of its earliest variable; the bytes they
    add to the host."""
    added = 0
    for message in messages:
        first = min(message.scope, key=position.__getitem__)
        tables[first].append(message)
        origins[first].append(var)
        added += host_bytes(message)
    return added


def _message_bytes(
    bucket: Sequence[Table], origins: Sequence[str | None], host_bytes: Callable[[Table], int]
) -> int:
    """Host bytes of a bucket's messages (its tables that a bucket made)."""
    return sum(
        host_bytes(t) for t, origin in zip(bucket, origins, strict=True) if origin is not None
    )


#: The variable of one value whose elimination makes a slice of a bucket with the fused
#: kernel (:func:`eliminate_keeping_argbest`); no problem names a variable so.
SLICE_VAR = "\x00slice"


def eliminate_keeping_argbest(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    *,
    op: Op = "min",
    order: Mapping[str, int] | None = None,
    check: OutputCheck | None = None,
) -> tuple[BucketOutput, ArgbestTable | int]:
    """Eliminate ``var`` from a whole bucket (BE: one mini-bucket) and say, for every tuple of
    the output's scope, which value of ``var`` gives the best: the message and its
    :class:`ArgbestTable` (bits for a binary variable), or for a scalar output the best value
    itself.

    One pass per value ``x`` of ``var``: the tables sliced at ``x`` (a view where ``var`` leads
    the scope, as in every message of BE's order) joined over the output's scope, then folded
    into a running best and its argbest (strictly better only: the first best value, as
    ``argmin``). The fused kernel cannot say where its best came from, but it makes each slice:
    the slice is the elimination of a variable of one value (:data:`SLICE_VAR`, in a table of
    zeros) from the sliced tables, so the passes together cost one fused pass over the bucket,
    plus three element-wise passes over the output per value; and one slice, a mask and the
    argbest table more memory than the output alone.
    """
    if op not in ("min", "max"):
        raise ValueError(f"argbest decoding minimises or maximises, not {op!r}")
    sizes = {v: s for t in tables for v, s in zip(t.scope, t.shape, strict=True)}
    (plan,) = plan_bucket([t.scope for t in tables], var, sizes, None, order)
    if not plan.out_scope:  # the bucket's value does not depend on later variables
        value, cost = backend.best_value(tables, var, {}, op)
        return BucketOutput((), float(cost), (plan,)), int(value)
    if check is not None:
        check(var, plan.out_scope, plan.out_entries)
    xp = backend.xp
    better, fold = (xp.less, xp.minimum) if op == "min" else (xp.greater, xp.maximum)
    dtype = np.result_type(*[t.data.dtype for t in tables])
    one_value = backend.table((SLICE_VAR,), np.zeros(1, dtype), dtype)
    best: Any = None
    arg: Any = None
    with on_device(backend):
        for x in range(sizes[var]):
            sliced = [backend.condition(t, {var: x}) for t in tables]
            made = backend.join_eliminate([*sliced, one_value], SLICE_VAR, op, plan.out_scope)
            part = backend.asarray(made.data, dtype)  # already there: no copy
            del sliced, made
            if best is None:  # the first slice is the running best
                best = part
                arg = xp.zeros(part.shape, dtype=argbest_dtype(sizes[var]))
                continue
            mask = better(part, best)
            fold(best, part, out=best)
            xp.copyto(arg, arg.dtype.type(x), where=mask)  # a scalar of arg's dtype: no cast
            del part, mask
        packed = sizes[var] <= 2
        if packed:  # a bit per entry: 8x less than a byte (a 28x28 spin glass: 26 -> 3.3 GiB)
            arg = xp.packbits(arg.reshape(-1))
    shape = tuple(sizes[v] for v in plan.out_scope)
    kept = ArgbestTable(plan.out_scope, shape, arg.reshape(-1), packed)
    return BucketOutput((Table(plan.out_scope, best),), 0.0, (plan,)), kept


def decode(
    problem: Problem, buckets: Buckets, backend: TableBackend, op: Op = "min"
) -> dict[str, int]:
    """The value-assignment phase: along the order backwards, each variable's best value given
    the later ones (BE: an optimal assignment; MBE: the upper bound's assignment), read from the
    argbest tables of a pass that kept them."""
    assignment: dict[str, int] = {}
    for var in reversed(buckets.order):
        if buckets.argbest is None:
            assignment[var] = choose_value(backend, buckets.tables[var], var, assignment, op)
            continue
        best = buckets.argbest.get(var, 0)  # none: no table holds var, any value will do
        assignment[var] = best if isinstance(best, int) else best.value(backend, assignment)
    return {v: assignment[v] for v in problem.variables}


def too_large_message(
    var: str,
    scope: Sequence[str],
    out_bytes: int,
    held: int,
    max_bytes: float,
    plan: MemoryPlan,
) -> str:
    """Why a bucket's output is refused while the run holds ``held`` bytes, and the largest MBE z
    whose plan fits (the plan's z excluded)."""
    fitting = largest_fitting_z(plan, max_bytes, suggestion_bound(plan))
    way = (
        f"--algo mbe --z {fitting.z} for bounds"
        if fitting is not None
        else "nothing fits, not even MBE with z=1"
    )
    return (
        f"bucket of {var!r}: its output over {len(scope)} variables ({human_bytes(out_bytes)}) "
        f"would bring the tables held to {human_bytes(held + out_bytes)} > the memory limit of "
        f"{human_bytes(max_bytes)}; use --max-memory to raise it or {way}"
    )
