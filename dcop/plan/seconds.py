"""How long a planned BE run takes on the CPU (NumPy's fused join+eliminate, one core).

``auto`` decides from this whether BE runs at once, and whether a small problem ends on the CPU
before a device could start. A bucket's cost is not one rate per joined entry: every member
table is added into the joined block (``joined x members``), and every output entry is a
reduction over the eliminated variable's values. On 23 files (the shared set, the paper's
random networks n = 18-20, grids and scale-free networks of d = 3-4, spin glasses) the
per-entry model (1e-8 s a joined entry plus 3e-4 s a bucket) predicted 0.2-7x the time BE
took: 1.24 s for 0.17 s on a random network of d = 10, where auto then searched and paid
numba's load; the model below, fitted to those runs (least squares on relative error, 2-core
VM under load 3-4), predicted 0.5-1.6x.
"""

from __future__ import annotations

from dcop.plan.bucket_plan import MemoryPlan

#: Seconds per bucket: Python's calls around one join+eliminate.
SECONDS_PER_BUCKET = 7e-5
#: Seconds per output entry: the reduction over the eliminated variable, and the write.
SECONDS_PER_OUTPUT = 5e-9
#: Seconds per joined entry and member table: one table's add into the joined block.
SECONDS_PER_MEMBER_ENTRY = 3e-10


def cpu_be_seconds(plan: MemoryPlan) -> float:
    """Predicted seconds of BE's eliminations along ``plan`` on one CPU core."""
    out = member = 0
    for bucket in plan.buckets:
        for mini in bucket.minibuckets:
            out += mini.out_entries
            member += mini.joined_entries * len(mini.members)
    return (
        len(plan.buckets) * SECONDS_PER_BUCKET
        + out * SECONDS_PER_OUTPUT
        + member * SECONDS_PER_MEMBER_ENTRY
    )
