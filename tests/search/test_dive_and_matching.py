"""The search's first feasible assignment (the dive) and the moment-matched heuristic (MBE-MM)
against brute force, BE and plain MBE."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dcop.backends import resolve_backend
from dcop.bucketpass import bucket_pass
from dcop.inference import solve
from dcop.io import read_problem
from dcop.model import CostTable, Problem, Variable
from dcop.momentmatch import matching_shifts
from dcop.orders.choose import choose_order
from dcop.plan.bucket_plan import plan_for
from dcop.search import solve_aobb
from dcop.search.dive import dive, hard_tables
from dcop.search.local import incidence, total_cost
from dcop.search.solver import _heuristic
from tests.conftest import INSTANCES, brute_force, instance_index, random_problem


def test_shifts_sum_to_zero_and_carry_infinities() -> None:
    shifts = matching_shifts([np.array([1.0, 4.0, np.inf]), np.array([3.0, 0.0, 2.0])])
    assert np.allclose(shifts[0][:2] + shifts[1][:2], 0.0)
    assert np.allclose(shifts[0][:2], [1.0, -2.0])  # each min-marginal moved to the mean
    assert math.isinf(shifts[0][2]) and math.isinf(shifts[1][2])


@pytest.mark.parametrize("seed", range(30))
def test_matched_bound_is_below_the_optimum(seed: int) -> None:
    # hard constraints, unary to ternary tables, domains 1-3
    problem = random_problem(seed, n=8, n_tables=12, p_inf=0.15)
    best = brute_force(problem)
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill", 0).order
    for z in (1, 2, 3):
        plain = bucket_pass(problem, order, engine, z).stats.bound
        matched = bucket_pass(problem, order, engine, z, match=True).stats.bound
        assert plain <= best + 1e-9
        assert matched <= best + 1e-9 or (math.isinf(best) and math.isinf(matched))
    exact = bucket_pass(problem, order, engine, None, match=True).stats.bound
    assert exact == pytest.approx(best) or (math.isinf(best) and math.isinf(exact))


def test_matching_tightens_the_bound_on_a_split_bucket() -> None:
    # x's bucket split in two mini-buckets that disagree on x: plain MBE takes each one's
    # minimum at another value of x, the matched pass meets the optimum
    variables = [Variable.with_size(v, 2) for v in ("x", "a", "b")]
    tables = [
        CostTable(("x", "a"), np.array([[0.0, 5.0], [4.0, 4.0]])),
        CostTable(("x", "b"), np.array([[6.0, 6.0], [0.0, 7.0]])),
    ]
    problem = Problem.build(variables, tables)
    engine = resolve_backend("numpy")
    order = ["x", "a", "b"]
    assert bucket_pass(problem, order, engine, 2).stats.bound == pytest.approx(0.0)
    assert bucket_pass(problem, order, engine, 2, match=True).stats.bound == pytest.approx(4.0)
    assert brute_force(problem) == pytest.approx(4.0)


SMALL_BE = [
    row["file"]
    for row in instance_index()
    if row["be_check"] == "agree" and int(row["max_table_entries"]) <= 1 << 16
][:8]


@pytest.mark.parametrize("name", SMALL_BE)
def test_matched_bound_is_below_be_on_shared_instances(name: str) -> None:
    problem = read_problem(INSTANCES / name)
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill", 0).order
    be = solve(problem, "be").upper_bound
    for z in (2, 3):
        assert bucket_pass(problem, order, engine, z, match=True).stats.bound <= be + 1e-6 * max(
            1.0, abs(be)
        )


def _model(problem: object, z: int) -> tuple[object, np.ndarray, np.ndarray, np.ndarray]:
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill", 0).order
    plan = plan_for(problem, order, z, np.float64, engine)
    compiled, _, first = _heuristic(problem, order, engine, plan, 1e9, True)
    inc_off, inc_fun = incidence(compiled.model)
    assert first is not None
    return compiled.model, inc_off, inc_fun, first


@pytest.mark.parametrize("seed", range(30))
def test_the_dive_finds_a_feasible_assignment_iff_there_is_one(seed: int) -> None:
    problem = random_problem(seed, n=8, n_tables=14, p_inf=0.35)
    # the dive assigns the nodes: a table over no variable (an infinite constant) is not its
    scoped = Problem.build(problem.variables.values(), [t for t in problem.tables if t.scope])
    best = brute_force(scoped)
    for z in (1, 2):
        model, inc_off, inc_fun, first = _model(problem, z)
        out = first.copy()
        found = dive(model, inc_off, inc_fun, hard_tables(model), out, 10**6, 10**9)
        assert found == math.isfinite(best)
        if found:
            assert math.isfinite(total_cost(model, out))
        else:
            assert np.array_equal(out, first)  # left as it was


@pytest.mark.parametrize("seed", range(6))
def test_tight_problems_are_proved_with_the_dive(seed: int) -> None:
    # most assignments infeasible: the search starts from the dive's answer and still proves
    problem = random_problem(seed, n=9, n_tables=16, p_inf=0.4)
    best = brute_force(problem)
    for z in (1, 2, None):
        result = solve_aobb(problem, z=z)
        assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
        if math.isinf(best):
            assert result.status == "infeasible"
        else:
            assert result.exact and result.upper_bound == pytest.approx(best)
