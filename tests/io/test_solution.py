"""Solution files: toulbar2's -w line and the UAI competition MPE / PR / MAR results."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from dcop.errors import InputError, ModelError
from dcop.inference import solve
from dcop.io import read_problem
from dcop.io.solution import file_indices, read_solution, write_mar, write_pr, write_solution
from dcop.model import Problem, Variable
from tests.conftest import INSTANCES, instance_index
from tests.io.helpers import DATA, SAMPLES, write

SOLVED = [
    r
    for r in instance_index()
    if (INSTANCES / "solutions" / f"{r['file']}.sol").exists() and int(r["n_functions"]) <= 300
]


@pytest.mark.parametrize("row", SOLVED, ids=[r["file"] for r in SOLVED])
def test_reference_solutions_read_evaluate_and_write_back(
    row: dict[str, str], tmp_path: Path
) -> None:
    """The shared .sol files are toulbar2 -w lines: they re-evaluate to the known optimum, and
    writing the assignment gives the same line back."""
    problem = read_problem(INSTANCES / row["file"])
    sol = INSTANCES / "solutions" / f"{row['file']}.sol"
    assignment = read_solution(sol, problem)
    cost = problem.evaluate(assignment)
    if row["format"] == "wcsp":
        assert cost == float(row["optimum"])
    else:
        assert cost == pytest.approx(float(row["neg_ln_optimum"]), abs=1e-6)
    out = tmp_path / "copy.sol"
    write_solution(out, problem, assignment, kind="wcsp")
    assert out.read_text().split() == sol.read_text().split()
    assert out.read_text().count("\n") == 1


def test_our_optimum_written_as_a_wcsp_solution_reads_back(tmp_path: Path) -> None:
    path = INSTANCES / "example.wcsp"
    if not path.exists():
        pytest.skip("reference instances missing")
    problem = read_problem(path)
    result = solve(problem)
    out = tmp_path / "example.sol"
    write_solution(out, problem, result.assignment)  # a .wcsp problem: toulbar2's line
    assert not out.read_text().startswith("MPE")
    assert read_solution(out, problem) == result.assignment
    assert problem.evaluate(read_solution(out, problem)) == 27


def test_mpe_result_names_the_file_indices_of_observed_variables(tmp_path: Path) -> None:
    problem = read_problem(SAMPLES["uai"], evidence=DATA / "features.evid")
    assert problem.meta["evidence"] == {"x1": 2, "x3": 0}
    assert problem.meta["evidence_sizes"] == {"x1": 3, "x3": 2}
    # the observed variables' labels are their value indices in the file
    assert problem.variables["x1"].values == (2,)
    result = solve(problem)
    assert result.assignment["x1"] == 0  # the only value of the one-value domain
    assert problem.labels(result.assignment)["x1"] == 2
    out = tmp_path / "features.uai.MPE"
    write_solution(out, problem, result.assignment)
    lines = out.read_text().splitlines()
    assert lines[0] == "MPE"
    assert lines[1].split() == ["4", *map(str, file_indices(problem, result.assignment))]
    assert lines[1].split()[2] == "2"
    assert read_solution(out, problem) == result.assignment
    # the same solution, read against the model without evidence, costs what BE said
    full = read_problem(SAMPLES["uai"])
    assert full.evaluate(read_solution(out, full)) == pytest.approx(result.upper_bound)


def test_pr_result(tmp_path: Path) -> None:
    out = tmp_path / "m.uai.PR"
    write_pr(out, -0.2008)
    assert out.read_text() == "PR\n-0.2008\n"
    write_pr(out, -math.inf)
    assert out.read_text() == "PR\n-inf\n"
    with pytest.raises(ModelError):
        write_pr(out, math.nan)


def test_mar_result(tmp_path: Path) -> None:
    problem = Problem.build([Variable.with_size("a", 2), Variable.with_size("b", 3)], [])
    out = tmp_path / "m.uai.MAR"
    write_mar(out, problem, {"a": [0.1, 0.9], "b": [0.2, 0.2, 0.6]})
    assert out.read_text() == "MAR\n2 2 0.1 0.9 3 0.2 0.2 0.6\n"
    with pytest.raises(ModelError, match="3 values but 2"):
        write_mar(out, problem, {"a": [0.1, 0.9], "b": [0.5, 0.5]})
    with pytest.raises(ModelError, match="miss variable 'b'"):
        write_mar(out, problem, {"a": [0.1, 0.9]})
    # an observed variable spans its domain in the file, all mass on the observed value
    observed = read_problem(SAMPLES["uai"], evidence=DATA / "features.evid")
    marginals = {name: [1.0 / var.size] * var.size for name, var in observed.variables.items()}
    write_mar(out, observed, marginals)
    words = out.read_text().split()
    assert words[:2] == ["MAR", "4"]
    # x0: uniform; x1 observed at 2 of 3 values; x2: uniform; x3 observed at 0 of 2 values
    x0, x1, x2, x3 = (
        ["2", "0.5", "0.5"],
        ["3", "0.0", "0.0", "1.0"],
        ["2", "0.5", "0.5"],
        ["2", "1.0", "0.0"],
    )
    assert words[2:] == [*x0, *x1, *x2, *x3]


@pytest.mark.parametrize(
    ("content", "evidence", "words"),
    [
        ("", False, "empty solution"),
        ("0 1\n", False, "2 values for a problem of 4"),
        ("0 1 x 0\n", False, "'x'"),
        ("0 5 1 0\n", False, "0..2"),
        ("MPE\n3 0 1 1\n", False, "for 3 variables"),
        ("MPE\n", False, "no solution"),
        ("0 2 1 1\n", True, "x3.* observed with value 0, the solution gives 1"),
    ],
)
def test_bad_solution_files(content: str, evidence: bool, words: str, tmp_path: Path) -> None:
    problem = read_problem(SAMPLES["uai"], evidence=DATA / "features.evid" if evidence else None)
    path = write(tmp_path, "bad.sol", content)
    with pytest.raises(InputError, match=words) as info:
        read_solution(path, problem)
    assert str(info.value).startswith(f"{path}:")
    assert "\n" not in str(info.value)


def test_last_of_several_mpe_solutions_counts(tmp_path: Path) -> None:
    problem = read_problem(SAMPLES["uai"])
    path = write(tmp_path, "m.MPE", "MPE\n4 0 0 0 0\n-BEGIN-\n4 1 2 1 0\n")
    assert read_solution(path, problem) == {"x0": 1, "x1": 2, "x2": 1, "x3": 0}
    with pytest.raises(ModelError, match="misses variable"):
        write_solution(tmp_path / "x.sol", problem, {"x0": 1})
    with pytest.raises(ModelError, match="unknown solution kind"):
        write_solution(tmp_path / "x.sol", problem, {"x0": 1}, kind="json")
