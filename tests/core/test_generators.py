"""The paper's generators: edge counts, connectivity, costs, tightness, seeds."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest

from dcop.errors import ModelError
from dcop.generators import generate, grid_network, random_network, scale_free_network


def graph_of(problem) -> nx.Graph:
    g = nx.Graph()
    g.add_nodes_from(problem.variables)
    g.add_edges_from(t.scope for t in problem.tables)
    return g


@pytest.mark.parametrize("n,p1", [(10, 0.3), (15, 0.3), (20, 0.5), (10, 0.2)])
def test_random_network_shape(n: int, p1: float) -> None:
    p = random_network(n, 10, p1, 0.5, seed=3)
    g = graph_of(p)
    assert g.number_of_edges() == math.floor(p1 * n * (n - 1) / 2)
    assert nx.is_connected(g)
    costs = np.concatenate([t.costs.ravel() for t in p.tables])
    finite = costs[np.isfinite(costs)]
    assert finite.min() >= 0 and finite.max() <= 100
    assert np.array_equal(finite, np.round(finite))
    assert 0.4 < np.isinf(costs).mean() < 0.6


def test_scale_free_and_grid() -> None:
    for n in (5, 12, 30):
        g = graph_of(scale_free_network(n, 4, 0.5, seed=n))
        assert g.number_of_edges() == 2 * (n - 2) + 1
        assert nx.is_connected(g)
    g = graph_of(grid_network(25, 3, 0.0, seed=1))
    assert g.number_of_edges() == 2 * 5 * 4
    assert sorted(d for _, d in g.degree)[:4] == [2, 2, 2, 2]
    with pytest.raises(ModelError):
        grid_network(24, 3, 0.5)


def test_seeded_and_dispatch() -> None:
    a = random_network(12, 5, 0.3, 0.5, seed=7)
    b = random_network(12, 5, 0.3, 0.5, seed=7)
    c = random_network(12, 5, 0.3, 0.5, seed=8)
    assert all(np.array_equal(x.costs, y.costs) for x, y in zip(a.tables, b.tables, strict=True))
    assert [t.scope for t in a.tables] != [t.scope for t in c.tables] or any(
        not np.array_equal(x.costs, y.costs) for x, y in zip(a.tables, c.tables, strict=True)
    )
    assert generate("grid", 9, 2).n == 9
    with pytest.raises(ModelError):
        generate("ring", 9, 2)
    with pytest.raises(ModelError):
        random_network(10, 3, 0.1, 0.5)  # 4 edges cannot connect 10 nodes


@pytest.mark.parametrize("m", [1, 3, 5])
def test_scale_free_links(m: int) -> None:
    """``m`` links per new node: sum over new nodes of min(m, existing nodes) edges, connected,
    and a heavier tail of degrees than the paper-text default."""
    n = 20
    g = graph_of(generate("scalefree", n, 3, seed=4, links=m))
    assert g.number_of_edges() == 1 + sum(min(m, k) for k in range(2, n))
    assert nx.is_connected(g)
    assert max(d for _, d in g.degree) >= m
    with pytest.raises(ModelError):
        scale_free_network(10, 3, 0.5, m=0)
