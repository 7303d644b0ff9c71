"""Where work runs: each bucket on the CPU or the GPU, and each agent on a GPU.

A bucket sent to the device pays for more than its kernel: the upload of its inputs, a launch, a
synchronisation and, in an agent, the download of its output (a UTIL message). Below some size the
CPU is done before the device has started, so a GPU agent keeps small buckets on the CPU.
:func:`place` decides from the bucket's joined entries (the size of the table that is never built)
against one threshold, :data:`DEFAULT_GPU_MIN_ENTRIES`, overridden by an argument or by the
environment (``DCOP_GPU_MIN_ENTRIES``); ``0`` sends every bucket to the device (for tests).
:class:`PlacedBackend` applies it call by call, with the same methods as any table backend, moves
inputs to where their bucket runs and records where each bucket ran.

For several GPUs on one host, :func:`gpu_devices` reads ``--gpu all`` or a list such as ``0,2``.
Agents are spread over those devices in one of three ways (:data:`PLACEMENTS`): ``round-robin``
(:func:`device_for_agent`: the ``k``-th agent on device ``k mod count``), ``balanced``
(:func:`balanced_devices`: whole subtrees of the pseudo-tree on one device, the heaviest subtrees
on different devices, so that most UTILs stay on their device and the largest buckets run at
once on different GPUs), or ``split`` (round robin, and each agent's large buckets split over
every device: what a chain of heavy buckets, where no two run at once, can use).

Nothing here imports CuPy: the device backend is given (``dcop.backend.get_backend("placed")``
builds one).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np

from dcop.errors import BackendUnavailable, InputError, ModelError
from dcop.tables import Op, Table, domain_sizes

Where = Literal["cpu", "gpu"]
#: How agents are spread over several GPUs (see the module docstring).
PLACEMENTS = ("round-robin", "balanced", "split")

#: Joined entries from which a bucket runs on the GPU: the crossover of a bucket's path as an agent
#: pays it, measured on an H100 by ``benchmarks/probes/gpu_bucket_context.py`` (its
#: ``CONCLUSION``). Back to back in a loop the GPU path wins from
#: 1e5 (0.62 ms against NumPy's 0.50 ms there, 0.46 against 2.4 ms at 1e6), but an agent runs its
#: bucket on a fresh thread after waiting for its children, while other agents use the GPU: then
#: the GPU path costs 1.2-1.6 ms from 1e4 to 1e6 entries and NumPy's 0.74-0.91 ms at 1e5 and
#: 2.4-2.5 ms at 1e6, so the two cross between (about 3e5).
DEFAULT_GPU_MIN_ENTRIES = 300_000
#: Environment variable overriding :data:`DEFAULT_GPU_MIN_ENTRIES` (0: every bucket on the GPU).
GPU_MIN_ENTRIES_ENV = "DCOP_GPU_MIN_ENTRIES"


def gpu_min_entries(value: int | None = None) -> int:
    """The placement threshold: ``value`` if given, else ``$DCOP_GPU_MIN_ENTRIES``, else
    :data:`DEFAULT_GPU_MIN_ENTRIES`. The variable takes a whole number (``131072``, ``1e5``)."""
    if value is None:
        raw = os.environ.get(GPU_MIN_ENTRIES_ENV, "").strip()
        if not raw:
            return DEFAULT_GPU_MIN_ENTRIES
        try:
            number = float(raw.replace("_", ""))
        except ValueError:
            number = math.nan
        if not (math.isfinite(number) and number >= 0 and number == int(number)):
            raise InputError(
                f"{GPU_MIN_ENTRIES_ENV}={raw!r}: want a whole number of joined entries >= 0"
            )
        return int(number)
    if value < 0:
        raise InputError(f"GPU placement threshold {value}: want joined entries >= 0")
    return int(value)


def place(joined_entries: int, min_entries: int = DEFAULT_GPU_MIN_ENTRIES) -> Where:
    """Where a join+eliminate of ``joined_entries`` entries runs: ``"gpu"`` from ``min_entries``
    on (so ``0`` puts everything on the GPU), ``"cpu"`` below."""
    return "gpu" if joined_entries >= min_entries else "cpu"


class BucketPlacement(NamedTuple):
    """One join+eliminate and where it ran (a tuple: one is made per mini-bucket, in the solve)."""

    var: str
    joined: int
    out_entries: int
    where: Where


class PlacedBackend:
    """A table backend that runs each bucket on the CPU or the GPU, whichever :func:`place` says.

    Tables are made on the host (:meth:`table`); a bucket placed on the GPU uploads its inputs
    and leaves its output on the device (a GPU output comes back only when a CPU bucket, or
    :meth:`to_numpy`, needs it). Single-table operations run where their table is.

    Parameters
    ----------
    cpu
        The host backend (a :class:`dcop.tables.NumpyBackend`).
    gpu
        The device backend (a :class:`dcop.gpu.CupyBackend`, or a stand-in with its methods).
    min_entries
        Joined entries from which a bucket runs on the GPU (default: :func:`gpu_min_entries`).
    """

    name = "placed"
    xp = np

    def __init__(self, cpu: Any, gpu: Any, min_entries: int | None = None) -> None:
        self.cpu = cpu
        self.gpu = gpu
        self.min_entries = gpu_min_entries(min_entries)
        #: every join+eliminate, in call order
        self.placements: list[BucketPlacement] = []
        # whether any table was ever made on the device: until then no device work can be
        # queued, and synchronize does not touch CUDA (from an agent's fresh job thread it would)
        self._device_tables = False
        self.out_of_memory_errors: tuple[type[BaseException], ...] = (
            *getattr(cpu, "out_of_memory_errors", (MemoryError,)),
            *getattr(gpu, "out_of_memory_errors", ()),
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

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        """A table on the host: it goes to the device only with a bucket placed there."""
        return Table(tuple(scope), self.asarray(array, dtype))

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
        return str(getattr(self.gpu, "ipc_domain", ""))

    def handover_path(self, mine: str, peer: str, reading: bool) -> str:
        """How a UTIL goes between my agent (IPC domain ``mine``) and the agent of domain
        ``peer`` (``ipc``, ``p2p``, ``host`` or ``net``; see :func:`dcop.gpu.ipc.handover_path`)."""
        path = getattr(self.gpu, "handover_path", None)
        if path is None:  # a device backend without peers: one GPU or none
            return "ipc" if mine and mine == peer else "net"
        return str(path(mine, peer, reading))

    def export_ipc(self, data: Any) -> Any:
        """An IPC export of device ``data`` (:class:`dcop.gpu.ipc.Exported`); None for host data,
        which travels as bytes anyway."""
        return None if self.on_host(data) else self.gpu.export_ipc(data)

    def import_ipc(self, handle: bytes, shape: tuple[int, ...], dtype: str, peer: str = "") -> Any:
        """Another agent's table on this GPU (or a peer GPU: ``peer`` is its IPC domain), copied
        to this backend's device (it stays there)."""
        self._device_tables = True
        return self.gpu.import_ipc(handle, shape, dtype, peer)

    def offer_ipc(self, nbytes: int) -> Any:
        """An exportable device buffer to fill later (None when too small to be worth it)."""
        return self.gpu.offer_ipc(nbytes)

    def export_ipc_into(self, exported: Any, offset: int, data: Any, wait: bool = True) -> bool:
        """Copy device ``data`` into an offered buffer (``wait=False``: queued only, for a
        :meth:`synchronize` before the handle goes out); False for host data (sent as bytes)."""
        if self.on_host(data):
            return False
        self._device_tables = True
        self.gpu.export_ipc_into(exported, offset, data, wait)
        return True

    def open_ipc(self, handle: bytes, nbytes: int = 0, peer: str = "") -> int:
        """Map another agent's offered buffer of ``nbytes`` on this GPU (``peer``: its IPC
        domain, which names its device)."""
        return int(self.gpu.open_ipc(handle, nbytes, peer))

    def read_ipc_tables(
        self, pointer: int, tables: Sequence[tuple[int, tuple[int, ...], str]]
    ) -> list[Any]:
        """Tables (offset, shape, dtype) of a mapped buffer, copied to this backend's device."""
        self._device_tables = True
        return list(self.gpu.read_ipc_tables(pointer, tables))

    def close_ipc(self, pointer: int) -> None:
        """Unmap a buffer of :meth:`open_ipc`."""
        self.gpu.close_ipc(pointer)

    # ---- getting ready -----------------------------------------------------------------------
    def warm_up(self, **kwargs: Any) -> dict[str, float]:
        """The device backend's ``warm_up`` (context, pools, generic kernels)."""
        return self.gpu.warm_up(**kwargs)  # type: ignore[no-any-return]

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
        """Compile the bucket's kernel ahead if the bucket will run on the GPU; seconds spent
        (``background``: on a thread of its own, see ``CupyBackend.prepare_bucket``)."""
        joined = math.prod(_sizes(scopes, shapes).values())
        if place(joined, self.min_entries) != "gpu":
            return 0.0
        return float(self.gpu.prepare_bucket(scopes, shapes, var, op, dtype, scope, background))

    @property
    def setup(self) -> Any:
        """The device backend's set-up seconds (:class:`dcop.gpu.SetupStats`)."""
        return self.gpu.setup

    def placement_metrics(self) -> dict[str, float]:
        """Counts for an agent's metrics: buckets and joined entries per side, and the threshold."""
        out: dict[str, float] = {"gpu_min_entries": self.min_entries}
        device = getattr(self.gpu, "device_id", None)
        if device is not None:  # which GPU of the host this agent ran on
            out["device"] = int(device)
        split = getattr(self.gpu, "split_metrics", None)
        if split is not None:  # an agent whose large buckets are split over several GPUs
            out.update({k: float(v) for k, v in split().items()})
        for side in ("cpu", "gpu"):
            done = [p for p in self.placements if p.where == side]
            out[f"buckets_{side}"] = len(done)
            out[f"joined_{side}"] = sum(p.joined for p in done)
        transfers = getattr(self.gpu, "transfers", None)
        if transfers is not None:
            for key in ("h2d_bytes", "d2h_bytes", "ipc_out_bytes", "ipc_in_bytes", "p2p_in_bytes"):
                out[key] = int(getattr(transfers, key, 0))
            for key in (
                "ipc_out",
                "ipc_open",
                "ipc_in",
                "ipc_in_alloc",
                "ipc_in_copy",
                "ipc_in_check",
            ):
                out[f"{key}_s"] = float(transfers.seconds.get(key, 0.0))
        return out


