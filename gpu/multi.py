"""``MultiGpuBackend``: a centralized solve (BE, MBE, PR bounds) over several GPUs of one host.

Exact PR and MAR run the contraction engine (:mod:`dcop.contraction`), which contracts on the
first device only: splitting its contractions is not done.

A bucket's output is laid out row after row (C order over its scope), and the fused kernel never
builds the joined table. A bucket large enough (``split_min_entries`` joined entries) is split
along its leading output variable ``v``: device ``i`` of ``k`` computes the rows where ``v``
takes its ``i``-th range of values (:func:`split_ranges`), a contiguous block of the output.

- The first device computes its block from the whole inputs where they lie on it (or in
  page-locked host memory, read in place): nothing is copied for it.
- Every other device gets only the slices it needs: of each input table holding ``v``, the part
  with ``v`` in its range (cut out where the table lies, on its device, and copied over once;
  or from host memory by one 2-D copy of the strided rows), every other input whole. Its block
  is then a bucket of its own (the same scopes, ``v``'s domain cut to the range), planned and
  compiled for its shapes (:meth:`prepare_bucket` does it ahead); the joined table is never
  built, whole or sliced.

The output then lands where one device would have put it:

- on the first device when it fits its budget: each other device computes its block in chunks
  into two buffers and each chunk is copied to the first device (device to device: NVLink or
  PCIe peer-to-peer where the devices reach each other, else CUDA stages it through the host)
  while the next is computed;
- else in pinned host memory, each device streaming its block there in chunks (the single-GPU
  chunked path, one per device), so an output larger than one device's memory is computed on
  all of them; a later bucket reads it in place (first device) or takes its slices of it.

Everything else (small buckets, single-table operations, uploads) runs on the first device.
Each split bucket is recorded (:attr:`MultiGpuBackend.splits`): where its output went, and the
input bytes moved to each device. :meth:`MultiGpuBackend.device_model` tells the memory plan
(:mod:`dcop.plan.memory`) how this backend places tables.

A GPU agent may use one too (``dcop run --gpu-placement split``, given to the agents whose
planned bucket will be split): its own device first, the others only for its buckets of
``split_min_entries`` and more. Its warm-up makes every device's context (before the solve);
with ``lazy`` and no warm-up they are made when such a bucket is first prepared or run. The
agent's CUDA IPC hand-over stays on its own device.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from dcop.backends.base import BackendInfo, BucketShape, TableBackend
from dcop.errors import BackendUnavailable
from dcop.gpu.backend import (
    ZERO_COPY_SHARE,
    CupyBackend,
    JoinEliminatePlan,
    SetupStats,
    pinned_empty,
)
from dcop.gpu.plan import BucketPlan, chunk_units, kernel_dtype, launch_ranges
from dcop.tables import Op, Table

if TYPE_CHECKING:
    from dcop.plan.memory import DeviceModel

#: Joined entries from which a bucket is split over the devices. On 2 x H100 BE ran 1e11
#: joined entries in ~0.2 s (5e11 a second, benchmarks/results/gpu_multi.md): 1e8 took ~0.2 ms,
#: less than the split's own cost (waiting for the inputs, cutting and moving slices, more
#: launches), and the split of every bucket of 1e8 and more made n = 18-22 1.0-1.3x slower.
#: 2e9 (~4 ms on one device) is a guess to be checked by ``benchmarks/gpu_multi.py --parts
#: threshold`` (one bucket of growing size, one device against the split).
DEFAULT_SPLIT_MIN_ENTRIES = 2_000_000_000
#: Host tables up to this size are uploaded whole to the first device without a second thought.
SMALL_TABLE_BYTES = 1 << 20
#: A slice of a device table in at most this many contiguous runs is copied run by run to the
#: other device; one in more runs is first cut out (a temporary on the table's device).
MAX_RUN_COPIES = 64
#: The largest pitch (bytes between rows) of a 2-D copy (``cudaDevAttrMaxPitch`` on current
#: GPUs); rows farther apart are copied one by one.
MAX_PITCH = (1 << 31) - 1

Landing = Literal["device", "host"]


@dataclass(frozen=True)
class Split:
    """One bucket split over the devices: its variable, size, each device's range of values of
    the leading output variable ``lead``, where its output landed (``device``: the first
    device; ``host``: pinned host memory), and the input bytes moved to each device."""

    var: str
    joined: int
    out_bytes: int
    ranges: tuple[tuple[int, int], ...]
    landing: Landing
    seconds: float
    lead: str = ""
    moved: tuple[int, ...] = ()


def split_ranges(n_units: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n_units)`` cut into ``parts`` contiguous ranges as equal as can be (the leading
    output variables' values, in order: device ``i`` gets the ``i``-th range)."""
    if parts < 1:
        raise ValueError(f"split into {parts} parts")
    cuts = [n_units * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(cuts))


