"""A digest of one agent's part of a problem, so that two copies can be compared cheaply.

The coordinator puts the digest of each agent's part in its Setup; an agent that read its part
from a problem file computes the same digest and refuses to run on a mismatch (same graph,
different costs would otherwise give a wrong answer that looks right).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

DIGEST_CHARS = 64  # sha256, hex


def part_digest(
    variable: str, domain: int, tables: Iterable[tuple[Sequence[str], npt.ArrayLike]]
) -> str:
    """sha256 over the variable, its domain size and its tables (scope, shape, float64 costs),
    independent of the tables' order."""
    per_table = []
    for scope, costs in tables:
        array = np.ascontiguousarray(costs, dtype="<f8")
        h = hashlib.sha256()
        h.update("\x1f".join(scope).encode())
        h.update(repr(array.shape).encode())
        h.update(array.tobytes())
        per_table.append(h.hexdigest())
    whole = hashlib.sha256(f"{variable}\x1e{domain}\x1e".encode())
    for item in sorted(per_table):
        whole.update(item.encode())
    return whole.hexdigest()
