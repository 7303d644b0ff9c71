"""Pseudo-trees: the :class:`PseudoTree` every side shares, and the centralized DFS that builds one.

A pseudo-tree of the primal graph (a forest when it is disconnected) joins every edge's two
variables as ancestor and descendant. :func:`dfs_pseudo_tree` builds the paper's DFS tree in one
process (most neighbours first); the agents build the same tree by distributed DFS
(:mod:`dcop.trees.dfs`) and :func:`dcop.trees.induced.order_pseudo_tree` turns any elimination
order into one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dcop.errors import ModelError

Adjacency = Mapping[str, set[str]]


@dataclass
class PseudoTree:
    """A pseudo-tree of the primal graph (a forest when it is disconnected): every edge joins a
    variable and one of its ancestors; edges to ancestors other than the parent make
    pseudo-parents. ``order`` is a pre-order (parents before children). ``distributed``: every
    tree edge is an edge of the graph, as in a DFS tree that agents build by token passing; False
    for :func:`dcop.trees.induced.order_pseudo_tree`, where a parent may not be a neighbour."""

    parent: dict[str, str | None]
    children: dict[str, list[str]]
    pseudo_parents: dict[str, list[str]]
    pseudo_children: dict[str, list[str]]
    roots: list[str]
    order: list[str]
    depth: dict[str, int] = field(default_factory=dict)
    distributed: bool = True

    def separators(self) -> dict[str, tuple[str, ...]]:
        """sep(x) = parent and pseudo-parents of x and of its descendants, minus the subtree."""
        sep: dict[str, set[str]] = {}
        for v in reversed(self.order):  # children before parents
            s: set[str] = set(self.pseudo_parents[v])
            p = self.parent[v]
            if p is not None:
                s.add(p)
            for c in self.children[v]:
                s |= sep[c]
            s.discard(v)
            sep[v] = s
        return {v: tuple(sorted(sep[v], key=lambda u: self.depth[u])) for v in self.order}

    def elimination_order(self) -> list[str]:
        """Leaves first: every variable comes after all of its descendants."""
        return list(reversed(self.order))


def most_neighbours_first(adjacency: Adjacency, candidates: Sequence[str]) -> list[str]:
    """The paper's DFS heuristic: most neighbours first, ties by name (deterministic)."""
    return sorted(candidates, key=lambda v: (-len(adjacency[v]), v))


def dfs_pseudo_tree(adjacency: Adjacency, root: str | None = None) -> PseudoTree:
    """DFS pseudo-tree with the most-neighbours-first heuristic; one tree per component."""
    parent: dict[str, str | None] = {}
    children: dict[str, list[str]] = {v: [] for v in adjacency}
    depth: dict[str, int] = {}
    order: list[str] = []
    roots: list[str] = []
    if root is not None and root not in adjacency:
        raise ModelError(f"root {root!r} is not a variable")
    starts = most_neighbours_first(adjacency, list(adjacency))
    if root is not None:
        starts = [root, *[v for v in starts if v != root]]
    for start in starts:
        if start in parent:
            continue
        roots.append(start)
        parent[start] = None
        depth[start] = 0
        order.append(start)
        stack = [(start, iter(most_neighbours_first(adjacency, list(adjacency[start]))))]
        while stack:
            v, pending = stack[-1]
            nxt = next((u for u in pending if u not in parent), None)
            if nxt is None:
                stack.pop()
                continue
            parent[nxt] = v
            depth[nxt] = depth[v] + 1
            children[v].append(nxt)
            order.append(nxt)
            stack.append((nxt, iter(most_neighbours_first(adjacency, list(adjacency[nxt])))))
    pseudo_parents: dict[str, list[str]] = {v: [] for v in adjacency}
    pseudo_children: dict[str, list[str]] = {v: [] for v in adjacency}
    for v in order:
        for u in adjacency[v]:
            # a back edge joins v to a proper ancestor u other than its parent
            if u != parent[v] and depth[u] < depth[v] and _is_ancestor(parent, u, v):
                pseudo_parents[v].append(u)
                pseudo_children[u].append(v)
    return PseudoTree(parent, children, pseudo_parents, pseudo_children, roots, order, depth)


def _is_ancestor(parent: Mapping[str, str | None], u: str, v: str) -> bool:
    p = parent[v]
    while p is not None:
        if p == u:
            return True
        p = parent[p]
    return False
