"""CUDA IPC: a UTIL table handed from a child agent to its parent on the same GPU, on the device.

On the H100 (``benchmarks/probes/gpu_ipc_copy.py``) the mechanics are cheap: an open takes
0.04-0.16 ms and the copy out of a 512 MB table 0.4 ms; the ~50 ms a table (and once 5.7 s)
measured earlier inside agents was CuPy compiling its NaN test for each new table shape, now one
kernel of our own loaded at warm-up. The mapping still happens ahead, off the path of the
tables. Once the pseudo-tree is
chosen, a child that shares its parent's GPU allocates a buffer for its planned UTIL with a
``cudaMalloc`` of its own (:func:`offer_buffer`: a handle names a whole allocation, and CuPy's
pool sub-allocates) and offers its handle; the parent maps it at once (:func:`open_handle`)
while the child's subtree still computes, and reserves where the tables will land on its own
device. When the UTIL is ready the child copies its tables into the buffer (:func:`copy_into`,
one wait before it sends) and sends their offsets; the parent copies them to their landing place
on its own stream and tests them for NaN with one wait for all (:func:`copy_tables_out`), and
unmaps the buffer (:func:`close_handle`) once its own UTIL has gone out: off its critical path,
and before its VALUE or down message, until which the child keeps the buffer (or the problem
ends). Measured inside agents on the H200, that took a taken table from ~0.8 ms (a new array,
a copy with its wait, a NaN test with its wait, the unmap) to the copy and test with one wait:
GPU agents' simulated time at n = 16 fell 16-26%. A table that does not fit the offer (another
dtype) goes by a buffer of its own (:func:`export_array`; the parent opens, copies and closes
it). A handle that cannot be opened (its exporter exited) raises :class:`IpcUnavailable`; the
agent reports it naming the child.

Who may: two agents whose :func:`ipc_domain` strings are equal and not empty: one kernel boot,
one IPC and one PID namespace (containers that do not share them cannot open each other's
handles), one GPU by PCI address. ``DCOP_CUDA_IPC=0`` turns it off (UTILs then travel as bytes);
UTILs under :data:`DEFAULT_IPC_MIN_BYTES` (``DCOP_CUDA_IPC_MIN_BYTES``) travel as bytes anyway.

Agents on different GPUs of one host (domains equal but for the PCI address): CUDA IPC works
across devices where the reader's device can access the owner's (``cudaDeviceCanAccessPeer``):
``cudaIpcOpenMemHandle`` on the reader's device, with ``cudaIpcMemLazyEnablePeerAccess`` (CuPy's
default flag), maps the owner's buffer, and the copy out is a device-to-device copy over NVLink or
PCIe. So :func:`handover_path` chooses, for each child-parent pair:

- ``ipc``: one GPU;
- ``p2p``: two GPUs of this host, the parent's able to read the child's: the same offer, handle
  and copy as ``ipc``, the copy going peer to peer (``DCOP_CUDA_P2P=0`` turns this off);
- ``host``: two GPUs of this host without peer access: through pinned host memory, which is the
  bytes path (the child downloads into page-locked memory, the frame crosses the local socket,
  the parent uploads);
- ``net``: anything else (another host, a CPU agent, IPC off): bytes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dcop.errors import DcopError, InputError, ProtocolError

#: Environment switch: ``0`` keeps every UTIL on the network even between agents of one GPU.
IPC_ENV = "DCOP_CUDA_IPC"
#: Environment switch: ``0`` sends UTILs between agents of different GPUs through the host even
#: where the devices can access each other (to compare the two paths).
P2P_ENV = "DCOP_CUDA_P2P"
#: The ways a UTIL goes from a child to its parent (see the module docstring).
HANDOVER_PATHS = ("ipc", "p2p", "host", "net")
#: Environment override of :data:`DEFAULT_IPC_MIN_BYTES`.
IPC_MIN_BYTES_ENV = "DCOP_CUDA_IPC_MIN_BYTES"
#: UTILs smaller than this travel as bytes even between agents of one GPU. Measured on the H100
#: (`benchmarks/probes/gpu_ipc_copy.py`, `benchmarks/results/gpu_dpop.md`): taking a table over costs ~1-2 ms inside
#: an agent (a new array, the copy, the NaN test), while the bytes path costs ~1.3 ms per MB end
#: to end (download into pinned memory, socket, upload): they cross near 1 MB. (It was 32 MiB
#: while CuPy compiled a NaN test per table shape: ~35-50 ms a table.)
DEFAULT_IPC_MIN_BYTES = 1 << 20


class IpcUnavailable(DcopError):
    """A handle could not be opened (its exporter exited or freed it) or copied."""


@dataclass(frozen=True, eq=False)
class Exported:
    """A table's copy in an exportable buffer: its handle, and the buffer (kept alive here)."""

    handle: bytes
    nbytes: int
    memory: Any


