"""BE equals brute force; MBE brackets the optimum; on many random small problems."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.errors import ModelError, TableTooLarge
from dcop.generators import random_network
from dcop.inference import partition_minibuckets, solve
from dcop.model import CostTable, Problem
from tests.conftest import brute_force, brute_force_by_evaluate, joint_costs, random_problem


def _with_sparse_table_and_top(seed: int) -> Problem:
    """A random problem plus a sparse table on scope order unlike the variables', and a top."""
    base = random_problem(seed, n=5, max_domain=3, n_tables=6)
    names = list(base.variables)
    scope = (names[3], names[0])
    shape = tuple(base.variables[v].size for v in scope)
    sparse = CostTable.sparse(scope, shape, 2.0, [[0, 0], [shape[0] - 1, 0]], [7.0, 0.5])
    finite = [c for t in base.tables for c in t.finite_costs()]
    top = float(np.median(finite)) * 3 + 1 if finite else 10.0
    return Problem.build(
        list(base.variables.values()), [*base.tables, sparse], constant=1.0, upper_bound=top
    )


@pytest.mark.parametrize("seed", range(8))
def test_joint_costs_are_what_evaluate_gives_assignment_by_assignment(seed: int) -> None:
    """The tests' brute force broadcasts the tables at once; it must be Problem.evaluate's
    cost at every assignment (the same sums in the same order: equal to the last bit)."""
    for problem in (random_problem(seed, n=5), _with_sparse_table_and_top(seed)):
        joint = joint_costs(problem)
        names = list(problem.variables)
        assert joint.shape == tuple(problem.variables[v].size for v in names)
        for values in itertools.product(*(range(n) for n in joint.shape)):
            assert joint[values] == problem.evaluate(dict(zip(names, values, strict=True)))
        assert brute_force(problem) == brute_force_by_evaluate(problem)


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 10**6),
    st.sampled_from(["minfill", "mindegree", "pseudotree"]),
    st.booleans(),
)
def test_be_equals_brute_force(seed: int, ordering: str, integer: bool) -> None:
    problem = random_problem(seed, integer=integer)
    best = brute_force(problem)
    result = solve(problem, "be", ordering=ordering)
    if math.isinf(best):
        assert math.isinf(result.lower_bound)
        return
    assert result.lower_bound == pytest.approx(best, rel=1e-9)
    assert result.upper_bound == pytest.approx(best, rel=1e-9)
    assert problem.evaluate(result.assignment) == result.upper_bound


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4))
def test_mbe_brackets_optimum(seed: int, z: int) -> None:
    problem = random_problem(seed, n=7, n_tables=9, p_inf=0.05)
    best = brute_force(problem)
    result = solve(problem, "mbe", z=z)
    assert result.lower_bound <= best + 1e-9
    assert best <= result.upper_bound
    assert result.upper_bound == problem.evaluate(result.assignment)


def test_mbe_with_large_z_is_exact() -> None:
    problem = random_network(9, 4, 0.4, 0.2, seed=2)
    exact = solve(problem, "be")
    wide = solve(problem, "mbe", z=problem.n)
    assert wide.lower_bound == exact.lower_bound == brute_force(problem)


def test_minibucket_partition_respects_z() -> None:
    import numpy as np

    from dcop.tables import Table

    tables = [
        Table(s, np.zeros((2,) * len(s))) for s in [("x", "a"), ("x", "b"), ("x", "c", "d"), ("x",)]
    ]
    groups = partition_minibuckets(tables, 3)
    assert sum(len(g) for g in groups) == 4
    for g in groups:
        scope = set().union(*(t.scope for t in g))
        assert len(scope) <= 3 or len(g) == 1
    assert len(partition_minibuckets(tables, None)) == 1


def test_memory_limit_names_bucket_and_suggests_mbe() -> None:
    problem = random_network(12, 10, 0.6, 0.5, seed=1)
    with pytest.raises(TableTooLarge, match=r"bucket of .* --algo mbe --z"):
        solve(problem, "be", max_bytes=100_000, resident=0)
    with pytest.raises(ModelError):
        solve(problem, "mbe")
    with pytest.raises(ModelError):
        solve(problem, "dfbb")


def test_float32_and_float64_agree() -> None:
    problem = random_network(11, 6, 0.4, 0.4, seed=5)
    a = solve(problem, dtype="float32")
    b = solve(problem, dtype="float64")
    assert a.dtype == "float32" and b.dtype == "float64"
    assert a.lower_bound == b.lower_bound
