"""Predicted table sizes (entries) as capped floats, never as exact integers.

A pseudo-tree of a few hundred agents can predict a UTIL of 3^50 or 5^200 entries: as an exact
integer it passes 2^64 and no wire format carries it (msgpack raised ``cannot encode int``), and a
receiver that range-checks it drops the message and the DFS waits forever. A float64 is exact for
every size below 2^53 (every table that could ever be built), keeps its order above, and is capped
at :data:`SIZE_CAP`, so a product or sum of sizes is always a finite float that any wire carries
and every limit comparison still reads right.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: The largest size carried (2^1000, about 1e301): far above every memory or message limit,
#: and below float64's overflow, so a sum of two capped sizes stays finite.
SIZE_CAP = 2.0**1000


def as_size(value: float) -> float:
    """``value`` (an int of any size, or a float) as a capped, non-negative float size."""
    try:
        f = float(value)
    except OverflowError:  # an int beyond float64's range
        return SIZE_CAP
    if math.isnan(f) or f < 0:
        raise ValueError(f"a size must be a non-negative number, not {value!r}")
    return min(f, SIZE_CAP)


def entries(domains: Iterable[int]) -> float:
    """The entries of a table over variables of these domain sizes (capped)."""
    out = 1.0
    for d in domains:
        out = min(out * d, SIZE_CAP)
    return out


def add(a: float, b: float) -> float:
    """The sum of two sizes (capped)."""
    return min(a + b, SIZE_CAP)


def total(sizes: Iterable[float]) -> float:
    """The sum of many sizes (capped)."""
    out = 0.0
    for s in sizes:
        out = min(out + s, SIZE_CAP)
    return out


def as_count(size: float) -> int:
    """A size as the integer a result document shows (exact below 2^53, rounded above)."""
    return int(size)
