"""Planning a GPU join+eliminate from shapes alone: which kernel, its signature, its metadata.

Everything here works on scopes, shapes and dtypes (no data, no CuPy), so a bucket can be planned,
and its kernel compiled, before its tables exist (an agent knows its bucket's shape once the
pseudo-tree is built, before the UTIL messages arrive), and the plans can be tested on any machine.
:mod:`dcop.gpu.backend` turns a plan into launches on a device; :mod:`dcop.gpu.kernels` holds the
CUDA sources that the signatures select.

A plan is *generic* (one precompiled kernel reads strides from a metadata array at run time: small
buckets, where compiling would cost more than running) or *generated* (a kernel compiled for the
bucket's :class:`~dcop.gpu.kernels.FusedSig`). The inputs are taken in a canonical order (by scope,
then shape), so that the same bucket gives the same signature whatever order its tables come in.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dcop.errors import ModelError
from dcop.gpu import kernels as K
from dcop.tables import check_join_eliminate_scopes

#: What a kernel generated for one bucket shape costs and gains (the H100 of
#: benchmarks/results/gpu_kernels.md; the H200 is alike): NVRTC's compile of one signature, and
#: the joined entries per second of the generic kernel (its slowest measured: d = 4, 15 binary
#: tables, 1e9 entries) and of a generated one (its slower large buckets).
COMPILE_S = 0.5
GENERIC_ENTRIES_PER_S = 4e10
GENERATED_ENTRIES_PER_S = 2e12
#: Joined entries of one bucket shape, summed over its calls, from which a kernel generated for
#: it pays for its compile: the seconds it saves over the generic kernel reach COMPILE_S (about
#: 2e10). Below, a shape runs on the generic kernel, compiled once per machine: a first solve
#: of a new problem compiles nothing (a ±J spin glass 24x24 spent 8.7 s of 9.4 s compiling one
#: kernel per bucket shape at the former 2^22).
DEFAULT_SPECIALIZE_ENTRIES = int(
    COMPILE_S / (1 / GENERIC_ENTRIES_PER_S - 1 / GENERATED_ENTRIES_PER_S)
)
#: A caller that compiles ahead of its data, off its critical path (a GPU agent's
#: ``prepare_bucket`` in the background), pays little for a compile: from this size on.
AHEAD_SPECIALIZE_ENTRIES = 1 << 22
#: ``specialize_entries`` that no bucket reaches: the generic kernel wherever it can run.
NEVER_SPECIALIZE = 1 << 62
#: Largest bucket (joined entries) that runs with the generic kernel while its own is still being
#: compiled in the background; a larger one waits for its kernel (the generic kernel's extra time
#: there could exceed the rest of the compile).
GENERIC_FALLBACK_MAX_ENTRIES = 100_000_000
#: Share of ``specialize_entries`` from which a shape the generic kernel runs while its own
#: compiles (its buckets at most ``GENERIC_FALLBACK_MAX_ENTRIES``) earns its kernel: that compile
#: runs on a thread, so it costs the call nothing and the break-even of a compile on the critical
#: path does not apply; the shape's kernel is then ready within the first calls of a repeated
#: solve. A ±J spin glass 22x22 solved 15 times on the H200 ran its warm calls at 0.22-0.24 s
#: until the sixth earned its one kernel, then at 0.16 s (1.5x between warm calls).
BACKGROUND_SHARE = 0.1
#: Rows (or groups) per launch, well inside 32-bit indices.
MAX_LAUNCH_ROWS = 1 << 30
#: Blocks per multiprocessor of a launch's grid at most (grid-stride loops beyond): the generic
#: kernels', and a generated fused kernel's.
GENERIC_BLOCKS_PER_SM = 32
GENERATED_BLOCKS_PER_SM = 8
#: Predicted seconds of queued work after which a join+eliminate run under a check
#: (:mod:`dcop.backends.between`: a pass with a deadline) waits for its stream and runs the
#: check: how late a deadline inside one large bucket is heard, at most about one piece. Each
#: wait leaves the device idle for SYNC_S (the wait's return, the check, the next launch); the
#: rates of :func:`predicted_seconds` are near the slow end of those measured on the large
#: buckets of benchmarks/results/gpu_kernels_h200.md (joined entries per second: generic
#: 5.6e10-1.9e11, generated 8.7e11-7.8e12), so a piece runs 10-115 ms and the waits cost
#: SYNC_S / 10 ms = 1 % at most, 0.2 % at the model's rates. A piece is also at least a
#: launch's whole grid (:func:`grid_units`). No check: no wait, no piece.
PIECE_S = 0.05
#: Seconds the device idles at one such wait (an estimate: a stream synchronize's return and a
#: RawKernel launch are tens of microseconds each through CuPy; not measured on this machine).
SYNC_S = 1e-4
#: How much slower than ``min`` an op's fused kernel runs per joined entry (an exp and a log
#: per entry: 5x in float32, 8x in float64 on the H200; ``sum`` and ``max`` run as ``min``).
OP_COST = {"min": 1.0, "max": 1.0, "sum": 1.0, "logsumexp": 10.0}


@dataclass(frozen=True)
class PlanSettings:
    """The backend's choices that shape a plan (see :class:`dcop.gpu.CupyBackend`).

    Attributes
    ----------
    specialize_entries
        Joined entries of one bucket shape, summed over the calls of a :class:`PlanCache`, from
        which it gets a generated kernel (0: always; :data:`NEVER_SPECIALIZE`: only a bucket the
        generic kernel cannot run).
    min_groups
        A generated kernel gives each thread all rows that differ in the last output variable only
        when that leaves at least this many threads; otherwise one row per thread.
    stage_output
        Let generated kernels stage a warp's output rows in shared memory (coalesced stores).
    background_share
        A shape whose buckets have at most ``background_max_entries`` joined entries (the
        generic kernel runs them while their own compiles on a thread) earns its kernel at this
        share of ``specialize_entries`` (:data:`BACKGROUND_SHARE` in a backend; 1: none).
    """

    specialize_entries: int = DEFAULT_SPECIALIZE_ENTRIES
    min_groups: int = 0
    stage_output: bool = True
    background_share: float = 1.0
    background_max_entries: int = GENERIC_FALLBACK_MAX_ENTRIES


@dataclass(frozen=True)
class BucketPlan:
    """One join+eliminate, resolved from shapes: the kernel to run and how to launch it.

    ``scopes`` and ``shapes`` are in plan order; ``order[k]`` is the caller's index of the plan's
    ``k``-th table. A generic plan carries its int64 metadata with zeros where the device pointers
    go (``pointers``: pairs of metadata position and plan-order table index); a generated plan
    carries its signature ``sig``. Launches cover ``n_units`` units (output rows for the generic
    kernel, groups of ``rows_per_unit`` rows for a generated one).
    """

    scopes: tuple[tuple[str, ...], ...]
    shapes: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
    var: str
    op: str
    dtype: np.dtype
    out_scope: tuple[str, ...]
    out_shape: tuple[int, ...]
    ndom: int
    generated: bool
    sig: K.FusedSig | None
    meta: tuple[int, ...]
    pointers: tuple[tuple[int, int], ...]
    n_units: int
    rows_per_unit: int

    @property
    def n_out(self) -> int:
        return math.prod(self.out_shape)

    @property
    def out_bytes(self) -> int:
        return self.n_out * self.dtype.itemsize

    @property
    def joined(self) -> int:
        """Entries of the (never built) joined table."""
        return self.n_out * self.ndom

    @property
    def kernel_name(self) -> str:
        """The name of the kernel this plan launches."""
        if self.sig is not None:
            return self.sig.name
        return K.generic_name(self.op, self.dtype.name)


class PlanCache:
    """Plans of :func:`plan_join_eliminate` by the bucket's structure, not its names.

    A name stands for its place (the output's variables by position, the eliminated one), so
    buckets that differ only in their variables' names share one plan, renamed on the way out:
    the plan an agent makes at Go for its kernel (with ids for names) is then the one its bucket
    takes without planning again. Planning took 25 us of a 133 us warm join+eliminate of a
    1e6-entry bucket on the H200, and a fifth of a GPU agent's bucket under cProfile.

    The cache also sums the joined entries planned per structure: a shape gets its generated
    kernel once that sum reaches ``settings.specialize_entries`` (a large bucket at once, a
    shape met again and again once its calls have paid for the compile), and the generic
    kernel until then."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._plans: dict[tuple[object, ...], BucketPlan] = {}
        #: joined entries planned so far, per structure (scopes by place, shapes, dtype, op)
        self._entries: dict[tuple[object, ...], int] = {}

    def plan(
        self,
        scopes: Sequence[Sequence[str]],
        shapes: Sequence[Sequence[int]],
        dtype: Any,
        var: str,
        op: str,
        scope: Sequence[str] | None,
        settings: PlanSettings,
    ) -> BucketPlan:
        """:func:`plan_join_eliminate`, planned once per structure and settings."""
        out = tuple(scope) if scope is not None else None
        if out is None:
            out = tuple(v for v in dict.fromkeys(v for s in scopes for v in s) if v != var)
        place = {v: f"o{k}" for k, v in enumerate(out)}
        place[var] = "e"
        try:
            structure = (
                tuple(tuple(place[v] for v in s) for s in scopes),
                tuple(tuple(int(n) for n in shape) for shape in shapes),
                np.dtype(dtype).str,
                op,
                len(out),
            )
        except KeyError:  # a variable with no place: the planner names what is wrong
            return plan_join_eliminate(scopes, shapes, dtype, var, op, scope, settings)
        if len(self._plans) >= self.size or len(self._entries) >= self.size:
            self._plans.clear()
            self._entries.clear()
        joined = _joined(structure[0], structure[1])
        seen = self._entries.get(structure, 0) + joined
        self._entries[structure] = seen
        earns = settings.specialize_entries
        if joined <= settings.background_max_entries:  # compiled off the call's path
            earns = int(earns * settings.background_share)
        chosen = dataclasses.replace(
            settings,
            specialize_entries=0 if seen >= earns else NEVER_SPECIALIZE,
            background_share=1.0,
        )
        key = (*structure, chosen)
        plan = self._plans.get(key)
        if plan is None:
            check_join_eliminate_scopes(scopes, shapes, var, op, scope)  # errors in real names
            places = tuple(place[v] for v in out)
            plan = plan_join_eliminate(structure[0], shapes, dtype, "e", op, places, chosen)
            self._plans[key] = plan
        name = {c: v for v, c in place.items()}
        return dataclasses.replace(
            plan,
            scopes=tuple(tuple(name[c] for c in s) for s in plan.scopes),
            var=var,
            out_scope=out,
        )


def _joined(scopes: Sequence[Sequence[str]], shapes: Sequence[Sequence[int]]) -> int:
    """Entries of the joined table of tables with these scopes and shapes (a mismatch is
    :func:`check_join_eliminate_scopes`'s to name)."""
    sizes = {
        v: n
        for scope, shape in zip(scopes, shapes, strict=False)
        for v, n in zip(scope, shape, strict=False)
    }
    return math.prod(sizes.values())


def c_strides(shape: Sequence[int]) -> list[int]:
    """C-order strides of ``shape``, in elements."""
    out = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        out[k] = out[k + 1] * int(shape[k + 1])
    return out


def kernel_dtype(dtypes: Iterable[Any]) -> np.dtype:
    """The dtype the kernels compute a bucket in: the inputs' common float type (float64 for
    anything else, integers included)."""
    dtype = np.dtype(np.result_type(*list(dtypes)))
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


def plan_join_eliminate(
    scopes: Sequence[Sequence[str]],
    shapes: Sequence[Sequence[int]],
    dtype: Any,
    var: str,
    op: str = "min",
    scope: Sequence[str] | None = None,
    settings: PlanSettings = PlanSettings(),
) -> BucketPlan:
    """Plan ``join_eliminate`` of tables with these scopes and shapes, computed in ``dtype``.

    Parameters
    ----------
    scopes, shapes
        One scope and one shape per input table, in the caller's order.
    dtype
        The dtype to compute in (see :func:`kernel_dtype`): float32 or float64.
    var
        The variable to eliminate.
    op
        The elimination op (``min``, ``max``, ``sum``, ``logsumexp``).
    scope
        Order of the output's variables (default: first appearance in the tables).
    settings
        The backend's planning choices.

    Returns
    -------
    BucketPlan
        The plan; generated plans name their kernel in ``sig``.
    """
    sizes, out = check_join_eliminate_scopes(scopes, shapes, var, op, scope)
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ModelError(f"GPU kernels compute in float32 or float64, not {dt}")
    order = tuple(sorted(range(len(scopes)), key=lambda j: (tuple(scopes[j]), tuple(shapes[j]))))
    p_scopes = tuple(tuple(scopes[j]) for j in order)
    p_shapes = tuple(tuple(int(s) for s in shapes[j]) for j in order)
    out_shape = tuple(sizes[v] for v in out)
    n_out = math.prod(out_shape)
    ndom = sizes[var]
    meta_words = 3 + sum(3 + 3 * len(s) for s in p_scopes)
    generated = (
        n_out * ndom >= settings.specialize_entries
        or len(p_scopes) > K.GENERIC_MAX_TABLES
        or meta_words > K.GENERIC_MAX_META
        or n_out >= MAX_LAUNCH_ROWS
    )
    sig: K.FusedSig | None = None
    meta: tuple[int, ...] = ()
    pointers: tuple[tuple[int, int], ...] = ()
    if generated:
        sig = fused_signature(p_scopes, p_shapes, dt, var, op, out, out_shape, settings)
        n_units, rows_per_unit = sig.n_groups, sig.dy
    else:
        meta, pointers = generic_meta(p_scopes, p_shapes, var, out, out_shape)
        n_units, rows_per_unit = n_out, 1
    return BucketPlan(
        scopes=p_scopes,
        shapes=p_shapes,
        order=order,
        var=var,
        op=op,
        dtype=dt,
        out_scope=out,
        out_shape=out_shape,
        ndom=ndom,
        generated=generated,
        sig=sig,
        meta=meta,
        pointers=pointers,
        n_units=n_units,
        rows_per_unit=rows_per_unit,
    )


def fused_signature(
    scopes: Sequence[tuple[str, ...]],
    shapes: Sequence[tuple[int, ...]],
    dtype: np.dtype,
    var: str,
    op: str,
    out_scope: tuple[str, ...],
    out_shape: tuple[int, ...],
    settings: PlanSettings,
) -> K.FusedSig:
    """The signature of the kernel generated for a bucket (tables in plan order).

    Each thread computes the rows of one *group* (output tuple without the last variable ``y``),
    for every value of ``y``, unless that leaves fewer than ``settings.min_groups`` threads; then
    each thread computes one row. Shared memory goes to the tables read most (those holding the
    eliminated variable first, smaller first) while the staging buffer leaves room.
    """
    n_out = math.prod(out_shape)
    group: tuple[str, ...] = out_scope[:-1]
    yvar = out_scope[-1] if out_scope else None
    dy = out_shape[-1] if out_scope else 1
    if dy > 1 and n_out // dy < settings.min_groups:
        # too few groups to fill the device: one output row per thread instead
        group, yvar, dy = out_scope, None, 1
    sizes = dict(zip(out_scope, out_shape, strict=True))
    specs = []
    for scope, shape in zip(scopes, shapes, strict=True):
        lay = dict(zip(scope, c_strides(shape), strict=True))
        specs.append(
            (
                math.prod(shape),
                tuple(lay.get(v, 0) for v in group),
                lay.get(yvar, 0) if (yvar is not None and dy > 1) else 0,
                lay.get(var, 0),
            )
        )
    stage = settings.stage_output and dy > 1
    sbytes = K.stage_bytes(dtype.name, dy) if stage else 0
    if sbytes > K.SHARED_BUDGET // 2:
        stage, sbytes = False, 0
    budget = K.SHARED_BUDGET - sbytes
    shared = [False] * len(specs)
    for j in sorted(range(len(specs)), key=lambda j: (specs[j][3] == 0, specs[j][0])):
        if specs[j][0] * dtype.itemsize <= budget:
            shared[j] = True
            budget -= specs[j][0] * dtype.itemsize
    tabs = tuple(
        K.TableSig(size=s[0], group_strides=s[1], sy=s[2], sx=s[3], shared=shared[j])
        for j, s in enumerate(specs)
    )
    return K.FusedSig(
        dtype=dtype.name,
        op=op,
        group_sizes=tuple(sizes[v] for v in group),
        dy=dy,
        ndom=_domain_of(var, scopes, shapes),
        tables=tabs,
        stage=stage,
    )


def _domain_of(
    var: str, scopes: Sequence[tuple[str, ...]], shapes: Sequence[tuple[int, ...]]
) -> int:
    for scope, shape in zip(scopes, shapes, strict=True):
        if var in scope:
            return int(shape[scope.index(var)])
    raise ModelError(f"variable {var!r} is in none of the tables to eliminate it from")


def generic_meta(
    scopes: Sequence[tuple[str, ...]],
    shapes: Sequence[tuple[int, ...]],
    var: str,
    out_scope: tuple[str, ...],
    out_shape: tuple[int, ...],
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Metadata of the generic fused kernel (see ``_GENERIC`` in :mod:`dcop.gpu.kernels`).

    Layout (int64): ``[n_tables, n_hoisted, NDOM]``, then per table ``[pointer, sx, s]`` and
    ``(div, mod, mul)`` for each of its ``s`` output variables; tables without ``var`` (hoisted out
    of the loop over its values) come first. Pointers are left 0; the second value lists
    ``(position, table index)`` for each of them.
    """
    order = sorted(range(len(scopes)), key=lambda j: var in scopes[j])
    hoisted = sum(1 for s in scopes if var not in s)
    meta = [len(scopes), hoisted, _domain_of(var, scopes, shapes)]
    pointers = []
    for j in order:
        lay = dict(zip(scopes[j], c_strides(shapes[j]), strict=True))
        dims = [v for v in scopes[j] if v != var]
        pointers.append((len(meta), j))
        meta += [0, lay.get(var, 0), len(dims)]
        for v in dims:
            k = out_scope.index(v)
            meta += [math.prod(out_shape[k + 1 :]), out_shape[k], lay[v]]
    return tuple(meta), tuple(pointers)


def aggregate_meta(
    scopes: Sequence[tuple[str, ...]],
    shapes: Sequence[tuple[int, ...]],
    full: tuple[str, ...],
    sizes: Mapping[str, int],
) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Metadata of the paper's aggregation kernel (``dcop_aggregate``) joining into ``full``.

    Layout (int64), per table: ``[pointer, s, mul[0..s), div[0..s), mod[0..s)]`` (Eq. 1 of the
    paper: the table's row is the sum over its variables of ``mul * (r / div % mod)``). Pointers
    are left 0, listed as ``(position, table index)``.
    """
    shape = tuple(sizes[v] for v in full)
    meta: list[int] = []
    pointers = []
    for j, (scope, tshape) in enumerate(zip(scopes, shapes, strict=True)):
        mul, div, mod = [], [], []
        for v, stride in zip(scope, c_strides(tshape), strict=True):
            k = full.index(v)
            mul.append(stride)
            div.append(math.prod(shape[k + 1 :]))
            mod.append(sizes[v])
        pointers.append((len(meta), j))
        meta += [0, len(scope), *mul, *div, *mod]
    return tuple(meta), tuple(pointers)


def chunk_units(plan: BucketPlan, chunk_bytes: int, device_budget: float) -> int:
    """Units per chunk of the chunked (host-bound) path: at most ``chunk_bytes`` of output and
    half the device budget (two chunk buffers live at once), and at least one unit."""
    unit_bytes = plan.rows_per_unit * plan.dtype.itemsize
    budget = min(int(chunk_bytes), max(unit_bytes, int(device_budget // 2)))
    return max(1, budget // unit_bytes)


def predicted_seconds(plan: BucketPlan, units: int) -> float:
    """Predicted device seconds of ``units`` units of ``plan`` (the joined entries they cover at
    the cost model's rate of its kernel, generic or generated, and its op)."""
    rate = GENERATED_ENTRIES_PER_S if plan.generated else GENERIC_ENTRIES_PER_S
    joined = units * plan.rows_per_unit * max(1, plan.ndom)
    return joined * OP_COST.get(plan.op, 1.0) / rate


def grid_units(plan: BucketPlan, sm_count: int) -> int:
    """Units that one launch's whole grid takes at once (a unit per thread): a piece of fewer
    would leave multiprocessors idle while it runs."""
    blocks = GENERATED_BLOCKS_PER_SM if plan.generated else GENERIC_BLOCKS_PER_SM
    return max(1, sm_count * blocks * K.BLOCK)


def piece_units(plan: BucketPlan, seconds: float = PIECE_S, least: int = 1) -> int:
    """Units of one piece of a checked join+eliminate: the fewest whose predicted work reaches
    ``seconds`` (so that each whole piece is followed by a wait), and at least ``least`` (a
    launch's whole grid, :func:`grid_units`: a bucket whose every unit folds a large domain, a
    hub of a million values, gets pieces longer than ``seconds`` rather than an idle device)."""
    per_unit = predicted_seconds(plan, 1)
    if per_unit <= 0 or not math.isfinite(seconds):  # inf: one piece (a bench's "before")
        return max(1, plan.n_units)
    units = max(1, least, math.ceil(seconds / per_unit))
    while predicted_seconds(plan, units) < seconds:  # the quotient rounded down by an ulp
        units += 1
    return units


def launch_ranges(begin: int, end: int, step: int = MAX_LAUNCH_ROWS) -> list[tuple[int, int]]:
    """``[begin, end)`` cut into launches of at most ``step`` units."""
    return [(lo, min(end, lo + step)) for lo in range(begin, end, step)]
