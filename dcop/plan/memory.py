"""The memory plan of a (mini-)bucket elimination run, from scopes and domain sizes alone.

One estimate serves ``dcop info``, the memory limit of :func:`dcop.inference.solve` and the
progress bar: :func:`plan_memory` walks the buckets along the elimination order with
:func:`dcop.buckets.plan_bucket` (no table is built) and adds up what is live at each step:

* ``resident``: what the process holds before solving (interpreter, libraries, the Problem);
  measured by :func:`resident_bytes`, or 0 for the tables alone;
* the input tables converted to the backend's dtype (counted even where NumPy can share the
  Problem's float64 arrays: an overestimate by the size of the inputs);
* every message table made so far: messages are kept until the end, because the value-assignment
  phase reads each bucket's tables again (so BE needs the sum of its messages, not its largest);
* the output being built, and the fused kernel's working memory (NumPy: one output block per
  thread, plus contiguous copies of the small tables of the mini-bucket).

The plan's peak is the largest of these sums over all mini-buckets; :func:`largest_fitting_z`
finds the MBE z whose plan fits a limit, and :func:`refusal` says why a run is refused.

With several GPUs (a backend that gives a :class:`DeviceModel`) the plan places tables as the
backend does: input tables on the first device, each output there while it fits the device's
budget, else in pinned host memory (only those count in the host peak), and for every bucket
split over the devices what each device allocates: its slices of the inputs (the share of the
leading output variable's values it computes of every table that holds that variable, every other
table whole; a host table is read in place where its slice is contiguous) and two chunk buffers.
A run is refused when the host peak exceeds the limit or one device's need exceeds its memory.
"""

from __future__ import annotations

import math
import os
import resource
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dcop.buckets import MiniBucketPlan, plan_bucket

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


def work_model_of(backend: Any) -> WorkModel:
    """The :class:`WorkModel` of a backend: NumPy's block and threads; none for others (CuPy
    computes in registers and chunks large outputs itself)."""
    block = int(getattr(backend, "block_entries", 0) or 0)
    if block <= 0:
        return WorkModel()
    return WorkModel(block, int(getattr(backend, "threads", 1) or 1), block)


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


def device_model_of(backend: Any) -> DeviceModel | None:
    """The backend's :class:`DeviceModel` (several GPUs), or None: then every table is planned
    in host memory."""
    model = getattr(backend, "device_model", None)
    return model() if callable(model) else None


@dataclass(frozen=True)
class BucketPlan:
    """One bucket of the plan: its mini-buckets, its work and the most bytes live while it runs."""

    var: str
    minibuckets: tuple[MiniBucketPlan, ...]
    work: int
    peak_bytes: int


@dataclass(frozen=True)
class MemoryPlan:
    """What a run along ``order`` holds at its peak, and the work of each bucket.

    ``peak_bytes`` counts ``resident_bytes`` + ``input_bytes`` + the messages made before the peak
    + the output being built + working memory; ``peak_var``/``peak_scope`` name the bucket and the
    output at that moment. ``message_bytes`` is the sum of all messages (kept until the end).
    """

    order: tuple[str, ...]
    z: int | None
    itemsize: int
    resident_bytes: int
    input_bytes: int
    message_bytes: int
    peak_bytes: int
    peak_var: str | None
    peak_scope: tuple[str, ...]
    peak_out_bytes: int
    buckets: tuple[BucketPlan, ...]
    scopes: tuple[tuple[str, ...], ...] = field(repr=False, default=())
    sizes: Mapping[str, int] = field(repr=False, default_factory=dict)
    work: WorkModel = field(repr=False, default_factory=WorkModel)
    #: with a :class:`DeviceModel`: the most one device needs at once, the bucket and device
    #: where that happens, and each device's memory
    devices: DeviceModel | None = field(repr=False, default=None)
    device_peak_bytes: int = 0
    device_peak_var: str | None = None
    device_peak_device: int = 0

    @property
    def total_work(self) -> int:
        """Joined entries over all mini-buckets: the progress bar's total."""
        return sum(b.work for b in self.buckets)

    @property
    def largest_output(self) -> int:
        """Entries of the largest message (output) table."""
        return max((m.out_entries for b in self.buckets for m in b.minibuckets), default=0)

    @property
    def largest_joined(self) -> int:
        """Entries of the largest joined (never built) table of a mini-bucket."""
        return max((m.joined_entries for b in self.buckets for m in b.minibuckets), default=0)

    @property
    def width(self) -> int:
        """The largest output scope: the induced width along the order for BE."""
        return max((len(m.out_scope) for b in self.buckets for m in b.minibuckets), default=0)

    def fits(self, limit: float) -> bool:
        """Whether the peak stays within ``limit`` bytes (and every device's need within its
        memory)."""
        return self.peak_bytes <= limit and self.fits_devices()

    def fits_devices(self) -> bool:
        """Whether every device's need stays within its memory (True without devices)."""
        return self.devices is None or self.device_peak_bytes <= self.devices.device_bytes

    def with_z(self, z: int | None) -> MemoryPlan:
        """The same run planned with mini-bucket size ``z`` (None: BE)."""
        return plan_memory(
            self.scopes,
            self.sizes,
            self.order,
            z,
            self.itemsize,
            resident=self.resident_bytes,
            work=self.work,
            devices=self.devices,
        )


