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
    return dual_from_successors(model, successors_of(model, embedding))


def successors_of(model: IsingModel, embedding: Any) -> IntArray:
    """Each half-edge's successor around its face in ``embedding`` (networkx's
    ``next_face_half_edge``: after ``u -> v``, ``v -> w`` with ``w`` counter-clockwise of ``u``
    around ``v``). Half-edge ``2e`` runs from ``a[e]`` to ``b[e]``, ``2e + 1`` back."""
    m = len(model.a)
    half: dict[tuple[int, int], int] = {}  # half-edge -> 2e (a to b) or 2e + 1 (b to a)
    for e, (u, v) in enumerate(zip(model.a.tolist(), model.b.tolist(), strict=True)):
        half[(u, v)] = 2 * e
        half[(v, u)] = 2 * e + 1
    successor = np.empty(2 * m, dtype=np.int64)
    for (u, v), slot in half.items():
        successor[slot] = half[(v, embedding[v][u]["ccw"])]
    return successor


def dual_from_successors(model: IsingModel, successor: IntArray) -> Dual:
    """The faces that ``successor`` (each half-edge's next around its face, a permutation of the
    half-edges: :func:`successors_of`, :func:`dcop.planar.grid.grid_successors`) makes, and
    which of them are frustrated."""
    face_of = face_labels(successor)
    faces = int(face_of.max(initial=-1)) + 1
    left, right = face_of[0::2].copy(), face_of[1::2].copy()
    negative = (model.coupling < 0).astype(np.int64)
    count = np.bincount(left, weights=negative, minlength=faces) + np.bincount(
        right, weights=negative, minlength=faces
    )
    odd = (count.astype(np.int64) % 2) == 1
    return Dual(faces=faces, left=left, right=right, odd=odd)


def face_labels(successor: IntArray) -> IntArray:
    """The cycles of the permutation ``successor`` (the faces), numbered 0, 1, ... in the order
    of their least half-edge. Each half-edge takes the least index on its cycle by pointer
    jumping: after round ``k`` the least of the next ``2**k``; a round that changes nothing
    leaves every later one unchanged, so the rounds are about log2 of the longest face (an
    outer face of 4 * side edges: 10 rounds at 128 x 128), each in NumPy."""
    least = np.arange(successor.size, dtype=np.int64)
    jump = successor.astype(np.int64, copy=True)
    while True:
        lower = np.minimum(least, least[jump])
        if np.array_equal(lower, least):
            break
        least = lower
        jump = jump[jump]
    _, labels = np.unique(least, return_inverse=True)
    return labels.astype(np.int64).reshape(-1)
