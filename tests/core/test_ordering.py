"""Orders, induced width and DFS pseudo-trees on graphs with known answers."""

from __future__ import annotations

import math
import random

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.errors import ModelError
from dcop.generators import grid_network, random_bayes, random_network, scale_free_network
from dcop.model import Problem
from dcop.orders import order_cost
from dcop.orders.greedy import (
    elimination_order,
    induced_width,
    largest_table,
    level_order,
    min_degree_order,
    min_fill_order,
)
from dcop.trees.induced import induced_scopes, order_pseudo_tree
from dcop.trees.pseudotree import dfs_pseudo_tree


def adjacency_of(graph: nx.Graph) -> dict[str, set[str]]:
    return {str(v): {str(u) for u in graph[v]} for v in graph}


def test_widths_of_known_graphs() -> None:
    tree = adjacency_of(nx.balanced_tree(2, 3))
    clique = adjacency_of(nx.complete_graph(6))
    cycle = adjacency_of(nx.cycle_graph(7))
    grid = adjacency_of(nx.convert_node_labels_to_integers(nx.grid_2d_graph(4, 4)))
    for order_fn in (min_fill_order, min_degree_order):
        assert induced_width(tree, order_fn(tree)) == 1
        assert induced_width(clique, order_fn(clique)) == 5
        assert induced_width(cycle, order_fn(cycle)) == 2
        assert induced_width(grid, order_fn(grid)) == 4
    sizes = {v: 3 for v in clique}
    assert largest_table(clique, min_fill_order(clique), sizes) == 3**6


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 14), st.floats(0.1, 0.9), st.integers(0, 10_000))
def test_pseudo_tree_is_a_dfs_tree(n: int, p: float, seed: int) -> None:
    graph = nx.gnp_random_graph(n, p, seed=seed)
    adj = adjacency_of(graph)
    tree = dfs_pseudo_tree(adj)
    assert sorted(tree.order) == sorted(adj)
    assert len(tree.roots) == nx.number_connected_components(graph)

    def ancestors(v: str) -> set[str]:
        out = set()
        while tree.parent[v] is not None:
            v = tree.parent[v]  # type: ignore[assignment]
            out.add(v)
        return out

    # every edge of the graph links a node to one of its ancestors (no cross edges)
    for a, b in graph.edges:
        a, b = str(a), str(b)
        assert a in ancestors(b) or b in ancestors(a)
    # the pseudo-tree order's induced width is the largest separator
    seps = tree.separators()
    order = tree.elimination_order()
    assert induced_width(adj, order) == max((len(s) for s in seps.values()), default=0)
    scopes = induced_scopes(adj, order)
    for v in adj:
        assert set(scopes[v]) == set(seps[v])


def test_most_neighbours_first_and_errors() -> None:
    adj = {"a": {"b"}, "b": {"a", "c", "d"}, "c": {"b", "d"}, "d": {"b", "c"}}
    tree = dfs_pseudo_tree(adj)
    assert tree.roots == ["b"]
    assert tree.order[1] in ("c", "d")
    with pytest.raises(ModelError):
        elimination_order("random", adj)
    with pytest.raises(ModelError):
        induced_width(adj, ["a", "b"])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 16), st.floats(0.05, 0.8), st.integers(0, 10_000), st.integers(0, 2))
def test_pseudo_tree_of_an_elimination_order(n: int, p: float, seed: int, which: int) -> None:
    graph = nx.gnp_random_graph(n, p, seed=seed)
    adj = adjacency_of(graph)
    if which == 0:
        order = min_fill_order(adj)
    elif which == 1:
        order = min_degree_order(adj)
    else:  # any order works, not only greedy ones
        order = sorted(adj, key=lambda v: (int(v) * 7919 + seed) % 101)
    tree = order_pseudo_tree(adj, order)
    assert not tree.distributed
    assert sorted(tree.order) == sorted(adj)
    assert len(tree.roots) == nx.number_connected_components(graph)

    def ancestors(v: str) -> list[str]:
        out = []
        while tree.parent[v] is not None:
            v = tree.parent[v]  # type: ignore[assignment]
            out.append(v)
        return out

    position = {v: i for i, v in enumerate(order)}
    for v in adj:
        # a parent is eliminated after its child, and the pre-order puts it first
        if tree.parent[v] is not None:
            assert position[tree.parent[v]] > position[v]  # type: ignore[index]
            assert tree.order.index(tree.parent[v]) < tree.order.index(v)  # type: ignore[arg-type]
            assert tree.depth[v] == tree.depth[tree.parent[v]] + 1  # type: ignore[index]
        assert set(tree.pseudo_parents[v]) == (adj[v] & set(ancestors(v))) - {tree.parent[v]}
        for c in tree.children[v]:
            assert tree.parent[c] == v
    # a valid pseudo-tree: every edge joins a variable and one of its ancestors
    for a, b in graph.edges:
        a, b = str(a), str(b)
        assert a in ancestors(b) or b in ancestors(a)
    # its separators are the order's induced scopes, so its width is the order's induced width
    seps = tree.separators()
    scopes = induced_scopes(adj, order)
    for v in adj:
        assert set(seps[v]) == set(scopes[v])
    width = max((len(s) for s in seps.values()), default=0)
    assert width == induced_width(adj, order)
    assert induced_width(adj, tree.elimination_order()) == width


def test_order_pseudo_tree_need_not_be_a_dfs_tree() -> None:
    # 6-cycle eliminated 0, 2, 4, 1, 3, 5: the fill edge 1-3 (from 2) makes 3 the parent of 1
    adj = adjacency_of(nx.cycle_graph(6))
    tree = order_pseudo_tree(adj, ["0", "2", "4", "1", "3", "5"])
    assert any(p is not None and p not in adj[v] for v, p in tree.parent.items())
    assert dfs_pseudo_tree(adj).distributed
    with pytest.raises(ModelError):
        order_pseudo_tree(adj, ["0", "1"])


