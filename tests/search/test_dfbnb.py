"""Branch and bound under soft arc consistency (dcop.search.dfbnb) against brute force, BE, and
its own bounds."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.inference import solve
from dcop.io import read_problem
from dcop.model import CostTable, Problem, Variable
from dcop.search import dfbnb, propagate, reduce
from dcop.search.dfbnb import solve_dfbnb
from tests.conftest import (
    INSTANCES,
    brute_force,
    check_exact_answer,
    instance_index,
    random_problem,
    small_bayes_net_with_evidence,
)


def check_answer(problem: Problem, result: object, best: float) -> None:
    assert result.algo == "dfbnb"
    check_exact_answer(problem, result, best)


@pytest.mark.parametrize("seed", range(30))
def test_random_problems_equal_brute_force(seed: int) -> None:
    # mixed arities 0-3 (unary and ternary tables), domains 1-3, +inf entries (hard constraints)
    problem = random_problem(seed, n=7, n_tables=9, integer=seed % 3 != 0)
    check_answer(problem, solve_dfbnb(problem), brute_force(problem))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("sweeps", [0, 1])
def test_with_and_without_the_nodes_diffusion(
    seed: int, sweeps: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # AC* alone (no sweeps), and one sweep at a radius of one table
    monkeypatch.setattr(dfbnb, "NODE_SWEEPS", sweeps)
    monkeypatch.setattr(dfbnb, "RADIUS", 1)
    problem = random_problem(100 + seed, n=8, max_domain=4, n_tables=12, p_inf=0.2)
    check_answer(problem, solve_dfbnb(problem), brute_force(problem))


@pytest.mark.parametrize("seed", range(8))
def test_best_first_dives_of_one_backtrack(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # every dive stops at its first backtrack: its open nodes are replayed from the root
    monkeypatch.setattr(dfbnb, "BACKTRACKS", 1)
    problem = random_problem(300 + seed, n=9, max_domain=4, n_tables=13, p_inf=0.15)
    heard: list[tuple[float, float, float]] = []
    result = solve_dfbnb(problem, on_bounds=lambda *p: heard.append(p))
    best = brute_force(problem)
    check_answer(problem, result, best)
    for _, lower, upper in result.search.trace + heard:
        assert lower <= best + 1e-9 <= upper + 2e-9 or math.isinf(best)


@pytest.mark.parametrize("seed", range(4))
def test_a_reduction_given_maps_back_to_the_original(seed: int) -> None:
    problem = random_problem(200 + seed, n=9, max_domain=3, n_tables=10, p_inf=0.3)
    best = brute_force(problem)
    try:
        reduction = reduce.reduce(problem)
    except reduce.Infeasible:
        assert math.isinf(best)
        return
    if reduction is None:
        pytest.skip("nothing to reduce")
    result = solve_dfbnb(problem, reduction=reduction)
    check_answer(problem, result, best)


def test_a_small_trail_grows(monkeypatch: pytest.MonkeyPatch) -> None:
    # the walk stops on a full trail with the pending branch undone; the driver doubles it
    monkeypatch.setattr(dfbnb, "TRAIL_PER_ENTRY", 0)
    monkeypatch.setattr(dfbnb, "TRAIL_MIN_ROWS", 1)
    problem = random_network(12, 3, 0.5, 0.2, seed=4)
    check_answer(problem, solve_dfbnb(problem), solve(problem, "be").upper_bound)


def test_mpe_with_evidence_equals_brute_force(tmp_path: Path) -> None:
    problem = small_bayes_net_with_evidence(tmp_path)
    result = solve_dfbnb(problem)
    check_answer(problem, result, brute_force(problem))
    assert result.to_json()["task"] == "mpe"


def test_infeasible_is_proved() -> None:
    a, b = Variable.with_size("a", 2), Variable.with_size("b", 2)
    hard = np.array([[0.0, np.inf], [np.inf, 0.0]])
    problem = Problem.build(
        [a, b],
        [CostTable(("a", "b"), hard), CostTable(("a",), np.array([np.inf, 0.0])),
         CostTable(("b",), np.array([0.0, np.inf]))],
    )  # fmt: skip
    check_answer(problem, solve_dfbnb(problem), math.inf)


#: The shared files BE proves on which the search proves at once (a DFS without caching: the
#: grids, DBN_11, CSP_12 and GEOM40_3 are for AOBB and toulbar2's BTD)
QUICK = {
    "water.uai", "pdb1etl.uai", "pdb1akg.uai", "test_Z2.uai", "Promedus_24.uai", "pdb2fdn.uai",
    "test_Z.uai", "network.uai", "Promedus_13.uai", "Promedus_15.uai", "Segmentation_11.uai",
    "Pedigree_12.uai", "base2.wcsp", "oconnell.wcsp", "oconnell_bayesnet.wcsp", "queens4.wcsp",
    "queens4-bis.wcsp", "GEOM40_6.wcsp", "warehouse.wcsp", "zebre-ext.wcsp", "zebra.wcsp",
    "example.wcsp",
}  # fmt: skip
SHARED = [r for r in instance_index() if r["be_check"] == "agree" and r["file"] in QUICK]


@pytest.mark.parametrize("row", SHARED, ids=[r["file"] for r in SHARED])
def test_equals_be_on_the_shared_files(row: dict[str, str]) -> None:
    problem = read_problem(INSTANCES / row["file"])
    be = solve(problem, "be")
    result = solve_dfbnb(problem)
    assert result.exact
    assert result.upper_bound == pytest.approx(be.upper_bound, rel=1e-9, abs=1e-9)
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment), abs=1e-9)


def test_every_trace_point_brackets_the_optimum() -> None:
    problem = random_network(24, 4, 0.25, 0.2, seed=5)
    best = solve(problem, "be").upper_bound
    heard: list[tuple[float, float, float]] = []
    result = solve_dfbnb(
        problem, deadline=time.monotonic() + 3, on_bounds=lambda *p: heard.append(p)
    )
    points = result.search.trace + heard
    assert points
    for _, lower, upper in points:
        assert lower <= best + 1e-9 and best <= upper + 1e-9
    assert result.lower_bound <= best + 1e-9 <= result.upper_bound + 2e-9


@pytest.mark.parametrize("name", ["GEOM40_3.uai", "grid10x10.f10.uai"])
def test_the_trace_of_an_unfinished_search_brackets_the_optimum(name: str) -> None:
    # a search that runs to its deadline: every bound it reports on the way, and its last
    rows = [r for r in instance_index() if r["file"] == name]
    if not rows:
        pytest.skip("reference instances not found")
    problem = read_problem(INSTANCES / name)
    best = float(rows[0]["neg_ln_optimum"])
    heard: list[tuple[float, float, float]] = []
    result = solve_dfbnb(
        problem, deadline=time.monotonic() + 1.0, on_bounds=lambda *p: heard.append(p)
    )
    for _, lower, upper in result.search.trace + heard:
        assert lower <= best + 1e-6 and best <= upper + 1e-6
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment), abs=1e-9)


def test_a_timeout_keeps_a_valid_assignment_and_its_cost() -> None:
    problem = random_network(60, 5, 0.3, 0.2, seed=7)
    result = solve_dfbnb(problem, deadline=time.monotonic() + 0.05)
    assert set(result.assignment) == set(problem.variables)
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment), abs=1e-9)
    assert result.lower_bound <= result.upper_bound
    if result.status == "timeout":
        assert not result.exact and result.stopped is not None


def test_the_same_seed_gives_the_same_result() -> None:
    problem = random_problem(11, n=10, max_domain=3, n_tables=14, p_inf=0.2)
    first = solve_dfbnb(problem, seed=3)
    again = solve_dfbnb(problem, seed=3)
    assert first.assignment == again.assignment
    assert (first.lower_bound, first.upper_bound) == (again.lower_bound, again.upper_bound)
    assert first.search.expanded == again.search.expanded


def test_integer_costs_round_down_and_stay_below_top() -> None:
    dom = np.array([2, 3], dtype=np.int64)
    costs = np.array([[0.3, np.inf, 1.7], [2.2, 0.9, 5.0]])
    _, live, base, scale = propagate.build(
        dom, [(0, 1)], [costs], np.array([0.5, 0.0, 1.0, 2.0, 3.0]), np.array([0, 2, 5]), 16
    )
    finite = np.isfinite(costs.ravel())
    assert base == pytest.approx(0.3 + 0.0 + 1.0)  # each table's least cost, unary ones too
    assert np.all(live.tab[finite] <= (costs.ravel()[finite] - 0.3) * scale)
    assert np.all(live.tab[~finite] == propagate.TOP)
    assert live.tab[finite].sum() + live.un.sum() < propagate.TOP // 1024


def test_tables_over_the_memory_limit_are_refused() -> None:
    problem = random_network(10, 4, 0.5, 0.2, seed=1)
    with pytest.raises(TableTooLarge, match="integer tables"):
        solve_dfbnb(problem, max_bytes=1024)


def test_runs_without_numba(tmp_path: Path) -> None:
    # DCOP_NO_JIT: the very same functions as plain Python (slower), the same optimum
    code = (
        "from dcop.search.dfbnb import solve_dfbnb\n"
        "from dcop.search.jit import COMPILED\n"
        "from tests.conftest import random_problem, brute_force\n"
        "p = random_problem(3, n=6, n_tables=8, p_inf=0.0)\n"
        "r = solve_dfbnb(p)\n"
        "assert not COMPILED\n"
        "assert abs(r.upper_bound - brute_force(p)) < 1e-9 and r.exact, r\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DCOP_NO_JIT": "1", "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
