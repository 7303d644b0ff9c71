"""BE reproduces the known optimum of every reference instance that fits in memory."""

from __future__ import annotations

import math

import pytest

from dcop.inference import solve
from dcop.io import read_problem
from tests.conftest import INSTANCES, instance_index

#: Largest BE table (entries, along min-fill) we solve in the test suite; CELAR6-SUB0 (9.4e12) is out.
MAX_ENTRIES = 3e7

ROWS = [r for r in instance_index() if float(r["max_table_entries"]) <= MAX_ENTRIES]


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_be_reaches_known_optimum(row: dict[str, str]) -> None:
    problem = read_problem(INSTANCES / row["file"])
    result = solve(problem, "be", ordering="minfill")
    if row["format"] == "wcsp":
        expected = float(row["optimum"])
        assert result.lower_bound == expected  # exact integer equality
        assert result.upper_bound == expected
        assert problem.reported(result.upper_bound) == expected
    else:
        expected = float(row["neg_ln_optimum"])
        assert result.lower_bound == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert result.upper_bound == pytest.approx(expected, rel=1e-6, abs=1e-9)
        doc = result.to_json()
        assert doc["status"] == "ok" and doc["exact"]
        assert doc["cost"] == pytest.approx(float(row["optimum"]), rel=1e-6, abs=1e-9)
    assert math.isfinite(result.upper_bound)


@pytest.mark.parametrize("row", ROWS[:12], ids=[r["file"] for r in ROWS[:12]])
def test_mbe_brackets_known_optimum(row: dict[str, str]) -> None:
    problem = read_problem(INSTANCES / row["file"])
    expected = float(row["optimum"] if row["format"] == "wcsp" else row["neg_ln_optimum"])
    for z in (2, 3):
        result = solve(problem, "mbe", z=z)
        assert result.lower_bound <= expected + 1e-6 * max(1.0, abs(expected))
        assert result.upper_bound >= expected - 1e-6 * max(1.0, abs(expected))
