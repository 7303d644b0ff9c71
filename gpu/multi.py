"""``MultiGpuBackend``: a centralized solve (BE, MBE, PR bounds) over several GPUs of one host.

Exact PR and MAR run the contraction engine (:mod:`dcop.contraction`), which contracts on the
first device only: splitting its contractions is not done.

A bucket's output is laid out row after row (C order over its scope), and the fused kernel
computes any range of its units (groups or rows: :mod:`dcop.gpu.plan`) from the inputs alone.
So a bucket large enough (``split_min_entries`` joined entries) is split along its leading output
variables: device ``i`` of ``k`` computes units ``[n*i/k, n*(i+1)/k)`` with its own copy of the
inputs (uploaded to it, or copied from the first device peer to peer), all devices at once. The
output then lands where one device would have put it:

- on the first device when it fits there (each other device's slice comes over by a
  device-to-device copy: NVLink or PCIe peer-to-peer where the devices can reach each other, else
  CUDA stages it through the host);
- else in pinned host memory, each device streaming its slice there in chunks (the single-GPU
  chunked path, one per device), so an output larger than one device's memory is computed on all
  of them. What a later bucket reads must still fit one device.

Everything else (small buckets, single-table operations, uploads) runs on the first device.
Each split bucket is recorded (:attr:`MultiGpuBackend.splits`) with where its output went.

A GPU agent may use one too (``dcop run --gpu-placement split``): its own device first, the
others only for its buckets of ``split_min_entries`` and more. With ``lazy`` the other devices'
contexts are made when such a bucket is first prepared (when the tree is known, before its data)
or run, so agents with small buckets never make them; the agent's CUDA IPC hand-over stays on
its own device.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dcop.errors import BackendUnavailable
from dcop.gpu.backend import CupyBackend, JoinEliminatePlan, SetupStats, pinned_empty
from dcop.tables import Op, Table

#: Joined entries from which a bucket is split over the devices: below it one device finishes
#: before the others' copies of the inputs would have arrived (a guess from the single-GPU
#: figures: 1e8 joined entries take ~10 ms on one H100; to be measured by benchmarks/gpu_multi.py).
DEFAULT_SPLIT_MIN_ENTRIES = 100_000_000

Landing = Literal["device", "host"]


@dataclass(frozen=True)
class Split:
    """One bucket split over the devices: its variable, size, each device's units, and where
    its output landed (``device``: the first device; ``host``: pinned host memory)."""

    var: str
    joined: int
    out_bytes: int
    ranges: tuple[tuple[int, int], ...]
    landing: Landing
    seconds: float


def split_ranges(n_units: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n_units)`` cut into ``parts`` contiguous ranges as equal as can be (the leading
    output variables' values, in order: device ``i`` gets the ``i``-th range)."""
    if parts < 1:
        raise ValueError(f"split into {parts} parts")
    cuts = [n_units * i // parts for i in range(parts + 1)]
    return list(itertools.pairwise(cuts))


class MultiGpuBackend:
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

    def asarray(self, array: Any, dtype: Any = np.float64) -> Any:
        return self.primary.asarray(array, dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return self.primary.to_numpy(array)

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
        """Every made device's ``warm_up`` (devices made later are warmed up then); seconds per
        step added over the devices."""
        self._warm = dict(kwargs)
        out: dict[str, float] = {}
        for part in self.parts:
            for key, value in part.warm_up(**kwargs).items():
                out[key] = out.get(key, 0.0) + value
        return out

    def prepare_bucket(
        self,
        scopes: Sequence[Sequence[str]],
        shapes: Sequence[Sequence[int]],
        var: str,
        op: Op = "min",
        dtype: Any = np.float64,
        scope: Sequence[str] | None = None,
        background: bool = False,
    ) -> float:
        """Compile a bucket's kernel ahead: on every device for a bucket that will be split
        (making the devices not made yet), else on the first. With ``background`` the other
        devices are made and compile on a thread of their own (a split waits for them)."""
        sizes: dict[str, int] = {}
        for names, shape in zip(scopes, shapes, strict=True):
            sizes.update(zip(names, (int(s) for s in shape), strict=True))
        args = (scopes, shapes, var, op, dtype, scope)
        spent = self.primary.prepare_bucket(*args, background)
        if math.prod(sizes.values()) < self.split_min_entries:
            return spent
        if background:
            threading.Thread(target=self._prepare_others, args=args, daemon=True).start()
            return spent
        return spent + self._prepare_others(*args)

    def _prepare_others(self, *args: Any) -> float:
        """Make the other devices and compile a bucket's kernel there; seconds spent."""
        started = time.perf_counter()
        for part in self._all_parts()[1:]:
            part.prepare_bucket(*args)
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
    def join_eliminate(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """``eliminate(join(tables), var)``: split over the devices from ``split_min_entries``
        joined entries on, else on the first device (as :class:`~dcop.gpu.CupyBackend` does)."""
        bound = self.primary.prepare(tables, var, op, scope)
        plan = bound.plan
        joined = plan.n_out * plan.ndom
        budget = self.primary._device_budget()
        if joined < self.split_min_entries or plan.n_units < len(self.device_ids):
            if plan.out_bytes > budget:
                return self.primary._run_chunked(bound)
            return self.primary.run(bound)
        t0 = time.perf_counter()
        parts = self._all_parts()
        ranges = split_ranges(plan.n_units, len(parts))
        # the inputs may still be in the making on the first device's stream (an earlier
        # bucket's output), and a copy to another device is not ordered after it (CuPy copies
        # from the source device's own current stream): wait for them here
        self.primary.synchronize()
        bounds = [bound, *(p.prepare(tables, var, op, scope) for p in parts[1:])]
        for other in bounds[1:]:
            if (other.plan.n_units, other.plan.rows_per_unit) != (
                plan.n_units,
                plan.rows_per_unit,
            ):
                raise BackendUnavailable("the devices planned one bucket differently")
        slice_fits = all(
            (hi - lo) * plan.rows_per_unit * plan.dtype.itemsize <= part._device_budget()
            for part, (lo, hi) in zip(self.parts[1:], ranges[1:], strict=True)
        )
        if plan.out_bytes <= budget and slice_fits:
            out = self._on_first_device(bounds, ranges)
            landing: Landing = "device"
        else:
            out = self._to_host(bounds, ranges)
            landing = "host"
        self.splits.append(
            Split(
                var,
                joined,
                plan.out_bytes,
                tuple(ranges),
                landing,
                time.perf_counter() - t0,
            )
        )
        return Table(plan.out_scope, out)

    def _on_first_device(
        self, bounds: Sequence[JoinEliminatePlan], ranges: Sequence[tuple[int, int]]
    ) -> Any:
        """Each device computes its slice; the others' slices are copied into the first
        device's output (device to device) once their kernels are done."""
        first = self.primary
        plan = bounds[0].plan
        rows, itemsize = plan.rows_per_unit, plan.dtype.itemsize
        with first._on():
            out = first.xp.empty(plan.out_shape, dtype=plan.dtype)
        flat = out.reshape(-1)
        kept = []
        # queue every device's kernels first, so that they all run at once
        for part, bound, (lo, hi) in zip(self.parts, bounds, ranges, strict=True):
            if part is first:
                with first._on():
                    first._launch(bound, flat[lo * rows : hi * rows], lo, hi)
                continue
            with part._on():
                buf = part.xp.empty((hi - lo) * rows, dtype=plan.dtype)
                part._launch(bound, buf, lo, hi)
            kept.append((part, buf, lo, hi))
        for part, buf, lo, hi in kept:
            with part._on():  # an event belongs to its stream's device
                computed = part.stream.record()
            with first._on():
                first.stream.wait_event(computed)
                nbytes = (hi - lo) * rows * itemsize
                if nbytes:
                    flat[lo * rows :].data.copy_from_device_async(buf.data, nbytes, first.stream)
        first.stream.synchronize()
        return out

    def _to_host(
        self, bounds: Sequence[JoinEliminatePlan], ranges: Sequence[tuple[int, int]]
    ) -> np.ndarray:
        """Each device streams its slice into one pinned host output, in chunks."""
        plan = bounds[0].plan
        with self.primary._on():
            host = pinned_empty(self.xp, plan.out_shape, plan.dtype)
        flat = host.reshape(-1)
        kept = [
            part.queue_chunks(bound, lo, hi, flat)
            for part, bound, (lo, hi) in zip(self.parts, bounds, ranges, strict=True)
        ]
        for part in self.parts:
            part.synchronize()
        del kept
        return host

    def split_metrics(self) -> dict[str, float]:
        """Counts for a result: buckets split, and how many landed on the host."""
        return {
            "devices": len(self.device_ids),
            "split_buckets": len(self.splits),
            "split_to_host": sum(s.landing == "host" for s in self.splits),
            "split_joined": sum(s.joined for s in self.splits),
            "split_out_bytes_max": max((s.out_bytes for s in self.splits), default=0),
            "split_s": math.fsum(s.seconds for s in self.splits),
        }


__all__ = ["DEFAULT_SPLIT_MIN_ENTRIES", "MultiGpuBackend", "Split", "split_ranges"]
