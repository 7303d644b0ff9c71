"""Anytime solving: ``--algo auto`` and ``--timeout`` (dcop.inference.anytime)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from dcop.errors import RunTimeout
from dcop.generators import random_network
from dcop.inference import solve
from dcop.inference.anytime import Options, Rate, base_plan, solve_auto, solve_until, z_ladder
from dcop.io import read_problem, write_problem
from tests.cli.conftest import assert_valid, run_dcop
from tests.conftest import INSTANCES, brute_force, random_problem

CELAR = INSTANCES / "CELAR6-SUB0.wcsp"


@pytest.mark.parametrize("seed", range(6))
def test_anytime_bounds_bracket_the_optimum(seed: int) -> None:
    problem = random_problem(seed, n=7, max_domain=3, n_tables=9, max_arity=3)
    best = brute_force(problem)
    result = solve_auto(problem, timeout=60)
    assert result.steps, "a deadline makes the run go by steps"
    assert result.lower_bound <= best + 1e-9 and best <= result.upper_bound + 1e-9
    assert problem.evaluate(result.assignment) == pytest.approx(result.upper_bound)
    for step in result.steps:
        if step.status == "ok":
            assert step.lower <= best + 1e-9 <= step.upper + 2e-9
    if result.steps[-1].algo == "be" and result.steps[-1].status == "ok":
        assert result.exact and result.upper_bound == pytest.approx(best)
    assert_valid(result.to_json())


def test_without_a_deadline_auto_is_be_when_it_fits() -> None:
    problem = random_problem(3)
    result = solve_auto(problem)
    assert result.algo == "be" and result.steps is None
    assert result.upper_bound == pytest.approx(brute_force(problem))


def test_the_ladder_rises_in_work_and_ends_with_be() -> None:
    problem = random_network(12, 4, 0.4, 0.3, seed=2)
    plan = base_plan(problem, Options())
    ladder = z_ladder(plan, 2)
    works = [p.total_work for p in ladder]
    assert works == sorted(set(works)) and ladder[-1].z is None
    assert ladder[-1].total_work == plan.total_work


def test_bounds_that_meet_are_exact() -> None:
    problem = random_problem(5, n=5, max_domain=2, n_tables=4, max_arity=2, p_inf=0.0)
    mbe = solve(problem, "mbe", z=10)  # a z beyond the width is BE: its bounds meet
    assert mbe.lower_bound == mbe.upper_bound and mbe.exact
    assert mbe.to_json()["exact"] is True


def test_a_step_past_the_deadline_is_killed() -> None:
    problem = random_network(20, 10, 0.3, 0.5, seed=1)  # BE: ~10^9 joined entries
    with pytest.raises(RunTimeout, match="--timeout"):
        solve_until(problem, "be", None, time.monotonic() + 0.5)


@pytest.mark.skipif(not CELAR.exists(), reason="needs ../shared/instances")
def test_a_killed_step_keeps_the_bounds_of_the_finished_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every step predicted instantly: z = 2..4 finish, z = 5 (~10 s) is killed at 3 s."""
    monkeypatch.setattr(Rate, "predict", lambda self, plan: 0.0)
    problem = read_problem(CELAR)
    result = solve_auto(problem, timeout=3)
    doc = result.to_json()
    assert doc["status"] == "timeout" and result.stopped
    assert math.isfinite(doc["lower_bound"]) and math.isfinite(doc["upper_bound"])
    assert doc["lower_bound"] <= 159 <= doc["upper_bound"]  # the known optimum
    assert [s["status"] for s in doc["anytime"]][-1] == "timeout"
    assert_valid(doc)


@pytest.mark.skipif(not CELAR.exists(), reason="needs ../shared/instances")
def test_cli_auto_with_a_timeout_returns_bounds(tmp_path: Path) -> None:
    out = tmp_path / "celar.json"
    proc = run_dcop("solve", str(CELAR), "--algo", "auto", "--timeout", "4", "--json", str(out))
    assert proc.returncode in (0, 4), proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] in ("ok", "timeout")
    assert math.isfinite(doc["lower_bound"]) and doc["lower_bound"] <= 159 <= doc["upper_bound"]
    assert "MBE z=2: bounds" in proc.stderr  # off a terminal: one line per step


def test_cli_timeout_and_usage(tmp_path: Path) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(20, 10, 0.3, 0.5, seed=1), path)
    proc = run_dcop("solve", str(path), "--timeout", "1.5", "-q")
    assert proc.returncode == 4 and "timeout" in proc.stderr
    proc = run_dcop("solve", str(path), "--algo", "mbe")
    assert proc.returncode == 2 and proc.stderr.strip().startswith(
        "dcop: error: --algo mbe needs a mini-bucket size --z"
    )
    proc = run_dcop("solve", str(path), "--algo", "mbe", "--z", "2", "--timeout", "30", "-q")
    assert proc.returncode in (0, 6), proc.stderr  # finished: ok, or no_solution (hard costs)
    proc = run_dcop("solve", str(path), "--z", "2", "--timeout", "0.8", "-q")
    assert "--z 2 is ignored by --algo be" in proc.stderr
