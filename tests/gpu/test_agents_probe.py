"""Smoke test of benchmarks/probes/gpu_agents_probe.py on the fake CuPy: every part that runs in-process
completes without an error entry, so that the one run on the device machine is not wasted."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.gpu import fake_cupy

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "gpu_agents_probe.py"


@pytest.fixture
def probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_agents_probe", PROBE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def errors(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict):
        found = [f"{path}: {node['error']}"] if "error" in node else []
        for key, value in node.items():
            found += errors(value, f"{path}/{key}")
        return found
    if isinstance(node, list):
        return [e for i, value in enumerate(node) for e in errors(value, f"{path}[{i}]")]
    return []


def test_in_process_parts(probe: ModuleType, fake_cupy_module: ModuleType, tmp_path: Path) -> None:
    probe.MIN_TOTAL_S = 0.0  # three calls per timing are enough here
    code = probe.main(
        [
            "--out", str(tmp_path),
            "--parts", "crossover,transfers,agents",
            "--max-joined", "3e4",
            "--transfer-bytes", "4e5",
            "--agents-n", "7",
            "--budget", "120",
        ]
    )  # fmt: skip
    assert code == 0
    result = json.loads((tmp_path / probe.RESULT_NAME).read_text())
    assert errors(result) == []
    rows = result["crossover"]["rows"]
    assert [r["joined"] for r in rows] == [100, 300, 1000, 3000, 10000, 30000]
    for row in rows:
        assert {"cpu_all", "cpu_one", "gpu_agent", "gpu_resident", "gpu_download"} <= set(row)
    assert "recommended_gpu_min_entries" in result["crossover"]
    assert result["transfers"]["0.4MB"]["pinned_h2d"]["GB_per_s"] > 0
    problem = result["agents"]["problems"][0]
    assert problem["same_cost"] and {"cpu", "gpu", "placed"} <= set(problem)


@pytest.mark.parametrize("kind", ["setup", "first_bucket", "compile"])
def test_child_parts(probe: ModuleType, fake_cupy_module: ModuleType, kind: str) -> None:
    out = probe.child(kind, argparse.Namespace(dtype="float32"))
    assert errors(out) == []
    if kind == "compile":
        assert [b["generated"] for b in out["buckets"]] == [True] * 5
        # each kernel compiled once: the second prepare_bucket of a bucket finds it ready
        generated = [
            n for n in fake_cupy.COMPILED if n.startswith("dcop_join_elim_") and "generic" not in n
        ]
        assert generated == [b["kernel"] for b in out["buckets"]]
    if kind == "setup":
        assert out["solve_compiles"] == 0


def test_recommend(probe: ModuleType) -> None:
    def row(joined: int, cpu: float, gpu: float) -> dict:
        return {"joined": joined, "cpu_all": {"median_s": cpu}, "gpu_agent": {"median_s": gpu}}

    rows = [row(100, 1, 5), row(1000, 2, 3), row(10000, 9, 4), row(100000, 90, 5)]
    assert probe.recommend(rows, "cpu_all") == 10000
    assert probe.recommend([row(100, 1, 5)], "cpu_all") is None
    assert (
        probe.recommend([row(100, 5, 1), {"joined": 1000, "cpu_all": {"skipped": ""}}], "cpu_all")
        == 100
    )
