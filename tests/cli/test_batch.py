"""``dcop batch``: one row per file in CSV, JSONL and JSON; failures are rows; auto's choice."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from dcop.cli.batch import COLUMNS, choose_auto
from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.inference import solve
from dcop.io import read_problem, write_problem
from tests.cli.conftest import assert_valid, assert_valid_batch, run_dcop
from tests.conftest import brute_force


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        return list(reader)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_centralized_batch_rows(
    tmp_path: Path, instances_dir: Path, broken_file: Path, infeasible_file: Path
) -> None:
    generated = tmp_path / "gen.wcsp"
    problem = random_network(8, 3, 0.4, 0.3, seed=5)
    write_problem(problem, generated)
    files = [
        instances_dir / "warehouse.wcsp",
        instances_dir / "pdb1akg.uai",
        generated,
        broken_file,
        tmp_path / "missing.wcsp",
        infeasible_file,
    ]
    out_csv, out_jsonl, out_json = tmp_path / "b.csv", tmp_path / "b.jsonl", tmp_path / "b.json"
    run = run_dcop(
        "batch",
        *map(str, files),
        "--algo",
        "be",
        "--csv",
        str(out_csv),
        "--jsonl",
        str(out_jsonl),
        "--json",
        str(out_json),
    )
    assert run.returncode == 0, run.stderr  # the batch ran, whatever its rows say
    rows = read_csv(out_csv)
    docs = read_jsonl(out_jsonl)
    assert [r["file"] for r in rows] == [str(f) for f in files] == [d["file"] for d in docs]
    for row, doc in zip(rows, docs, strict=True):
        assert_valid(doc)
        assert row["status"] == doc["status"] and row["algo"] == "be"
    warehouse, pdb, gen, broken, missing, infeasible = rows
    assert warehouse["status"] == "ok" and float(warehouse["cost"]) == 328
    assert warehouse["exact"] == "true" and warehouse["exit_code"] == "0"
    assert warehouse["induced_width"] == "5" and float(warehouse["wall_s"]) > 0
    assert math.isclose(float(pdb["cost"]), -2.6268150614, abs_tol=1e-6)
    assert float(gen["cost"]) == brute_force(read_problem(generated))
    assert gen["lower_bound"] == gen["upper_bound"] == gen["cost"]
    assert broken["status"] == "error" and broken["exit_code"] == "2"
    assert "broken.wcsp:3" in broken["message"] and broken["cost"] == ""
    assert missing["status"] == "error" and missing["exit_code"] == "2"
    assert infeasible["status"] == "infeasible" and infeasible["exit_code"] == "0"
    assert infeasible["lower_bound"] == "inf" and infeasible["cost"] == ""
    batch = json.loads(out_json.read_text())
    assert_valid_batch(batch)
    assert batch["counts"] == {"ok": 3, "infeasible": 1, "error": 2}
    assert batch["results"] == docs
    assert [r["status"] for r in batch["rows"]] == [r["status"] for r in rows]
    # not a terminal: one plain progress line per file on stderr
    assert sum(line.startswith("[") for line in run.stderr.splitlines()) == len(files)


def _big(tmp_path: Path) -> Path:
    """A feasible instance whose BE plan needs about 0.5 GiB (MBE fits in much less)."""
    path = tmp_path / "big.wcsp"
    write_problem(random_network(14, 10, 0.6, 0.1, seed=0), path)
    return path


def test_timeout_and_too_large_are_rows(tmp_path: Path) -> None:
    out = tmp_path / "b.csv"
    run = run_dcop(
        "batch", str(_big(tmp_path)), "--algo", "be", "--max-memory", "300M", "--csv", str(out),
        "-q",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (too_large,) = read_csv(out)
    assert too_large["status"] == "too_large" and too_large["exit_code"] == "5"
    assert "--algo mbe --z" in too_large["message"]

    slow = tmp_path / "r20.wcsp"  # the paper's n=20, d=10 network: BE needs 10 s or more
    write_problem(random_network(20, 10, 0.3, 0.5, seed=1), slow)
    out = tmp_path / "t.csv"
    run = run_dcop("batch", str(slow), "--algo", "be", "--timeout", "1", "--csv", str(out), "-q")
    assert run.returncode == 0, run.stderr
    (row,) = read_csv(out)
    assert row["status"] == "timeout" and row["exit_code"] == "4" and "--timeout" in row["message"]


def test_auto_picks_be_or_the_largest_mbe_z_that_fits(tmp_path: Path) -> None:
    """auto's choice is the solver's own plan: its z runs, z + 1 is refused."""
    problem = random_network(12, 6, 0.6, 0.2, seed=1)
    limit = 64 * 1024
    algo, z = choose_auto(problem, limit, resident=0)
    assert algo == "mbe" and z is not None
    solve(problem, "mbe", z, max_bytes=limit, resident=0)  # fits
    with pytest.raises(TableTooLarge):
        solve(problem, "mbe", z + 1, max_bytes=limit, resident=0)
    with pytest.raises(TableTooLarge):
        solve(problem, "be", max_bytes=limit, resident=0)
    assert choose_auto(problem, None, resident=0) == ("be", None)

    path = _big(tmp_path)
    out = tmp_path / "auto.jsonl"
    run = run_dcop("batch", str(path), "--max-memory", "300M", "--jsonl", str(out), "-q")
    assert run.returncode == 0, run.stderr
    (doc,) = read_jsonl(out)
    assert_valid(doc)
    # where BE does not fit, auto searches: a proof, or the bounds it had at the row's timeout
    assert doc["algo"] == "aobb" and doc["z"] is not None and doc["status"] in ("ok", "timeout")
    assert doc["lower_bound"] <= doc["upper_bound"]


def test_distributed_batch_rows(tmp_path: Path, broken_file: Path) -> None:
    path = tmp_path / "small.yaml"
    problem = random_network(5, 3, 0.5, 0.3, seed=3)
    write_problem(problem, path)
    out_csv, out_jsonl = tmp_path / "d.csv", tmp_path / "d.jsonl"
    run = run_dcop(
        "batch", str(path), str(broken_file), "--algo", "dpop", "--timeout", "120",
        "--csv", str(out_csv), "--jsonl", str(out_jsonl), "--json", "-",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    batch = json.loads(run.stdout)  # --json -: stdout holds the JSON, the summary is on stderr
    assert_valid_batch(batch)
    assert "dcop batch" in run.stderr
    good, broken = read_csv(out_csv)
    assert good["status"] == "ok" and good["exact"] == "true"
    assert float(good["cost"]) == solve(read_problem(path)).to_json()["cost"]
    assert int(good["messages"]) > 0 and int(good["bytes"]) > 0 and good["solve_s"] != ""
    assert broken["status"] == "error" and broken["exit_code"] == "2"
    docs = read_jsonl(out_jsonl)
    for doc in docs:
        assert_valid(doc)
    assert docs[0]["metrics"]["total_bytes"] == int(good["bytes"])


def test_batch_usage_errors(tmp_path: Path, instances_dir: Path) -> None:
    wcsp = str(instances_dir / "warehouse.wcsp")
    for args in (
        ["--algo", "mbe"],  # no --z
        ["--algo", "adpop", "--z", "0"],
        ["--algo", "magic"],
        ["--timeout", "0"],
        ["--max-memory", "lots"],
    ):
        run = run_dcop("batch", wcsp, *args)
        assert run.returncode == 2, (args, run.stderr)
        assert "Traceback" not in run.stderr
    assert run_dcop("batch").returncode == 2  # no files


@pytest.mark.parametrize("option", ["--csv", "--jsonl"])
def test_a_failed_output_write_loses_no_row(tmp_path: Path, option: str) -> None:
    """Security round 4, finding 7: a full disk (``/dev/full``) under --csv or --jsonl stopped
    the batch at its first row with a traceback; now one warning, every row runs, and that output
    follows whole on stdout."""
    path = tmp_path / "r.wcsp"
    write_problem(random_network(6, 2, 0.5, 0.3, seed=1), str(path))
    done = run_dcop("batch", str(path), str(path), "--algo", "be", option, "/dev/full", "-q")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"dcop: warning: cannot write {option} /dev/full: No space left on device; the batch "
        "goes on, and that output follows whole at its end"
    ]
    lines = done.stdout.strip().splitlines()
    if option == "--csv":
        rows = list(csv.DictReader(lines))
        assert [r["status"] for r in rows] == ["ok", "ok"]
    else:
        assert [json.loads(line)["status"] for line in lines] == ["ok", "ok"]
