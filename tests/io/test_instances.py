"""Every reference instance reads; its known optimal assignment evaluates to the known optimum;
writing it back and reading again gives the same tables."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from dcop.inference import solve
from dcop.io import read_problem, write_problem
from dcop.model import Problem
from tests.conftest import INSTANCES, instance_index
from tests.io.helpers import EXT, assert_same_problem

ROWS = instance_index()
#: Instances small enough to write in the other formats within the test budget.
SMALL = [r for r in ROWS if int(r["n_functions"]) <= 300 and r["file"] != "CELAR6-SUB0.wcsp"]


def _dcop_rows(folder: str) -> list[dict[str, str]]:
    index = INSTANCES / folder / "INDEX.tsv"
    if not index.exists():
        return []
    with index.open() as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


DCOP_ROWS = [("pydcop", r) for r in _dcop_rows("pydcop")] + [
    ("frodo", r) for r in _dcop_rows("frodo")
]


def _solution(problem: Problem, name: str) -> dict[str, int]:
    values = [int(x) for x in (INSTANCES / "solutions" / f"{name}.sol").read_text().split()]
    assert len(values) == problem.n
    return dict(zip(problem.variables, values, strict=True))


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_solution_evaluates_to_known_optimum(row: dict[str, str]) -> None:
    problem = read_problem(INSTANCES / row["file"])
    assert problem.n == int(row["n_vars"])
    assert problem.max_domain() == int(row["max_domain"])
    cost = problem.evaluate(_solution(problem, row["file"]))
    if row["format"] == "wcsp":
        assert problem.cost_kind == "cost"
        assert cost == float(row["optimum"])  # exact
        # functions of arity 0 live in the constant, the rest are tables
        assert len(problem.tables) <= int(row["n_functions"])
    else:
        assert problem.cost_kind == "neg_ln"
        assert len(problem.tables) == int(row["n_functions"])
        assert cost == pytest.approx(float(row["neg_ln_optimum"]), rel=1e-6, abs=1e-9)
        assert problem.log10_probability(cost) == pytest.approx(
            float(row["optimum"]), rel=1e-6, abs=1e-9
        )


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_round_trip_same_format(row: dict[str, str], tmp_path: Path) -> None:
    problem = read_problem(INSTANCES / row["file"])
    suffix = Path(row["file"]).suffix
    out = tmp_path / f"copy{suffix}"
    write_problem(problem, out)
    again = read_problem(out)
    exact = suffix == ".wcsp"
    assert_same_problem(problem, again, exact=exact)
    cost = again.evaluate(_solution(again, row["file"]))
    reference = problem.evaluate(_solution(problem, row["file"]))
    assert cost == (reference if exact else pytest.approx(reference, rel=1e-12))


@pytest.mark.parametrize("row", SMALL, ids=[r["file"] for r in SMALL])
@pytest.mark.parametrize("fmt", ["yaml", "xml", "wcsp"])
def test_cross_format_keeps_the_optimum_assignment_cost(
    row: dict[str, str], fmt: str, tmp_path: Path
) -> None:
    problem = read_problem(INSTANCES / row["file"])
    out = tmp_path / f"copy{EXT[fmt]}"
    # -ln p costs are not integers: a .wcsp keeps 9 decimals of each (and records the scale)
    rounded = fmt == "wcsp" and row["format"] != "wcsp"
    write_problem(problem, out, precision=9 if rounded else None)
    again = read_problem(out)
    reference = problem.evaluate(_solution(problem, row["file"]))
    cost = again.evaluate(_solution(again, row["file"]))
    if row["format"] == "wcsp":
        assert cost == reference
    elif rounded:
        assert cost == pytest.approx(reference, rel=1e-12, abs=0.5e-9 * len(problem.tables))
    else:
        assert cost == pytest.approx(reference, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize(("folder", "row"), DCOP_ROWS, ids=[r["file"] for _, r in DCOP_ROWS])
def test_dcop_instances_reach_their_optimum(
    folder: str, row: dict[str, str], tmp_path: Path
) -> None:
    path = INSTANCES / folder / row["file"]
    problem = read_problem(path)
    assert problem.n == int(row["n_vars"])
    assert problem.max_domain() == int(row["max_domain"])
    # every variable has an owner: explicit in FRODO, one agent per variable in these YAML files
    assert all(v.agent for v in problem.variables.values())
    result = solve(problem, "be")
    expected = float(row["optimum"])
    assert problem.reported(result.upper_bound) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert problem.evaluate(result.assignment) == pytest.approx(result.upper_bound, rel=1e-12)
    # the writer of the same format (and the other DCOP format) keeps the problem and its optimum
    for fmt in ("yaml", "xml"):
        out = tmp_path / f"copy{EXT[fmt]}"
        write_problem(problem, out)
        again = read_problem(out)
        assert_same_problem(problem, again)
        assert [v.agent for v in again.variables.values()] == [
            v.agent for v in problem.variables.values()
        ]
        assert again.evaluate(result.assignment) == problem.evaluate(result.assignment)


def test_index_is_not_empty_when_instances_exist() -> None:
    if not INSTANCES.exists():
        pytest.skip("reference instances missing")
    assert len(ROWS) == 32
    assert len(DCOP_ROWS) == 7
    assert math.isfinite(float(ROWS[0]["optimum"]))