# ---- the greedy orders against a plain reference --------------------------------------------------
def reference_greedy(adjacency: dict[str, set[str]], score_fill: bool) -> list[str]:
    """Greedy min-fill (min-degree) as defined: at each step every remaining variable's fill-in
    and degree recounted from scratch, the least (fill, degree, rank in ``adjacency``) first."""
    graph = {v: set(ns) for v, ns in adjacency.items()}
    rank = {v: i for i, v in enumerate(adjacency)}

    def fill(v: str) -> int:
        ns = sorted(graph[v])
        return sum(1 for i, a in enumerate(ns) for b in ns[i + 1 :] if b not in graph[a])

    order = []
    while graph:
        v = min(graph, key=lambda u: (fill(u) if score_fill else 0, len(graph[u]), rank[u]))
        ns = graph.pop(v)
        for a in ns:
            graph[a].discard(v)
            graph[a].update(ns - {a})
        order.append(v)
    return order


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 30), st.floats(0.02, 0.9), st.integers(0, 10_000))
def test_greedy_orders_equal_the_reference(n: int, p: float, seed: int) -> None:
    # names in a shuffled order, so ranks are not the names' sort order
    graph = nx.gnp_random_graph(n, p, seed=seed)
    nodes = list(graph)
    random.Random(seed).shuffle(nodes)
    adj = {f"x{v}": {f"x{u}" for u in graph[v]} for v in nodes}
    assert min_fill_order(adj) == reference_greedy(adj, True)
    assert min_degree_order(adj) == reference_greedy(adj, False)


@pytest.mark.parametrize(
    "problem",
    [
        grid_network(64, 3, 0.3, 1),
        scale_free_network(60, 2, 0.3, 1, m=2),
        random_bayes(60, 2, 3, 20, 1),
        random_network(40, 2, 0.2, 0.3, 2),
    ],
    ids=["grid8x8", "scalefree60", "bayes60", "random40"],
)
def test_greedy_orders_equal_the_reference_on_generated_problems(problem: Problem) -> None:
    # many ties (grids) and long fill-in chains (Bayesian networks)
    adj = {v: set(ns) for v, ns in problem.neighbours().items()}
    assert min_fill_order(adj) == reference_greedy(adj, True)
    assert min_degree_order(adj) == reference_greedy(adj, False)


def reference_scopes(adjacency: dict[str, set[str]], order: list[str]) -> dict[str, set[str]]:
    """Induced scopes by filling in the induced graph: each eliminated variable's neighbours
    become a clique."""
    graph = {v: set(ns) for v, ns in adjacency.items()}
    scopes = {}
    for v in order:
        ns = graph.pop(v)
        for a in ns:
            graph[a].discard(v)
            graph[a].update(ns - {a})
        scopes[v] = ns
    return scopes


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.floats(0.02, 0.9), st.integers(0, 10_000))
def test_induced_scopes_equal_the_filled_in_graph(n: int, p: float, seed: int) -> None:
    graph = nx.gnp_random_graph(n, p, seed=seed)
    adj = adjacency_of(graph)
    order = list(adj)
    random.Random(seed).shuffle(order)
    sizes = {v: 2 + int(v) % 3 for v in adj}
    expected = reference_scopes(adj, order)
    scopes = induced_scopes(adj, order)
    assert {v: set(s) for v, s in scopes.items()} == expected
    position = {v: i for i, v in enumerate(order)}
    assert all(list(s) == sorted(s, key=position.__getitem__) for s in scopes.values())
    cost = order_cost(adj, order, sizes)
    entries = [sizes[v] * math.prod(sizes[u] for u in s) for v, s in expected.items()]
    assert cost.width == max(len(s) for s in expected.values())
    assert cost.largest == max(entries)
    assert cost.total == sum(entries)


def test_the_band_order_sweeps_from_a_far_variable() -> None:
    """level_order: a path started in its middle is swept from an end (width 1); an n x n grid
    from a corner, one diagonal a step (width n, its treewidth, where min-fill's grows past it
    on large grids); components stay whole, in the order of their first variables."""
    path = adjacency_of(nx.path_graph(9))
    middle_first = {v: path[v] for v in ["4", "3", "5", "2", "6", "1", "7", "0", "8"]}
    assert level_order(middle_first) == [str(i) for i in range(9)]
    for n in (4, 6, 9):
        grid = adjacency_of(nx.convert_node_labels_to_integers(nx.grid_2d_graph(n, n)))
        assert induced_width(grid, level_order(grid)) == n
    two = adjacency_of(nx.disjoint_union(nx.path_graph(3), nx.cycle_graph(5)))
    order = level_order(two)
    assert sorted(order) == sorted(two) and set(order[:3]) == {"0", "1", "2"}


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.floats(0.05, 0.6), st.integers(0, 10_000))
def test_the_band_order_is_breadth_first_from_each_components_first_variable(
    n: int, p: float, seed: int
) -> None:
    """A permutation of the variables in which each component is one run, its variables by
    their distance from the run's first variable (the root found), never decreasing."""
    graph = nx.gnp_random_graph(n, p, seed=seed)
    adj = adjacency_of(graph)
    order = level_order(adj)
    assert sorted(order) == sorted(adj)
    start = 0
    while start < len(order):
        root = int(order[start])
        dist = nx.single_source_shortest_path_length(graph, root)
        run = order[start : start + len(dist)]
        assert {int(v) for v in run} == set(dist)
        assert [dist[int(v)] for v in run] == sorted(dist.values())
        start += len(dist)