def ipc_enabled() -> bool:
    """Whether ``DCOP_CUDA_IPC`` allows device hand-over (default: yes)."""
    return os.environ.get(IPC_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def p2p_enabled() -> bool:
    """Whether ``DCOP_CUDA_P2P`` allows peer-to-peer hand-over between devices (default: yes)."""
    return os.environ.get(P2P_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def ipc_min_bytes() -> int:
    """The smallest table handed over by IPC: ``DCOP_CUDA_IPC_MIN_BYTES`` or the default."""
    raw = os.environ.get(IPC_MIN_BYTES_ENV)
    if raw is None:
        return DEFAULT_IPC_MIN_BYTES
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"{IPC_MIN_BYTES_ENV} must be a whole number of bytes >= 0, not {raw!r}")
    return value


def _namespace(kind: str) -> str:
    try:
        return os.readlink(f"/proc/self/ns/{kind}")
    except OSError:
        return ""


def ipc_domain(cupy: Any, device_id: int) -> str:
    """Who can open this process's handles on ``device_id``: boot id, IPC and PID namespaces and
    the GPU's PCI address; empty when IPC is off or any of them cannot be read (then nobody)."""
    if not ipc_enabled():
        return ""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    spaces = [_namespace("ipc"), _namespace("pid")]
    if not boot or not all(spaces):
        return ""
    props = cupy.cuda.runtime.getDeviceProperties(device_id)
    pci = "{:04x}:{:02x}:{:02x}".format(
        int(props.get("pciDomainID", 0)),
        int(props.get("pciBusID", 0)),
        int(props.get("pciDeviceID", 0)),
    )
    return f"cuda/{boot}/{spaces[0]}/{spaces[1]}/{pci}"


def _split_domain(domain: str) -> tuple[str, str]:
    """(who may share handles: boot id and namespaces, the GPU's PCI address)."""
    host, _, pci = domain.rpartition("/")
    return host, pci


def domain_device(cupy: Any, domain: str) -> int | None:
    """This process's ordinal of the GPU that ``domain`` names by its PCI address (None when this
    process does not see it)."""
    _, pci = _split_domain(domain)
    try:
        return int(cupy.cuda.runtime.deviceGetByPCIBusId(pci))
    except Exception:  # CuPy's CUDARuntimeError: not a device of this process
        return None


def handover_path(cupy: Any, mine: str, device_id: int, peer: str, reading: bool) -> str:
    """How a UTIL goes between this agent (IPC domain ``mine``, on ``device_id``) and ``peer``
    (its domain): one of :data:`HANDOVER_PATHS`. ``reading``: I am the parent, who reads the
    child's buffer (else the child): the parent's device must be able to access the child's."""
    if not mine or not peer:
        return "net"
    if mine == peer:
        return "ipc"
    if _split_domain(mine)[0] != _split_domain(peer)[0]:
        return "net"  # another host or namespace: handles cannot be opened
    other = domain_device(cupy, peer)
    if other is None or other == device_id or not p2p_enabled():
        return "host"
    reader, owner = (device_id, other) if reading else (other, device_id)
    try:
        can = bool(cupy.cuda.runtime.deviceCanAccessPeer(reader, owner))
    except Exception:  # treated as no access: the host path always works
        can = False
    return "p2p" if can else "host"


def offer_buffer(cupy: Any, nbytes: int) -> Exported:
    """A buffer of its own ``cudaMalloc`` and its handle, to fill later (:func:`copy_into`): the
    receiver can open it while the tables are still being computed."""
    memory = cupy.cuda.memory.Memory(max(1, nbytes))
    handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(memory.ptr))
    return Exported(handle, nbytes, memory)


def copy_into(
    cupy: Any, exported: Exported, offset: int, array: Any, stream: Any, wait: bool = True
) -> None:
    """Copy the C-contiguous device ``array`` into ``exported`` at byte ``offset`` and wait (the
    receiver reads it from another process); ``wait=False`` leaves the wait to the caller, who
    must synchronize ``stream`` before it hands the handle over."""
    nbytes = int(array.size) * int(array.dtype.itemsize)
    if offset < 0 or offset + nbytes > exported.nbytes:
        raise ValueError(f"{nbytes} bytes at {offset} do not fit a buffer of {exported.nbytes}")
    target = cupy.cuda.MemoryPointer(exported.memory, offset)
    target.copy_from_device_async(array.data, nbytes, stream)
    if wait:
        stream.synchronize()


