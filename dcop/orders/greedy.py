"""Elimination orders and pseudo-trees, from the primal graph alone (pure functions).

An elimination order lists variables in the order BE eliminates them (first = first bucket
processed). Orders: greedy ``minfill`` and ``mindegree`` (ties: smaller degree, then earlier
variable), and ``pseudotree``: the reverse of a DFS pre-order that visits neighbours with the most
neighbours first (the paper's heuristic), so each variable is eliminated after all its
descendants; it is the order DPOP's UTIL phase follows. :func:`order_pseudo_tree` turns any
elimination order into a pseudo-tree whose width is that order's induced width (not a DFS tree);
the pseudo-tree itself and the DFS that builds one live in :mod:`dcop.trees`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator, Mapping, Sequence

from dcop.errors import ModelError
from dcop.trees.pseudotree import PseudoTree, dfs_pseudo_tree

Adjacency = Mapping[str, set[str]]
ORDERINGS = ("minfill", "mindegree", "pseudotree")


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


# ---- an order's pseudo-tree --------------------------------------------------------------------
def order_pseudo_tree(adjacency: Adjacency, order: Sequence[str]) -> PseudoTree:
    """The pseudo-tree of an elimination order (the centralized option, e.g. along min-fill).

    The parent of x is the variable of x's induced scope (:func:`induced_scopes`) that ``order``
    eliminates first after x; roots are the variables with an empty induced scope. Every graph
    edge then joins a variable and an ancestor, each variable's separator is its induced scope, and
    the tree's width is the order's induced width. A parent need not be a neighbour, so agents
    cannot build this tree by a DFS: it comes back with ``distributed=False``.
    """
    scopes = induced_scopes(adjacency, order)
    position = {v: i for i, v in enumerate(order)}
    parent: dict[str, str | None] = {v: (s[0] if s else None) for v, s in scopes.items()}
    children: dict[str, list[str]] = {v: [] for v in adjacency}
    for v in reversed(order):  # each variable's children: eliminated last first
        p = parent[v]
        if p is not None:
            children[p].append(v)
    roots = [v for v in reversed(order) if parent[v] is None]
    pre: list[str] = []
    depth: dict[str, int] = {}
    stack = [(r, 0) for r in reversed(roots)]
    while stack:
        v, d = stack.pop()
        pre.append(v)
        depth[v] = d
        stack.extend((c, d + 1) for c in reversed(children[v]))
    pseudo_parents: dict[str, list[str]] = {v: [] for v in adjacency}
    pseudo_children: dict[str, list[str]] = {v: [] for v in adjacency}
    for v in pre:
        # a neighbour eliminated later is an ancestor (it is in v's induced scope)
        for u in sorted(adjacency[v], key=position.__getitem__):
            if position[u] > position[v] and u != parent[v]:
                pseudo_parents[v].append(u)
                pseudo_children[u].append(v)
    return PseudoTree(
        parent,
        children,
        pseudo_parents,
        pseudo_children,
        roots,
        pre,
        depth,
        distributed=False,
    )


# ---- measures of an order -----------------------------------------------------------------------
def induced_scope_walk(
    adjacency: Adjacency, order: Sequence[str]
) -> Iterator[tuple[str, set[str]]]:
    """(variable, its induced scope) along ``order``, first eliminated first, for an order that
    lists every variable once (unchecked); the scopes are the walk's own, to read. The scope is built the way BE's messages travel: a
    variable's later neighbours and the scopes handed to it (less itself), handed on to the
    scope's first-eliminated variable; no induced graph is kept, so a step costs the sizes of the
    scopes it joins, not their squares (2-3x faster than filling in cliques at n = 400-900)."""
    position = {v: i for i, v in enumerate(order)}
    handed: list[list[set[str]]] = [[] for _ in order]
    for i, v in enumerate(order):
        scope = {u for u in adjacency[v] if position[u] > i}
        for inner in handed[i]:
            scope |= inner
        handed[i] = []
        scope.discard(v)
        if scope:
            handed[min(map(position.__getitem__, scope))].append(scope)
        yield v, scope


def induced_scopes(adjacency: Adjacency, order: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """For each variable, the variables after it that it is joined with when it is eliminated
    (its bucket's output scope along ``order``)."""
    if set(order) != set(adjacency) or len(order) != len(adjacency):
        raise ModelError("an elimination order must list every variable exactly once")
    position = {v: i for i, v in enumerate(order)}
    return {
        v: tuple(sorted(scope, key=position.__getitem__))
        for v, scope in induced_scope_walk(adjacency, order)
    }


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
