"""AND/OR branch and bound (dcop.search) against brute force, BE and its own bounds."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.inference import solve
from dcop.io import read_problem
from dcop.model import CostTable, Problem, Variable
from dcop.search import preload, solve_aobb
from tests.conftest import (
    INSTANCES,
    brute_force,
    check_exact_answer,
    instance_index,
    random_problem,
    small_bayes_net_with_evidence,
)


def check_answer(problem: Problem, result: object, best: float) -> None:
    # even an infeasible search's cost is its assignment's
    cost = problem.evaluate(result.assignment)
    assert result.upper_bound == pytest.approx(cost, abs=1e-9)
    check_exact_answer(problem, result, best)


@pytest.mark.parametrize("seed", range(24))
def test_random_problems_equal_brute_force(seed: int) -> None:
    # mixed arities 0-3 (unary and ternary tables), domains 1-3, +inf entries (hard constraints)
    problem = random_problem(seed, n=7, n_tables=9, integer=seed % 3 != 0)
    best = brute_force(problem)
    for z in (1, 2, 3, None):
        check_answer(problem, solve_aobb(problem, z=z), best)


@pytest.mark.parametrize("seed", range(6))
def test_several_components_and_free_variables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    variables = [Variable.with_size(f"x{i}", int(rng.integers(2, 4))) for i in range(9)]
    tables = []
    for a, b in [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (6, 6)]:
        scope = (f"x{a}",) if a == b else (f"x{a}", f"x{b}")
        shape = tuple(variables[int(v[1:])].size for v in scope)
        tables.append(CostTable(scope, rng.integers(0, 9, size=shape).astype(float)))
    problem = Problem.build(variables, tables)  # x7, x8 are in no table
    check_answer(problem, solve_aobb(problem, z=2), brute_force(problem))


def test_the_papers_random_network_equals_be() -> None:
    problem = random_network(14, 4, 0.4, 0.2, seed=3)
    be = solve(problem, "be")
    for z in (2, 3):
        result = solve_aobb(problem, z=z)
        assert result.exact and result.upper_bound == pytest.approx(be.upper_bound)


def test_mpe_with_evidence_equals_brute_force(tmp_path: Path) -> None:
    problem = small_bayes_net_with_evidence(tmp_path)
    result = solve_aobb(problem, z=1)
    check_answer(problem, result, brute_force(problem))
    assert result.to_json()["task"] == "mpe"


SMALL_BE = [
    row["file"]
    for row in instance_index()
    if row["be_check"] == "agree" and int(row["max_table_entries"]) <= 1 << 21
]


@pytest.mark.parametrize("name", SMALL_BE)
def test_shared_instances_equal_their_optimum(name: str) -> None:
    problem = read_problem(INSTANCES / name)
    row = next(r for r in instance_index() if r["file"] == name)
    result = solve_aobb(problem, deadline=time.monotonic() + 120)
    assert result.exact, result.stopped
    doc = result.to_json()
    assert doc["cost"] == pytest.approx(float(row["optimum"]), rel=1e-6, abs=1e-6)


def test_a_problem_be_refuses_is_proved() -> None:
    # CELAR6-SUB0: BE needs a 9.4e12-entry table; its optimum is 159
    path = INSTANCES / "CELAR6-SUB0.wcsp"
    if not path.exists():
        pytest.skip("no shared instances")
    result = solve_aobb(read_problem(path), z=4, ordering="minfill")
    assert result.exact and result.to_json()["cost"] == 159


@pytest.mark.parametrize("seed", range(3))
def test_every_trace_point_brackets_the_optimum(seed: int) -> None:
    problem = random_network(16, 5, 0.4, 0.0, seed=seed)
    best = solve(problem, "be").upper_bound
    result = solve_aobb(problem, z=2)
    assert result.search.trace
    for _, lower, upper in result.search.trace:
        assert lower <= best + 1e-9 <= upper + 2e-9
    seconds = [t for t, _, _ in result.search.trace]
    assert seconds == sorted(seconds)


def test_a_deadline_keeps_a_valid_answer() -> None:
    problem = random_network(22, 10, 0.3, 0.0, seed=1)
    result = solve_aobb(problem, z=3, deadline=time.monotonic() + 0.5)
    doc = result.to_json()
    assert result.status == "timeout" and not result.exact
    assert result.upper_bound == problem.evaluate(result.assignment)
    assert math.isfinite(result.upper_bound) and result.lower_bound <= result.upper_bound
    assert doc["status"] == "timeout" and doc["assignment"]


def test_the_same_seed_gives_the_same_answer() -> None:
    problem = random_network(18, 6, 0.3, 0.0, seed=4)
    a = solve_aobb(problem, seed=7, ordering="minfill", threads=1)
    b = solve_aobb(problem, seed=7, ordering="minfill", threads=1)
    assert a.assignment == b.assignment and a.z == b.z
    assert [s.expanded for s in a.search.steps] == [s.expanded for s in b.search.steps]


def test_the_document_names_the_search() -> None:
    problem = random_network(10, 3, 0.4, 0.0, seed=2)
    doc = solve_aobb(problem, z=2).to_json()
    assert doc["algo"] == "aobb" and doc["z"] == 2 and doc["exact"]
    search = doc["search"]
    assert search["ibound"] == 2 and search["expanded"] >= 1 and search["trace"]
    assert set(search["trace"][0]) == {"seconds", "lower_bound", "upper_bound"}


def test_without_numba_the_same_loops_run_as_python() -> None:
    """A machine without a numba wheel installs and runs: the loops run uncompiled, same answer."""
    import os
    import subprocess
    import sys

    code = (
        "from dcop.generators import random_network; from dcop.search import solve_aobb;"
        "from dcop.search.jit import COMPILED; r = solve_aobb(random_network(9, 3, 0.4, 0.2, 1),"
        " z=2); print(COMPILED, r.status, r.upper_bound)"
    )
    env = {**os.environ, "DCOP_NO_JIT": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    compiled, status, cost = out.stdout.split()
    best = solve(random_network(9, 3, 0.4, 0.2, 1), "be")
    assert compiled == "False" and status == best.status
    assert float(cost) == pytest.approx(best.upper_bound)


@pytest.mark.parametrize("error", [MemoryError, TableTooLarge])
def test_a_later_rung_out_of_memory_keeps_the_search(
    monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    """Issue 48, item 1 ("too_large after a step"): the second rung's pass fails for memory
    (other processes took it meanwhile). The first rung's assignment and bound are not lost: the
    search goes on with its heuristic, proves the optimum, and says what happened. The first
    rung failing is the run's too_large (nothing found yet)."""
    import dcop.search.solver as solver
    from dcop.plan.bucket_plan import plan_for

    # the search's preload (a tiny solve on a thread, once per process) ends first: its passes
    # would be counted and failed below (a process whose first search was this test's failed)
    preload.start()
    preload.join()
    problem = random_network(12, 3, 0.3, 0.3, seed=4)
    best = solve(problem, "be").upper_bound

    def ladder(
        problem: Problem, order: list[str], engine: object, top: object, resident: object,
        **kwargs: object,
    ):  # fmt: skip
        return [plan_for(problem, order, z, np.float64, engine) for z in (2, 3)] + [top]

    real_pass = solver.bucket_pass
    calls: list[int] = []

    def failing(problem: Problem, order: list[str], engine: object, z: int, **kwargs: object):
        calls.append(z)
        if len(calls) == fail_at:
            raise error("out of memory meanwhile")
        return real_pass(problem, order, engine, z, **kwargs)

    monkeypatch.setattr(solver, "ladder", ladder)
    monkeypatch.setattr(solver, "PORTFOLIO_MAX_VARIABLES", 0)  # one pass a rung, counted
    monkeypatch.setattr(
        solver, "rung_budget", lambda following, engine, typical, passes=1, threads=1: 1
    )
    monkeypatch.setattr(solver, "bucket_pass", failing)
    fail_at = 2
    result = solve_aobb(problem)
    assert calls[:2] == [2, 3] and len(calls) == 2  # z = 3 failed: no third pass
    check_answer(problem, result, best)
    assert result.search.ibound == 2 and "the pass of z = 3 failed" in result.search.ibound_reason
    calls.clear()
    fail_at = 1
    with pytest.raises(error):
        solve_aobb(problem)
