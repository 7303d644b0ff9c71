"""Subtrees the mini-bucket pass eliminated exactly: taken at their heuristic, never walked."""

from __future__ import annotations

import numpy as np
import pytest

from dcop.backends import resolve_backend
from dcop.bucketpass import Buckets, bucket_pass
from dcop.generators import random_network
from dcop.model import Problem
from dcop.orders.choose import choose_order
from dcop.search import kernel, solve_aobb
from dcop.search.compile import Compiled, compile_search, new_state
from tests.conftest import brute_force


def compiled(problem: Problem, z: int | None) -> tuple[Buckets, Compiled]:
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill").order
    buckets = bucket_pass(problem, order, engine, z, dtype=np.float64, match=True)
    return buckets, compile_search(problem, order, buckets, engine, 1e8, z=z)


@pytest.mark.parametrize("seed", range(4))
def test_a_node_is_exact_when_its_whole_subtree_is_one_mini_bucket_each(seed: int) -> None:
    problem = random_network(12, 3, 0.4, 0.2, seed=seed)
    buckets, c = compiled(problem, 3)
    m = c.model
    for v, var in enumerate(c.names):
        joined = {u for t in buckets.tables[var] for u in t.scope}
        children = m.ch_list[m.ch_off[v] : m.ch_off[v + 1]]
        assert m.exact[v] == int(len(joined) <= 3 and all(m.exact[k] for k in children))
    assert compiled(problem, None)[1].model.exact.all()  # an exact pass: every node
    engine = resolve_backend("numpy")
    unknown = compile_search(problem, buckets.order, buckets, engine, 1e8)
    assert not unknown.model.exact.any()  # z not given: none


@pytest.mark.parametrize("seed", range(4))
def test_a_walk_that_skips_exact_subtrees_returns_the_full_walks_value(seed: int) -> None:
    problem = random_network(14, 3, 0.25, 0.2, seed=seed)
    _, c = compiled(problem, 3)  # some nodes exact, some not
    assert 0 < c.model.exact.sum() < len(c.names)
    full = c.model._replace(exact=np.zeros(0, dtype=np.int8))
    rng = np.random.default_rng(seed)
    inner = [v for v in range(len(c.names)) if c.model.ch_off[v] < c.model.ch_off[v + 1]]
    for v in inner:
        asg = rng.integers(0, c.model.dom).astype(np.int32)  # the ancestors' values
        values = []
        for model in (c.model, full):
            s = new_state(model, c.width, c.cache_entries)
            s.asg[:] = asg
            kernel.start(s, v, np.inf)
            assert kernel.search(model, s, v, 10**9, c.width, 1e-9, 1e-10)
            values.append(float(s.fre[0]))
        assert values[0] == pytest.approx(values[1], abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_exact_subtrees_keep_the_optimum_and_its_assignment(seed: int) -> None:
    problem = random_network(10, 3, 0.3, 0.2, seed=seed)
    best = brute_force(problem)
    for z in (2, 3, 20):
        result = solve_aobb(problem, z=z)
        assert result.exact
        assert result.upper_bound == pytest.approx(best, abs=1e-9)
        assert problem.evaluate(result.assignment) == pytest.approx(best, abs=1e-9)
    exact_pass = solve_aobb(problem, z=20)  # every bucket whole: only the roots are expanded
    assert exact_pass.search is not None
    assert exact_pass.search.expanded <= len(problem.variables) // 2
