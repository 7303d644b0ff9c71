"""benchmarks/startup.py: a registered suite that writes its JSON and Markdown (a quick run)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import INSTANCES

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import run as runner  # noqa: E402
import startup  # noqa: E402


def test_startup_is_a_registered_suite() -> None:
    assert runner.suite_function("startup") is startup.suite_startup


@pytest.mark.skipif(not (INSTANCES / "test_Z.uai").exists(), reason="no shared instances")
def test_a_quick_run_writes_every_part(tmp_path: Path) -> None:
    assert startup.main(["--quick", "--repeats", "1", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "startup.json").read_text())
    rows = doc["rows"]
    assert rows["import numpy"]["x_numpy_median"] == 1.0
    for name in ("dcop --version", "dcop solve test_Z.uai -q", "dcop solve test_Z.uai"):
        assert rows[name]["runs"] == 1 and rows[name]["failed"] == 0
    assert doc["machine"]["cores"] >= 1 and "--out" not in doc["command"]
    imports = doc["imports_ms"]
    assert imports["watched_ms"]["numpy"] > 0 and imports["total_ms"] > 0
    assert imports["watched_ms"]["dcop.contraction"] is None  # a min-sum solve loads none of it
    assert imports["watched_ms"]["typer"] is None  # a plain solve line is read without typer
    (pr,) = doc["pr_repeats"]
    assert len(pr["calls_s"]) == 4 and pr["same_tree"] and pr["same_order"]
    assert len(pr["gc_s"]) == len(pr["gc_full"]) == 4  # the collector's pauses, per call
    assert len(pr["faults"]) == len(pr["machine_s"]) == 4 and pr["machine_spread"] >= 1.0
    text = (tmp_path / "startup.md").read_text()
    assert "x numpy" in text and "The same PR" in text


@pytest.mark.skipif(not (INSTANCES / "Grids_11.uai").exists(), reason="no shared instances")
def test_only_steady_writes_its_section_alone(tmp_path: Path) -> None:
    assert startup.main(["--only", "steady", "--quick", "--out", str(tmp_path)]) == 0
    assert not (tmp_path / "startup.json").exists()
    (pr,) = json.loads((tmp_path / "startup_steady.json").read_text())["pr_repeats"]
    assert pr["file"] == "Grids_11.uai" and len(pr["calls_s"]) == 4 and pr["same_value"]
    assert "machine spread" in (tmp_path / "startup_steady.md").read_text()


def test_only_steady_keeps_out_of_the_results_folder() -> None:
    with pytest.raises(SystemExit):
        startup.main(["--only", "steady", "--quick"])
