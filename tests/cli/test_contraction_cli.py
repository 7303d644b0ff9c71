"""The command line over the contraction engine: a bad task/file combination and a refused plan
are one line each (exit 2 / a one-line refusal, no traceback); ``dcop info`` shows the tree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dcop.generators import ising_grid
from dcop.io.uai import write_uai


def dcop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcop", *args], capture_output=True, text=True, timeout=120
    )


def test_bad_task_for_a_file_is_one_line(tmp_path: Path) -> None:
    wcsp = tmp_path / "tiny.wcsp"
    wcsp.write_text("tiny 2 2 1 10\n2 2\n2 0 1 0 1\n0 0 3\n")
    for task in ("pr", "mar"):
        run = dcop("solve", str(wcsp), "--task", task)
        assert run.returncode == 2, run.stderr
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "--task" in lines[0]
        assert "Traceback" not in run.stderr


def test_a_plan_over_the_memory_cap_is_refused_in_one_line(tmp_path: Path) -> None:
    model = tmp_path / "grid.uai"
    write_uai(ising_grid(6, seed=1), model)
    for task in ("pr", "mar"):
        run = dcop("solve", str(model), "--task", task, "--max-memory", "1K")
        assert run.returncode != 0
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "by contraction" in lines[0], run.stderr
        assert "Traceback" not in run.stderr


def test_info_shows_the_contraction_tree(tmp_path: Path) -> None:
    model = tmp_path / "grid.uai"
    write_uai(ising_grid(6, seed=1), model)
    run = dcop("info", str(model), "--json", "-")
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["contraction_largest_intermediate"] >= 2
    assert info["contraction_tree"].startswith(("order:", "opt_einsum:"))
    assert info["memory_bytes_contraction_mar"] >= info["memory_bytes_contraction_pr"] > 0
    run = dcop("solve", str(model), "--task", "pr", "--json", "-", "-q")
    doc = json.loads(run.stdout)
    assert doc["solver"]["space"] == "scaled"
    assert doc["solver"]["tree"]["largest_intermediate"] == doc["solver"]["largest_table"]