def plan_memory(
    scopes: Sequence[Sequence[str]],
    sizes: Mapping[str, int],
    order: Sequence[str],
    z: int | None = None,
    itemsize: int = 8,
    *,
    resident: int = 0,
    work: WorkModel | None = None,
    devices: DeviceModel | None = None,
) -> MemoryPlan:
    """Plan (mini-)bucket elimination of tables over ``scopes`` along ``order``.

    Parameters
    ----------
    scopes
        The scope of every input table (arity-0 tables are constants and take no table memory).
    sizes
        The domain size of every variable.
    order
        The elimination order (every variable of ``scopes`` once).
    z
        The mini-bucket size; None for BE.
    itemsize
        Bytes per table entry in the dtype of the run.
    resident
        Bytes the process holds before the run (see :func:`resident_bytes`).
    work
        The backend's working memory per mini-bucket (:func:`work_model_of`); none by default.
    devices
        Several GPUs (:func:`device_model_of`): tables planned where that backend puts them.

    Returns
    -------
    MemoryPlan
        The peak, where it happens, and every bucket's mini-buckets and work.
    """
    work = work or WorkModel()
    position = {v: i for i, v in enumerate(order)}
    buckets: dict[str, list[tuple[str, ...]]] = {v: [] for v in order}
    on_host: dict[str, list[bool]] = {v: [] for v in order}  # where each bucket table lies
    inputs = 0
    for scope in scopes:
        if scope:
            first = min(scope, key=position.__getitem__)
            buckets[first].append(tuple(scope))
            on_host[first].append(devices is None)
            inputs += math.prod(sizes[v] for v in scope)
    # with devices, the input tables are uploaded to the first one
    live = resident + (inputs * itemsize if devices is None else 0)
    device_live = 0 if devices is None else inputs * itemsize
    peak, peak_out = live, 0
    peak_var: str | None = None
    peak_scope: tuple[str, ...] = ()
    device_peak, device_peak_var, device_peak_device = device_live, None, 0
    messages = 0
    planned: list[BucketPlan] = []
    for var in order:
        bucket = buckets[var]
        if not bucket:
            continue
        minis = plan_bucket(bucket, var, sizes, z, position)
        bucket_peak = live
        for mini in minis:
            out_bytes = mini.out_entries * itemsize if mini.out_scope else 0
            members = [math.prod(sizes[v] for v in bucket[k]) for k in mini.members]
            host_out = out_bytes
            if devices is not None:
                host_out = out_bytes if out_bytes > devices.output_budget(device_live) else 0
                needs = _device_needs(
                    devices, mini, [bucket[k] for k in mini.members],
                    [on_host[var][k] for k in mini.members], sizes, itemsize,
                    device_live, out_bytes - host_out,
                )  # fmt: skip
                for device, need in enumerate(needs):
                    if need > device_peak:
                        device_peak, device_peak_var, device_peak_device = need, var, device
            during = live + host_out + work.bytes_for(mini, members, itemsize)
            bucket_peak = max(bucket_peak, during)
            if during > peak:
                peak, peak_var, peak_scope, peak_out = during, var, mini.out_scope, host_out
            if mini.out_scope:  # kept until the value-assignment phase has read it
                live += host_out
                device_live += out_bytes - host_out
                messages += out_bytes
                first = min(mini.out_scope, key=position.__getitem__)
                buckets[first].append(mini.out_scope)
                on_host[first].append(host_out > 0)
        planned.append(
            BucketPlan(var, tuple(minis), sum(m.joined_entries for m in minis), bucket_peak)
        )
    return MemoryPlan(
        order=tuple(order),
        z=z,
        itemsize=itemsize,
        resident_bytes=resident,
        input_bytes=inputs * itemsize,
        message_bytes=messages,
        peak_bytes=peak,
        peak_var=peak_var,
        peak_scope=peak_scope,
        peak_out_bytes=peak_out,
        buckets=tuple(planned),
        scopes=tuple(tuple(scope) for scope in scopes),
        sizes=dict(sizes),
        work=work,
        devices=devices,
        device_peak_bytes=device_peak,
        device_peak_var=device_peak_var,
        device_peak_device=device_peak_device,
    )


