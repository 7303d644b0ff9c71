"""benchmarks/gpu_multi.py on small sizes without a GPU: its BE and big-table parts on a fake CuPy
with two devices (split buckets, the closed-form optimum), its DPOP part's bookkeeping with the
runs stood in for, and the report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gpu import fake_cupy

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import gpu_multi  # noqa: E402


def test_the_big_instance_has_the_asked_size_and_its_closed_form_optimum() -> None:
    from dcop.inference import solve

    problem, optimum = gpu_multi.big_problem(3000, seed=4)
    assert gpu_multi.largest_output_bytes(problem) >= 3000
    assert gpu_multi.largest_output_bytes(problem) < 2 * 3000  # the next size down is too small
    result = solve(problem)
    assert result.lower_bound == optimum == result.upper_bound


def test_be_and_big_parts_on_two_fake_devices(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with fake_cupy.installed(monkeypatch, devices=2):
        gpu_multi.main(
            [
                "--out", str(tmp_path), "--devices", "1,2", "--parts", "be,big",
                "--be-n-min", "8", "--be-n-max", "9", "--be-max-gib", "1e-4",
                "--big-gib", "2e-6", "--big-all", "--split-min-entries", "0",
                "--be-rows", "7:3:2",
            ]
        )  # fmt: skip
    doc = json.loads((tmp_path / "gpu_multi.json").read_text())
    assert doc["meta"]["devices"] == [1, 2] and doc["meta"]["gpu"].startswith("2 x ")
    be = [r for r in doc["rows"] if r["part"] == "be" and "skipped" not in r]
    assert {r["devices"] for r in be} == {1, 2} and all(r["same"] for r in be)
    assert all(r["splits"]["split_buckets"] > 0 for r in be if r["devices"] == 2 and r["d"] == 10)
    assert any(r["d"] == 3 for r in be)  # a --be-rows instance
    big = [r for r in doc["rows"] if r["part"] == "big"]
    assert [r["devices"] for r in big] == [2, 1] and all(r["exact"] for r in big)
    text = (tmp_path / "gpu_multi.md").read_text()
    assert "One table larger than a device" in text and "| NO |" not in text


def test_dpop_part_compares_every_run_with_the_last_one_device_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[tuple[int, str]] = []

    def fake_run(problem: Any, spec: Any, devices: int, placement: str, timeout: float) -> Any:
        calls.append((devices, placement))
        wall = 1.0 if devices == 1 else 0.5
        cost = 7.0 if (devices, placement) != (2, "balanced") else 8.0  # one wrong answer
        split = {"split_buckets": 2, "split_s": 0.25} if placement == "split" else {}
        return {"cost": cost, "bound": cost, "sim_s": wall, "solve_wall_s": wall,
                "handover_tables": {"ipc": 3, "p2p": devices - 1, "host": 0, "net": 0},
                "devices_used": list(range(devices)), **split}  # fmt: skip

    monkeypatch.setattr(gpu_multi, "dpop_run", fake_run)
    args = gpu_multi.parse_args(
        ["--out", str(tmp_path), "--n-min", "8", "--n-max", "8", "--dpop-rows", ""]
    )
    rows: list[dict[str, Any]] = []
    gpu_multi.dpop_part(args, lambda: False, rows, lambda: None)
    assert calls == [
        (1, "round-robin"),
        (2, "round-robin"),
        (2, "balanced"),
        (2, "split"),  # a cold run first: its kernels are new
        (2, "split"),
        (1, "round-robin"),
    ]
    assert [r["same"] for r in rows] == [True, True, False, True, True, True]
    assert [r["note"] for r in rows] == ["cold", "", "", "cold", "", ""]
    meta = {"gpu": "2 x fake", "devices": [1, 2], "date": "today", "command": "c", "cpus": 2,
            "cpu": "cpu", "seconds": 1.0}  # fmt: skip
    text = gpu_multi.markdown(rows, meta)
    assert (
        "| 8 | 10 | 1 | 2 | round-robin |  | 0.5 | 0.5 | 0.5 | 3/1/0 | [0, 1] | - | yes |" in text
    )
    assert "| 8 | 10 | 1 | 2 | balanced |  | 0.5 | 0.5 | 0.5 | 3/1/0 | [0, 1] | - | NO |" in text
    assert "| 2 | split |  | 0.5 | 0.5 | 0.5 | 3/1/0 | [0, 1] | 2 (0.25) | yes |" in text
    with pytest.raises(SystemExit):
        gpu_multi.parse_args(["--devices", "2,4"])  # no one-device baseline

    calls.clear()  # only the placements asked for, around the two one-device runs
    args = gpu_multi.parse_args(
        ["--n-min", "8", "--n-max", "8", "--dpop-rows", "", "--placements", "split"]
    )
    gpu_multi.dpop_part(args, lambda: False, [], lambda: None)
    assert calls == [(1, "round-robin"), (2, "split"), (2, "split"), (1, "round-robin")]
    with pytest.raises(SystemExit):
        gpu_multi.parse_args(["--placements", "split,nearest"])


def test_device_counts_beyond_the_host_are_reported_not_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with fake_cupy.installed(monkeypatch, devices=2):
        gpu_multi.main(
            ["--out", str(tmp_path), "--devices", "1,2,4", "--parts", "be",
             "--be-n-min", "8", "--be-n-max", "8", "--be-rows", ""]
        )  # fmt: skip
    doc = json.loads((tmp_path / "gpu_multi.json").read_text())
    assert {r["devices"] for r in doc["rows"] if r["part"] == "be"} == {1, 2}
    assert "Not run: device counts [4]: 2 visible." in (tmp_path / "gpu_multi.md").read_text()


def test_threshold_part_times_one_bucket_on_one_device_and_split(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with fake_cupy.installed(monkeypatch, devices=2):
        gpu_multi.main(
            ["--out", str(tmp_path), "--devices", "1,2", "--parts", "threshold",
             "--threshold-k", "2,3"]
        )  # fmt: skip
    doc = json.loads((tmp_path / "gpu_multi.json").read_text())
    rows = [r for r in doc["rows"] if r["part"] == "threshold"]
    assert [r["joined"] for r in rows] == [1000, 10000] and all(r["same"] for r in rows)
    assert all(r["one_s"] > 0 and r["split_s"] > 0 for r in rows)
    assert "Where a split pays" in (tmp_path / "gpu_multi.md").read_text()
