"""The dcop command as a user runs it: real subprocesses, JSON results, one-line errors, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def dcop(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_solve_writes_json_with_known_optimum(tmp_path: Path, instances_dir: Path) -> None:
    out = tmp_path / "r.json"
    run = dcop("solve", str(instances_dir / "warehouse.wcsp"), "--json", str(out))
    assert run.returncode == 0, run.stderr
    data = json.loads(out.read_text())
    assert data["cost"] == 328 and data["exact"] is True and data["status"] == "ok"
    assert set(data["assignment"]) and data["solver"]["dtype"] == "float32"
    assert {"ordering", "eliminate", "assign", "total"} <= set(data["times"])


def test_mbe_and_mpe_json_to_stdout(instances_dir: Path) -> None:
    run = dcop(
        "solve", str(instances_dir / "pdb1akg.uai"), "--algo", "mbe", "--z", "2", "--json", "-"
    )
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    internal = data["internal"]
    assert internal["lower_bound"] <= 6.0484652024 + 1e-6 <= internal["upper_bound"] + 2e-6
    # in the file's own sense: log10 of the probability, maximised
    assert data["objective"] == "max" and internal["kind"] == "neg_ln"
    assert data["lower_bound"] - 2e-6 <= -2.6268150614 <= data["upper_bound"] + 1e-6
    assert data["cost"] == data["lower_bound"]


def test_generate_then_solve_and_info(tmp_path: Path) -> None:
    for ext in ("wcsp", "yaml", "xml", "uai"):
        target = tmp_path / f"g.{ext}"
        run = dcop(
            "generate",
            "random",
            "--n",
            "9",
            "--d",
            "3",
            "--p1",
            "0.4",
            "--p2",
            "0.3",
            "--seed",
            "4",
            "-o",
            str(target),
        )
        assert run.returncode == 0, run.stderr
    values = set()
    for ext in ("wcsp", "yaml", "xml"):
        run = dcop("solve", str(tmp_path / f"g.{ext}"), "--json", "-", "-q")
        assert run.returncode == 0, run.stderr
        values.add(json.loads(run.stdout)["cost"])
    assert len(values) == 1
    info = dcop("info", str(tmp_path / "g.wcsp"), "--json", "-")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["variables"] == 9 and data["max_domain"] == 3
    assert data["induced_width_minfill"] <= data["induced_width_pseudotree"]


@pytest.mark.parametrize(
    "name,text",
    [
        ("empty.wcsp", ""),
        ("truncated.wcsp", "p 3 2 1 100\n2 2 2\n2 0 1 0 4\n0 0 5\n"),
        ("letters.wcsp", "p 2 2 1 100\n2 2\n2 0 1 zero 1\n0 0 5\n"),
        ("unknown.wcsp", "p 2 2 1 100\n2 2\n2 0 7 0 1\n0 0 5\n"),
        ("range.wcsp", "p 2 2 1 100\n2 2\n2 0 1 0 1\n0 9 5\n"),
        ("bad.uai", "MARKOV\n2\n2 2\n1\n2 0 1\n4\n0.1 0.2\n"),
        ("bad.yaml", "name: x\nvariables: [\n"),
        ("bad.xml", "<instance><presentation></instance>"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    run = dcop("solve", str(path))
    assert run.returncode == 2, (run.stdout, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert name in lines[0]
    assert "Traceback" not in run.stderr


def test_memory_limit_and_usage_errors(tmp_path: Path) -> None:
    target = tmp_path / "big.wcsp"
    assert (
        dcop(
            "generate", "random", "--n", "14", "--d", "10", "--p1", "0.6", "-o", str(target)
        ).returncode
        == 0
    )
    out = tmp_path / "r.json"
    run = dcop("solve", str(target), "--max-memory", "300M", "--json", str(out))
    assert run.returncode == 5 and "--algo mbe --z" in run.stderr  # too large: exit 5
    refused = json.loads(out.read_text())
    assert refused["status"] == "too_large" and refused["cost"] is None
    assert "--algo mbe --z" in refused["message"]
    assert dcop("solve", str(target), "--max-memory", "lots").returncode == 2
    assert dcop("solve", str(target), "--algo", "magic").returncode == 2
    assert dcop("solve", str(tmp_path / "missing.wcsp")).returncode == 2
    assert dcop("solve", str(target), "--backend", "tpu").returncode == 2


def test_unknown_extension(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("hello")
    run = dcop("info", str(path))
    assert run.returncode == 2 and "x.txt" in run.stderr
