"""A planar embedding without the planarity test, where the graph is a full rectangular grid.

networkx's left-right planarity test took 2.2 s of a 3.4 s solve of a 128x128 spin glass (1.2 s
at a quieter moment), and it cannot be interrupted. A grid's embedding is given by its drawing:
:func:`grid_coordinates` recognises an ``r`` x ``c`` grid from the graph alone (no variable
names): exactly four corners of degree 2, the rest of degree 3 or 4, ``2rc - r - c`` edges, and
every variable placed at ``(i, j)`` by its distances from two corners (``d_s = i + j`` from the
corner ``s`` at ``(0, 0)``, ``d_t = i + c - 1 - j`` from the nearest other corner ``t``); the
placement must put each variable on its own point and each edge between two points one step
apart. Those are the straight segments of a drawing without crossings, and the order of each
variable's edges around it (east, north, west, south) is a planar rotation system
(:func:`grid_successors`).

The answer is checked as a certificate: a rotation system of a connected graph is planar
exactly when its faces number ``E - V + 2`` (Euler; fewer faces: a surface of higher genus),
and :func:`dcop.planar.dual.face_labels` counts them. Anything that is not a full grid (a
missing edge, a coupling dropped as noise, a torus) goes to networkx's test as before.
"""

from __future__ import annotations

import numpy as np

from dcop.planar.dual import face_labels
from dcop.planar.ising import IntArray, IsingModel


def grid_successors(model: IsingModel) -> IntArray | None:
    """Each half-edge's successor around its face (:func:`dcop.planar.dual.dual_from_successors`;
    half-edge ``2e`` runs from ``a[e]`` to ``b[e]``, ``2e + 1`` back) in the grid's drawing, or
    None where the model's graph is not a full grid of at least 2 x 2."""
    placed = grid_coordinates(model)
    if placed is None:
        return None
    row, col = placed
    n, m = len(model.names), len(model.a)
    tail = np.empty(2 * m, dtype=np.int64)
    tail[0::2], tail[1::2] = model.a, model.b
    head = np.empty(2 * m, dtype=np.int64)
    head[0::2], head[1::2] = model.b, model.a
    di, dj = row[head] - row[tail], col[head] - col[tail]
    # counter-clockwise from east, rows growing downwards: east, north, west, south
    direction = np.select([dj == 1, di == -1, dj == -1], [0, 1, 2], default=3)
    key = tail * 4 + direction
    order = np.argsort(key, kind="stable")
    rank = np.empty(2 * m, dtype=np.int64)
    rank[order] = np.arange(2 * m)
    first = np.searchsorted(key[order], np.arange(n) * 4)  # each variable's first half-edge
    last = np.searchsorted(key[order], np.arange(n) * 4 + 4)  # and one past its last
    # after arriving at v along u -> v, leave v along the edge after v -> u counter-clockwise
    back = np.arange(2 * m) ^ 1
    at = head
    after = rank[back] + 1
    after = np.where(after < last[at], after, first[at])
    successor = order[after]
    if int(face_labels(successor).max(initial=-1)) + 1 != m - n + 2:  # not planar: a bug
        return None
    return successor


def grid_coordinates(model: IsingModel) -> tuple[IntArray, IntArray] | None:
    """Each variable's row and column where the model's graph is a full ``r`` x ``c`` grid
    (``r, c >= 2``), else None (see the module docstring)."""
    n, m = len(model.names), len(model.a)
    if n < 4 or m == 0:
        return None
    ends = np.concatenate([model.a, model.b])
    degree = np.bincount(ends, minlength=n)
    corners = np.flatnonzero(degree == 2)
    if corners.size != 4 or degree.min() < 2 or degree.max() > 4:
        return None
    order = np.argsort(ends, kind="stable")
    neighbours = np.concatenate([model.b, model.a])[order]
    starts = np.searchsorted(ends[order], np.arange(n + 1))
    from_s = _distances(int(corners[0]), starts, neighbours)
    if (from_s < 0).any():  # not connected
        return None
    others = corners[1:]
    t = int(others[np.argmin(from_s[others])])
    cols = int(from_s[t]) + 1
    if n % cols:
        return None
    rows = n // cols
    if rows < 2 or cols < 2 or m != 2 * rows * cols - rows - cols:
        return None
    from_t = _distances(t, starts, neighbours)
    twice_row = from_s + from_t - (cols - 1)
    twice_col = from_s - from_t + (cols - 1)
    if (twice_row % 2).any() or (twice_col % 2).any():
        return None
    row, col = twice_row // 2, twice_col // 2
    if row.min() < 0 or row.max() >= rows or col.min() < 0 or col.max() >= cols:
        return None
    if np.unique(row * cols + col).size != n:  # two variables on one point
        return None
    step = np.abs(row[model.b] - row[model.a]) + np.abs(col[model.b] - col[model.a])
    if (step != 1).any():  # an edge that is not one step of the grid
        return None
    return row, col


def _distances(source: int, starts: IntArray, neighbours: IntArray) -> IntArray:
    """Edges from ``source`` to every variable (-1: not reached), breadth first, a level at a
    time in NumPy (the adjacency in CSR form: ``neighbours[starts[v]:starts[v + 1]]``)."""
    n = starts.size - 1
    distance = np.full(n, -1, dtype=np.int64)
    distance[source] = 0
    frontier = np.array([source], dtype=np.int64)
    level = 0
    while frontier.size:
        level += 1
        counts = starts[frontier + 1] - starts[frontier]
        offsets = np.repeat(starts[frontier] - (np.cumsum(counts) - counts), counts)
        reached = neighbours[np.arange(int(counts.sum())) + offsets]
        reached = np.unique(reached[distance[reached] < 0])
        distance[reached] = level
        frontier = reached
    return distance
