"""Where work runs: each bucket on the CPU or the GPU, and each agent on a GPU.

A bucket sent to the device pays for more than its kernel: the upload of its inputs, a launch, a
synchronisation and, in an agent, the download of its output (a UTIL message). Below some size the
CPU is done before the device has started, so a GPU agent keeps small buckets on the CPU.
:func:`place` decides from the bucket's joined entries (the size of the table that is never built)
against one threshold, :data:`DEFAULT_GPU_MIN_ENTRIES`, overridden by an argument or by the
environment (``DCOP_GPU_MIN_ENTRIES``); ``0`` sends every bucket to the device (for tests).
:class:`dcop.backends.placed.PlacedBackend` applies it call by call.

For several GPUs on one host, :func:`gpu_devices` reads ``--gpu all`` or a list such as ``0,2``.
Agents are spread over those devices in one of three ways (:data:`PLACEMENTS`): ``round-robin``
(:func:`device_for_agent`: the ``k``-th agent on device ``k mod count``), ``balanced``
(:func:`balanced_devices`: whole subtrees of the pseudo-tree on one device, the heaviest subtrees
on different devices, so that most UTILs stay on their device and the largest buckets run at
once on different GPUs), or ``split`` (round robin, and each agent's large buckets split over
every device: what a chain of heavy buckets, where no two run at once, can use).

Nothing here imports CuPy.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Literal

from dcop.errors import BackendUnavailable, InputError, ModelError

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
