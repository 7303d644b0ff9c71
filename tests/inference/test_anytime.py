"""Time-aware solving: ``--algo auto`` (BE or the search) and ``--timeout``
(dcop.inference.anytime)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from dcop.errors import RunTimeout
from dcop.generators import random_network
from dcop.inference import anytime, solve
from dcop.inference.anytime import solve_auto, solve_until
from dcop.io import read_problem, write_problem
from dcop.plan.memory import resident_bytes
from tests.cli.conftest import assert_valid, run_dcop
from tests.conftest import INSTANCES, brute_force, random_problem

CELAR = INSTANCES / "CELAR6-SUB0.wcsp"


@pytest.mark.parametrize("seed", range(6))
def test_auto_proves_the_optimum_whichever_it_runs(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = random_problem(seed, n=7, max_domain=3, n_tables=9, max_arity=3)
    best = brute_force(problem)
    if seed % 2:  # BE is never quick enough: the search runs
        monkeypatch.setattr(anytime, "BE_FIRST_S", -1.0)
    result = solve_auto(problem, timeout=60)
    assert result.algo == ("aobb" if seed % 2 else "be") and result.choice
    assert problem.evaluate(result.assignment) == pytest.approx(result.upper_bound)
    if math.isinf(best):
        assert result.status == "infeasible"
        return
    assert result.exact and result.upper_bound == pytest.approx(best)
    doc = result.to_json()
    assert doc["choice"].startswith("search: " if seed % 2 else "BE: ")
    assert_valid(doc)


def test_without_a_deadline_auto_is_be_when_it_fits() -> None:
    problem = random_problem(3)
    result = solve_auto(problem)
    assert result.algo == "be" and result.steps is None
    assert result.upper_bound == pytest.approx(brute_force(problem))


def test_auto_searches_where_be_does_not_fit() -> None:
    problem = random_network(20, 10, 0.3, 0.0, seed=1)  # BE's plan: ~0.8 GB of tables
    result = solve_auto(problem, max_bytes=resident_bytes() + 1e8, timeout=120)
    assert result.algo == "aobb" and "BE's plan needs" in (result.choice or "")
    assert result.exact and result.upper_bound == pytest.approx(solve(problem, "be").upper_bound)


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
def test_a_search_stopped_by_the_deadline_keeps_its_bounds() -> None:
    problem = read_problem(CELAR)
    result = solve_auto(problem, timeout=1.5)
    doc = result.to_json()
    assert_valid(doc)
    if doc["status"] == "ok":  # a fast machine proves it in time
        assert doc["cost"] == 159 and doc["exact"]
        return
    assert doc["status"] == "timeout" and result.stopped and not doc["exact"]
    assert math.isfinite(doc["lower_bound"]) and math.isfinite(doc["upper_bound"])
    assert doc["lower_bound"] <= 159 <= doc["upper_bound"]  # the known optimum
    assert doc["cost"] == doc["upper_bound"] and doc["assignment"]


@pytest.mark.skipif(not CELAR.exists(), reason="needs ../shared/instances")
def test_cli_auto_with_a_timeout_returns_bounds(tmp_path: Path) -> None:
    out = tmp_path / "celar.json"
    proc = run_dcop("solve", str(CELAR), "--algo", "auto", "--timeout", "4", "--json", str(out))
    assert proc.returncode in (0, 4), proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    # binary tables over domains of 44: auto's large-domain probe (dfbnb)
    assert doc["status"] in ("ok", "timeout") and doc["algo"] == "dfbnb"
    assert math.isfinite(doc["lower_bound"]) and doc["lower_bound"] <= 159 <= doc["upper_bound"]
    assert "dcop: search: bounds" in proc.stderr  # off a terminal: lines as the bounds improve


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