class MultiGpuBackend(TableBackend):
    """Table operations on several devices: large buckets split over all of them, the rest on
    the first (see the module docstring).

    Parameters
    ----------
    devices
        CUDA device ordinals, the first one holding results (two or more, no repeats).
    split_min_entries
        Joined entries from which a bucket is split (0: every bucket with enough units).
    lazy
        Make the other devices' backends only when a bucket is first split (an agent's).
    gpu_options
        Passed to each device's :class:`~dcop.gpu.CupyBackend` (``max_device_bytes``, ...).
    """

    name = "cupy"

    def __init__(
        self,
        devices: Sequence[int],
        split_min_entries: int = DEFAULT_SPLIT_MIN_ENTRIES,
        lazy: bool = False,
        stream: Any = None,
        **gpu_options: Any,
    ) -> None:
        ids = tuple(int(d) for d in devices)
        if len(ids) < 2 or len(set(ids)) != len(ids):
            raise BackendUnavailable(f"several distinct devices needed, not {list(ids)}")
        if split_min_entries < 0:
            raise BackendUnavailable(f"split_min_entries {split_min_entries} < 0")
        self.primary = CupyBackend(device=ids[0], stream=stream, **gpu_options)
        self.parts = [self.primary]
        self._gpu_options = gpu_options
        self._warm: dict[str, Any] | None = None  # warm_up's arguments, for parts made later
        # an agent prepares on its loop (or a compile thread) and runs buckets on its worker
        self._making = threading.Lock()
        self.device_ids = ids
        self.device_id = ids[0]
        self.info = BackendInfo(device=ids[0])
        #: the first device (work that is not split runs there)
        self.device = self.primary.device
        self.xp = self.primary.xp
        self.device_name = self.primary.device_name
        self.split_min_entries = int(split_min_entries)
        self.out_of_memory_errors = self.primary.out_of_memory_errors
        #: every bucket split over the devices, in call order
        self.splits: list[Split] = []
        if not lazy:
            self._all_parts()

    def _all_parts(self) -> list[CupyBackend]:
        """Every device's backend, made now where not yet (the same plans on each device); a
        caller that finds another thread making them waits for it."""
        with self._making:
            for device in self.device_ids[len(self.parts) :]:
                part = CupyBackend(device=device, **self._gpu_options)
                # one plan for every device: units and rows per unit must mean the same on each
                part.min_groups = self.primary.min_groups
                if self._warm is not None:
                    part.warm_up(**self._warm)
                self.parts.append(part)
            return list(self.parts)

    # ---- on the first device -----------------------------------------------------------------
    @property
    def transfers(self) -> Any:
        return self.primary.transfers

    @property
    def setup(self) -> SetupStats:
        """Set-up seconds of all devices added up."""
        total = SetupStats()
        for part in self.parts:
            for key, value in part.setup.as_dict().items():
                setattr(total, key, getattr(total, key) + value)
        return total

    def free_bytes(self) -> float:
        """Free memory of the first device (work that is not split runs there)."""
        return self.primary.free_bytes()

    def asarray(self, array: Any, dtype: Any = np.float64) -> Any:
        return self.primary.asarray(array, dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return self.primary.to_numpy(array)

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        self.primary.copy_to_host(array, out)

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        return self.primary.table(scope, array, dtype)

    def transpose(self, table: Table, scope: Sequence[str]) -> Table:
        return self.primary.transpose(table, scope)

    def eliminate(self, table: Table, var: str, op: Op = "min") -> Table:
        return self.primary.eliminate(table, var, op)

    def argbest(self, table: Table, var: str, op: Op = "min") -> Table:
        return self.primary.argbest(table, var, op)

    def condition(self, table: Table, assignment: Mapping[str, int]) -> Table:
        return self.primary.condition(table, assignment)

    def join(self, tables: Sequence[Table], scope: Sequence[str] | None = None) -> Table:
        return self.primary.join(tables, scope)

    def best_value(
        self,
        tables: Sequence[Table],
        var: str,
        assignment: Mapping[str, int],
        op: Op = "min",
    ) -> tuple[int, float]:
        return self.primary.best_value(tables, var, assignment, op)

    def synchronize(self) -> None:
        for part in self.parts:
            part.synchronize()

    # ---- getting ready -----------------------------------------------------------------------
    def warm_up(self, **kwargs: Any) -> dict[str, float]:
        """Make every device (a lazy backend too: an agent is given several devices only when
        its bucket will be split, and contexts made here are made before the solve) and warm
        each one up; seconds per step added over the devices."""
        self._warm = dict(kwargs)
        out: dict[str, float] = {}
        for part in self._all_parts():
            for key, value in part.warm_up(**kwargs).items():
                out[key] = out.get(key, 0.0) + value
        return out

    def prepare_bucket(self, bucket: BucketShape, background: bool = False) -> float:
        """Compile a bucket's kernel ahead on the first device, and for a bucket that will be
        split the kernels of its slices on every device (making the devices not made yet). With
        ``background`` the other devices are made and compile on a thread of their own (a split
        waits for them)."""
        b = bucket
        spent = self.primary.prepare_bucket(b, background)
        shape = self.primary._plan(
            b.scopes, b.shapes, kernel_dtype([b.dtype]), b.var, b.op, b.scope
        )
        if self.split_variable(shape) is None:
            return spent
        if background:
            threading.Thread(target=self._prepare_slices, args=(shape,), daemon=True).start()
            return spent
        return spent + self._prepare_slices(shape)

    def _prepare_slices(self, shape: BucketPlan) -> float:
        """Make the devices a split of ``shape`` uses and compile each one's slice kernel (the
        first device's too: it runs its slice where its inputs must be copied); seconds spent."""
        started = time.perf_counter()
        lead = shape.out_scope[0]
        d0 = shape.out_shape[0]
        parts = self._all_parts()[: min(len(self.device_ids), d0)]
        for part, (lo, hi) in zip(parts, split_ranges(d0, len(parts)), strict=True):
            sub = [
                tuple(hi - lo if v == lead else n for v, n in zip(names, dims, strict=True))
                for names, dims in zip(shape.scopes, shape.shapes, strict=True)
            ]
            op = cast(Op, shape.op)
            part.prepare_bucket(
                BucketShape(shape.scopes, sub, shape.var, op, shape.dtype, shape.out_scope)
            )
        return time.perf_counter() - started

    # ---- CUDA IPC of an agent: on its own (first) device -------------------------------------
    @property
    def ipc_domain(self) -> str:
        return self.primary.ipc_domain

    def handover_path(self, mine: str, peer: str, reading: bool) -> str:
        return self.primary.handover_path(mine, peer, reading)

    def offer_ipc(self, nbytes: int) -> Any:
        return self.primary.offer_ipc(nbytes)

    def export_ipc(self, array: Any) -> Any:
        return self.primary.export_ipc(array)

    def export_ipc_into(self, exported: Any, offset: int, array: Any, wait: bool = True) -> None:
        self.primary.export_ipc_into(exported, offset, array, wait)

    def open_ipc(self, handle: bytes, nbytes: int = 0, peer: str = "") -> int:
        return self.primary.open_ipc(handle, nbytes, peer)

    def read_ipc_tables(self, pointer: int, tables: Sequence[Any]) -> list[Any]:
        return self.primary.read_ipc_tables(pointer, tables)

    def import_ipc(self, handle: bytes, shape: tuple[int, ...], dtype: str, peer: str = "") -> Any:
        return self.primary.import_ipc(handle, shape, dtype, peer)

    def close_ipc(self, pointer: int) -> None:
        self.primary.close_ipc(pointer)

    def has_nan(self, array: Any) -> bool:
        return self.primary.has_nan(array)

    # ---- the split bucket --------------------------------------------------------------------
    def split_variable(self, plan: BucketPlan) -> str | None:
        """The output variable a bucket is split along, or None to run it on the first device:
        its leading output variable, for a bucket of ``split_min_entries`` joined entries and
        more whose output has at least two variables and whose leading one at least two values
        (each device then takes a contiguous range of that variable's values)."""
        if plan.joined < self.split_min_entries or len(plan.out_scope) < 2:
            return None
        return plan.out_scope[0] if plan.out_shape[0] >= 2 else None

    def join_eliminate(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """Split over the devices from ``split_min_entries``
        joined entries on (see :meth:`split_variable`), else on the first device (as
        :class:`~dcop.gpu.CupyBackend` does)."""
        dtype = kernel_dtype(t.data.dtype for t in tables)
        shape = self.primary._plan(
            [t.scope for t in tables], [t.shape for t in tables], dtype, var, op, scope
        )
        lead = self.split_variable(shape)
        if lead is None:
            bound = self.primary.prepare(tables, var, op, scope)
            if bound.out_bytes > self.primary._device_budget():
                return self.primary._run_chunked(bound)
            return self.primary.run(bound)
        t0 = time.perf_counter()
        d0 = shape.out_shape[0]
        parts = self._all_parts()[: min(len(self.device_ids), d0)]
        ranges = split_ranges(d0, len(parts))
        # the inputs may still be in the making on the first device's stream (an earlier
        # bucket's output), and the slices are cut on other streams: wait for them here
        self.primary.synchronize()
        out_scope = shape.out_scope
        landing: Landing = "device" if shape.out_bytes <= self.primary._device_budget() else "host"
        # the first device takes its range of units of the whole bucket where its inputs are
        # there already (or read in place): nothing copied; else its slices like the others
        whole = all(_in_place(self.primary, t) for t in tables)
        jobs: list[_Job] = []
        for part, (lo, hi) in zip(parts, ranges, strict=True):
            if part is self.primary and whole:
                read = part.transfers.zero_copy_bytes
                bound = part.prepare(tables, var, op, scope)
                per_value = bound.plan.n_units // d0
                # small host tables are uploaded whole; large page-locked ones are read in place
                on_host = sum(t.data.nbytes for t in tables if isinstance(t.data, np.ndarray))
                moved = on_host - (part.transfers.zero_copy_bytes - read)
                jobs.append(_Job(part, bound, lo, hi, lo * per_value, hi * per_value, moved, True))
                continue
            moved = 0
            sliced = []
            for t in tables:
                data, nbytes = self._slice_to(part, t, lead, lo, hi, dtype)
                sliced.append(Table(t.scope, data))
                moved += nbytes
            sub = part.prepare(sliced, var, op, out_scope)
            jobs.append(_Job(part, sub, lo, hi, 0, sub.plan.n_units, moved, False))
        rest = shape.n_out // d0
        if landing == "device":
            out = self._on_first_device(shape, jobs, rest)
        else:
            out = self._to_host(shape, jobs, rest)
        self.splits.append(
            Split(
                var,
                shape.joined,
                shape.out_bytes,
                tuple(ranges),
                landing,
                time.perf_counter() - t0,
                lead,
                tuple(job.moved for job in jobs),
            )
        )
        return Table(out_scope, out)

    def _slice_to(
        self, part: CupyBackend, table: Table, lead: str, lo: int, hi: int, dtype: np.dtype
    ) -> tuple[Any, int]:
        """``table`` restricted to ``lead`` in ``[lo, hi)`` (whole where it does not hold
        ``lead``), contiguous in ``dtype`` on ``part``'s device, and the bytes that moved there:
        only the slice leaves where the table lies (its device, or host memory)."""
        xp = part.xp
        data = table.data
        if lead not in table.scope:
            on_part = isinstance(data, xp.ndarray) and data.device.id == part.device_id
            before = part.transfers.zero_copy_bytes
            got = part._cast(table, dtype)
            read_in_place = part.transfers.zero_copy_bytes > before
            return got, 0 if on_part or read_in_place else int(got.nbytes)
        axis = table.scope.index(lead)
        shape = tuple(int(s) for s in table.shape)
        outer, size, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
        sub_shape = (*shape[:axis], hi - lo, *shape[axis + 1 :])
        if isinstance(data, xp.ndarray):
            if data.device.id == part.device_id:  # a copy on this device, nothing moves
                with part.stream_context():
                    view = xp.ascontiguousarray(data).reshape(outer, size, inner)[:, lo:hi, :]
                    return xp.ascontiguousarray(view, dtype=dtype).reshape(sub_shape), 0
            source = self._part_of(data.device.id)
            with part.stream_context():
                got = xp.empty(sub_shape, dtype=dtype)
            nbytes = int(got.nbytes)
            with source.stream_context():
                whole = xp.ascontiguousarray(data)
                if outer <= MAX_RUN_COPIES and whole.dtype == dtype:
                    # few long runs (a message's first axis is the variable its bucket
                    # eliminates): one device-to-device copy each, nothing cut out
                    item = np.dtype(dtype).itemsize
                    width, pitch = (hi - lo) * inner * item, size * inner * item
                    for k in range(outer if width else 0):
                        (got.data + k * width).copy_from_device_async(
                            whole.data + (k * pitch + lo * inner * item), width, source.stream
                        )
                else:  # cut out on the device that holds it (a temporary), then one copy over
                    view = whole.reshape(outer, size, inner)[:, lo:hi, :]
                    piece = xp.ascontiguousarray(view, dtype=dtype)
                    if nbytes:
                        got.data.copy_from_device_async(piece.data, nbytes, source.stream)
                copied = source.stream.record()
            with part.stream_context():  # its kernel runs once the slice is there
                part.stream.wait_event(copied)
            return got, nbytes
        host = np.asarray(data)
        if host.dtype != dtype or not host.flags.c_contiguous:
            piece = np.ascontiguousarray(host.reshape(outer, size, inner)[:, lo:hi, :], dtype)
            return part.asarray(piece.reshape(sub_shape), dtype), int(piece.nbytes)
        flat = host.reshape(-1)
        if outer == 1:  # one contiguous run: read where it lies when page-locked and large
            run = flat[lo * inner : hi * inner].reshape(sub_shape)
            got = part._device_data(Table(table.scope, run))
            return got, 0 if got.data.ptr == run.ctypes.data else int(run.nbytes)
        item = host.dtype.itemsize
        with part.stream_context():
            got = xp.empty(sub_shape, dtype=dtype)
            copy_rows(
                xp,
                got.data.ptr,
                host.ctypes.data + lo * inner * item,
                (hi - lo) * inner * item,
                size * inner * item,
                outer,
                part.stream,
            )
        part.transfers.h2d_bytes += int(got.nbytes)
        return got, int(got.nbytes)

    def _part_of(self, device: int) -> CupyBackend:
        for part in self.parts:
            if part.device_id == device:
                return part
        raise BackendUnavailable(f"a table on device {device}, not one of {self.device_ids}")

    def _on_first_device(self, shape: BucketPlan, jobs: Sequence[_Job], rest: int) -> Any:
        """Every device computes its slice; the first device's lands in the output there, the
        others' in chunks copied device to device as each is done (two buffers per device), so
        that copying overlaps computing."""
        first = self.primary
        with first.stream_context():
            out = first.xp.empty(shape.out_shape, dtype=shape.dtype)
        flat = out.reshape(-1)
        kept: list[Any] = []
        for job in jobs:  # queue every device's work first, so that they all run at once
            target = flat[job.lo * rest : job.hi * rest]
            if job.part is first:
                with first.stream_context():
                    first._launch(job.bound, target, job.begin, job.end)
            else:
                kept.append(_queue_to(job.part, job.bound, target))
        for job in jobs:
            job.part.synchronize()
        del kept
        return out

    def _to_host(self, shape: BucketPlan, jobs: Sequence[_Job], rest: int) -> np.ndarray:
        """Each device streams its slice into one pinned host output, in chunks."""
        with self.primary.stream_context():
            host = pinned_empty(self.xp, shape.out_shape, shape.dtype)
        flat = host.reshape(-1)
        kept = []
        for job in jobs:
            if job.whole:  # the first device, over the whole bucket: units at their place
                kept.append(job.part.queue_chunks(job.bound, job.begin, job.end, flat))
                continue
            target = flat[job.lo * rest : job.hi * rest]
            kept.append(job.part.queue_chunks(job.bound, job.begin, job.end, target))
        for job in jobs:
            job.part.synchronize()
        del kept
        return host

    def split_metrics(self) -> dict[str, float]:
        """Counts for a result: buckets split, how many landed on the host, bytes of inputs
        moved to the devices for them."""
        return {
            "devices": len(self.device_ids),
            "split_buckets": len(self.splits),
            "split_to_host": sum(s.landing == "host" for s in self.splits),
            "split_joined": sum(s.joined for s in self.splits),
            "split_out_bytes_max": max((s.out_bytes for s in self.splits), default=0),
            "split_moved_bytes": sum(sum(s.moved) for s in self.splits),
            "split_s": math.fsum(s.seconds for s in self.splits),
        }

    # ---- the memory plan ---------------------------------------------------------------------
    def output_on_host(self, nbytes: int) -> bool:
        """Whether an output of ``nbytes`` goes to pinned host memory (over the first device's
        budget now) rather than to the first device."""
        return nbytes > self.primary._device_budget()

    def device_model(self) -> DeviceModel:
        """What :func:`dcop.plan.bucket_plan.plan_memory` needs to place tables as this backend
        does: the devices, their memory now, the split threshold and chunk size."""
        from dcop.plan.memory import DeviceModel

        first = self.primary
        with first.device:
            free, _ = first.xp.cuda.runtime.memGetInfo()
            pool = first.xp.get_default_memory_pool().free_bytes()
        return DeviceModel(
            count=len(self.device_ids),
            device_bytes=int(free + pool),
            split_min_entries=self.split_min_entries,
            max_output_bytes=first.max_device_bytes,
            chunk_bytes=first.chunk_bytes,
            run_copies=MAX_RUN_COPIES,
        )


@dataclass
class _Job:
    """One device's share of a split bucket: its bound plan, its range ``[lo, hi)`` of the
    leading variable's values, the units it launches, the input bytes moved to it, and whether
    it runs the whole bucket (units of the whole output) or its slice (a bucket of its own)."""

    part: CupyBackend
    bound: JoinEliminatePlan
    lo: int
    hi: int
    begin: int
    end: int
    moved: int
    whole: bool


def _in_place(first: CupyBackend, table: Table) -> bool:
    """Whether ``first`` reads ``table`` without copying it whole: it is on its device, or in
    page-locked host memory large enough to be read in place, or small."""
    data = table.data
    if isinstance(data, first.xp.ndarray):
        return bool(data.device.id == first.device_id)
    if data.nbytes <= SMALL_TABLE_BYTES:
        return True
    return bool(data.nbytes > ZERO_COPY_SHARE * first._device_budget() and _pinned(first, data))


def _pinned(backend: CupyBackend, data: np.ndarray) -> bool:
    try:
        attributes = backend.xp.cuda.runtime.pointerGetAttributes(int(data.ctypes.data))
    except Exception:  # CuPy's CUDARuntimeError: not memory CUDA knows
        return False
    return int(getattr(attributes, "type", 0)) == 1


def copy_rows(xp: Any, dst: int, src: int, width: int, pitch: int, rows: int, stream: Any) -> None:
    """Copy ``rows`` runs of ``width`` bytes, ``pitch`` bytes apart at ``src``, one after the
    other to ``dst``: one 2-D copy (any direction, CUDA tells host and device pointers apart),
    or one copy per run where the pitch is over what a 2-D copy takes."""
    runtime = xp.cuda.runtime
    kind = getattr(runtime, "memcpyDefault", 4)
    if rows == 1 or pitch > MAX_PITCH:
        for k in range(rows):
            runtime.memcpyAsync(dst + k * width, src + k * pitch, width, kind, stream.ptr)
        return
    runtime.memcpy2DAsync(dst, width, src, pitch, width, rows, kind, stream.ptr)


def _queue_to(part: CupyBackend, bound: JoinEliminatePlan, target: Any) -> list[Any]:
    """Queue ``bound`` (a whole sub-bucket) on ``part`` in chunks into two buffers there, each
    chunk copied into ``target`` (on another device) on the copy stream once computed, while
    the next chunk is computed. The caller synchronizes ``part`` and keeps the buffers alive."""
    plan = bound.plan
    units = chunk_units(plan, part.chunk_bytes, part._device_budget())
    rows, item = plan.rows_per_unit, plan.dtype.itemsize
    with part.stream_context():
        bufs = [part.xp.empty(min(units, plan.n_units) * rows, plan.dtype) for _ in range(2)]
        done: list[Any] = [None, None]
        for i, (lo, hi) in enumerate(launch_ranges(0, plan.n_units, units)):
            buf = bufs[i % 2]
            if done[i % 2] is not None:
                part.stream.wait_event(done[i % 2])
            part._launch(bound, buf, lo, hi)
            computed = part.stream.record()
            part.copy_stream.wait_event(computed)
            n = (hi - lo) * rows
            target[lo * rows :].data.copy_from_device_async(buf.data, n * item, part.copy_stream)
            done[i % 2] = part.copy_stream.record()
    return bufs


__all__ = [
    "DEFAULT_SPLIT_MIN_ENTRIES",
    "MultiGpuBackend",
    "Split",
    "copy_rows",
    "split_ranges",
]
