"""Every result document dcop writes validates against dcop/schema/result.schema.json, and the
schema is strict enough to refuse broken ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dcop.coordinator import free_ports, run_local
from dcop.generators import random_network
from dcop.inference import solve
from dcop.io import write_problem
from dcop.protocol import RunSpec
from dcop.schema import RESULT_SCHEMA_FILE, batch_schema, result_schema
from tests.cli.conftest import RESULT_VALIDATOR, assert_valid, run_dcop
from tests.conftest import random_problem


def test_schemas_are_valid_json_schema_and_shipped() -> None:
    jsonschema.Draft202012Validator.check_schema(result_schema())
    jsonschema.Draft202012Validator.check_schema(batch_schema())
    shipped = Path(__file__).resolve().parents[2] / "dcop" / "schema" / RESULT_SCHEMA_FILE
    assert json.loads(shipped.read_text()) == result_schema()
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"dcop.schema" = ["*.json"]' in pyproject  # package data: installed with dcop


@pytest.mark.parametrize(
    "file,args",
    [
        ("warehouse.wcsp", ["--algo", "be"]),
        ("warehouse.wcsp", ["--algo", "mbe", "--z", "2"]),
        ("pdb1akg.uai", ["--algo", "be"]),
        ("pdb1akg.uai", ["--algo", "mbe", "--z", "2"]),
    ],
)
def test_solve_documents_validate(instances_dir: Path, file: str, args: list[str]) -> None:
    run = run_dcop("solve", str(instances_dir / file), *args, "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert_valid(doc)
    met = doc["lower_bound"] == doc["upper_bound"]
    assert doc["status"] == "ok" and doc["exact"] == (args[1] == "be" or met)


@pytest.mark.parametrize(
    "args",
    [
        ["--task", "pr"],
        ["--task", "mar"],
        ["--task", "pr", "--algo", "mbe", "--z", "1"],
        ["--task", "mpe"],
    ],
)
def test_uai_task_documents_validate(instances_dir: Path, args: list[str]) -> None:
    run = run_dcop("solve", str(instances_dir / "test_Z.uai"), *args, "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert_valid(doc)
    assert doc["status"] == "ok" and doc["task"] == args[1]
    assert (doc["bounds"] is None) == ("mbe" not in args) if args[1] == "pr" else True


def test_in_process_documents_validate() -> None:
    """SolveResult.to_json on random problems with +inf entries, maximised and MPE problems."""
    for seed in range(12):
        problem = random_problem(seed, p_inf=0.3)
        for algo, z in (("be", None), ("mbe", 2)):
            doc = solve(problem, algo, z).to_json()
            assert_valid(doc)
            assert doc["status"] in ("ok", "infeasible")


def test_infeasible_document_validates(infeasible_file: Path) -> None:
    for algo in (["--algo", "be"], ["--algo", "mbe", "--z", "1"]):
        run = run_dcop("solve", str(infeasible_file), *algo, "--json", "-", "-q")
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        assert doc["status"] == "infeasible" and doc["assignment"] is None
        assert_valid(doc)


def test_failure_documents_validate(tmp_path: Path, broken_file: Path) -> None:
    big = tmp_path / "big.wcsp"
    write_problem(random_network(12, 6, 0.6, 0.2, seed=1), big)
    out = tmp_path / "too_large.json"
    run = run_dcop("solve", str(big), "--max-memory", "1K", "--json", str(out), "-q")
    assert run.returncode == 5, run.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "too_large" and doc["problem"] is not None
    assert_valid(doc)

    out = tmp_path / "bad.json"
    run = run_dcop("solve", str(broken_file), "--json", str(out))
    assert run.returncode == 2, run.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "error" and "broken.wcsp:3" in doc["message"]
    assert_valid(doc)

    out = tmp_path / "no_z.json"
    run = run_dcop("solve", str(big), "--algo", "mbe", "--json", str(out))
    assert run.returncode != 0
    assert_valid(json.loads(out.read_text()))


def test_run_documents_validate(tmp_path: Path) -> None:
    """A local distributed run (DPOP in process-per-agent mode) and its failure document."""
    problem = random_network(5, 3, 0.5, 0.2, seed=2)
    result = run_local(problem, RunSpec("adpop", 2), timeout=120)
    doc = result.to_json()
    assert_valid(doc)
    assert doc["metrics"]["total_messages"] > 0 and doc["spec"]["algo"] == "adpop"

    path = tmp_path / "p.wcsp"
    write_problem(problem, path)
    run = run_dcop("run", str(path), "--algo", "dpop", "--json", "-")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)  # the summary went to stderr
    assert_valid(doc)
    assert doc["exact"] and doc["cost"] == solve(problem).to_json()["cost"]
    times = doc["times"]  # from the command's start: the launch is in the total, and shown
    assert 0 < times["launch"] < times["total"] and times["solve"] < times["total"]
    assert times["launch"] + times["solve"] <= times["total"]

    run = run_dcop("run", str(path), "--algo", "adpop", "--json", "-")  # no --z: bad input
    assert run.returncode == 2
    assert_valid(json.loads(run.stdout))


def test_run_timeout_counts_the_launch(tmp_path: Path) -> None:
    """``--timeout`` counts from the command's start: one shorter than any launch ends the run in
    the hello phase, with a timeout document (it once started counting after the launch)."""
    path = tmp_path / "p.wcsp"
    write_problem(random_network(5, 3, 0.5, 0.2, seed=2), path)
    run = run_dcop("run", str(path), "--timeout", "0.001", "--json", "-")
    doc = json.loads(run.stdout)
    assert_valid(doc)
    assert run.returncode != 0 and doc["status"] == "timeout"
    # the deadline passes while the file is read, or else in the agents' hello phase
    assert "did not say hello" in doc["message"] or "reading the file took longer" in doc["message"]
    assert doc["times"]["total"] > 0.001  # a failed run's time counts from the start too


def test_coordinator_document_on_stdout(tmp_path: Path, instances_dir: Path) -> None:
    """No agent ever says hello: a timeout document on stdout, exit code 4."""
    problem = instances_dir / "queens4.wcsp"
    peers = tmp_path / "peers.json"
    (port,) = free_ports(1)
    made = run_dcop(
        "peers", str(problem), "--hosts", "127.0.0.1", "--base-port", str(port), "-o", str(peers)
    )
    assert made.returncode == 0, made.stderr
    run = run_dcop(
        "coordinator",
        "--peers",
        str(peers),
        "--problem",
        str(problem),
        "--hello-timeout",
        "1",
        "--timeout",
        "5",
        "--json",
        "-",
    )
    assert run.returncode == 4, run.stderr
    doc = json.loads(run.stdout)
    assert doc["status"] == "timeout" and "hello" in doc["message"]
    assert_valid(doc)


def _good() -> dict[str, Any]:
    return solve(random_problem(1, p_inf=0.0), "mbe", 2).to_json()


def _set(path: str, value: Any) -> Any:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = doc
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def _drop(key: str) -> Any:
    return lambda doc: doc.pop(key)


@pytest.mark.parametrize(
    "break_it",
    [
        _drop("status"),
        _drop("assignment"),
        _set("status", "done"),
        _set("schema", "dcop-result/1"),  # the version before no_solution
        _set("cost", "Infinity"),
        _set("cost", None),  # an answer without its cost
        _set("assignment", None),
        _set("exact", True),  # MBE claims an exact answer only when its bounds meet
        _set("z", 0),
        _set("algo", "dpop2"),
        _set("task", "maximise"),
        _set("gap", -1.0),
        _set("times.total", "fast"),
        _set("solver.backend", "tpu"),
        _set("solver.width", 3),
        _set("size.variables", -1),
        _set("internal.kind", "log"),
        _set("assignment.v0", [1, 2]),
        _set("surprise", 1),
        _set("status", "timeout"),  # a failure: no message, yet a cost and an assignment
        _set("marginals", {"v0": [0.5, 1.5]}),
    ],
)
def test_broken_documents_fail(break_it: Any) -> None:
    doc = _good()
    assert_valid(doc)
    broken = copy.deepcopy(doc)
    break_it(broken)
    assert not RESULT_VALIDATOR.is_valid(broken)


def test_optional_blocks_of_later_tasks_are_allowed() -> None:
    doc = _good()
    doc.update({"ln_partition": -1.5, "log10_partition": "-inf", "marginals": {"v0": [0.25, 0.75]}})
    assert_valid(doc)
