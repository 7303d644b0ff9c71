"""What an elimination order costs with the real domain sizes (pure functions).

The engine ranks orders by the work and memory of the run they would drive, not by the induced
width alone: with unequal domains a wider order can join fewer entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dcop.errors import ModelError
from dcop.trees.induced import induced_scope_walk
from dcop.trees.pseudotree import Adjacency

#: Seconds per joined table entry of a NumPy min-sum bucket (fused join and eliminate; measured
#: 1.3e-8 to 3.2e-8 in float64 on the shared files, 4.5e-9 in float32 on a 14x14 grid, one
#: core), used only to size the default ordering budget.
SECONDS_PER_ENTRY = 1e-8
#: A GPU's join+eliminate per entry against single-core NumPy's (the contraction's ratio; the
#: generic kernel's 4e10-2e11 joined entries/s against NumPy's 3e7-1e8).
GPU_SPEEDUP = 500.0
#: Backends (by name) whose buckets run on a device.
DEVICE_BACKENDS = ("cupy", "placed")


def backend_seconds_per_entry(name: str) -> float:
    """Predicted seconds per joined entry of a bucket on the backend called ``name`` (``auto``
    counts as the CPU: the ordering budget it sizes is then the larger one)."""
    return SECONDS_PER_ENTRY / GPU_SPEEDUP if name in DEVICE_BACKENDS else SECONDS_PER_ENTRY


#: Seconds of fixed cost per bucket (Python overhead of one elimination step).
SECONDS_PER_BUCKET = 5e-5


@dataclass(frozen=True)
class OrderCost:
    """Width, largest joined table and total joined entries (eliminated variable included)."""

    width: int
    largest: float
    total: float

    def key(self, max_entries: float = math.inf) -> tuple[bool, float, float, int]:
        """Smaller is better: orders whose largest table exceeds ``max_entries`` come last, then
        by the run's work plus its largest table (entries), then largest table, then width."""
        return (self.largest > max_entries, self.total + self.largest, self.largest, self.width)

    def predicted_seconds(
        self, variables: int, seconds_per_entry: float = SECONDS_PER_ENTRY
    ) -> float:
        """A rough solve time along this order: by default single-core BE's (a solver of
        another speed gives its own ``seconds_per_entry``)."""
        return self.total * seconds_per_entry + variables * SECONDS_PER_BUCKET


def order_cost(
    adjacency: Adjacency,
    order: Sequence[str],
    sizes: Mapping[str, int],
    cap: float = math.inf,
) -> OrderCost:
    """The :class:`OrderCost` of ``order``; raises :class:`ModelError` unless ``order`` lists
    every variable of ``adjacency`` exactly once. Once the total passes ``cap`` the walk stops
    and the cost is infinite (a hopeless candidate's walk can take long)."""
    if len(order) != len(adjacency) or set(order) != set(adjacency):
        raise ModelError("an elimination order must list every variable exactly once")
    size = {v: float(s) for v, s in sizes.items()}
    width, largest, total = 0, 0.0, 0.0
    for v, scope in induced_scope_walk(adjacency, order):
        entries = size[v] * math.prod(map(size.__getitem__, scope))
        width = max(width, len(scope))
        largest = max(largest, entries)
        total += entries
        if total > cap:
            return OrderCost(width, math.inf, math.inf)
    return OrderCost(width, largest, total)
