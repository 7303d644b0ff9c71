"""``dcop run FILE.uai --task pr|mar`` as a user runs it (one process per agent), and
``--solution`` on solve and run: the UAI competition's PR, MAR and MPE files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dcop.generators import random_bayes
from dcop.io.uai import write_uai
from tests.cli.conftest import assert_valid, run_dcop
from tests.inference.test_sumproduct import brute_force, observe_exactly


@pytest.fixture
def bayes_files(tmp_path: Path) -> tuple[Path, Path]:
    model, evid = tmp_path / "net.uai", tmp_path / "net.uai.evid"
    write_uai(random_bayes(7, d=2, parents=2, seed=6), model)
    evid.write_text("2 1 0 5 1\n")
    return model, evid


def _mar_file(path: Path) -> list[list[float]]:
    """The per-variable probabilities of a UAI MAR file."""
    tokens = path.read_text().split()
    assert tokens[0] == "MAR"
    count, values, out = int(tokens[1]), [float(t) for t in tokens[2:]], []
    for _ in range(count):
        size = int(values.pop(0))
        out.append(values[:size])
        values = values[size:]
    assert not values
    return out


def test_run_mar_with_evidence_equals_brute_force(tmp_path: Path, bayes_files) -> None:
    model, evid = bayes_files
    expected, marginals = brute_force(
        observe_exactly(random_bayes(7, d=2, parents=2, seed=6), {"x1": 0, "x5": 1})
    )
    out = tmp_path / "net.MAR"
    run = run_dcop(
        "run", str(model), "--task", "mar", "--evidence", str(evid), "--solution", str(out),
        "--json", "-", "-q",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert_valid(doc)
    assert doc["task"] == "mar" and doc["status"] == "ok" and doc["exact"]
    assert doc["ln_partition"] == pytest.approx(expected, rel=1e-9)
    assert doc["metrics"]["messages"]["down"] == doc["metrics"]["theory"]["down_messages"]
    assert doc["marginals"]["x1"] == [1.0, 0.0] and doc["marginals"]["x5"] == [0.0, 1.0]
    for name in ("x0", "x2", "x3", "x4", "x6"):
        assert doc["marginals"][name] == pytest.approx(list(marginals[name]), abs=1e-9)
    written = _mar_file(out)
    for i, probs in enumerate(written):
        assert probs == pytest.approx(doc["marginals"][f"x{i}"], abs=1e-12)


def test_run_pr_and_solve_pr_write_the_same_solution(tmp_path: Path, bayes_files) -> None:
    model, evid = bayes_files
    docs = []
    for command in ("run", "solve"):
        out = tmp_path / f"{command}.PR"
        run = run_dcop(
            command, str(model), "--task", "pr", "--evidence", str(evid), "--solution", str(out),
            "--json", "-", "-q",
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        docs.append(json.loads(run.stdout))
        assert_valid(docs[-1])
        lines = out.read_text().split()
        assert lines[0] == "PR"
        assert float(lines[1]) == pytest.approx(docs[-1]["log10_partition"], rel=1e-12)
    assert docs[0]["ln_partition"] == pytest.approx(docs[1]["ln_partition"], rel=1e-9)
    assert docs[0]["metrics"]["messages"].get("down", 0) == 0


def test_a_zero_model_is_infeasible_and_its_pr_file_says_so(tmp_path: Path) -> None:
    model = tmp_path / "zero.uai"
    model.write_text("MARKOV\n3\n2 2 3\n2\n2 0 1\n2 1 2\n4\n0 0 0 0\n6\n0 0 0 0 0 0\n")
    out = tmp_path / "zero.PR"
    run = run_dcop("run", str(model), "--task", "pr", "--solution", str(out), "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert_valid(doc)
    assert doc["status"] == "infeasible" and doc["ln_partition"] == "-inf"
    assert out.read_text().split() == ["PR", "-inf"]
    out = tmp_path / "zero.MAR"
    run = run_dcop("run", str(model), "--task", "mar", "--solution", str(out), "--json", "-", "-q")
    assert json.loads(run.stdout)["marginals"] is None and not out.exists()


def test_solve_and_run_write_toulbar2_and_mpe_solutions(
    tmp_path: Path, instances_dir: Path
) -> None:
    wcsp = instances_dir / "warehouse.wcsp"
    for command in ("solve", "run"):
        out = tmp_path / f"{command}.sol"
        run = run_dcop(command, str(wcsp), "--solution", str(out), "--json", "-", "-q")
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        values = [int(v) for v in out.read_text().split()]
        assert len(values) == len(doc["assignment"]) and doc["cost"] == 328
    model = instances_dir / "test_Z.uai"
    out = tmp_path / "z.MPE"
    run = run_dcop("run", str(model), "--solution", str(out), "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    tokens = out.read_text().split()
    assert tokens[0] == "MPE" and int(tokens[1]) == len(tokens) - 2


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--task", "pr"], ["--task", "uai"]),
        (["--task", "mar", "--algo", "adpop", "--z", "2"], ["--algo dpop"]),
    ],
)
def test_bad_tasks_get_one_line(
    instances_dir: Path, args: list[str], words: list[str], tmp_path: Path
) -> None:
    file = instances_dir / ("queens4.wcsp" if args[1] == "pr" else "test_Z.uai")
    out = tmp_path / "r.json"
    run = run_dcop("run", str(file), *args, "--json", str(out))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), run.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] == "error" and doc["task"] == args[1]
    run = run_dcop("run", str(file), "--task", "bogus")
    assert run.returncode == 2 and "bogus" in run.stderr
