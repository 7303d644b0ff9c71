"""The search's exact reduction (dcop.search.reduce): hard-zero pruning, fixing and the
elimination of variables of small degree keep the optimum, and every assignment of the reduced
problem expands to a full one of the original at the same cost."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dcop.generators import random_network
from dcop.model import CostTable, Problem, Variable
from dcop.search import reduce, reparam, solve_aobb
from dcop.search.reduce import Infeasible
from tests.conftest import brute_force, joint_costs, random_problem


def _same(a: float, b: float) -> bool:
    return (math.isinf(a) and math.isinf(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _assignments(problem: Problem) -> list[dict[str, int]]:
    names = list(problem.variables)
    sizes = [problem.variables[v].size for v in names]
    return [
        dict(zip(names, values, strict=True)) for values in itertools.product(*map(range, sizes))
    ]


@pytest.mark.parametrize("degree", [0, 1, 2, 3, 6])
@pytest.mark.parametrize("seed", range(40))
def test_reduction_keeps_every_cost(seed: int, degree: int) -> None:
    """Hard zeros (p_inf up to 0.4), one-value domains (evidence), unary to ternary tables: the
    reduced problem's optimum is the original's, and each of its assignments costs what its
    expansion costs on the original."""
    problem = random_problem(seed, n=7, n_tables=9, p_inf=0.1 * (seed % 5))
    optimum = brute_force(problem)
    try:
        reduction = reduce.reduce(problem, max_degree=degree)
    except Infeasible:
        assert math.isinf(optimum)
        return
    if reduction is None:
        return
    reduced = reduction.problem
    if reduced.n:
        assert _same(brute_force(reduced), optimum)
    for assignment in _assignments(reduced):
        full = reduction.expand(assignment)
        assert set(full) == set(problem.variables)
        assert _same(problem.evaluate(full), reduced.evaluate(assignment))
    # an optimal assignment of the original maps onto the reduced problem at its cost
    costs = joint_costs(problem)
    if math.isfinite(optimum):
        names = list(problem.variables)
        best = dict(
            zip(names, map(int, np.unravel_index(np.argmin(costs), costs.shape)), strict=True)
        )
        restricted = reduction.restrict(best)
        assert restricted is not None
        assert reduced.evaluate(restricted) <= optimum + 1e-9


def test_pruning_to_a_fixpoint_fixes_a_chain() -> None:
    """x0 = 1 by a unary hard zero, x_i = x_{i-1} by hard binary tables: arc consistency fixes
    the whole chain, and only the constant is left."""
    n = 6
    variables = [Variable.with_size(f"x{i}", 2) for i in range(n)]
    equal = np.array([[0.0, math.inf], [math.inf, 0.0]])
    tables = [CostTable(("x0",), np.array([math.inf, 1.5]))]
    tables += [CostTable((f"x{i - 1}", f"x{i}"), equal + i) for i in range(1, n)]
    problem = Problem.build(variables, tables)
    reduction = reduce.reduce(problem, max_degree=0)
    assert reduction is not None
    assert reduction.problem.n == 0
    assert reduction.fixed == {f"x{i}": 1 for i in range(n)}
    assert _same(reduction.problem.constant, brute_force(problem))


def test_an_emptied_domain_is_infeasible() -> None:
    variables = [Variable.with_size("a", 2), Variable.with_size("b", 2)]
    tables = [
        CostTable(("a",), np.array([math.inf, 0.0])),
        CostTable(("a", "b"), np.array([[0.0, 0.0], [math.inf, math.inf]])),
    ]
    with pytest.raises(Infeasible):
        reduce.reduce(Problem.build(variables, tables))


@pytest.mark.parametrize("seed", range(4))
def test_the_search_on_the_reduction_proves_the_optimum(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """solve_aobb reduces first (the size thresholds lowered): the proof equals brute force and
    the assignment covers every original variable at that cost."""
    monkeypatch.setattr(reduce, "MIN_VARIABLES", 1)
    monkeypatch.setattr(reduce, "MIN_SHARE", 0.0)
    monkeypatch.setattr(reduce, "MAX_DEGREE", 1)  # the leaves go, the core stays
    core = random_network(9, 3, 0.7, 0.0, seed=seed)
    rng = np.random.default_rng(seed)
    leaves = [Variable.with_size(f"leaf{k}", 3) for k in range(4)] + [Variable("seen", (1,))]
    extra = []
    for k, leaf in enumerate(leaves):
        costs = rng.integers(0, 9, size=(3, leaf.size)).astype(float)
        costs[rng.random(costs.shape) < 0.3] = math.inf
        costs[:, -1] = 4.0  # a finite cost for every value of the core's variable
        extra.append(CostTable((f"x{k}", leaf.name), costs))
    problem = Problem.build([*core.variables.values(), *leaves], [*core.tables, *extra])
    reduction = reduce.for_search(problem)
    assert reduction is not None and 0 < reduction.problem.n < problem.n
    result = solve_aobb(problem, z=2, ordering="minfill")
    optimum = brute_force(problem)
    assert result.exact
    assert _same(result.upper_bound, optimum)
    assert set(result.assignment) == set(problem.variables)
    assert _same(problem.evaluate(result.assignment), optimum)
    assert "reduced from" in result.search.ibound_reason


@pytest.mark.parametrize("seed", range(30))
def test_diffusion_keeps_every_cost_and_bounds_the_optimum(seed: int) -> None:
    """The shifted problem gives every assignment the original's cost, and its bound is at most
    the optimum (hard zeros included: a variable with an infinite min-marginal is skipped)."""
    problem = random_problem(seed, n=6, n_tables=9, p_inf=0.1 * (seed % 4), integer=False)
    shifted, bound = reparam.diffuse(problem, sweeps=50)
    for assignment in _assignments(problem):
        a, b = problem.evaluate(assignment), shifted.evaluate(assignment)
        assert (math.isinf(a) and math.isinf(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    optimum = brute_force(problem)
    assert bound <= optimum + 1e-9
