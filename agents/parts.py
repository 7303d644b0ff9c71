"""MB-DPOP's UTILs in parts: a table larger than one message goes up as blocks of its rows, and
the parent puts them back together.

A sender flattens the table's first axes into rows, as few as make the rest fit one message
(:func:`dcop.trees.cutset.rows_per_part`), and sends blocks of rows in order, each a table over
(:data:`ROWS`, the last variables) beside the :class:`Whole` it belongs to. The receiver keeps a
series's blocks until the last is in (:class:`Assembly`). A parent holds the whole table, as it
would a DPOP UTIL: parts bound the message, not the agent's memory (the cut does that).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.errors import ProtocolError
from dcop.protocol.messages import ROWS, Whole, WireTable
from dcop.trees.cutset import CutLimit, rows_per_part


def split(
    scope: tuple[str, ...], data: np.ndarray, limit: CutLimit
) -> tuple[Whole, list[WireTable]]:
    """A table as the blocks of rows that each fit one message, in order."""
    shape = tuple(int(s) for s in data.shape)
    lead, rows = rows_per_part(shape, limit)
    flat = np.ascontiguousarray(data).reshape((-1, *shape[lead:]))
    rest = scope[lead:]
    blocks = [
        WireTable.from_array((ROWS, *rest), flat[k : k + rows]) for k in range(0, len(flat), rows)
    ]
    return Whole(tuple(scope), shape), blocks


def summed(tables: Sequence[WireTable], scalar: float) -> tuple[tuple[str, ...], np.ndarray]:
    """The sum of host tables (and a constant) as one table over their joint scope: what a
    parent would add up, sent in one series of parts (in a DPOP tree the tables an agent sends
    all lie within its separator, so their sum is no larger than the UTIL that needs the parts)."""
    scope: list[str] = []
    for t in tables:
        scope += [v for v in t.scope if v not in scope]
    sizes = {v: n for t in tables for v, n in zip(t.scope, t.shape, strict=True)}
    dtype = np.result_type(*(np.dtype(t.dtype) for t in tables)) if tables else np.float64
    out = np.full(tuple(sizes[v] for v in scope), scalar, dtype=dtype)
    for t in tables:
        order = sorted(range(len(t.scope)), key=lambda i: scope.index(t.scope[i]))
        arr = t.to_array().transpose(order)
        shape = [sizes[v] if v in t.scope else 1 for v in scope]
        out += arr.reshape(shape)
    return tuple(scope), out


@dataclass
class Series:
    """The blocks of one table received so far."""

    whole: Whole
    parts: int
    blocks: dict[int, np.ndarray] = field(default_factory=dict)


#: Makes the host array a table is put together in: ``np.empty``, or page-locked memory where a
#: GPU agent uploads it next (:class:`dcop.backends.base.PinnedHost`).
HostEmpty = Callable[[tuple[int, ...], Any], np.ndarray]


@dataclass
class Assembly:
    """Tables arriving in parts, by key (the sender and its chunk), put together in arrays of
    ``empty``."""

    empty: HostEmpty = np.empty
    series: dict[tuple[int, int], Series] = field(default_factory=dict)

    def take(
        self, key: tuple[int, int], whole: Whole, part: int, parts: int, block: WireTable
    ) -> np.ndarray | None:
        """Keep one block; the whole table once its last block is in (None before)."""
        held = self.series.setdefault(key, Series(whole, parts))
        if held.whole != whole or held.parts != parts or part in held.blocks:
            raise ProtocolError(f"UTIL parts from {key[0]} repeated or torn")
        held.blocks[part] = block.to_array()
        if len(held.blocks) < parts:
            return None
        del self.series[key]
        blocks = [held.blocks[k] for k in range(parts)]
        rows = sum(len(b) for b in blocks)
        if rows * int(np.prod(blocks[0].shape[1:], dtype=np.int64)) != int(
            np.prod(whole.shape, dtype=np.int64)
        ) or any(b.shape[1:] != blocks[0].shape[1:] or b.dtype != blocks[0].dtype for b in blocks):
            raise ProtocolError(f"UTIL parts from {key[0]} do not make their whole table")
        out = self.empty((rows, *blocks[0].shape[1:]), blocks[0].dtype)
        at = 0
        for b in blocks:  # the one copy a table takes between the socket and its bucket
            out[at : at + len(b)] = b
            at += len(b)
        return out.reshape(whole.shape)

    def drop(self, key: tuple[int, int]) -> None:
        self.series.pop(key, None)
