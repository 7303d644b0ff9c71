"""The placed backend: each bucket on the CPU or the GPU, whichever :func:`dcop.placement.place`
says, with the same table operations as any backend; it moves inputs to where their bucket runs
and records where each bucket ran.

Nothing here imports CuPy: the device backend is given (``dcop.backends.get_backend("placed")``
builds one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from dcop.backends.base import (
    BackendInfo,
    BucketShape,
    Counted,
    IpcDomain,
    IpcHandover,
    SplitsBuckets,
    TableBackend,
    capable,
)
from dcop.errors import ModelError
from dcop.placement import Where, gpu_min_entries, place
from dcop.tables import Op, Table, domain_sizes


class BucketPlacement(NamedTuple):
    """One join+eliminate and where it ran (a tuple: one is made per mini-bucket, in the solve)."""

    var: str
    joined: int
    out_entries: int
    where: Where


class PlacedBackend(TableBackend):
    """A table backend that runs each bucket on the CPU or the GPU, whichever :func:`place` says.

    Tables are made on the host (:meth:`table`); a bucket placed on the GPU uploads its inputs
    and leaves its output on the device (a GPU output comes back only when a CPU bucket, or
    :meth:`to_numpy`, needs it). Single-table operations run where their table is.

    Parameters
    ----------
    cpu
        The host backend (a :class:`dcop.backends.numpy.NumpyBackend`).
    gpu
        The device backend (a :class:`dcop.gpu.CupyBackend`, several GPUs', or a stand-in with
        the table surface); what it can do beyond that is asked by :func:`capable`.
    min_entries
        Joined entries from which a bucket runs on the GPU (default: :func:`gpu_min_entries`).
    """

    name = "placed"
    xp: Any = np

    def __init__(self, cpu: Any, gpu: Any, min_entries: int | None = None) -> None:
        # ``Any``: the device backend's table calls are typed by TableBackend, which this class
        # is; typing ``gpu`` so would hide CupyBackend's own methods (stage, IPC) from mypy
        self.cpu = cpu
        self.gpu = gpu
        self.min_entries = gpu_min_entries(min_entries)
        #: its tables are made on the host; a bucket's placement decides where its output lives
        self.info = BackendInfo()
        #: every join+eliminate, in call order
        self.placements: list[BucketPlacement] = []
        # whether any table was ever made on the device: until then no device work can be
        # queued, and synchronize does not touch CUDA (from an agent's fresh job thread it would)
        self._device_tables = False
        self.out_of_memory_errors: tuple[type[BaseException], ...] = (
            *cpu.out_of_memory_errors,
            *gpu.out_of_memory_errors,
        )

    # ---- where data lives --------------------------------------------------------------------
    @staticmethod
    def on_host(data: Any) -> bool:
        """True for host data (NumPy, pinned host memory included); False for device arrays."""
        return isinstance(data, np.ndarray | np.generic)

    def _host(self, table: Table) -> Table:
        if self.on_host(table.data):
            return table
        return Table(table.scope, self.gpu.to_numpy(table.data))

    def _where_data(self, table: Table) -> Any:
        return self.cpu if self.on_host(table.data) else self.gpu

    # ---- moving data -------------------------------------------------------------------------
    def asarray(self, array: Any, dtype: Any = np.float64) -> np.ndarray:
        if not self.on_host(array):
            array = self.gpu.to_numpy(array)
        return np.asarray(self.cpu.asarray(array, dtype))

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array) if self.on_host(array) else np.asarray(self.gpu.to_numpy(array))

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        if self.on_host(array):
            np.copyto(out, array)
        else:
            self.gpu.copy_to_host(array, out)

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        """A table on the host: it goes to the device only with a bucket placed there."""
        return Table(tuple(scope), self.asarray(array, dtype))

    def host_empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A host array its GPU uploads at full speed (page-locked)."""
        return np.asarray(self.gpu.host_empty(shape, dtype))

    def stage(self, table: Table) -> Table:
        """``table`` on the device now, for a bucket that will be placed there (an agent uploads
        its tables while it waits for its children instead of inside the bucket)."""
        if not self.on_host(table.data):
            return table
        self._device_tables = True
        return Table(table.scope, self.gpu.asarray(table.data, table.data.dtype))

    def synchronize(self) -> None:
        if self._device_tables:
            self.gpu.synchronize()

    # ---- single-table operations: where the table is -----------------------------------------
    def transpose(self, table: Table, scope: Sequence[str]) -> Table:
        return self._where_data(table).transpose(table, scope)  # type: ignore[no-any-return]

    def eliminate(self, table: Table, var: str, op: Op = "min") -> Table:
        return self._where_data(table).eliminate(table, var, op)  # type: ignore[no-any-return]

    def argbest(self, table: Table, var: str, op: Op = "min") -> Table:
        return self._where_data(table).argbest(table, var, op)  # type: ignore[no-any-return]

    def condition(self, table: Table, assignment: Mapping[str, int]) -> Table:
        return self._where_data(table).condition(table, assignment)  # type: ignore[no-any-return]

    # ---- joins: where the bucket is placed ---------------------------------------------------
    def join(self, tables: Sequence[Table], scope: Sequence[str] | None = None) -> Table:
        """The materialised join, on the GPU when its size reaches the threshold."""
        if not tables:
            raise ModelError("join needs at least one table")
        size = math.prod(domain_sizes(tables).values())
        if place(size, self.min_entries) == "gpu":
            self._device_tables = True
            return self.gpu.join(tables, scope)  # type: ignore[no-any-return]
        return self.cpu.join([self._host(t) for t in tables], scope)  # type: ignore[no-any-return]

    def join_eliminate(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """``join_eliminate`` on the device chosen by :func:`place` for the bucket's joined size;
        recorded in :attr:`placements`."""
        if not tables:
            raise ModelError("join_eliminate needs at least one table")
        sizes = domain_sizes(tables)
        joined = math.prod(sizes.values())
        where = place(joined, self.min_entries)
        if where == "gpu":
            self._device_tables = True
            out = self.gpu.join_eliminate(tables, var, op, scope)
        else:
            out = self.cpu.join_eliminate([self._host(t) for t in tables], var, op, scope)
        self.placements.append(
            BucketPlacement(var, joined, joined // max(sizes.get(var, 1), 1), where)
        )
        return out  # type: ignore[no-any-return]

    def runner_for(self, tables: Sequence[Table], var: str, plans: Sequence[Any]) -> Any:
        """Who runs a bucket of ``tables`` split into ``plans`` (its mini-buckets,
        :class:`dcop.buckets.MiniBucketPlan`): the host backend itself when every mini-bucket
        stays on the CPU and every table is on the host, else this backend, which places each
        mini-bucket as it comes. Whoever runs a bucket on the host backend records it with
        :meth:`record`. Placing call by call cost each mini-bucket a few microseconds, and an
        agent's short CPU buckets ~5% when they run on cold caches after a wait."""
        largest = max((p.joined_entries for p in plans), default=0)
        if place(largest, self.min_entries) == "gpu" or not all(
            self.on_host(t.data) for t in tables
        ):
            return self
        return self.cpu

    def record(self, var: str, plans: Sequence[Any], where: Where) -> None:
        """Record mini-buckets (:class:`dcop.buckets.MiniBucketPlan`) that ran without asking
        this backend (see :meth:`runner_for`)."""
        self.placements.extend(
            BucketPlacement(var, p.joined_entries, p.out_entries, where) for p in plans
        )

    def best_value(
        self,
        tables: Sequence[Table],
        var: str,
        assignment: Mapping[str, int],
        op: Op = "min",
    ) -> tuple[int, float]:
        """On the GPU when a table is there (it reads only the rows it needs), else on the CPU."""
        if any(not self.on_host(t.data) for t in tables):
            return self.gpu.best_value(tables, var, assignment, op)  # type: ignore[no-any-return]
        return self.cpu.best_value(tables, var, assignment, op)  # type: ignore[no-any-return]

    # ---- CUDA IPC between agents of one GPU, or of two with peer access ----------------------
    @property
    def ipc_domain(self) -> str:
        """Who can open this backend's IPC handles (empty: nobody)."""
        return str(self.gpu.ipc_domain) if capable(self.gpu, IpcDomain) else ""

    def handover_path(self, mine: str, peer: str, reading: bool) -> str:
        if not capable(self.gpu, IpcHandover):  # a device backend without peers: one GPU or none
            return "ipc" if mine and mine == peer else "net"
        return str(self.gpu.handover_path(mine, peer, reading))

    def export_ipc(self, data: Any) -> Any:
        return None if self.on_host(data) else self.gpu.export_ipc(data)

    def import_ipc(self, handle: bytes, shape: tuple[int, ...], dtype: str, peer: str = "") -> Any:
        self._device_tables = True
        return self.gpu.import_ipc(handle, shape, dtype, peer)

    def offer_ipc(self, nbytes: int) -> Any:
        return self.gpu.offer_ipc(nbytes)

    def export_ipc_into(self, exported: Any, offset: int, data: Any, wait: bool = True) -> bool:
        if self.on_host(data):
            return False
        self._device_tables = True
        self.gpu.export_ipc_into(exported, offset, data, wait)
        return True

    def open_ipc(self, handle: bytes, nbytes: int = 0, peer: str = "") -> int:
        return int(self.gpu.open_ipc(handle, nbytes, peer))

    def read_ipc_tables(
        self, pointer: int, tables: Sequence[tuple[int, tuple[int, ...], str]]
    ) -> list[Any]:
        self._device_tables = True
        return list(self.gpu.read_ipc_tables(pointer, tables))

    def close_ipc(self, pointer: int) -> None:
        self.gpu.close_ipc(pointer)

    # ---- getting ready -----------------------------------------------------------------------
    def warm_up(self, **kwargs: Any) -> dict[str, float]:
        """The device backend's ``warm_up`` (context, pools, generic kernels)."""
        return self.gpu.warm_up(**kwargs)  # type: ignore[no-any-return]

    def prepare_bucket(self, bucket: BucketShape, background: bool = False) -> float:
        """Compile the bucket's kernel ahead if the bucket will run on the GPU; seconds spent
        (``background``: on a thread of its own, see ``CupyBackend.prepare_bucket``)."""
        joined = math.prod(_sizes(bucket.scopes, bucket.shapes).values())
        if place(joined, self.min_entries) != "gpu":
            return 0.0
        return float(self.gpu.prepare_bucket(bucket, background))

    @property
    def setup(self) -> Any:
        """The device backend's set-up seconds (:class:`dcop.gpu.SetupStats`)."""
        return self.gpu.setup

    def placement_metrics(self) -> dict[str, float]:
        """Counts for an agent's metrics: buckets and joined entries per side, and the threshold."""
        out: dict[str, float] = {"gpu_min_entries": self.min_entries}
        counted = capable(self.gpu, Counted)
        if counted:  # which GPU of the host this agent ran on
            out["device"] = int(self.gpu.device_id)
        if capable(self.gpu, SplitsBuckets):  # an agent whose large buckets are split
            out.update({k: float(v) for k, v in self.gpu.split_metrics().items()})
        for side in ("cpu", "gpu"):
            done = [p for p in self.placements if p.where == side]
            out[f"buckets_{side}"] = len(done)
            out[f"joined_{side}"] = sum(p.joined for p in done)
        if counted:
            out.update(self.gpu.transfers.metrics())
        return out


def _sizes(scopes: Sequence[Sequence[str]], shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for scope, shape in zip(scopes, shapes, strict=True):
        sizes.update(zip(scope, (int(s) for s in shape), strict=True))
    return sizes
