"""A digest of one agent's part of a problem, so that two copies can be compared cheaply.

The coordinator puts the digest of each agent's part in its Setup; an agent that read its part
from a problem file computes the same digest and refuses to run on a mismatch (same graph,
different costs would otherwise give a wrong answer that looks right).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

DIGEST_CHARS = 64  # sha256, hex


def table_digest(scope: Sequence[str], shape: tuple[int, ...], chunks: Iterable[Any]) -> str:
    """sha256 of one table: its scope, shape and float64 costs in C order, given as consecutive
    chunks (a large table need never exist whole in float64 to be hashed)."""
    h = hashlib.sha256()
    h.update("\x1f".join(scope).encode())
    h.update(repr(tuple(shape) or (1,)).encode())  # a scalar as np.ascontiguousarray has it
    for chunk in chunks:
        h.update(np.ascontiguousarray(chunk, dtype="<f8").data)  # its buffer: no copy
    return h.hexdigest()


def combine_digests(variable: str, domain: int, per_table: Iterable[str]) -> str:
    """The part's digest from its tables' digests, independent of their order."""
    whole = hashlib.sha256(f"{variable}\x1e{domain}\x1e".encode())
    for item in sorted(per_table):
        whole.update(item.encode())
    return whole.hexdigest()


def part_digest(
    variable: str, domain: int, tables: Iterable[tuple[Sequence[str], npt.ArrayLike]]
) -> str:
    """sha256 over the variable, its domain size and its tables (scope, shape, float64 costs),
    independent of the tables' order."""
    per_table = []
    for scope, costs in tables:
        array = np.ascontiguousarray(costs, dtype="<f8")
        per_table.append(table_digest(scope, array.shape, [array]))
    return combine_digests(variable, domain, per_table)
