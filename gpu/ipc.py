"""CUDA IPC: a UTIL table handed from a child agent to its parent on the same GPU, on the device.

Exporter (:func:`export_array`): copies the table into a buffer of its own ``cudaMalloc`` (an IPC
handle names a whole allocation, and CuPy's pool sub-allocates), waits for that copy, and takes
the buffer's ``cudaIpcMemHandle_t``; the :class:`Exported` it returns keeps the buffer alive, and
the agent drops it once the parent cannot need it any more (its VALUE or down message came, or
the problem ended). Importer (:func:`import_array`): opens the handle, copies the table into its
own memory on its own stream, waits, and closes the handle: it holds the exporter's memory only
for that copy, so an exporter that dies later harms nobody, and one that died earlier makes the
open fail with :class:`IpcUnavailable` (the agent reports it, naming the child).

Who may: two agents whose :func:`ipc_domain` strings are equal and not empty: one kernel boot,
one IPC and one PID namespace (containers that do not share them cannot open each other's
handles), one GPU by PCI address. ``DCOP_CUDA_IPC=0`` turns it off (UTILs then travel as bytes); tables
under :data:`DEFAULT_IPC_MIN_BYTES` (``DCOP_CUDA_IPC_MIN_BYTES``) travel as bytes anyway.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dcop.errors import DcopError, InputError, ProtocolError

#: Environment switch: ``0`` keeps every UTIL on the network even between agents of one GPU.
IPC_ENV = "DCOP_CUDA_IPC"
#: Environment override of :data:`DEFAULT_IPC_MIN_BYTES`.
IPC_MIN_BYTES_ENV = "DCOP_CUDA_IPC_MIN_BYTES"
#: Tables smaller than this travel as bytes even between agents of one GPU. A hand-over costs a
#: fixed ~35 ms a table (an allocation, a handle, its opening in the other process; 16-19 agents
#: on one H100), the bytes path ~1.3 ms per MB end to end (download into pinned memory, socket,
#: upload): they cross near 27 MB (`benchmarks/results/gpu_ipc_smoke.md`).
DEFAULT_IPC_MIN_BYTES = 32 << 20


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


def export_array(cupy: Any, array: Any, stream: Any) -> Exported:
    """Copy the C-contiguous device ``array`` into a buffer of its own and return its handle
    (call with the array's device current)."""
    nbytes = int(array.size) * int(array.dtype.itemsize)
    memory = cupy.cuda.memory.Memory(max(1, nbytes))
    target = cupy.cuda.MemoryPointer(memory, 0)
    target.copy_from_device_async(array.data, nbytes, stream)
    stream.synchronize()  # the parent reads it from another process: complete before the handle
    handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(memory.ptr))
    return Exported(handle, nbytes, memory)


def import_array(
    cupy: Any, handle: bytes, shape: tuple[int, ...], dtype: str, device_id: int, stream: Any
) -> Any:
    """Open ``handle``, copy its table into a new array of this process, close it (call with the
    device current). Raises :class:`IpcUnavailable` when the handle cannot be opened."""
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    try:
        pointer = cupy.cuda.runtime.ipcOpenMemHandle(handle)
    except Exception as exc:  # CuPy's CUDARuntimeError, whatever the driver said
        raise IpcUnavailable(f"cannot open its CUDA IPC handle ({exc})") from None
    try:
        out = cupy.empty(shape, dtype=np.dtype(dtype))
        source = cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(pointer, nbytes, None, device_id), 0
        )
        out.data.copy_from_device_async(source, nbytes, stream)
        stream.synchronize()
    finally:
        cupy.cuda.runtime.ipcCloseMemHandle(pointer)
    if int(cupy.count_nonzero(cupy.isnan(out))):  # as a framed table is checked on decode
        raise ProtocolError("a table handed over by CUDA IPC holds NaN")
    return out


__all__ = [
    "DEFAULT_IPC_MIN_BYTES",
    "IPC_ENV",
    "IPC_MIN_BYTES_ENV",
    "Exported",
    "IpcUnavailable",
    "export_array",
    "import_array",
    "ipc_domain",
    "ipc_min_bytes",
]
