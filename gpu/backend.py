"""``CupyBackend``: the table operations of :class:`dcop.backends.numpy.NumpyBackend` on a CUDA device.

Every method has the NumPy backend's meaning; tables are :class:`dcop.tables.Table` whose data is a
CuPy array on the backend's device (a NumPy array is accepted as input and uploaded). The backend is
bound to one device and one non-blocking stream (its own unless one is given), so that each agent
process can own a stream; all its work is queued there, and ``synchronize`` waits for it.

``join_eliminate`` never builds the joined table. :mod:`dcop.gpu.plan` decides, from shapes alone,
which kernel a bucket runs (the precompiled generic one for small buckets, one generated for the
bucket's signature for larger ones) and lays out its metadata; this module holds the device side:
inputs on the device, compiling and loading kernels, launching, and chunking. An output larger than
the device memory allowed for it is computed in chunks of rows into two device buffers and copied
into pinned host memory on a second stream while the next chunk is computed; such a table comes
back as a NumPy array.

A deadline inside one large bucket: the launches are queued without waiting, so the host hears
of no time passing on the device. Under the check of a
:func:`~dcop.backends.between.checked_between` block (a pass with a deadline), a join+eliminate
is queued in pieces of about :data:`dcop.gpu.plan.PIECE_S` of predicted work, and once that
much is queued the backend waits for its stream and runs the check, which may raise: the
output being made is then dropped, nothing of it still running. Without a check nothing waits.

Getting ready is kept apart from solving: :meth:`CupyBackend.warm_up` sets up the memory pools and
loads the generic kernels, :meth:`CupyBackend.prepare_bucket` compiles a bucket's kernel from its
shapes before its data exist, and :attr:`CupyBackend.setup` adds up the seconds both took (and any
compile that still happened while solving), for an agent to report apart from its solve time.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from dcop.backends.base import BackendInfo, BucketShape, TableBackend
from dcop.backends.between import Pieces
from dcop.errors import BackendUnavailable, ModelError
from dcop.gpu import kernels as K
from dcop.gpu.ipc import Exported, Placed
from dcop.gpu.plan import (
    BACKGROUND_SHARE,
    DEFAULT_SPECIALIZE_ENTRIES,
    GENERATED_BLOCKS_PER_SM,
    GENERIC_BLOCKS_PER_SM,
    GENERIC_FALLBACK_MAX_ENTRIES,
    MAX_LAUNCH_ROWS,
    NEVER_SPECIALIZE,
    PIECE_S,
    BucketPlan,
    PlanCache,
    PlanSettings,
    aggregate_meta,
    c_strides,
    chunk_units,
    grid_units,
    kernel_dtype,
    launch_ranges,
    piece_units,
    predicted_seconds,
)
from dcop.tables import Op, Table, check_op, domain_sizes, union_scope

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_SPECIALIZE_ENTRIES",
    "CupyBackend",
    "JoinEliminatePlan",
    "SetupStats",
    "TransferStats",
    "pinned_empty",
]

#: Largest chunk (bytes of output) of the chunked, host-bound path.
DEFAULT_CHUNK_BYTES = 256 << 20
#: Downloads from this size on go to page-locked memory (measured on an H100: 52 GB/s against
#: 7.6 GB/s pageable at 100 MB; ``benchmarks/probes/gpu_agents_probe.py``).
PINNED_DOWNLOAD_BYTES = 1 << 20
#: Share of the free device memory an output may take before it is chunked to the host.
FREE_MEMORY_SHARE = 0.8
#: A page-locked host table over this share of the device budget is read by the kernels where it
#: lies instead of being uploaded (:meth:`CupyBackend._host_view`): room stays for the output.
ZERO_COPY_SHARE = 0.5
#: Dtypes and ops :meth:`CupyBackend.warm_up` prepares by default (DPOP and BE: min-sum).
WARM_DTYPES = ("float32", "float64")
WARM_OPS = ("min",)


def _import_cupy() -> Any:
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailable(
            "backend 'cupy' needs CuPy and a CUDA GPU: pip install 'dcop[gpu]' "
            f"(or the cupy-cudaXXx wheel matching your CUDA), or use --backend numpy ({exc})"
        ) from exc
    return cupy


@dataclass
class TransferStats:
    """Seconds and bytes the backend spent moving tables, for benchmarks (host clock)."""

    h2d_bytes: int = 0
    d2h_bytes: int = 0
    #: bytes handed to / taken from other processes of this GPU by CUDA IPC
    ipc_out_bytes: int = 0
    ipc_in_bytes: int = 0
    #: of ``ipc_in_bytes``, those taken from another GPU's buffer (peer to peer)
    p2p_in_bytes: int = 0
    #: bytes of page-locked host tables that kernels read in place (not uploaded)
    zero_copy_bytes: int = 0
    chunks: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, dt: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + dt

    def metrics(self) -> dict[str, float]:
        """The counts an agent's metrics carry: bytes moved each way and by CUDA IPC, and the
        seconds of each IPC step (``<step>_s``)."""
        out: dict[str, float] = {
            "h2d_bytes": self.h2d_bytes,
            "d2h_bytes": self.d2h_bytes,
            "ipc_out_bytes": self.ipc_out_bytes,
            "ipc_in_bytes": self.ipc_in_bytes,
            "p2p_in_bytes": self.p2p_in_bytes,
        }
        for key in ("ipc_out", "ipc_open", "ipc_in", "ipc_in_alloc", "ipc_in_copy", "ipc_in_check"):
            out[f"{key}_s"] = float(self.seconds.get(key, 0.0))
        return out


@dataclass
class SetupStats:
    """Seconds a backend spent getting ready rather than solving (host clock), for metrics.

    Attributes
    ----------
    init_s
        The constructor: driver, CUDA context, streams, device properties.
    warm_up_s
        :meth:`CupyBackend.warm_up`: memory pools, generic kernels, first launches.
    prepare_s, prepared
        :meth:`CupyBackend.prepare_bucket`: buckets planned and their kernels compiled or loaded
        ahead of their data, and how many.
    solve_compile_s, solve_compiles
        Kernels compiled or loaded while solving (not prepared ahead): this time is inside the
        solve time too.
    compile_wait_s
        Seconds ``join_eliminate`` waited for a kernel that ``prepare_bucket(background=True)``
        was still compiling (set-up time that landed inside a solve step; agents take it out of
        their compute time).
    generic_fallbacks
        Buckets run with the generic kernel because their own was still compiling.
    kernels_s, kernels
        Every kernel compiled (or loaded from the disk cache) onto the device, wherever it was
        (warm-up, prepare, solve): seconds and count. A solve of a new problem compiles nothing
        on its path but the generic kernels once per machine
        (:data:`dcop.gpu.plan.DEFAULT_SPECIALIZE_ENTRIES`); a shape that earns its own kernel
        (:data:`dcop.gpu.plan.BACKGROUND_SHARE`) compiles on a thread beside it.
    """

    init_s: float = 0.0
    warm_up_s: float = 0.0
    prepare_s: float = 0.0
    prepared: int = 0
    solve_compile_s: float = 0.0
    solve_compiles: int = 0
    compile_wait_s: float = 0.0
    generic_fallbacks: int = 0
    kernels_s: float = 0.0
    kernels: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)


class CupyBackend(TableBackend):
    """Table operations with CuPy RawKernels on one device and one stream.

    Parameters
    ----------
    device
        CUDA device ordinal (default: CuPy's current device).
    stream
        A ``cupy.cuda.Stream`` (or ``ExternalStream``) to queue all work on; default: a new
        non-blocking stream owned by this backend.
    max_device_bytes
        Cap on one output table kept on the device; larger ones are chunked to pinned host memory.
        Default: 80% of the free device memory at the time of the call.
    chunk_bytes
        Size of one chunk of the chunked path.
    specialize_entries
        Joined entries of one bucket shape, summed over its calls, from which it gets a
        generated kernel (0: always). The default is where that kernel pays for its compile
        (:data:`dcop.gpu.plan.DEFAULT_SPECIALIZE_ENTRIES`, about 2e10): smaller shapes run the
        generic kernel, so a new problem compiles nothing. A caller that compiles ahead, in the
        background, passes :data:`dcop.gpu.plan.AHEAD_SPECIALIZE_ENTRIES`.
    stage_output
        Let generated kernels stage a warp's output rows in shared memory for coalesced stores.
    min_groups
        A generated kernel gives each thread all rows that differ in the last output variable
        only when that leaves at least this many threads (default: 512 per multiprocessor).
    kernel_cache
        Directory of compiled kernels (default: ``$DCOP_KERNEL_CACHE``, else CuPy's own); see
        :func:`dcop.gpu.kernels.use_cache_dir`.
    background_share
        A shape the generic kernel runs while its own compiles on a thread earns its kernel at
        this share of ``specialize_entries`` (:data:`dcop.gpu.plan.BACKGROUND_SHARE`; 1: none).
    piece_seconds
        Predicted seconds of queued work after which a run under a check (a deadline) waits for
        the stream and runs it (:data:`dcop.gpu.plan.PIECE_S`).
    """

    name = "cupy"

    def __init__(
        self,
        device: int | None = None,
        stream: Any = None,
        max_device_bytes: int | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        specialize_entries: int = DEFAULT_SPECIALIZE_ENTRIES,
        stage_output: bool = True,
        min_groups: int | None = None,
        kernel_cache: str | os.PathLike[str] | None = None,
        background_share: float = BACKGROUND_SHARE,
        piece_seconds: float = PIECE_S,
    ) -> None:
        started = time.perf_counter()
        #: where compiled kernels are kept (set before anything compiles)
        self.kernel_cache = K.use_cache_dir(kernel_cache)
        cupy = _import_cupy()
        try:
            count = int(cupy.cuda.runtime.getDeviceCount())
        except Exception as exc:  # no driver, no device: CuPy raises its own CUDA errors
            raise BackendUnavailable(f"backend 'cupy': no usable CUDA device ({exc})") from exc
        if count == 0:
            raise BackendUnavailable("backend 'cupy': CuPy sees no CUDA device")
        ordinal = int(cupy.cuda.runtime.getDevice()) if device is None else int(device)
        if not 0 <= ordinal < count:
            raise BackendUnavailable(
                f"backend 'cupy': no device {ordinal} (this machine has {count})"
            )
        self.xp = cupy
        self.device_id = ordinal
        self.info = BackendInfo(device=ordinal)
        self._strided: Any = None  # dcop.gpu.strided.StridedKernels, made at first use
        self.device = cupy.cuda.Device(ordinal)
        with self.device:
            self.stream = stream if stream is not None else cupy.cuda.Stream(non_blocking=True)
            self.copy_stream = cupy.cuda.Stream(non_blocking=True)
            props = cupy.cuda.runtime.getDeviceProperties(ordinal)
        self.sm_count = int(props["multiProcessorCount"])
        self.device_name = (
            props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        )
        self.max_device_bytes = max_device_bytes
        self.chunk_bytes = int(chunk_bytes)
        self.specialize_entries = int(specialize_entries)
        self.background_share = float(background_share)
        self.piece_seconds = float(piece_seconds)
        self.stage_output = bool(stage_output)
        self.min_groups = self.sm_count * 512 if min_groups is None else int(min_groups)
        self.transfers = TransferStats()
        #: what ``solve`` reports as TableTooLarge (several tables live on the device at once)
        self.out_of_memory_errors: tuple[type[BaseException], ...] = (
            cupy.cuda.memory.OutOfMemoryError,
        )
        self._loaded: set[str] = set()  # kernels compiled or loaded on this device
        #: kernels being compiled on a background thread (prepare_bucket(background=True))
        self._compiling: dict[str, concurrent.futures.Future[float]] = {}
        self._setup_lock = threading.Lock()
        #: smallest table exported by CUDA IPC (read from the environment at the first export)
        self.ipc_min_bytes: int | None = None
        self._plans = PlanCache()  # plans by bucket structure (see PlanCache)
        #: predicted seconds of join+eliminate work queued on the stream since the last wait
        #: for it here (a checked run waits once they reach piece_seconds)
        self._queued_s = 0.0
        #: where the tables of each mapped buffer land (by its pointer; see :meth:`open_ipc`)
        self._landing: dict[int, Any] = {}
        #: the device holding each mapped buffer (another one's for a peer-to-peer hand-over)
        self._owner: dict[int, int] = {}
        self.setup = SetupStats(init_s=time.perf_counter() - started)

    # ---- context -----------------------------------------------------------------------------
    def stream_context(self) -> Any:
        """Context that makes this backend's device and stream current."""
        return _Bound(self.device, self.stream)

    # ---- moving data -------------------------------------------------------------------------
    def asarray(self, array: Any, dtype: Any = np.float64) -> Any:
        cupy = self.xp
        with self.stream_context():
            if isinstance(array, cupy.ndarray):
                if array.device.id != self.device_id:
                    array = cupy.asarray(array)  # peer copy onto this device
                return cupy.ascontiguousarray(array, dtype=dtype)
            host = np.ascontiguousarray(array, dtype=dtype)
            self.transfers.h2d_bytes += host.nbytes
            return cupy.asarray(host)

    def to_numpy(self, array: Any) -> np.ndarray:
        """The array on the host; large ones land in page-locked memory (several times faster
        than a pageable copy), which then goes to the socket as it is."""
        if isinstance(array, self.xp.ndarray):
            with self.stream_context():
                if array.size * array.dtype.itemsize >= PINNED_DOWNLOAD_BYTES:
                    out = pinned_empty(self.xp, tuple(array.shape), np.dtype(array.dtype))
                    array.get(stream=self.stream, out=out)
                    self.stream.synchronize()
                else:
                    out = array.get(stream=self.stream)
            self.transfers.d2h_bytes += out.nbytes
            return np.asarray(out)
        return np.asarray(array)

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        """Straight into ``out`` (pageable: the H200 host read a z = 9 pass's 9.4 GB of messages
        at 2.7 GB/s through a page-locked buffer allocated per table, and page-locking is slower
        than the copy it saves)."""
        if not isinstance(array, self.xp.ndarray):
            np.copyto(out, array)
            return
        with self.stream_context():
            self.xp.ascontiguousarray(array).get(stream=self.stream, out=out)
            self.stream.synchronize()
        self.transfers.d2h_bytes += out.nbytes

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        return Table(tuple(scope), self.asarray(array, dtype))

    def host_empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """A host array in page-locked memory: its upload is a DMA at the link's speed, not a
        staged pageable copy (about 5 GB/s on an H200 host)."""
        with self.stream_context():
            return pinned_empty(self.xp, tuple(shape), np.dtype(dtype))

    def free_bytes(self) -> float:
        """Free memory of this device, its memory pool's free blocks included."""
        with self.device:
            free, _ = self.xp.cuda.runtime.memGetInfo()
            pool = self.xp.get_default_memory_pool().free_bytes()
        return float(free + pool)

    # ---- the contraction engine's steps ------------------------------------------------------
    @property
    def strided(self) -> Any:
        """This device's :class:`dcop.gpu.strided.StridedKernels` (sums of strided products,
        peaks, counts: one module compiled per dtype, where CuPy's own operations compile a
        kernel per number of dimensions), made at first use; used within ``self.stream_context()``."""
        if self._strided is None:
            from dcop.gpu.strided import StridedKernels

            self._strided = StridedKernels(
                self.xp,
                self.device_id,
                self._upload_meta,
                self.stream_context,
                self.stream,
            )
        return self._strided

    # ---- CUDA IPC between agents of one GPU ----------------------------------------------------
    @property
    def ipc_domain(self) -> str:
        """Who can open this backend's IPC handles (:func:`dcop.gpu.ipc.ipc_domain`)."""
        from dcop.gpu.ipc import ipc_domain

        return ipc_domain(self.xp, self.device_id)

    def handover_path(self, mine: str, peer: str, reading: bool) -> str:
        """How a UTIL goes between this backend's agent (IPC domain ``mine``) and the agent of
        domain ``peer``: ``ipc``, ``p2p``, ``host`` or ``net``
        (:func:`dcop.gpu.ipc.handover_path`); ``reading`` when this agent is the parent."""
        from dcop.gpu.ipc import handover_path

        return handover_path(self.xp, mine, self.device_id, peer, reading)

    def _ipc_worth(self, nbytes: int) -> bool:
        """Whether a table of ``nbytes`` goes by IPC (:func:`dcop.gpu.ipc.ipc_min_bytes`)."""
        if self.ipc_min_bytes is None:
            from dcop.gpu.ipc import ipc_min_bytes

            self.ipc_min_bytes = ipc_min_bytes()
        return nbytes > 0 and nbytes >= self.ipc_min_bytes  # nothing to hand over in 0 bytes

    def offer_ipc(self, nbytes: int) -> Exported | None:
        """An exportable buffer of ``nbytes`` to fill later (None when that is too small to be
        worth a handle)."""
        from dcop.gpu.ipc import offer_buffer

        if not self._ipc_worth(nbytes):
            return None
        t0 = time.perf_counter()
        with self.stream_context():
            offered = offer_buffer(self.xp, nbytes)
        self.transfers.add("ipc_out", time.perf_counter() - t0)
        return offered

    def export_ipc_into(
        self, exported: Exported, offset: int, array: Any, wait: bool = True
    ) -> None:
        """Copy device ``array`` into an offered buffer at byte ``offset`` (``wait=False``: queued
        only; :meth:`synchronize` before the handle goes out)."""
        from dcop.gpu.ipc import copy_into

        t0 = time.perf_counter()
        with self.stream_context():
            array = self.xp.ascontiguousarray(array)
            copy_into(self.xp, exported, offset, array, self.stream, wait)
        self.transfers.ipc_out_bytes += int(array.size) * int(array.dtype.itemsize)
        self.transfers.add("ipc_out", time.perf_counter() - t0)

    def export_ipc(self, array: Any) -> Exported | None:
        """A copy of device ``array`` that another process of this GPU can open by its handle;
        None for a table under :func:`dcop.gpu.ipc.ipc_min_bytes` (it travels as bytes)."""
        nbytes = int(array.size) * int(array.dtype.itemsize)
        exported = self.offer_ipc(nbytes)
        if exported is not None:
            self.export_ipc_into(exported, 0, array)
        return exported

    def open_ipc(self, handle: bytes, nbytes: int = 0, peer: str = "") -> int:
        """Map another process's buffer on this device (:class:`dcop.gpu.ipc.IpcUnavailable`).
        With ``nbytes`` (the buffer's size) also reserve where its tables will land, so that
        taking them over (:meth:`read_ipc_tables`) allocates nothing: a new device array there
        cost 0.15-0.3 ms of an agent's critical path on the H200. ``peer``: the exporter's IPC
        domain, naming its device when that is not this one (a peer-to-peer hand-over)."""
        from dcop.gpu.ipc import domain_device, open_handle

        t0 = time.perf_counter()
        owner = domain_device(self.xp, peer) if peer else None
        with self.device:
            pointer = open_handle(self.xp, handle)
        self._owner[pointer] = self.device_id if owner is None else owner
        if nbytes > 0:
            # best effort: without room now, each table gets an array of its own when it comes
            with self.stream_context(), contextlib.suppress(*self.out_of_memory_errors):
                self._landing[pointer] = self.xp.empty(nbytes, dtype=np.uint8)
        self.transfers.add("ipc_open", time.perf_counter() - t0)
        return pointer

    def read_ipc_tables(self, pointer: int, tables: Sequence[Placed]) -> list[Any]:
        """The ``tables`` (offset, shape, dtype) of a buffer mapped at ``pointer``, copied onto
        this backend's device (they stay there), checked for NaN, with one wait for all."""
        from dcop.gpu.ipc import copy_tables_out

        t0 = time.perf_counter()
        steps: dict[str, float] = {}
        with self.stream_context():
            out = copy_tables_out(
                self.xp,
                pointer,
                tables,
                # the mapping is in this device's address space (peer access enabled by the
                # open): naming the owner would make CuPy open a context on it for nothing
                self.device_id,
                self.stream,
                self.flag_nan,
                self._landing.get(pointer),
                steps,
            )
        nbytes = sum(int(a.size) * int(a.dtype.itemsize) for a in out)
        self.transfers.ipc_in_bytes += nbytes
        if self._owner.get(pointer, self.device_id) != self.device_id:
            self.transfers.p2p_in_bytes += nbytes  # came over from another GPU
        self.transfers.add("ipc_in", time.perf_counter() - t0)
        for step, dt in steps.items():  # where ipc_in went: ipc_in_alloc, _copy, _check
            self.transfers.add(f"ipc_in_{step}", dt)
        return out

    def read_ipc(self, pointer: int, offset: int, shape: tuple[int, ...], dtype: str) -> Any:
        """The table at ``pointer + offset`` of a mapped buffer (:meth:`read_ipc_tables`)."""
        return self.read_ipc_tables(pointer, [(offset, shape, dtype)])[0]

    def close_ipc(self, pointer: int) -> None:
        from dcop.gpu.ipc import close_handle

        self._landing.pop(pointer, None)
        self._owner.pop(pointer, None)
        with self.device:
            close_handle(self.xp, pointer)

    def import_ipc(self, handle: bytes, shape: tuple[int, ...], dtype: str, peer: str = "") -> Any:
        """The table behind another process's IPC ``handle``, copied onto this backend's device
        (:class:`dcop.gpu.ipc.IpcUnavailable` when the handle cannot be opened); ``peer`` as for
        :meth:`open_ipc`."""
        pointer = self.open_ipc(handle, 0, peer)
        try:
            return self.read_ipc(pointer, 0, shape, dtype)
        finally:
            self.close_ipc(pointer)

    def has_nan(self, array: Any) -> bool:
        """Whether the C-contiguous float device ``array`` holds a NaN (one launch of our own
        kernel on this backend's stream, then a wait for its 4-byte answer)."""
        with self.stream_context():
            flag = self.xp.zeros(1, dtype=np.int32)
            self.flag_nan(array, flag)
            return bool(int(flag.get(stream=self.stream)[0]))

    def flag_nan(self, array: Any, flag: Any) -> None:
        """Queue the NaN test of the C-contiguous float device ``array`` on this backend's
        stream: it sets the int32 device ``flag`` when it finds one (nothing waits here)."""
        name = np.dtype(array.dtype).name
        kernel = K.nan_kernel(self.device_id, name)
        self._load(kernel, K.nan_name(name))
        n = int(array.size)
        if n:
            with self.stream_context():
                kernel(self._grid(n), (K.BLOCK,), (array, np.uint64(n), flag))

    def synchronize(self) -> None:
        """Wait for all work queued on this backend's streams."""
        self.stream.synchronize()
        self.copy_stream.synchronize()
        self._queued_s = 0.0

    def _device_data(self, table: Table) -> Any:
        """The table's data as a C-contiguous float array on this device."""
        data = table.data
        dtype = data.dtype if data.dtype in (np.float32, np.float64) else np.float64
        if (
            isinstance(data, self.xp.ndarray)
            and data.flags.c_contiguous
            and data.dtype == dtype
            and data.device.id == self.device_id
        ):
            return data
        if (
            isinstance(data, np.ndarray)
            and data.dtype == dtype
            and data.flags.c_contiguous
            and data.nbytes > ZERO_COPY_SHARE * self._device_budget()
        ):
            view = self._host_view(data)
            if view is not None:
                return view
        return self.asarray(data, dtype)

    def _host_view(self, data: np.ndarray) -> Any:
        """A device array over the host array ``data`` where it lies (no copy), or None when
        ``data`` is not page-locked. Page-locked memory is mapped into every device's address
        space (unified addressing), so a kernel reads it over the interconnect: a table larger
        than the device (a bucket's output streamed to pinned host memory) is read in place by
        the bucket that takes it, on every device that computes a slice of that bucket."""
        runtime = self.xp.cuda.runtime
        try:
            attributes = runtime.pointerGetAttributes(int(data.ctypes.data))
        except Exception:  # CuPy's CUDARuntimeError: not memory CUDA knows
            return None
        if int(getattr(attributes, "type", 0)) != 1:  # cudaMemoryTypeHost: page-locked
            return None
        memory = self.xp.cuda.UnownedMemory(
            int(attributes.devicePointer), data.nbytes, data, self.device_id
        )
        self.transfers.zero_copy_bytes += data.nbytes
        pointer = self.xp.cuda.MemoryPointer(memory, 0)
        return self.xp.ndarray(data.shape, dtype=data.dtype, memptr=pointer)

    # ---- single-table operations -------------------------------------------------------------
    def transpose(self, table: Table, scope: Sequence[str]) -> Table:
        scope = tuple(scope)
        if scope == table.scope:
            return table
        axes = [table.scope.index(v) for v in scope]
        with self.stream_context():
            data = self.xp.ascontiguousarray(self.xp.transpose(self._device_data(table), axes))
        return Table(scope, data)

    def _last_axis(self, table: Table, var: str) -> tuple[tuple[str, ...], Any]:
        if var not in table.scope:
            raise ModelError(f"variable {var!r} is not in the table's scope {table.scope}")
        rest = tuple(v for v in table.scope if v != var)
        moved = self.transpose(table, (*rest, var))
        return rest, self._device_data(moved)

    def eliminate(self, table: Table, var: str, op: Op = "min") -> Table:
        """Remove ``var`` by ``op`` over its axis (the paper's elimination kernel)."""
        check_op(op)
        return self._reduce_var(table, var, K.eliminate_kernel, op, None)

    def argbest(self, table: Table, var: str, op: Op = "min") -> Table:
        return self._reduce_var(table, var, K.argbest_kernel, op, np.int64)

    def _reduce_var(
        self, table: Table, var: str, make_kernel: Any, op: Op, out_dtype: Any
    ) -> Table:
        """One thread per tuple of the other variables reduces the last axis (``var``'s)."""
        rest, data = self._last_axis(table, var)
        ndom = data.shape[-1]
        n_out = data.size // max(ndom, 1)
        with self.stream_context():
            out = self.xp.empty(data.shape[:-1], dtype=out_dtype or data.dtype)
            if n_out:
                kernel = make_kernel(self.device_id, op, data.dtype.name)
                kernel(self._grid(n_out), (K.BLOCK,), (data, out, np.uint64(n_out), np.int32(ndom)))
        return Table(rest, out)

    def condition(self, table: Table, assignment: Mapping[str, int]) -> Table:
        index = tuple(int(assignment[v]) if v in assignment else slice(None) for v in table.scope)
        rest = tuple(v for v in table.scope if v not in assignment)
        shape = tuple(
            s for v, s in zip(table.scope, table.shape, strict=True) if v not in assignment
        )
        with self.stream_context():
            # reshape: ascontiguousarray turns a 0-d result (everything fixed) into shape (1,)
            data = self.xp.ascontiguousarray(self._device_data(table)[index]).reshape(shape)
        return Table(rest, data)

    # ---- joins -------------------------------------------------------------------------------
    def join(self, tables: Sequence[Table], scope: Sequence[str] | None = None) -> Table:
        """The paper's aggregation: the joined table over the union scope (materialised)."""
        if not tables:
            raise ModelError("join needs at least one table")
        full = tuple(scope) if scope is not None else union_scope(t.scope for t in tables)
        sizes = domain_sizes(tables)
        for t in tables:
            for v in t.scope:
                if v not in full:
                    raise ModelError(f"variable {v!r} of a table is not in the join scope")
        dtype = np.result_type(*[t.data.dtype for t in tables])
        datas = [self._cast(t, dtype) for t in tables]
        shape = tuple(sizes[v] for v in full)
        meta_t, pointers = aggregate_meta(
            [t.scope for t in tables], [t.shape for t in tables], full, sizes
        )
        meta = _with_pointers(meta_t, pointers, datas)
        with self.stream_context():
            out = self.xp.empty(shape, dtype=dtype)
            n_out = out.size
            if n_out:
                dmeta = self._upload_meta(meta)
                kernel = K.aggregate_kernel(self.device_id, np.dtype(dtype).name)
                kernel(
                    self._grid(n_out),
                    (K.BLOCK,),
                    (dmeta, np.int32(len(meta)), np.int32(len(tables)), out, np.uint64(n_out)),
                    shared_mem=8 * len(meta),
                )
        return Table(full, out)

    def join_eliminate(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """One pass that writes only the eliminated output.

        The result stays on the device unless it is larger than the device memory allowed for it;
        then it is computed in chunks and returned as a NumPy array (pinned host memory).
        """
        plan = self.prepare(tables, var, op, scope)
        if plan.out_bytes > self._device_budget():
            return self._run_chunked(plan)
        return self.run(plan)

    def prepare(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> JoinEliminatePlan:
        """Resolve a join+eliminate once (inputs on the device, kernel chosen and compiled) so that
        :meth:`run` launches only the kernel: what benchmarks time, and what repeated calls reuse.

        A kernel that :meth:`prepare_bucket` did not make ready is compiled (or loaded from the
        disk cache) here; that time is counted in ``setup.solve_compile_s``."""
        shape = self._plan(
            [t.scope for t in tables],
            [t.shape for t in tables],
            kernel_dtype(t.data.dtype for t in tables),
            var,
            op,
            scope,
        )
        scopes, shapes = [t.scope for t in tables], [t.shape for t in tables]
        if (
            shape.generated
            and self.specialize_entries > 0  # 0: every shape its own kernel from its first call
            and shape.kernel_name not in self._loaded
            and shape.kernel_name not in self._compiling
            and self._generic_for(shape, scopes, shapes) is not None
        ):
            # a shape that has just earned its own kernel (its joined entries, summed over its
            # calls, passed specialize_entries) compiles on a thread while the generic kernel
            # runs it: the call that passes the threshold pays no compile (a BE solve repeated
            # on an H200 spread 1.65x between warm calls); a bucket the generic kernel cannot
            # take waits for its kernel as before
            self._compile_ahead(shape)
        shape = self._unless_compiling(shape, scopes, shapes)
        spent = self._ensure_kernel(shape)
        if spent:
            self.setup.solve_compile_s += spent
            self.setup.solve_compiles += 1
        datas = [self._cast(tables[j], shape.dtype) for j in shape.order]
        plan = JoinEliminatePlan(shape, datas, _with_pointers(shape.meta, shape.pointers, datas))
        if not shape.generated:
            plan.dmeta = self._upload_meta(plan.meta)
        return plan

    def prepare_bucket(self, bucket: BucketShape, background: bool = False) -> float:
        """The kernels compute in :func:`dcop.gpu.plan.kernel_dtype` of ``dtype``, loaded from the
        disk cache where compiled before. A ``join_eliminate`` of a bucket still compiling in the
        background runs with the generic kernel where that can run it (see
        :meth:`_unless_compiling`), else waits for it; a background compile adds its seconds to
        ``setup.prepare_s``."""
        started = time.perf_counter()
        b = bucket
        plan = self._plan(b.scopes, b.shapes, kernel_dtype([b.dtype]), b.var, b.op, b.scope)
        name = plan.kernel_name
        if background and name not in self._loaded and name not in self._compiling:
            self._compile_ahead(plan)
            return time.perf_counter() - started
        self._ensure_kernel(plan)
        spent = time.perf_counter() - started
        with self._setup_lock:
            self.setup.prepare_s += spent
            self.setup.prepared += 1
        return spent

    def _compile_ahead(self, plan: BucketPlan) -> None:
        """Compile ``plan``'s kernel on a thread of its own (see :meth:`_unless_compiling`)."""
        future: concurrent.futures.Future[float] = concurrent.futures.Future()
        self._compiling[plan.kernel_name] = future
        threading.Thread(
            target=self._compile_in_background, args=(plan, future), daemon=True
        ).start()

    def _compile_in_background(
        self, plan: BucketPlan, future: concurrent.futures.Future[float]
    ) -> None:
        started = time.perf_counter()
        try:
            self._ensure_kernel(plan)
        except BaseException as exc:  # handed to whoever waits for this kernel
            future.set_exception(exc)
            return
        spent = time.perf_counter() - started
        with self._setup_lock:
            self.setup.prepare_s += spent
            self.setup.prepared += 1
        future.set_result(spent)

    def _unless_compiling(
        self,
        plan: BucketPlan,
        scopes: Sequence[Sequence[str]],
        shapes: Sequence[Sequence[int]],
    ) -> BucketPlan:
        """``plan``, unless its kernel is still compiling in the background: then the same bucket
        with the generic kernel when that kernel is loaded already (``warm_up``), can run it, and
        the bucket is at most :data:`GENERIC_FALLBACK_MAX_ENTRIES` joined entries; else ``plan``,
        once the compile has finished (the wait counts in ``setup.compile_wait_s``)."""
        name = plan.kernel_name
        future = self._compiling.get(name)
        if future is None:
            return plan
        if future.done():
            del self._compiling[name]
            future.result()  # re-raises a failed compile
            return plan
        generic = self._generic_for(plan, scopes, shapes)
        if generic is not None:
            with self._setup_lock:
                self.setup.generic_fallbacks += 1
            return generic
        started = time.perf_counter()
        try:
            future.result()  # re-raises a failed compile
        finally:
            waited = time.perf_counter() - started
            with self._setup_lock:
                self.setup.compile_wait_s += waited
            del self._compiling[name]
        return plan

    def _generic_for(
        self,
        plan: BucketPlan,
        scopes: Sequence[Sequence[str]],
        shapes: Sequence[Sequence[int]],
    ) -> BucketPlan | None:
        """The same bucket on the generic kernel, where that kernel is loaded already
        (``warm_up``, or an earlier bucket), can run it, and the bucket is at most
        :data:`GENERIC_FALLBACK_MAX_ENTRIES` joined entries; else None."""
        if plan.n_out * plan.ndom > GENERIC_FALLBACK_MAX_ENTRIES:
            return None
        settings = PlanSettings(NEVER_SPECIALIZE, self.min_groups, self.stage_output)
        generic = self._plans.plan(
            scopes, shapes, plan.dtype, plan.var, plan.op, plan.out_scope, settings
        )
        if generic.generated or generic.kernel_name not in self._loaded:
            return None
        return generic

    def warm_up(
        self, dtypes: Sequence[Any] = WARM_DTYPES, ops: Sequence[str] = WARM_OPS
    ) -> dict[str, float]:
        """Get the device ready before solving: memory pools (device and pinned host), copies both
        ways, the generic kernels for ``dtypes`` x ``ops`` (and ``min``, which ``best_value``
        uses), and one tiny launch of each (module loading, CuPy's cast kernel for mixed dtypes).

        The CUDA context and the streams were made by the constructor (``setup.init_s``). The
        transfer counters are reset afterwards, so they count the solve only.

        Returns
        -------
        dict
            Seconds per step (``pool_s``, ``kernels_s``, ``launch_s``) and ``total_s`` (also added
            to ``setup.warm_up_s``).
        """
        cupy = self.xp
        names = [np.dtype(d).name for d in dtypes]
        for name in names:
            if name not in ("float32", "float64"):
                raise ModelError(f"warm_up: GPU kernels compute in float32 or float64, not {name}")
        all_ops = list(dict.fromkeys([*ops, "min"]))
        for op in all_ops:
            check_op(op)
        times: dict[str, float] = {}
        started = time.perf_counter()
        with self.stream_context():
            probe = cupy.empty(1 << 20, dtype=np.uint8)  # the device pool's first arena
            host = pinned_empty(cupy, (1 << 20,), np.dtype(np.uint8))
            host[:] = 0
            probe.set(host, stream=self.stream)
            probe.get(stream=self.stream, out=host)
            del probe
        self.synchronize()
        times["pool_s"] = time.perf_counter() - started

        step = time.perf_counter()
        for name in names:
            for op in all_ops:
                self._load(K.generic_kernel(self.device_id, op, name), K.generic_name(op, name))
        times["kernels_s"] = time.perf_counter() - step

        step = time.perf_counter()
        tiny: dict[str, list[Table]] = {}
        for name in names:
            a = self.table(("a", "b"), np.zeros((2, 2), name), name)
            b = self.table(("b",), np.zeros(2, name), name)
            tiny[name] = [a, b]
            for op in all_ops:
                self.to_numpy(self.join_eliminate([a, b], "b", cast(Op, op)).data)
            self.best_value([a, b], "b", {"a": 0})
            self.has_nan(a.data)  # the check of tables taken by CUDA IPC (dcop.gpu.ipc.copy_out)
        if len(tiny) > 1:  # tables of both dtypes in one bucket: CuPy compiles its cast kernel
            first, second = list(tiny.values())[:2]
            self.to_numpy(self.join_eliminate([first[0], second[1]], "b").data)
        self.synchronize()
        times["launch_s"] = time.perf_counter() - step

        times["total_s"] = time.perf_counter() - started
        self.setup.warm_up_s += times["total_s"]
        self.transfers = TransferStats()
        return times

    def run(self, plan: JoinEliminatePlan, out: Any = None) -> Table:
        """Launch a prepared join+eliminate into ``out`` (a new device array by default), in
        pieces with the enclosing block's check between them (:meth:`_launch`); where it raises,
        the output is dropped."""
        between = Pieces()
        with self.stream_context():
            if out is None:
                out = self.xp.empty(plan.out_shape, dtype=plan.dtype)
            self._launch(plan, out, 0, plan.plan.n_units, between)
        return Table(plan.out_scope, out)

    def join_eliminate_host(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """``join_eliminate`` whose result is wanted on the host (a UTIL message to send, say):
        chunks are copied out on a second stream while the next chunk is computed."""
        return self._run_chunked(self.prepare(tables, var, op, scope))

    def best_value(
        self,
        tables: Sequence[Table],
        var: str,
        assignment: Mapping[str, int],
        op: Op = "min",
    ) -> tuple[int, float]:
        """One launch of the generic kernel sums the tables' entries along ``var`` at the assigned
        values of the others (each table's pointer offset to its conditioned row), and one small
        copy brings the ``|D_var|`` sums back."""
        if not tables:
            raise ModelError(f"best_value: no table holds {var!r}")
        dtype = np.dtype(np.result_type(*[t.data.dtype for t in tables]))
        if dtype not in (np.float32, np.float64) or len(tables) > K.GENERIC_MAX_TABLES:
            return self._best_value_slow(tables, var, assignment, op)
        sizes = domain_sizes(tables)
        ndom = sizes.get(var, 0)
        meta = [len(tables), len(tables), 1]
        keep = []
        for t in tables:
            if var not in t.scope or any(v != var and v not in assignment for v in t.scope):
                raise ModelError(f"best_value: table over {t.scope} is not resolved to {var!r}")
            if not isinstance(t.data, self.xp.ndarray):
                # a chunked output left in host memory: upload only its row along var
                row = t.data[
                    tuple(slice(None) if v == var else int(assignment[v]) for v in t.scope)
                ]
                data = self.asarray(row, dtype)
                keep.append(data)
                meta += [data.data.ptr, 0, 1, 1, ndom, 1]
                continue
            data = self._cast(t, dtype)
            keep.append(data)
            base, step = 0, 0
            for v, stride in zip(t.scope, c_strides(t.shape), strict=True):
                if v == var:
                    step = stride
                else:
                    base += int(assignment[v]) * stride
            # one output dimension (the value of var), no eliminated variable (NDOM = 1)
            meta += [data.data.ptr + base * dtype.itemsize, 0, 1, 1, ndom, step]
        with self.stream_context():
            out = self.xp.empty(ndom, dtype=dtype)
            dmeta = self._upload_meta(meta)
            kernel = K.generic_kernel(self.device_id, "min", dtype.name)
            kernel(
                (1,),
                (K.BLOCK,),
                (dmeta, np.int32(len(meta)), out, np.uint32(0), np.uint32(ndom)),
                shared_mem=8 * len(meta),
            )
            values = self.to_numpy(out).astype(np.float64)
        index = int(np.argmax(values) if op == "max" else np.argmin(values))
        return index, float(values[index])

    def _best_value_slow(
        self, tables: Sequence[Table], var: str, assignment: Mapping[str, int], op: str
    ) -> tuple[int, float]:
        total = None
        with self.stream_context():
            for t in tables:
                vec = self.condition(t, {v: assignment[v] for v in t.scope if v != var})
                if vec.scope != (var,):
                    raise ModelError(f"best_value: table over {t.scope} is not resolved to {var!r}")
                part = vec.data.astype(np.float64)
                total = part if total is None else total + part
            if total is None:
                raise ModelError(f"best_value: no table holds {var!r}")
            values = self.to_numpy(total)
        index = int(np.argmax(values) if op == "max" else np.argmin(values))
        return index, float(values[index])

    # ---- planning, compiling and launching the fused kernels --------------------------------
    def _cast(self, table: Table, dtype: Any) -> Any:
        data = self._device_data(table)
        if data.dtype != dtype:
            with self.stream_context():
                data = data.astype(dtype)
        return data

    def _plan(
        self,
        scopes: Sequence[Sequence[str]],
        shapes: Sequence[Sequence[int]],
        dtype: Any,
        var: str,
        op: str,
        scope: Sequence[str] | None,
    ) -> BucketPlan:
        settings = PlanSettings(
            self.specialize_entries,
            self.min_groups,
            self.stage_output,
            self.background_share,
            GENERIC_FALLBACK_MAX_ENTRIES,
        )
        return self._plans.plan(scopes, shapes, dtype, var, op, scope, settings)

    def _ensure_kernel(self, plan: BucketPlan) -> float:
        """Seconds spent making the plan's kernel ready on this device (0 if it already was)."""
        if plan.sig is not None:
            return self._load(K.fused_kernel(self.device_id, plan.sig), plan.sig.name)
        kernel = K.generic_kernel(self.device_id, plan.op, plan.dtype.name)
        return self._load(kernel, plan.kernel_name)

    def _load(self, kernel: Any, name: str) -> float:
        """Compile ``kernel`` (or load it from CuPy's disk cache) onto this device, once."""
        if name in self._loaded:
            return 0.0
        started = time.perf_counter()
        with self.device:
            _ = kernel.kernel  # CuPy compiles or loads on first access, per device
        spent = time.perf_counter() - started
        with self._setup_lock:
            self._loaded.add(name)
            self.setup.kernels_s += spent
            self.setup.kernels += 1
        return spent

    def _upload_meta(self, meta: list[int]) -> Any:
        # on this backend's stream: the copy is ordered before the kernel that reads it, and the
        # buffer returns to this stream's pool arena, so it is not reused under a running kernel
        host = np.asarray(meta, dtype=np.int64)
        self.transfers.h2d_bytes += host.nbytes
        with self.stream_context():
            return self.xp.asarray(host)

    def _grid(self, n: int, per_block: int = K.BLOCK) -> tuple[int]:
        return (max(1, min(-(-n // per_block), self.sm_count * GENERIC_BLOCKS_PER_SM)),)

    def _launch(
        self,
        bound: JoinEliminatePlan,
        out: Any,
        begin: int,
        end: int,
        between: Pieces | None = None,
    ) -> None:
        """Compute output units ``[begin, end)`` (groups or rows) into ``out`` (their rows only).

        With a check in ``between``: in pieces of ``piece_seconds`` of predicted work, each at
        least a launch's whole grid (:func:`~dcop.gpu.plan.piece_units`); once that much is
        queued on the stream (this call's and earlier calls' work, small buckets too) wait for
        it and run the check, which may raise with nothing left running. Without one, the
        launches are queued and nothing waits, as when no deadline is set."""
        plan = bound.plan
        if between is None or between.check is None:
            self._queue(bound, out, begin, end)
            self._queued_s += predicted_seconds(plan, end - begin)
            return
        step = piece_units(plan, self.piece_seconds, grid_units(plan, self.sm_count))
        for lo, hi in launch_ranges(begin, end, step):
            offset = (lo - begin) * plan.rows_per_unit
            self._queue(bound, out.reshape(-1)[offset:] if offset else out, lo, hi)
            self._queued_s += predicted_seconds(plan, hi - lo)
            if self._queued_s >= self.piece_seconds:
                self.stream.synchronize()
                self._queued_s = 0.0
                between.poll()

    def _queue(self, bound: JoinEliminatePlan, out: Any, begin: int, end: int) -> None:
        """Queue the launches of output units ``[begin, end)`` into ``out`` (their rows only)."""
        plan = bound.plan
        if end <= begin:
            return
        if plan.sig is not None:
            kernel = K.fused_kernel(self.device_id, plan.sig)
            _, _, shared = plan.sig.shared_layout()
            # the group range's type: 64-bit for a bucket of 2^32 groups or more
            count = np.uint64 if plan.sig.wide_groups else np.uint32
            for lo, hi in launch_ranges(begin, end, MAX_LAUNCH_ROWS):
                warps = -(-(hi - lo) // 32)
                most = self.sm_count * GENERATED_BLOCKS_PER_SM
                grid = (max(1, min(-(-warps // (K.BLOCK // 32)), most)),)
                offset = (lo - begin) * plan.rows_per_unit
                target = out.reshape(-1)[offset:] if offset else out
                kernel(
                    grid,
                    (K.BLOCK,),
                    (*bound.datas, target, count(lo), count(hi)),
                    shared_mem=shared,
                )
            return
        if bound.dmeta is None:
            bound.dmeta = self._upload_meta(bound.meta)
        kernel = K.generic_kernel(self.device_id, plan.op, plan.dtype.name)
        for lo, hi in launch_ranges(begin, end, MAX_LAUNCH_ROWS):
            offset = lo - begin
            target = out.reshape(-1)[offset:] if offset else out
            kernel(
                self._grid(hi - lo),
                (K.BLOCK,),
                (bound.dmeta, np.int32(len(bound.meta)), target, np.uint32(lo), np.uint32(hi)),
                shared_mem=8 * len(bound.meta),
            )

    def _device_budget(self) -> float:
        if self.max_device_bytes is not None:
            return float(self.max_device_bytes)
        with self.device:
            free, _ = self.xp.cuda.runtime.memGetInfo()
            pool = self.xp.get_default_memory_pool().free_bytes()
        return FREE_MEMORY_SHARE * float(free + pool)

    def _run_chunked(self, bound: JoinEliminatePlan) -> Table:
        """Compute the output in chunks on the compute stream; copy each finished chunk to pinned
        host memory on the copy stream while the next one is computed (two device buffers)."""
        plan = bound.plan
        t0 = time.perf_counter()
        with self.stream_context():
            host = pinned_empty(self.xp, plan.out_shape, plan.dtype)
        kept = self.queue_chunks(bound, 0, plan.n_units, host.reshape(-1), Pieces())
        self.copy_stream.synchronize()
        self.stream.synchronize()
        del kept
        self.transfers.add("chunked", time.perf_counter() - t0)
        return Table(plan.out_scope, host)

    def queue_chunks(
        self,
        bound: JoinEliminatePlan,
        begin: int,
        end: int,
        flat: Any,
        between: Pieces | None = None,
    ) -> list[Any]:
        """Queue output units ``[begin, end)`` in chunks into ``flat`` (the whole output, flat, in
        host memory): each chunk computed on the compute stream into one of two device buffers
        and copied out on the copy stream while the next is computed. Nothing waits here: the
        caller synchronizes (both streams) and keeps the returned buffers alive until then, so
        that several devices can each queue their slice of one output and run at once.

        ``between``: each chunk computed in checked pieces (:meth:`_launch`); where the check
        raises, the copies still running finish before the buffers and ``flat`` can be freed."""
        cupy = self.xp
        plan = bound.plan
        if end <= begin:
            return []
        units = chunk_units(plan, self.chunk_bytes, self._device_budget())
        with self.stream_context():
            bufs = [
                cupy.empty(min(units, end - begin) * plan.rows_per_unit, plan.dtype)
                for _ in range(2)
            ]
            done = [None, None]  # events: the copy out of each buffer has finished
            try:
                for i, (lo, hi) in enumerate(launch_ranges(begin, end, units)):
                    buf = bufs[i % 2]
                    if done[i % 2] is not None:
                        self.stream.wait_event(done[i % 2])
                    self._launch(bound, buf, lo, hi, between)
                    computed = self.stream.record()
                    self.copy_stream.wait_event(computed)
                    rows = (hi - lo) * plan.rows_per_unit
                    start = lo * plan.rows_per_unit
                    buf[:rows].get(
                        stream=self.copy_stream, out=flat[start : start + rows], blocking=False
                    )
                    done[i % 2] = self.copy_stream.record()
                    self.transfers.chunks += 1
                    self.transfers.d2h_bytes += rows * plan.dtype.itemsize
            except BaseException:
                # stopped (the check raised, the compute stream waited for already): a copy
                # out of the last chunk may still write into pinned host memory about to be
                # freed
                self.synchronize()
                raise
        return bufs


@dataclass
class JoinEliminatePlan:
    """A :class:`~dcop.gpu.plan.BucketPlan` bound to its inputs on this device: the data in plan
    order, the generic kernel's metadata with their pointers, and that metadata on the device."""

    plan: BucketPlan
    datas: list[Any]
    meta: list[int] = field(default_factory=list)
    dmeta: Any = None

    @property
    def out_scope(self) -> tuple[str, ...]:
        return self.plan.out_scope

    @property
    def out_shape(self) -> tuple[int, ...]:
        return self.plan.out_shape

    @property
    def dtype(self) -> np.dtype:
        return self.plan.dtype

    @property
    def out_bytes(self) -> int:
        return self.plan.out_bytes

    @property
    def generated(self) -> bool:
        return self.plan.generated


def _with_pointers(
    meta: Sequence[int], pointers: Sequence[tuple[int, int]], datas: Sequence[Any]
) -> list[int]:
    """Metadata with each table's device pointer written at its position."""
    out = list(meta)
    for position, j in pointers:
        out[position] = int(datas[j].data.ptr)
    return out


class _Bound:
    """``with device: with stream:`` as one context manager."""

    def __init__(self, device: Any, stream: Any) -> None:
        self.device = device
        self.stream = stream

    def __enter__(self) -> None:
        self.device.__enter__()
        self.stream.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.stream.__exit__(*exc)
        self.device.__exit__(*exc)


def pinned_empty(cupy: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A NumPy array in page-locked memory (so copies are asynchronous); pageable if that fails."""
    n = math.prod(shape)
    try:
        mem = cupy.cuda.alloc_pinned_memory(max(1, n * dtype.itemsize))
        return np.frombuffer(mem, dtype, n).reshape(shape)
    except Exception:
        # pinning can fail for huge sizes; a pageable array still works (synchronously)
        return np.empty(shape, dtype)