def _sizes(scopes: Sequence[Sequence[str]], shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for scope, shape in zip(scopes, shapes, strict=True):
        sizes.update(zip(scope, (int(s) for s in shape), strict=True))
    return sizes


# ---- agents on GPUs ---------------------------------------------------------------------------
def gpu_devices(spec: str, count: int | None) -> tuple[int, ...]:
    """The devices named by a ``--gpu`` value: ``all`` (every one of the ``count`` devices), one
    ordinal (``1``) or a comma-separated list (``0,2``).

    ``count`` is the number of devices visible on the agents' host; ``None`` when unknown (the
    ordinals are then not checked, and ``all`` is refused).
    """
    text = spec.strip()
    if text == "all":
        if not count:
            raise BackendUnavailable("--gpu all: no CUDA device is visible here")
        return tuple(range(count))
    devices: list[int] = []
    for part in text.split(","):
        item = part.strip()
        if not item.isdigit():
            raise InputError(f"--gpu {spec!r}: want 'all', a device number or a list like 0,2")
        ordinal = int(item)
        if ordinal in devices:
            raise InputError(f"--gpu {spec!r}: device {ordinal} is listed twice")
        if count is not None and ordinal >= count:
            raise BackendUnavailable(f"--gpu {spec!r}: no device {ordinal} (this host has {count})")
        devices.append(ordinal)
    return tuple(devices)


def agent_gpu(spec: str, index: int, count: int | None) -> tuple[int, tuple[int, ...]]:
    """An agent's ``--gpu`` value read: its device, and the devices its large buckets are split
    over (empty: none). ``D/LIST`` (what ``--gpu-placement split`` gives each agent: device
    ``D``, buckets split over ``LIST``), else a ``--gpu`` value of :func:`gpu_devices`, whose
    ``index mod len``-th device the agent takes (:func:`device_for_agent`)."""
    own, _, split = spec.partition("/")
    if not split:
        return device_for_agent(
            index, gpu_devices(own, count if own.strip() == "all" else None)
        ), ()
    device = gpu_devices(own, None)
    over = gpu_devices(split, count if split.strip() == "all" else None)
    if len(device) != 1 or device[0] not in over:
        raise InputError(f"--gpu {spec!r}: want DEVICE/LIST with DEVICE in LIST, like 1/0,1")
    return device[0], over


def device_for_agent(index: int, devices: Sequence[int]) -> int:
    """The device of the ``index``-th agent (0-based, in launch order): round robin over
    ``devices``, so agent ``k`` gets ``devices[k mod len(devices)]``."""
    if not devices:
        raise BackendUnavailable("no GPU to place agents on")
    if index < 0:
        raise ModelError(f"agent index {index} < 0")
    return int(devices[index % len(devices)])


def check_placement(name: str) -> str:
    """``name`` if it is one of :data:`PLACEMENTS` (else :class:`~dcop.errors.InputError`)."""
    if name not in PLACEMENTS:
        raise InputError(f"GPU placement {name!r}: want one of {', '.join(PLACEMENTS)}")
    return name


def balanced_devices(
    parent: Mapping[int, int | None], work: Mapping[int, float], devices: Sequence[int]
) -> dict[int, int]:
    """Each agent's device, whole subtrees at a time, the heaviest subtrees on different devices.

    ``parent`` is the pseudo-tree (agent -> parent, None for a root) and ``work`` each agent's
    bucket work (its joined entries where the bucket runs on a GPU, 0 where it stays on the
    CPU). Starting from the trees of the forest, the heaviest subtree is cut at its root while
    it weighs more than a device's fair share (total / count) or there are fewer subtrees than
    devices; the subtrees then go to devices heaviest first, each to the least loaded
    (longest-processing-time first), and each cut root goes with its heaviest child, so that
    the largest UTIL it takes stays on its device. Without any work: round robin.
    """
    if not devices:
        raise BackendUnavailable("no GPU to place agents on")
    if len(devices) == 1 or not any(work.get(v, 0) > 0 for v in parent):
        ids = sorted(parent)
        return {v: device_for_agent(k, devices) for k, v in enumerate(ids)}
    children: dict[int, list[int]] = {v: [] for v in parent}
    roots = []
    for v in sorted(parent):
        p = parent[v]
        if p is None:
            roots.append(v)
        else:
            children[p].append(v)
    weight: dict[int, float] = {}
    order = list(roots)  # pre-order; weights filled bottom-up below
    for v in order:
        order.extend(children[v])
    for v in reversed(order):
        weight[v] = float(work.get(v, 0)) + sum(weight[c] for c in children[v])
    total = sum(weight[r] for r in roots)
    share = total / len(devices)
    units, cut = list(roots), []
    while True:
        heaviest = max(units, key=lambda u: (weight[u], -u))
        if (weight[heaviest] <= share and len(units) >= len(devices)) or not children[heaviest]:
            break
        units.remove(heaviest)
        cut.append(heaviest)
        units.extend(children[heaviest])
    load = dict.fromkeys(devices, 0.0)
    rank = {d: k for k, d in enumerate(devices)}
    out: dict[int, int] = {}
    for u in sorted(units, key=lambda u: (-weight[u], u)):
        device = min(devices, key=lambda d: (load[d], rank[d]))
        load[device] += weight[u]
        stack = [u]
        while stack:
            v = stack.pop()
            out[v] = device
            stack.extend(c for c in children[v] if c not in cut)
    for v in reversed(cut):  # deeper cuts first: a cut root's heaviest child may be a cut root
        out[v] = out[max(children[v], key=lambda c: (weight[c], -c))]
    return out
