"""Elimination orders and pseudo-trees, from the primal graph alone (pure functions).

An elimination order lists variables in the order BE eliminates them (first = first bucket
processed). Orders: greedy ``minfill`` and ``mindegree`` (ties: smaller degree, then earlier
variable), and ``pseudotree``: the reverse of a DFS pre-order that visits neighbours with the most
neighbours first (the paper's heuristic), so each variable is eliminated after all its
descendants; it is the order DPOP's UTIL phase follows. :func:`level_order` (breadth-first
level sets, a band order) is a candidate of the contraction planner's. An order's induced scopes
and its pseudo-tree (whose width is the order's induced width) live in :mod:`dcop.trees.induced`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping, Sequence

from dcop.errors import ModelError
from dcop.trees.induced import induced_scope_walk, induced_scopes
from dcop.trees.pseudotree import dfs_pseudo_tree

Adjacency = Mapping[str, set[str]]
ORDERINGS = ("minfill", "mindegree", "pseudotree")
#: Most breadth-first searches :func:`level_order` makes per component to find a far root
#: (each strictly farther than the last: two or three on a lattice).
PERIPHERY_SWEEPS = 5


# ---- greedy elimination orders ------------------------------------------------------------------
def _greedy_order(adjacency: Adjacency, score_fill: bool) -> list[str]:
    # Variables as integers (their rank: ties go to the earlier variable) and a heap of keys
    # (fill, degree, rank), packed in one int that compares alike, with stale entries skipped.
    # The fill-in counts are kept up to date edge by edge instead of recounted: eliminating v
    # lowers each neighbour a's fill by the pairs (v, b) it loses (b not joined to v), and each
    # fill edge a-b lowers by one the fill of every common neighbour (its pair a-b is joined) and
    # raises a's by a's neighbours that b lacks (b's alike). Only variables whose key changed are
    # pushed again. The keys, hence the order, are those of recounting every touched variable
    # (tests/core/test_ordering.py checks against that reference); 6-20x faster at n = 400-900.
    names = list(adjacency)
    n = len(names)
    index = {v: i for i, v in enumerate(names)}
    graph = [set(map(index.__getitem__, adjacency[v])) for v in names]
    fill = [0] * n
    if score_fill:
        for i, ns in enumerate(graph):
            # pairs of neighbours minus the edges among them (each counted from both ends)
            inside = sum(map(len, map(ns.intersection, map(graph.__getitem__, ns))))
            fill[i] = (len(ns) * (len(ns) - 1) - inside) // 2
    current = [(fill[i] * n + len(ns)) * n + i for i, ns in enumerate(graph)]
    heap = list(current)
    heapq.heapify(heap)
    eliminated = [False] * n
    order: list[str] = []
    while heap:
        key = heapq.heappop(heap)
        v = key % n
        if eliminated[v] or key != current[v]:
            continue  # eliminated, or pushed again with a newer key
        eliminated[v] = True
        ns = graph[v]
        changed = set(ns)
        for a in ns:
            graph[a].discard(v)
        if score_fill:
            for a in ns:
                ga = graph[a]
                fill[a] -= len(ga) - len(ga & ns)
            for a in ns:
                ga = graph[a]
                for b in ns - ga:
                    if b > a:  # each missing pair once (a itself, in ns - ga, is skipped)
                        gb = graph[b]
                        common = ga & gb
                        for c in common:
                            fill[c] -= 1
                        changed |= common
                        fill[a] += len(ga) - len(common)
                        fill[b] += len(gb) - len(common)
                        ga.add(b)
                        gb.add(a)
        else:
            for a in ns:
                graph[a] |= ns
                graph[a].discard(a)
        graph[v] = set()
        order.append(names[v])
        for a in changed:
            new = (fill[a] * n + len(graph[a])) * n + a
            if new != current[a]:
                current[a] = new
                heapq.heappush(heap, new)
    return order


def min_fill_order(adjacency: Adjacency) -> list[str]:
    """Greedy min-fill: eliminate the variable whose elimination adds the fewest edges."""
    return _greedy_order(adjacency, score_fill=True)


def min_degree_order(adjacency: Adjacency) -> list[str]:
    """Greedy min-degree: eliminate the variable with the fewest remaining neighbours."""
    return _greedy_order(adjacency, score_fill=False)


def level_order(adjacency: Adjacency) -> list[str]:
    """A band order: each connected component's variables by their breadth-first distance from
    a pseudo-peripheral variable (George and Liu's search: from the component's first variable,
    on to the least-connected of the farthest while that lies farther; at most
    :data:`PERIPHERY_SWEEPS` searches), ties by rank, the components in the order of their first
    variables. One pass over the graph per search, no fill counted: on a lattice it sweeps the
    grid from a corner, one diagonal a step (a 28x28 spin glass's contraction tree from it cost
    what the ordering engine's tree decomposition gave, 1.4e11, against min-fill's 36x that and
    a search 100x the order's time)."""
    rank = {v: i for i, v in enumerate(adjacency)}

    def distances(root: str) -> dict[str, int]:
        dist = {root: 0}
        queue = deque([root])
        while queue:
            u = queue.popleft()
            for w in adjacency[u]:
                if w not in dist:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        return dist

    order: list[str] = []
    placed: set[str] = set()
    for first in adjacency:
        if first in placed:
            continue
        dist = distances(first)
        for _ in range(PERIPHERY_SWEEPS - 1):
            depth = max(dist.values())
            far = min(
                (v for v, d in dist.items() if d == depth),
                key=lambda v: (len(adjacency[v]), rank[v]),
            )
            further = distances(far)
            if max(further.values()) <= depth:
                break
            dist = further
        component = sorted(dist, key=lambda v: (dist[v], rank[v]))
        order += component
        placed.update(component)
    return order


# ---- measures of an order -----------------------------------------------------------------------
def induced_width(adjacency: Adjacency, order: Sequence[str]) -> int:
    """w*: the largest number of later neighbours of a variable in the induced graph."""
    return max((len(s) for s in induced_scopes(adjacency, order).values()), default=0)


def largest_table(adjacency: Adjacency, order: Sequence[str], sizes: Mapping[str, int]) -> int:
    """Entries of the largest joined bucket table (eliminated variable included) along ``order``."""
    scopes = induced_scopes(adjacency, order)
    return max((sizes[v] * math.prod(sizes[u] for u in s) for v, s in scopes.items()), default=0)


def elimination_order(name: str, adjacency: Adjacency) -> list[str]:
    """The elimination order called ``name`` (one of ``ORDERINGS``)."""
    if name == "minfill":
        return min_fill_order(adjacency)
    if name == "mindegree":
        return min_degree_order(adjacency)
    if name == "pseudotree":
        return dfs_pseudo_tree(adjacency).elimination_order()
    raise ModelError(f"unknown ordering {name!r}; use one of {', '.join(ORDERINGS)}")


def elimination_cost(
    adjacency: Adjacency,
    order: Sequence[str],
    sizes: Mapping[str, int],
    cap: float = math.inf,
) -> float:
    """Entries of all joined bucket tables along ``order`` (the work of one elimination pass);
    ``math.inf`` as soon as the running total exceeds ``cap`` (a worse candidate stops early)."""
    total = 0.0
    for v, scope in induced_scope_walk(adjacency, order):
        total += sizes[v] * math.prod(float(sizes[u]) for u in scope)
        if total > cap:
            return math.inf
    return total


def cheapest_order(
    adjacency: Adjacency, sizes: Mapping[str, int], candidates: Mapping[str, Sequence[str]]
) -> tuple[str, list[str]]:
    """The candidate order (by name) with the least :func:`elimination_cost`, first on ties."""
    best_name, best_cost = "", math.inf
    for name, order in candidates.items():
        cost = elimination_cost(adjacency, order, sizes, best_cost)
        if cost < best_cost or not best_name:
            best_name, best_cost = name, cost
    return best_name, list(candidates[best_name])
