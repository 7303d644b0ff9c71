"""``--algo planar`` and ``--algo auto``'s first rule, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dcop import generators
from dcop.cli.solve import describe
from dcop.inference import solve
from dcop.inference.anytime import solve_auto
from dcop.io import read_problem, write_problem
from tests.cli.conftest import assert_valid, assert_valid_batch, run_dcop


def test_auto_picks_planar_on_a_spin_glass() -> None:
    problem = generators.spin_glass(12, 2)
    result = solve_auto(problem)
    assert result.algo == "planar" and result.exact
    assert result.choice is not None and result.choice.startswith("planar: a planar Ising model")
    assert result.upper_bound == pytest.approx(solve(problem, "be").upper_bound, abs=1e-9)


def test_auto_does_not_pick_planar_with_a_field() -> None:
    problem = generators.ising_grid(5, 1.0, 0.2, seed=1)
    result = solve_auto(problem)
    assert result.algo != "planar" and result.exact
    assert result.choice is not None and not result.choice.startswith("planar")


def test_auto_goes_on_where_planar_gives_bounds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planar answer that is not a proof (weights of no common unit, beyond the fallback) is
    not auto's: it runs its usual way, which proves it."""
    from dcop.planar import tjoin

    monkeypatch.setattr(tjoin, "FALLBACK_MOST_ODD", 2)
    problem = generators.ising_grid(6, 1.0, 0.0, seed=2)
    result = solve_auto(problem)
    assert result.algo == "be" and result.exact


def test_solve_planar_writes_a_valid_document(tmp_path: Path) -> None:
    path = tmp_path / "sg.uai"
    write_problem(generators.spin_glass(10, 1), path)
    out = tmp_path / "p.json"
    proc = run_dcop("solve", str(path), "--algo", "planar", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["algo"] == "planar" and doc["exact"] and doc["status"] == "ok"
    assert doc["planar"]["tjoin"] in ("pymatching", "networkx") and doc["planar"]["faces"] > 0
    assert doc["cost"] == pytest.approx(solve(read_problem(path), "be").to_json()["cost"])
    assert "PLANAR on sg.uai" in proc.stdout and "planar dual" in proc.stdout


def test_auto_on_the_command_line_names_planar(tmp_path: Path) -> None:
    path = tmp_path / "sg.wcsp"
    write_problem(generators.spin_glass(10, 2), path)
    out = tmp_path / "a.json"
    proc = run_dcop("solve", str(path), "--algo", "auto", "--timeout", "30", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["algo"] == "planar" and doc["choice"].startswith("planar:")


@pytest.mark.parametrize(
    ("problem", "said"),
    [
        (generators.ising_grid(4, 1.0, 0.3, seed=2), "has a field"),
        (generators.random_network(6, 3, 0.5, 0.2, seed=1), "x0 takes 3 values"),
    ],
    ids=["field", "domain"],
)
def test_a_refusal_is_one_line_and_a_non_zero_exit(problem, said: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "p.uai"
    write_problem(problem, path)
    out = tmp_path / "p.json"
    proc = run_dcop("solve", str(path), "--algo", "planar", "--json", str(out))
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "planar: " in lines[0] and said in lines[0], proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] == "error" and doc["algo"] == "planar"


def test_partition_tasks_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "sg.uai"
    write_problem(generators.spin_glass(4, 1), path)
    for task in ("pr", "mar"):
        proc = run_dcop("solve", str(path), "--algo", "planar", "--task", task)
        assert proc.returncode == 2
        assert f"--task {task} takes --algo" in proc.stderr and "not planar" in proc.stderr


def test_info_says_whether_planar_applies() -> None:
    assert describe(generators.spin_glass(6, 0), sum_tasks=False)["planar"] == (
        "applies: a planar Ising model without field"
    )
    said = describe(generators.ising_grid(4, 1.0, 0.3, seed=2), sum_tasks=False)["planar"]
    assert isinstance(said, str) and said.startswith("planar: ") and "has a field" in said


def test_batch_runs_planar_rows(tmp_path: Path) -> None:
    good, bad = tmp_path / "sg.uai", tmp_path / "field.uai"
    write_problem(generators.spin_glass(8, 1), good)
    write_problem(generators.ising_grid(4, 1.0, 0.3, seed=2), bad)
    out = tmp_path / "b.json"
    run_dcop("batch", str(good), str(bad), "--algo", "planar,be", "--json", str(out))
    doc = json.loads(out.read_text())
    assert_valid_batch(doc)
    rows = {(Path(r["file"]).name, r["algo"]): r for r in doc["rows"]}
    assert rows[("sg.uai", "planar")]["exact"]
    assert rows[("sg.uai", "planar")]["cost"] == pytest.approx(rows[("sg.uai", "be")]["cost"])
    assert rows[("field.uai", "planar")]["status"] == "error"
    assert "has a field" in rows[("field.uai", "planar")]["message"]