def export_array(cupy: Any, array: Any, stream: Any) -> Exported:
    """Copy the C-contiguous device ``array`` into a buffer of its own and return its handle
    (call with the array's device current)."""
    exported = offer_buffer(cupy, int(array.size) * int(array.dtype.itemsize))
    copy_into(cupy, exported, 0, array, stream)
    return exported


def open_handle(cupy: Any, handle: bytes) -> int:
    """Map another process's buffer on the current device, which may be another device than the
    buffer's where it can access that one (CuPy opens with ``cudaIpcMemLazyEnablePeerAccess``);
    :class:`IpcUnavailable` when it cannot be opened."""
    try:
        return int(cupy.cuda.runtime.ipcOpenMemHandle(handle))
    except Exception as exc:  # CuPy's CUDARuntimeError, whatever the driver said
        raise IpcUnavailable(f"cannot open its CUDA IPC handle ({exc})") from None


def close_handle(cupy: Any, pointer: int) -> None:
    """Unmap what :func:`open_handle` mapped."""
    cupy.cuda.runtime.ipcCloseMemHandle(pointer)


#: Where a table lies in a mapped buffer: byte offset, shape, dtype string.
Placed = tuple[int, tuple[int, ...], str]


def copy_tables_out(
    cupy: Any,
    pointer: int,
    tables: Sequence[Placed],
    device_id: int,
    stream: Any,
    flag_nan: Callable[[Any, Any], None],
    landing: Any = None,
    seconds: dict[str, float] | None = None,
) -> list[Any]:
    """Arrays of this process holding the ``tables`` of a buffer mapped at ``pointer``, with one
    wait for all of them: each copy and its NaN test (``flag_nan(array, flag)``, the backend's
    kernel, which sets ``flag``) are queued on ``stream`` and one 4-byte read of the flag waits
    for them all. ``landing`` (a device byte buffer reserved when the buffer was mapped) receives
    the tables at their own offsets, so that nothing is allocated here; a table beyond it gets an
    array of its own. ``seconds`` gets ``alloc``, ``copy`` (queueing) and ``check`` (the wait and
    the flag) added. ``device_id`` is the device whose address space holds the mapping (this
    process's device, also for a buffer of another GPU opened with peer access). Measured inside
    agents on the H200, a copy with its own wait and NaN test took ~0.55 ms a table (alloc
    0.15-0.3, copy 0.19, test 0.16-0.3 ms)."""
    steps = seconds if seconds is not None else {}
    t0 = time.perf_counter()
    targets = []
    for offset, shape, dtype in tables:
        kind = np.dtype(dtype)
        nbytes = math.prod(shape) * kind.itemsize
        if landing is not None and offset >= 0 and offset + nbytes <= int(landing.size):
            out = landing[offset : offset + nbytes].view(kind).reshape(shape)
        else:
            out = cupy.empty(shape, dtype=kind)
        targets.append((out, offset, nbytes))
    flag = cupy.zeros(1, dtype=np.int32)
    t1 = time.perf_counter()
    for out, offset, nbytes in targets:
        if nbytes:
            source = _mapped(cupy, pointer + offset, nbytes, device_id)
            out.data.copy_from_device_async(source, nbytes, stream)
            flag_nan(out, flag)
    t2 = time.perf_counter()
    nan = bool(int(flag.get(stream=stream)[0]))  # waits for every copy and test above
    t3 = time.perf_counter()
    for key, dt in (("alloc", t1 - t0), ("copy", t2 - t1), ("check", t3 - t2)):
        steps[key] = steps.get(key, 0.0) + dt
    if nan:  # as a framed table is checked on decode
        raise ProtocolError("a table handed over by CUDA IPC holds NaN")
    return [out for out, _, _ in targets]


def _mapped(cupy: Any, address: int, nbytes: int, device_id: int) -> Any:
    """A CuPy pointer to ``nbytes`` of another process's memory mapped at ``address``."""
    return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(address, nbytes, None, device_id), 0)


__all__ = [
    "DEFAULT_IPC_MIN_BYTES",
    "HANDOVER_PATHS",
    "IPC_ENV",
    "IPC_MIN_BYTES_ENV",
    "P2P_ENV",
    "Exported",
    "IpcUnavailable",
    "close_handle",
    "copy_into",
    "copy_tables_out",
    "domain_device",
    "export_array",
    "handover_path",
    "ipc_domain",
    "ipc_min_bytes",
    "offer_buffer",
    "open_handle",
    "p2p_enabled",
]
