"""Faces of a planar embedding, and the dual graph's edges.

Each undirected edge has two half-edges; each half-edge bounds exactly one face, the one met by
walking the embedding's faces (networkx's ``next_face_half_edge``). Edge ``e`` then joins the
dual nodes ``left[e]`` and ``right[e]``, the faces of its two half-edges; a bridge has the same
face on both sides (a loop of the dual, never in a minimum T-join). Every connected part of the
graph has its own faces, its outer one included, so the parts stay apart in the dual.

A face is frustrated (odd) when an odd number of its edges have a negative coupling (they
prefer their two spins unequal): no assignment satisfies every edge around it. A bridge walked
twice by the same face counts twice, and cancels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dcop.planar.ising import IntArray, IsingModel


@dataclass(frozen=True)
class Dual:
    """The faces of an embedded model: ``faces`` in all, edge ``e`` between faces ``left[e]`` and
    ``right[e]``, ``odd[f]`` whether face ``f`` is frustrated."""

    faces: int
    left: IntArray
    right: IntArray
    odd: npt.NDArray[np.bool_]

    @property
    def frustrated(self) -> int:
        """The number of frustrated faces (always even in each connected part)."""
        return int(self.odd.sum())


def dual_of(model: IsingModel, embedding: Any) -> Dual:
    """The faces of ``embedding`` (a :class:`networkx.PlanarEmbedding` of ``model``'s graph over
    variable indices) and which of them are frustrated."""
    m = len(model.a)
    half: dict[tuple[int, int], int] = {}  # half-edge -> 2e (a to b) or 2e + 1 (b to a)
    for e, (u, v) in enumerate(zip(model.a.tolist(), model.b.tolist(), strict=True)):
        half[(u, v)] = 2 * e
        half[(v, u)] = 2 * e + 1
    face_of = np.full(2 * m, -1, dtype=np.int64)
    step = embedding.next_face_half_edge
    faces = 0
    for start, slot in half.items():
        if face_of[slot] >= 0:
            continue
        u, v = start
        while True:
            face_of[half[(u, v)]] = faces
            u, v = step(u, v)
            if (u, v) == start:
                break
        faces += 1
    left, right = face_of[0::2].copy(), face_of[1::2].copy()
    negative = (model.coupling < 0).astype(np.int64)
    count = np.bincount(left, weights=negative, minlength=faces) + np.bincount(
        right, weights=negative, minlength=faces
    )
    odd = (count.astype(np.int64) % 2) == 1
    return Dual(faces=faces, left=left, right=right, odd=odd)