def _device_needs(
    devices: DeviceModel,
    mini: MiniBucketPlan,
    members: Sequence[tuple[str, ...]],
    on_host: Sequence[bool],
    sizes: Mapping[str, int],
    itemsize: int,
    held: int,
    out_on_device: int,
) -> list[int]:
    """Bytes each device holds while ``mini`` runs: the first device what it holds plus the
    output (or two chunk buffers when the output goes to the host); split over the devices
    (as :meth:`dcop.gpu.multi.MultiGpuBackend.split_variable` decides), each other device its
    slices of the inputs and two chunk buffers."""
    out = mini.out_scope
    # two chunk buffers of at most chunk_bytes, and half the output budget each
    chunk = min(devices.chunk_bytes, max(itemsize, int(devices.output_budget(held)) // 2))
    chunks = 2 * min(chunk, mini.out_entries * itemsize)
    first = held + (out_on_device or (chunks if out else 0))
    split = (
        devices.count > 1
        and mini.joined_entries >= devices.split_min_entries
        and len(out) >= 2
        and sizes[out[0]] >= 2
    )
    if not split:
        return [first]
    lead = out[0]
    parts = min(devices.count, sizes[lead])
    share = -(-sizes[lead] // parts)  # the largest range of values a device takes
    other = 2 * min(chunk, mini.out_entries // sizes[lead] * share * itemsize)
    cut = 0  # the largest slice cut out on the first device before it is sent
    for scope, host in zip(members, on_host, strict=True):
        nbytes = math.prod(sizes[v] for v in scope) * itemsize
        if lead not in scope:
            other += 0 if host else nbytes  # a host table is read in place
        elif not (host and scope[0] == lead):  # a contiguous host slice is read in place
            other += nbytes // sizes[lead] * share
            runs = math.prod(sizes[v] for v in scope[: scope.index(lead)])
            if not host and runs > devices.run_copies:
                cut = max(cut, nbytes // sizes[lead] * share)
    return [first + cut, *[other] * (parts - 1)]


def largest_fitting_z(plan: MemoryPlan, limit: float, below: int) -> MemoryPlan | None:
    """The plan of the largest MBE z < ``below`` whose peak fits ``limit`` (the run of ``plan``
    otherwise unchanged), trying z = 1, 2, ... until one does not fit; None when not even z = 1
    fits."""
    best = None
    for z in range(1, below):
        candidate = plan.with_z(z)
        if not candidate.fits(limit):
            break
        best = candidate
    return best


def suggestion_bound(plan: MemoryPlan) -> int:
    """The z an MBE suggestion must stay below: the plan's own z, or for BE its width + 1
    (where MBE becomes BE)."""
    return plan.z if plan.z is not None else plan.width + 1


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


def refusal(plan: MemoryPlan, limit: Limit, fitting: MemoryPlan | None) -> str:
    """Why ``plan`` is refused (the bucket that makes its peak, the peak and what it is made of,
    the limit; or the device that would run out) and the way out: the largest MBE z that fits,
    or that nothing does."""
    if plan.peak_bytes <= limit.bytes and not plan.fits_devices() and plan.devices is not None:
        text = (
            f"bucket of {plan.device_peak_var!r} needs {human_bytes(plan.device_peak_bytes)} "
            f"on device {plan.device_peak_device} of {plan.devices.count} (its share of the "
            f"tables it reads and the output it makes) > the "
            f"{human_bytes(plan.devices.device_bytes)} a device has"
        )
        if fitting is not None:
            return f"{text}; use --algo mbe --z {fitting.z} for bounds, or more devices"
        return f"{text}; nothing fits, not even MBE with z=1: use more devices"
    parts = [f"{human_bytes(plan.resident_bytes)} held by the process"]
    parts.append(f"{human_bytes(plan.input_bytes)} of input tables")
    if plan.peak_var is None:
        what = "the input tables bring"
    else:
        what = f"bucket of {plan.peak_var!r} brings"
        kept = plan.peak_bytes - plan.resident_bytes - plan.input_bytes - plan.peak_out_bytes
        largest = max(
            ((m.out_entries, b.var) for b in plan.buckets for m in b.minibuckets if m.out_scope),
            default=(0, ""),
        )
        parts.append(
            f"its output over {len(plan.peak_scope)} variables: {human_bytes(plan.peak_out_bytes)}"
        )
        if largest[0]:
            parts.append(
                f"{human_bytes(max(kept, 0))} of earlier messages kept for the assignment phase "
                f"and working blocks (the largest message: "
                f"{human_bytes(largest[0] * plan.itemsize)} from bucket {largest[1]!r})"
            )
    text = (
        f"{what} the run to a peak of {human_bytes(plan.peak_bytes)} ({'; '.join(parts)}) "
        f"> {limit.text}"
    )
    more = "a machine with more memory" if limit.capped else "raise --max-memory"
    if fitting is not None:
        return (
            f"{text}; use --algo mbe --z {fitting.z} (peak {human_bytes(fitting.peak_bytes)}) for "
            f"bounds, or {more}"
        )
    if plan.z == 1:
        return f"{text}; nothing fits, not even MBE with z=1: {more}"
    least = plan.with_z(1)
    return (
        f"{text}; nothing fits, not even MBE with z=1 (peak {human_bytes(least.peak_bytes)}): "
        f"{more}"
    )


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
