"""The memory plan of a (mini-)bucket elimination run, from scopes and domain sizes alone.

:func:`plan_for` is its one owner: ``dcop solve`` (BE/MBE), PR/MAR
(:mod:`dcop.inference.partition`), ``dcop batch --algo auto`` and ``dcop info`` all plan a
problem's peak there, from the problem, the elimination order, z, the dtype and the backend, so
that what ``info`` and auto's choice promise is exactly what the solve checks before it builds
any table.

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

BE has a leaner way to decode (``decode="argbest"``, :attr:`MemoryPlan.lean`): each bucket keeps
only the best value of its variable for every tuple of its output's scope, in the fewest bytes
that hold the domain (:func:`dcop.plan.memory.argbest_bytes`: a bit per entry for a binary
variable, else one byte up to 256 values), and each message is freed once its bucket is
eliminated. Its peak is
the inputs, the argbest tables so far, the messages not yet consumed, and while a bucket runs its
output (a running best), one slice of the join over the output's scope (made by the fused kernel,
with its working memory), a mask and the argbest table being filled
(:func:`dcop.bucketpass.eliminate_keeping_argbest`). The slice passes cost more
time than the fused kernel, so a run keeps its messages when that fits
(:meth:`MemoryPlan.within`) and decodes from argbest tables only when it does not.

With several GPUs (a backend that gives a :class:`DeviceModel`) the plan places tables as the
backend does: input tables on the first device, each output there while it fits the device's
budget, else in pinned host memory (only those count in the host peak), and for every bucket
split over the devices what each device allocates: its slices of the inputs (the share of the
leading output variable's values it computes of every table that holds that variable, every other
table whole; a host table is read in place where its slice is contiguous) and two chunk buffers.
A run is refused when the host peak exceeds the limit or one device's need exceeds its memory.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.backends import resolve_backend
from dcop.buckets import MiniBucketPlan, plan_bucket
from dcop.model import Problem
from dcop.plan.memory import (
    DeviceModel,
    Limit,
    WorkModel,
    argbest_bytes,
    argbest_dtype,
    device_model_of,
    human_bytes,
    resident_bytes,
    work_model_of,
)
from dcop.tables import choose_dtype

#: How a run finds its assignment (see :attr:`MemoryPlan.decode`).
DECODES = ("messages", "argbest")
#: Backends that run BE's argbest decoding: their tables are arrays of their ``xp`` (the placed
#: backend's and several GPUs' tables may be on either side).
ARGBEST_BACKENDS = ("numpy", "cupy")


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
    #: how the run finds its assignment: ``messages`` (every message kept for the value phase)
    #: or ``argbest`` (argbest tables kept, messages freed once consumed: BE only)
    decode: str = "messages"
    #: bytes of the argbest tables (``decode="argbest"``)
    argbest_bytes: int = 0
    #: BE's plan with ``decode="argbest"``, where the backend runs it (None: none)
    lean: MemoryPlan | None = field(repr=False, default=None)

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
        """Whether the run fits ``limit`` bytes (and every device's need its memory): this plan,
        or else its :attr:`lean` one (see :meth:`within`)."""
        return self.within(limit).fits_alone(limit)

    def fits_alone(self, limit: float) -> bool:
        """Whether this plan's own peak stays within ``limit`` bytes (and every device's need
        within its memory), its :attr:`lean` alternative aside."""
        return self.peak_bytes <= limit and self.fits_devices()

    def within(self, limit: float) -> MemoryPlan:
        """The plan a run under ``limit`` bytes follows: this one when it fits (the faster
        decode), else the :attr:`lean` one when that fits, else this one (to be refused)."""
        if self.fits_alone(limit) or self.lean is None or not self.lean.fits_alone(limit):
            return self
        return self.lean

    def fits_devices(self) -> bool:
        """Whether every device's need stays within its memory (True without devices)."""
        return self.devices is None or self.device_peak_bytes <= self.devices.device_bytes

    def with_z(self, z: int | None) -> MemoryPlan:
        """The same run planned with mini-bucket size ``z`` (None: BE)."""
        if z == self.z:
            return self
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
    decode: str = "messages",
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
    decode
        ``messages`` (every message kept for the value phase) or ``argbest`` (BE on one device
        or the host: argbest tables kept, each message freed once its bucket is eliminated).

    Returns
    -------
    MemoryPlan
        The peak, where it happens, and every bucket's mini-buckets and work.
    """
    work = work or WorkModel()
    if decode not in DECODES:
        raise ValueError(f"unknown decode {decode!r}; use one of {', '.join(DECODES)}")
    lean = decode == "argbest"
    if lean and (z is not None or devices is not None):
        raise ValueError("argbest decoding is BE's on one device or the host (z None, no devices)")
    position = {v: i for i, v in enumerate(order)}
    # argbest decoding frees each message once its bucket is eliminated: its bytes per bucket
    consumed: dict[str, int] = {v: 0 for v in order}
    kept_argbest = 0
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
            if lean:  # a running best, one slice of the join, a mask, the argbest table
                extra = out_bytes + mini.out_entries * (1 + argbest_dtype(sizes[var]).itemsize)
                # a table whose leading axis is not var is copied when sliced at var's values
                extra += sum(
                    n // sizes[var] * itemsize
                    for k, n in zip(mini.members, members, strict=True)
                    if bucket[k][0] != var
                )
                # the fused kernel's working memory while it makes a slice
                extra += work.bytes_for(mini, [n // sizes[var] for n in members], itemsize)
            else:
                extra = work.bytes_for(mini, members, itemsize)
            during = live + host_out + extra
            bucket_peak = max(bucket_peak, during)
            if during > peak:
                peak, peak_var, peak_scope, peak_out = during, var, mini.out_scope, host_out
            if lean:  # the argbest table kept: packed to bits for a binary variable
                kept_argbest += argbest_bytes(mini.out_entries, sizes[var])
                live += argbest_bytes(mini.out_entries, sizes[var])
            if mini.out_scope:  # kept until the value phase has read it, or its bucket's end
                live += host_out
                device_live += out_bytes - host_out
                messages += out_bytes
                first = min(mini.out_scope, key=position.__getitem__)
                buckets[first].append(mini.out_scope)
                on_host[first].append(host_out > 0)
                consumed[first] += out_bytes
        if lean:  # the bucket's messages are freed: only its argbest table is read again
            live -= consumed[var]
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
        decode=decode,
        argbest_bytes=kept_argbest,
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
    if plan.lean is not None:
        text += (
            f" (with argbest tables instead of the messages, a peak of "
            f"{human_bytes(plan.lean.peak_bytes)}, {human_bytes(plan.lean.argbest_bytes)} of "
            f"them)"
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


#: The tasks that sum (sum-product) rather than minimise.
SUMMING_TASKS = ("pr", "mar")


def summing_work(work: WorkModel) -> WorkModel:
    """Sum-product's working memory: min-sum's, plus a linear-space (``exp``) copy of every
    member table of a mini-bucket (``tables._logsumexp_linear``): planned as min-sum, PR peaked
    11 % over --max-memory on Grids_11 (issue 33, item 5)."""
    return dataclasses.replace(work, copy_below=1 << 62)


def plan_for(
    problem: Problem,
    order: Sequence[str],
    z: int | None = None,
    dtype: Any = "auto",
    backend: str | Any = "numpy",
    *,
    task: str = "min",
    resident: int | None = None,
) -> MemoryPlan:
    """The planned peak of eliminating ``problem`` along ``order`` with mini-bucket size ``z``
    (None: BE) in ``dtype`` (a dtype, or a name :func:`dcop.tables.choose_dtype` resolves) on
    ``backend`` (a name or a backend object), for ``task`` (min/mpe, or pr/mar: sum-product's
    work). ``resident``: bytes the process already holds (default: measured now). A backend
    over several GPUs (:func:`~dcop.plan.memory.device_model_of`) is planned device by
    device: only what lands in host memory counts against the host limit."""
    engine = resolve_backend(backend)
    chosen = np.dtype(choose_dtype(problem, dtype) if isinstance(dtype, str) else dtype)
    work = work_model_of(engine)
    if task in SUMMING_TASKS:
        work = summing_work(work)
    scopes = [t.scope for t in problem.tables]
    sizes = problem.domain_sizes()
    held = resident_bytes() if resident is None else resident
    devices = device_model_of(engine)
    plan = plan_memory(
        scopes, sizes, order, z, chosen.itemsize, resident=held, work=work, devices=devices
    )
    if z is None and task not in SUMMING_TASKS and lean_runs_on(engine):
        lean = plan_memory(scopes, sizes, order, None, chosen.itemsize, resident=held,
                           work=work, decode="argbest")  # fmt: skip
        plan = dataclasses.replace(plan, lean=lean)
    return plan


def lean_runs_on(backend: Any) -> bool:
    """Whether ``backend`` (a backend object) runs BE's argbest decoding: one of
    :data:`ARGBEST_BACKENDS`, its tables in one place (no :class:`DeviceModel`)."""
    return backend.name in ARGBEST_BACKENDS and device_model_of(backend) is None
