"""``dcop info --write-order`` and ``--ordering FILE``: what one writes the other reads back;
``--order-time`` and bad order files end with exit 2 and one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DCOP = [sys.executable, "-m", "dcop"]


def dcop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DCOP, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("g") / "grid.wcsp"
    run = dcop(
        "generate", "grid", "--n", "49", "--d", "2", "--p2", "0.3", "--seed", "1", "-o", str(path)
    )
    assert run.returncode == 0, run.stderr
    return path


@pytest.mark.parametrize("name", ["o.order", "o.td"])
def test_solve_reads_back_the_written_order(grid: Path, tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    info = dcop(
        "info", str(grid), "--order-time", "0.05", "--write-order", str(target), "--json", "-"
    )
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert {m["method"] for m in data["orders"]} >= {"minfill", "mindegree"}
    for m in data["orders"]:
        assert m["width"] >= 0 and m["seconds"] >= 0
    solved = dcop("solve", str(grid), "--ordering", str(target), "--json", "-", "-q")
    assert solved.returncode == 0, solved.stderr
    doc = json.loads(solved.stdout)
    assert doc["solver"]["ordering"] == f"file:{name}"
    assert doc["solver"]["induced_width"] == data["induced_width_auto"]
    auto = json.loads(dcop("solve", str(grid), "--json", "-", "-q").stdout)
    assert auto["cost"] == doc["cost"]
    assert auto["solver"]["ordering"].startswith("auto:")


def test_bad_orderings_exit_2(grid: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.order"
    bad.write_text("x0\nnot_a_variable\n")
    run = dcop("solve", str(grid), "--ordering", str(bad))
    assert run.returncode == 2
    assert f"{bad}:2: 'not_a_variable' is not a variable" in run.stderr
    assert "Traceback" not in run.stderr
    run = dcop("solve", str(grid), "--ordering", "nowhere")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    run = dcop("info", str(grid), "--order-time", "-1")
    assert run.returncode == 2 and "--order-time" in run.stderr
