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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from dcop.errors import ModelError
from dcop.trees.pseudotree import PseudoTree, dfs_pseudo_tree

if TYPE_CHECKING:
    from dcop.model import Problem
    from dcop.orders.engine import CostModel, OrderResult

Adjacency = Mapping[str, set[str]]
ORDERINGS = ("minfill", "mindegree", "pseudotree")


# ---- greedy elimination orders ------------------------------------------------------------------
def _greedy_order(adjacency: Adjacency, score_fill: bool) -> list[str]:
    # a heap of (fill, degree, rank) keys with stale entries skipped: only the eliminated
    # variable's neighbours (degree) and their neighbours (fill) change key at each step
    graph = {v: set(ns) for v, ns in adjacency.items()}
    rank = {v: i for i, v in enumerate(adjacency)}

    def fill(v: str) -> int:
        # the pairs of v's neighbours minus the edges among them, each edge counted from both
        # ends; map() keeps the per-neighbour work in C (the pairwise Python loop was 3x slower)
        ns = graph[v]
        d = len(ns)
        inside = sum(map(len, map(ns.intersection, map(graph.__getitem__, ns))))
        return (d * (d - 1) - inside) // 2

    def key(v: str) -> tuple[int, int, int]:
        return (fill(v) if score_fill else 0, len(graph[v]), rank[v])

    current = {v: key(v) for v in graph}
    heap = [(*k, v) for v, k in current.items()]
    heapq.heapify(heap)
    order: list[str] = []
    while graph:
        *k, v = heapq.heappop(heap)
        if v not in graph or tuple(k) != current[v]:
            continue  # eliminated, or pushed again with a newer key
        ns = graph.pop(v)
        del current[v]
        for a in ns:
            graph[a].discard(v)
            graph[a].update(ns - {a})
        order.append(v)
        touched = set(ns)
        if score_fill:
            for a in ns:
                touched.update(graph[a])
        for a in touched:
            new = key(a)
            if new != current[a]:
                current[a] = new
                heapq.heappush(heap, (*new, a))
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
def induced_scopes(adjacency: Adjacency, order: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """For each variable, the variables after it that it is joined with when it is eliminated
    (its bucket's output scope along ``order``)."""
    if set(order) != set(adjacency) or len(order) != len(adjacency):
        raise ModelError("an elimination order must list every variable exactly once")
    graph = {v: set(ns) for v, ns in adjacency.items()}
    scopes: dict[str, tuple[str, ...]] = {}
    position = {v: i for i, v in enumerate(order)}
    for v in order:
        ns = graph.pop(v)
        for a in ns:
            graph[a].discard(v)
            graph[a].update(ns - {a})
        scopes[v] = tuple(sorted(ns, key=position.__getitem__))
    return scopes


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
    graph = {v: set(ns) for v, ns in adjacency.items()}
    total = 0.0
    for v in order:
        ns = graph.pop(v)
        total += sizes[v] * math.prod(float(sizes[u]) for u in ns)
        if total > cap:
            return math.inf
        for a in ns:
            graph[a].discard(v)
            graph[a].update(ns - {a})
    return total


def best_order(
    problem_or_graph: Problem | Adjacency,
    budget_s: float | None = None,
    cost_model: CostModel | None = None,
) -> OrderResult:
    """The ordering engine's best order (:func:`dcop.orders.engine.best_order`): greedy orders
    at once, then a tree-decomposition search within ``budget_s`` (None: sized from the predicted
    solve time), compared by their real cost; never costlier than min-fill."""
    from dcop.orders.engine import best_order as engine_best_order

    return engine_best_order(problem_or_graph, budget_s, cost_model)


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
