"""How many bytes a contraction's arrays may take, on the device that holds them.

One small function (:func:`contraction_room`), so that a single memory planner can take it over
later: on the CuPy backend the device's free memory (CuPy's pool included), never the host's; on
NumPy the run's limit (:func:`dcop.plan.memory.effective_limit`) less what the process
already holds. ``--max-memory`` caps either.
"""

from __future__ import annotations

from dcop.backends.base import DeviceArrays, TableBackend, capable
from dcop.plan.memory import Limit, effective_limit, human_bytes, resident_bytes

#: Share of the device's free memory a contraction plans to use (the rest: CUDA's own workspace,
#: cuBLAS's, fragmentation of the pool).
DEVICE_SHARE = 0.8


def device_free_bytes(backend: TableBackend) -> float | None:
    """Free memory of the backend's device (its pool's free blocks included); None for a backend
    without a device (:class:`~dcop.backends.base.DeviceArrays`)."""
    return backend.free_bytes() if capable(backend, DeviceArrays) else None


def contraction_room(backend: TableBackend, max_bytes: float | None) -> Limit:
    """The bytes the contraction's arrays may hold at their peak, and how to name that limit."""
    free = device_free_bytes(backend)
    if free is not None:
        room = DEVICE_SHARE * free
        text = f"{DEVICE_SHARE:.0%} of the device's free memory ({human_bytes(room)})"
        if max_bytes is not None and max_bytes < room:
            return Limit(float(max_bytes), f"the memory limit of {human_bytes(max_bytes)}")
        return Limit(room, text, capped=max_bytes is not None)
    limit = effective_limit(max_bytes)
    held = resident_bytes()
    return Limit(
        max(0.0, limit.bytes - held),
        f"{limit.text} less the {human_bytes(held)} held",
        limit.capped,
    )
