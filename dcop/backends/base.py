"""The backend contract: the base protocol every table backend keeps, the capabilities some add.

An algorithm takes a :class:`TableBackend` (NumPy's, CuPy's, several GPUs', or the placed one that
runs each bucket on the CPU or the GPU) and calls its table operations. What only some backends
can do is a small capability protocol of its own, and code asks for one with :func:`capable`
(``isinstance``, decided once per backend class), never by probing for an attribute:

* :class:`DeviceArrays`  tables on a GPU: the device's free memory
* :class:`Streamed`      one device and one stream, made current by a context
* :class:`Strided`       the contraction engine's steps compiled for the device
* :class:`Compiles`      kernels compiled ahead of the data: ``prepare_bucket``, ``warm_up``, the
  set-up seconds
* :class:`Placed`        each bucket on the CPU or the GPU by its size (``min_entries``), with a
  record of where each ran
* :class:`Planned`       several devices: the memory plan models how the backend places tables
* :class:`IpcHandover`   UTIL tables handed between agents' GPUs by CUDA IPC; :class:`IpcDomain`
  names who can open a device's handles
* :class:`Counted`       a device's metrics: which GPU, what it moved; :class:`SplitsBuckets`
  buckets split over several GPUs

:class:`BackendInfo` is what a backend is, fixed when it is made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard, TypeVar, runtime_checkable

import numpy as np

from dcop.tables import Op, Table

if TYPE_CHECKING:
    from typing import TypeGuard

    from dcop.plan.memory import DeviceModel

C = TypeVar("C")


@dataclass(frozen=True)
class BackendInfo:
    """What a backend is, fixed when it is made (read, never probed).

    Attributes
    ----------
    device
        The CUDA ordinal of the device its tables live on; None for host memory (NumPy, and the
        placed backend, which makes its tables on the host).
    block_entries
        Output entries of one block of the fused CPU join+eliminate (NumPy's accumulator); 0 where
        the backend computes in registers (a GPU).
    threads
        Threads that run those blocks at once.
    """

    device: int | None = None
    block_entries: int = 0
    threads: int = 1


class TableBackend(Protocol):
    """What an algorithm needs from an array backend: the table operations, documented here once.

    Tables are :class:`~dcop.tables.Table` values whose data live where the backend keeps them;
    ``to_numpy`` brings data to the host. ``name`` is ``numpy``, ``cupy`` or ``placed``; ``xp``
    the array module of the tables it makes (NumPy or CuPy), for the array arithmetic an algorithm
    does on them (under :func:`on_device`); ``info`` what else the code that adapts to a backend
    reads. ``out_of_memory_errors`` are the exception types the backend raises when its memory
    runs out: callers report them as :class:`~dcop.errors.TableTooLarge`.
    """

    name: str
    xp: Any
    info: BackendInfo
    out_of_memory_errors: tuple[type[BaseException], ...]

    def asarray(self, array: Any, dtype: Any = np.float64) -> Any:
        """``array`` as this backend's array type (C order, ``dtype``)."""
        ...

    def to_numpy(self, array: Any) -> np.ndarray:
        """A host (NumPy) copy or view of ``array``."""
        ...

    def copy_to_host(self, array: Any, out: np.ndarray) -> None:
        """Copy ``array`` into ``out``, a host array of its shape that the caller owns (no
        staging copy in between: the search reads many GB of messages this way)."""
        ...

    def table(self, scope: Sequence[str], array: Any, dtype: Any = np.float64) -> Table:
        """A backend table over ``scope`` holding ``array``."""
        ...

    def synchronize(self) -> None:
        """Wait until queued work is done."""
        ...

    def transpose(self, table: Table, scope: Sequence[str]) -> Table:
        """The same table with its axes in ``scope`` order."""
        ...

    def eliminate(self, table: Table, var: str, op: Op = "min") -> Table:
        """Remove ``var`` from ``table`` by ``op``."""
        ...

    def argbest(self, table: Table, var: str, op: Op = "min") -> Table:
        """The best value index of ``var`` for every tuple of the other variables."""
        ...

    def condition(self, table: Table, assignment: Mapping[str, int]) -> Table:
        """Fix the variables of ``assignment`` that ``table`` holds."""
        ...

    def join(self, tables: Sequence[Table], scope: Sequence[str] | None = None) -> Table:
        """The sum of ``tables`` over their union scope (materialised)."""
        ...

    def join_eliminate(
        self,
        tables: Sequence[Table],
        var: str,
        op: Op = "min",
        scope: Sequence[str] | None = None,
    ) -> Table:
        """``eliminate(join(tables), var, op)`` without building the joined table."""
        ...

    def best_value(
        self,
        tables: Sequence[Table],
        var: str,
        assignment: Mapping[str, int],
        op: Op = "min",
    ) -> tuple[int, float]:
        """The best value of ``var`` for the sum of ``tables`` given the others, and its cost."""
        ...


class IpcBuffer(Protocol):
    """A device buffer another process of the same GPU can map by its CUDA IPC ``handle``
    (:class:`dcop.gpu.ipc.Exported`)."""

    @property
    def handle(self) -> bytes: ...

    @property
    def nbytes(self) -> int: ...


#: Where a table lies in a mapped buffer: byte offset, shape, dtype (``"<f4"`` or ``"<f8"``).
IpcPlaced = tuple[int, tuple[int, ...], str]


@runtime_checkable
class IpcHandover(Protocol):
    """IPC handover: what a backend offers to hand UTIL tables between agents of
    one GPU by CUDA IPC, instead of as bytes (a GPU agent's placed backend,
    :class:`dcop.backends.placed.PlacedBackend`; the agent's ``Session`` is the one caller), and
    between agents of two GPUs of one host where the reader's device can access the owner's.

    A child offers its parent a buffer ahead (:meth:`offer_ipc`), fills it with its UTIL tables
    (:meth:`export_ipc_into`) or exports a table alone (:meth:`export_ipc`); the parent maps the
    buffer (:meth:`open_ipc`), copies the tables onto its own device (:meth:`read_ipc_tables`,
    :meth:`import_ipc` for a lone table) and unmaps it (:meth:`close_ipc`). A handle that cannot
    be opened raises :class:`dcop.gpu.ipc.IpcUnavailable`. :meth:`handover_path` says which way
    a UTIL goes between two agents; ``peer`` arguments name the exporter's IPC domain (its GPU).
    """

    def handover_path(self, mine: str, peer: str, reading: bool) -> str:
        """How a UTIL goes between my agent (IPC domain ``mine``) and the agent of domain
        ``peer``: ``ipc`` (one GPU), ``p2p`` (two GPUs, the parent's can read the child's),
        ``host`` (two GPUs of this host without) or ``net``; ``reading``: I am the parent."""
        ...

    def offer_ipc(self, nbytes: int) -> IpcBuffer | None:
        """An exportable device buffer of ``nbytes`` to fill later (None: too small to be worth
        a handle)."""
        ...

    def export_ipc(self, data: Any) -> IpcBuffer | None:
        """A copy of device ``data`` in a buffer of its own (None for host data or a table too
        small: it travels as bytes)."""
        ...

    def export_ipc_into(
        self, exported: IpcBuffer, offset: int, data: Any, wait: bool = True
    ) -> bool:
        """Copy device ``data`` into an offered buffer at byte ``offset`` (``wait=False``: queued
        only, synchronize before the handle goes out); False for host data (sent as bytes)."""
        ...

    def open_ipc(self, handle: bytes, nbytes: int = 0, peer: str = "") -> int:
        """Map another process's buffer of ``nbytes`` on this device; return its pointer."""
        ...

    def read_ipc_tables(self, pointer: int, tables: Sequence[IpcPlaced]) -> list[Any]:
        """The tables of a buffer mapped at ``pointer``, copied onto this device."""
        ...

    def import_ipc(self, handle: bytes, shape: tuple[int, ...], dtype: str, peer: str = "") -> Any:
        """The lone table behind another process's ``handle``, copied onto this device."""
        ...

    def close_ipc(self, pointer: int) -> None:
        """Unmap a buffer of :meth:`open_ipc` (tables taken from it stay)."""
        ...


# ---- capabilities -------------------------------------------------------------------------------
@runtime_checkable
class IpcDomain(Protocol):
    """A device backend that names who can open its CUDA IPC handles (CuPy's backends)."""

    @property
    def ipc_domain(self) -> str:
        """The IPC domain of this backend's device (:func:`dcop.gpu.ipc.ipc_domain`)."""
        ...


class TransferCounts(Protocol):
    """What a device backend moved (:class:`dcop.gpu.backend.TransferStats`)."""

    def metrics(self) -> dict[str, float]:
        """Bytes moved each way and by CUDA IPC, and the seconds of each IPC step."""
        ...


@runtime_checkable
class Counted(Protocol):
    """A device backend that counts its work for an agent's metrics: which GPU it is
    (``device_id``) and what it moved (``transfers``)."""

    device_id: int

    @property
    def transfers(self) -> TransferCounts: ...


@runtime_checkable
class SplitsBuckets(Protocol):
    """A device backend that splits large buckets over several GPUs (several GPUs')."""

    def split_metrics(self) -> dict[str, float]:
        """How many buckets were split, and over how many devices."""
        ...


@runtime_checkable
class DeviceArrays(Protocol):
    """Tables on a GPU (CuPy's backend, several GPUs' first device)."""

    def free_bytes(self) -> float:
        """Free memory of the backend's device, its memory pool's free blocks included."""
        ...


@runtime_checkable
class Streamed(Protocol):
    """One device and one stream (CuPy's backend)."""

    def stream_context(self) -> AbstractContextManager[Any]:
        """A context that makes this backend's device and stream current."""
        ...


@runtime_checkable
class PinnedHost(Protocol):
    """Host arrays the backend uploads at full speed: page-locked memory (CuPy's backend, and a
    GPU agent's placed one). A table received from the network is put together in one."""

    def host_empty(self, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """An uninitialised host array in page-locked memory (pageable where pinning fails)."""
        ...


@runtime_checkable
class Strided(Protocol):
    """The contraction engine's steps compiled for the backend's device (CuPy's backend)."""

    @property
    def strided(self) -> Any:
        """This device's :class:`dcop.gpu.strided.StridedKernels` (the contraction engine's
        steps, one module compiled per dtype), made at first use; used within
        :meth:`stream_context`."""
        ...


@dataclass(frozen=True)
class BucketShape:
    """A bucket known by its tables' scopes and shapes only, before their data arrive: what
    :meth:`Compiles.prepare_bucket` compiles a kernel for. ``dtype`` is the tables' dtype,
    ``scope`` the output scope ``join_eliminate`` will be given (None: first appearance)."""

    scopes: Sequence[Sequence[str]]
    shapes: Sequence[Sequence[int]]
    var: str
    op: Op = "min"
    dtype: Any = np.float64
    scope: Sequence[str] | None = None


class SetupTimes(Protocol):
    """A backend's set-up seconds (:class:`dcop.gpu.SetupStats`)."""

    @property
    def compile_wait_s(self) -> float: ...

    def as_dict(self) -> dict[str, float | int]: ...


@runtime_checkable
class Compiles(Protocol):
    """Kernels compiled ahead of the data (CuPy's backends, and the placed one over them)."""

    def warm_up(self, **kwargs: Any) -> dict[str, float]:
        """Make the device ready before any table arrives (context, pools, generic kernels);
        seconds per step."""
        ...

    def prepare_bucket(self, bucket: BucketShape, background: bool = False) -> float:
        """Compile the kernel of a bucket known by its shapes only (:class:`BucketShape`).

        An agent calls this once it knows its bucket (its own tables, and the scopes of the UTIL
        tables its children will send), before their data arrive; ``join_eliminate`` on tables of
        these scopes and shapes (in any order, with the same output scope) then finds the kernel
        ready. With ``background`` the compile runs on a thread of its own and this returns at
        once (an agent's loop keeps answering).

        Returns
        -------
        float
            Seconds spent here.
        """
        ...

    @property
    def setup(self) -> SetupTimes:
        """Set-up seconds so far."""
        ...


@runtime_checkable
class Specializes(Protocol):
    """A backend that generates a kernel per bucket shape from a size on (CuPy's): the generic
    kernel serves smaller buckets with no compile. A caller whose buckets are many and short
    (the search's mini-bucket passes) raises the size for the time of its own work."""

    #: Joined entries from which a bucket gets a generated kernel.
    specialize_entries: int


@runtime_checkable
class Placed(TableBackend, Protocol):
    """Each bucket on the CPU or the GPU by its joined entries (a GPU agent's backend,
    :class:`dcop.backends.placed.PlacedBackend`)."""

    #: joined entries from which a bucket runs on the GPU (the run may set it)
    min_entries: int
    #: every join+eliminate and where it ran, in call order
    placements: list[Any]

    def stage(self, table: Table) -> Table:
        """``table`` on the device ahead of a bucket that will run there."""
        ...

    def runner_for(self, tables: Sequence[Table], var: str, plans: Sequence[Any]) -> TableBackend:
        """The backend that runs the bucket of ``tables`` (its mini-buckets ``plans``): the host
        backend where it stays on the CPU, else this one."""
        ...

    def record(self, var: str, plans: Sequence[Any], where: str) -> None:
        """Count a bucket that a runner of :meth:`runner_for` ran (``where``: cpu or gpu)."""
        ...

    def placement_metrics(self) -> dict[str, float]:
        """Counts for an agent's metrics: buckets and joined entries per side, the threshold."""
        ...


@runtime_checkable
class Planned(Protocol):
    """Several devices, whose placement of tables the memory plan models (several GPUs)."""

    def device_model(self) -> DeviceModel:
        """What :func:`dcop.plan.bucket_plan.plan_memory` needs to place tables as this backend
        does."""
        ...

    def output_on_host(self, nbytes: int) -> bool:
        """Whether an output of ``nbytes`` lands in host memory (pinned) rather than on the
        first device."""
        ...


_CAPABLE: dict[tuple[type, type], bool] = {}


def capable(backend: object, capability: type[C]) -> TypeGuard[C]:
    """``isinstance(backend, capability)`` for a capability protocol of this module, decided once
    per backend class: a runtime protocol's own check walks its members at every call (20-40 us
    on Python 3.11, and an elimination asks once per bucket), and reads a property to see that
    it is there (a placed backend's ``setup`` asks its device). A member counts where the class
    has it (a method, a property, a class attribute) or the instance set it when it was made."""
    key = (type(backend), capability)
    known = _CAPABLE.get(key)
    if known is None:
        try:
            own = vars(backend)
        except TypeError:  # an object without a __dict__ holds no attribute of its own
            own = {}
        known = _CAPABLE[key] = all(
            hasattr(type(backend), name) or name in own for name in _members(capability)
        )
    return known


def _members(capability: type) -> set[str]:
    """The names a capability protocol declares (its methods, properties and attributes)."""
    names = set(vars(capability).get("__annotations__", {}))
    names.update(name for name in vars(capability) if not name.startswith("_"))
    return names


def on_device(backend: Any) -> Any:
    """A context that makes the backend's device and stream current (:class:`Streamed`), so that
    array arithmetic an algorithm does on the backend's tables (a mini-bucket's weight, the
    contraction engine's products) queues on the backend's stream, behind its uploads and
    kernels; a no-op elsewhere. Outside it, CuPy runs on the legacy default stream, which does
    not wait for a non-blocking stream: a busy GPU then let a kernel read a table before the
    division that made it had run (weighted MBE bounds differed when several processes shared
    the GPU)."""
    if capable(backend, Streamed):
        return backend.stream_context()
    return contextlib.nullcontext()
