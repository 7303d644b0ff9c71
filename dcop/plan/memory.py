"""Bytes before a solve: the limit a run keeps to, what the machine has, and the backends' models.

:class:`Limit` and :func:`effective_limit` (``--max-memory``, lowered to what the process can
have), :func:`available_bytes` and :func:`resident_bytes` (what the machine and the process say),
:func:`human_bytes`; :class:`WorkModel` (the fused join's working memory as a backend spends it)
and :class:`DeviceModel` (several GPUs as the backend places tables). The bucket plan built on
them is :mod:`dcop.plan.bucket_plan`.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dcop.backends.base import Planned, TableBackend, capable
from dcop.buckets import MiniBucketPlan

#: Fallback when the machine does not say how much memory is available.
FALLBACK_AVAILABLE_BYTES = 8 * 2**30


@dataclass(frozen=True)
class WorkModel:
    """The fused join+eliminate's working memory beyond its output, as a backend spends it.

    At most ``block_entries`` output entries per thread (the NumPy backend's accumulator block;
    no more threads than blocks), and member tables of at most ``copy_below`` entries copied into
    a contiguous layout.
    """

    block_entries: int = 0
    threads: int = 1
    copy_below: int = 0

    def bytes_for(self, plan: MiniBucketPlan, member_entries: Sequence[int], itemsize: int) -> int:
        """Working bytes of one mini-bucket's join+eliminate (``member_entries``: its tables)."""
        block = min(self.block_entries, plan.out_entries)
        threads = min(max(1, self.threads), -(-plan.out_entries // max(block, 1)))
        copies = sum(n for n in member_entries if n <= self.copy_below)
        return (block * threads + copies) * itemsize


def work_model_of(backend: TableBackend) -> WorkModel:
    """The :class:`WorkModel` of a backend (its :class:`~dcop.backends.base.BackendInfo`):
    NumPy's block and threads; none for others (CuPy computes in registers and chunks large
    outputs itself)."""
    info = backend.info
    if info.block_entries <= 0:
        return WorkModel()
    return WorkModel(info.block_entries, max(1, info.threads), info.block_entries)


@dataclass(frozen=True)
class DeviceModel:
    """Several GPUs as :class:`dcop.gpu.multi.MultiGpuBackend` uses them, for the plan.

    Attributes
    ----------
    count
        Devices.
    device_bytes
        Memory a device can give tables (its free memory when planned).
    split_min_entries
        Joined entries from which a bucket is split over the devices.
    max_output_bytes
        The backend's fixed cap on an output kept on a device (None: ``share`` of what is free).
    chunk_bytes
        One chunk buffer of a split device's output.
    share
        Share of the free memory an output may take on the first device.
    run_copies
        A device table's slice in more contiguous runs than this is cut out on the first
        device (a temporary of the slice's size) before it is sent.
    """

    count: int
    device_bytes: int
    split_min_entries: int
    max_output_bytes: int | None = None
    chunk_bytes: int = 256 << 20
    share: float = 0.8
    run_copies: int = 64

    def output_budget(self, held: int) -> float:
        """The largest output kept on the first device while it holds ``held`` bytes."""
        if self.max_output_bytes is not None:
            return float(self.max_output_bytes)
        return self.share * max(0, self.device_bytes - held)


def device_model_of(backend: TableBackend) -> DeviceModel | None:
    """The backend's :class:`DeviceModel` (several GPUs: :class:`~dcop.backends.base.Planned`),
    or None: then every table is planned in host memory."""
    return backend.device_model() if capable(backend, Planned) else None


def argbest_dtype(domain: int) -> np.dtype:
    """The smallest unsigned integer dtype that holds every value index of a ``domain``-valued
    variable: a BE argbest table's (one byte per entry up to 256 values, where int64 took 8)."""
    for dtype in (np.uint8, np.uint16, np.uint32):
        if domain - 1 <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


def argbest_bytes(entries: int, domain: int) -> int:
    """Bytes of a kept argbest table of ``entries`` entries for a ``domain``-valued variable: one
    bit per entry for a binary one (packed eight to a byte), else one entry of
    :func:`argbest_dtype` each."""
    if domain <= 2:
        return -(-entries // 8)
    return entries * argbest_dtype(domain).itemsize


def resident_bytes() -> int:
    """The resident memory of this process now (Linux ``/proc``; else its peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def available_bytes() -> int:
    """How many more bytes this process may allocate: the machine's available memory, lowered by
    an address-space rlimit or a cgroup limit where one applies."""
    limits = [_meminfo_available()]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(max(0, soft - _virtual_bytes()))
    cgroup = _cgroup_room()
    if cgroup is not None:
        limits.append(cgroup)
    return min(limits)


def default_limit() -> int:
    """The default memory limit of a run: what it holds now plus half the available memory."""
    return resident_bytes() + available_bytes() // 2


@dataclass(frozen=True)
class Limit:
    """The memory limit a run keeps to: bytes, how to name it, and whether it was lowered to
    what the process can have (then raising ``--max-memory`` does not help)."""

    bytes: float
    text: str
    capped: bool = False


def effective_limit(requested: float | None) -> Limit:
    """The limit a run keeps to: ``requested`` (None: :func:`default_limit`), lowered to what
    this process can have (resident + available), since a larger limit would let an allocation
    fail midway, or the kernel kill the process, instead of refusing the run up front."""
    if requested is None:
        limit = default_limit()
        return Limit(float(limit), f"the default memory limit of {human_bytes(limit)}")
    room = resident_bytes() + available_bytes()
    if requested > room:
        text = (
            f"the {human_bytes(room)} this process can have (--max-memory "
            f"{human_bytes(requested)} is more than that)"
        )
        return Limit(float(room), text, capped=True)
    return Limit(float(requested), f"the memory limit of {human_bytes(requested)}")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB', 1.06e12 -> '986 GiB'."""
    if not math.isfinite(n):
        return str(n)
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    k = 0
    while abs(n) >= 1024 and k < len(units) - 1:
        n /= 1024
        k += 1
    return f"{n:.0f} {units[k]}" if abs(n) >= 100 or k == 0 else f"{n:.3g} {units[k]}"


# ---- what the machine says ---------------------------------------------------------------------
def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return FALLBACK_AVAILABLE_BYTES


def _virtual_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _cgroup_room() -> int | None:
    """cgroup v2: memory.max minus memory.current of this process's group, if limited."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
        base = f"/sys/fs/cgroup{path}".rstrip("/")
        with open(f"{base}/memory.max") as f:
            text = f.read().strip()
        if text == "max":
            return None
        with open(f"{base}/memory.current") as f:
            return max(0, int(text) - int(f.read().strip()))
    except (OSError, ValueError, StopIteration, IndexError):
        return None
