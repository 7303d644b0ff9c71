"""The scale bench (benchmarks/scale.py) on a tiny series: real `dcop run`s of a few agents, their
memory sampled, and the JSON and Markdown written; which rows end well."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import scale  # noqa: E402


def test_a_tiny_series_runs_and_writes_its_report(tmp_path: Path) -> None:
    report = scale.main(
        ["--only", "tree:6,grid:4", "--d", "3", "--p2", "0.2", "--out", str(tmp_path)]
    )
    rows = report["rows"]
    assert [(r["family"], r["n"]) for r in rows] == [("tree", 6), ("grid", 4)]
    for r in rows:
        assert r["ends_well"], r
        assert r["run"]["wall_s"] > 0 and r["solve"]["status"] in scale.GOOD
        assert r["run"]["times_launch"] < r["run"]["times_total"]
        assert r["run"]["agents_sampled"] <= r["n"] and r["run"]["pss_agents_mb"] >= 0
        # the floor at the same n, beside it: its launch is part of its wall
        floor = r["floor"]
        assert 0 < floor["hello_s"] < floor["wall_s"] and floor["summed_pss_mb"] > 0
        assert 0 < r["run"]["agents_launch_s"] < r["run"]["times_launch"]
        assert r["launch_over_floor"] == r["run"]["agents_launch_s"] / floor["hello_s"]
        assert r["wall_over_floor"] == r["run"]["wall_s"] / floor["wall_s"]
    doc = json.loads((tmp_path / "scale.json").read_text())
    assert len(doc["rows"]) == 2
    text = (tmp_path / "scale.md").read_text()
    assert "| tree | 6 | ok" in text or "| tree | 6 | infeasible" in text
    assert "Every row ended ok" in text
    assert "FRODO was not run" in text  # no --frodo: said, not left as empty columns


def test_rows_end_well_only_with_an_answer_or_a_refusal_naming_z() -> None:
    def row(status: str, message: str = "") -> dict:  # type: ignore[type-arg]
        return {"run": {"status": status, "message": message}}

    assert scale.row_ends_well(row("ok")) and scale.row_ends_well(row("infeasible"))
    named = "DPOP's largest UTIL ... (--algo adpop --z 11, or --algo auto); refused"
    assert scale.row_ends_well(row("too_large", named))
    assert not scale.row_ends_well(row("too_large", "no ADPOP z fits either"))
    assert not scale.row_ends_well(row("error")) and not scale.row_ends_well(row("timeout"))


def test_only_names_families() -> None:
    assert scale.parse_only("tree:1000,grid:64") == [("tree", 1000), ("grid", 64)]
    with pytest.raises(SystemExit, match="FAMILY:N"):
        scale.parse_only("ring:10")


def test_frodo_runs_beside_each_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --frodo, each row's instance goes to FRODO as XCSP, counting off and on (FRODO itself
    is not installed here: its runner is replaced, the wiring is what is checked)."""
    import compare.external

    seen: list[Path] = []

    def fake_frodo(ctx: object, xml: Path) -> dict:  # type: ignore[type-arg]
        seen.append(xml)
        assert xml.suffix == ".xml" and xml.exists()
        return {
            "status": "ok",
            "wall_s": 1.5,
            "max_rss_mb": 300.0,
            "cost": 7.0,
            "stats_run": {"status": "ok", "wall_s": 2.0},
        }

    monkeypatch.setattr(compare.external, "run_frodo_twice", fake_frodo)
    out = tmp_path / "out"
    report = scale.main(
        ["--only", "tree:5", "--d", "3", "--p2", "0.2", "--frodo", str(tmp_path), "--out", str(out),
         "--no-floor"]
    )  # fmt: skip
    assert len(seen) == 1 and report["rows"][0]["frodo"]["wall_s"] == 1.5
    text = (out / "scale.md").read_text()
    over = report["rows"][0]["run"]["wall_s"] / 1.5  # dcop run's wall over FRODO's, counting off
    assert f"| 1.50 / 2.00 | {over:.2f} | 300 |" in text
    assert (
        report["frodo_version"] == "FRODO" and "FRODO's stock DPOP agent" in text
    )  # no build info
    assert "floor" not in report["rows"][0]


def test_the_pss_peak_prefers_a_sample_with_every_agent_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sample begun with only part of the agents up never stands for the run, however large:
    the peak is the largest begun with all of them alive, and says how many it read; those gone
    before their read count at the mean of the others.

    The PSS each pid reads is fixed here: real processes' PSS moves with every other process
    that maps the same libraries (a test beside it starting agents halved a sleeping
    interpreter's share of libpython between two reads, and this test failed 2 runs in 4 under
    ``-n 2``). :func:`test_pss_is_read_from_the_kernel_and_is_zero_once_gone` reads real ones."""
    worker, alive, gone = 101, 102, 103
    pss = {worker: 90_000, alive: 7_000}  # kB; the gone pid reads 0, as pss_kb says
    monkeypatch.setattr(scale, "pss_kb", lambda pid: pss.get(pid, 0))
    sampler = scale.PssSampler(worker, 0.1, expect=2)
    # one of the two agents up (a large one)
    sampler.sample([worker], [])
    assert (sampler.peak_agents, sampler.peak_complete) == (1, False)
    assert sampler.peak_agents_kb == 90_000
    # both up, and smaller than the partial sample: still the peak
    sampler.sample([alive, alive], [worker])
    assert (sampler.peak_agents, sampler.peak_complete) == (2, True)
    assert sampler.peak_agents_kb == 14_000
    assert sampler.peak_all_kb == 104_000 and sampler.complete_samples == 1
    # a later partial sample does not replace it, however large
    pss[worker] = 200_000
    sampler.sample([worker], [])
    assert sampler.peak_complete and sampler.peak_agents_kb == 14_000 and sampler.samples == 3
    # a later complete one that is larger does
    sampler.sample([alive, worker], [])
    assert (sampler.peak_agents_kb, sampler.peak_agents) == (207_000, 2)
    # both listed, one gone before its read: the sum is of the one read; the run's figure
    # is then the breakdown's agents (read first, all alive) times n
    partial = scale.PssSampler(worker, 0.1, expect=2)
    partial.sample([alive, gone], [])
    assert (partial.peak_agents, partial.peak_complete) == (1, True)
    assert partial.peak_agents_kb == 7_000
    assert scale.agents_pss(partial)["pss_source"] == "partial"  # no breakdown was read
    by_kind = {k: {"private_dirty_kb": 0, "pss_kb": 0} for k in scale.KINDS}
    by_kind[scale.KINDS[0]] = {"private_dirty_kb": 3_000, "pss_kb": 4_000}
    by_kind[scale.KINDS[2]] = {"private_dirty_kb": 0, "pss_kb": 3_000}
    monkeypatch.setattr(scale, "smaps_by_kind", lambda pid: by_kind if pid in pss else None)
    partial.read_breakdown([alive, gone])  # one of them unreadable: nothing kept
    assert partial.breakdown_agents == 0
    partial.read_breakdown([alive, alive])
    got = scale.agents_pss(partial)
    assert got["pss_source"] == "breakdown" and got["agents_sampled"] == 2
    assert got["pss_agents_mb"] == 2 * 7_000 / 1024
    # every agent read: the sum itself
    assert scale.agents_pss(sampler) == {
        "pss_agents_mb": 207_000 / 1024,
        "agents_sampled": 2,
        "pss_all_alive": True,
        "pss_source": "sum",
    }


def test_pss_is_read_from_the_kernel_and_is_zero_once_gone() -> None:
    import os
    import subprocess

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert scale.pss_kb(os.getpid()) > 0 and scale.pss_kb(alive.pid) > 0
        assert scale.pss_kb(gone.pid) == 0
        kinds = scale.smaps_by_kind(os.getpid())
        assert kinds is not None and set(kinds) == set(scale.KINDS)
        assert sum(k["pss_kb"] for k in kinds.values()) > 0
        assert scale.smaps_by_kind(gone.pid) is None
    finally:
        alive.kill()
        alive.wait()


def test_descendants_come_from_the_childrens_lists_as_from_every_parent() -> None:
    import os
    import subprocess

    code = (
        "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(60)']); print(c.pid, flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        by_parent = scale._descendants_by_parent(os.getpid())
        assert {child.pid, grandchild} <= set(by_parent)
        assert set(scale.descendants(os.getpid())) == set(by_parent)
    finally:
        child.kill()
        child.wait()
        os.kill(grandchild, 9)


def test_an_agents_mappings_are_counted_by_kind() -> None:
    import os
    import re

    assert scale.mapping_kind("[heap]", 100) == "malloc heap (brk)"
    assert scale.mapping_kind("", scale.THREAD_STACK_KB) == "thread stacks"
    assert scale.mapping_kind("", 1024).startswith("anonymous")
    assert scale.mapping_kind("/x/libpython3.11.so.1.0", 1232) == "libpython"
    assert scale.mapping_kind("/x/_zmq.cpython-311-x86_64-linux-gnu.so", 8) == "other libraries"
    kinds = scale.smaps_by_kind(os.getpid())
    assert kinds is not None and set(kinds) == set(scale.KINDS)
    # every mapping counted once: the kinds add up to the kernel's own sum
    rollup = Path(f"/proc/{os.getpid()}/smaps_rollup").read_text()
    total = int(re.search(r"^Private_Dirty:\s+(\d+)", rollup, re.M).group(1))  # type: ignore[union-attr]
    counted = sum(k["private_dirty_kb"] for k in kinds.values())
    assert abs(counted - total) <= 0.05 * total  # (this process runs on between the two reads)
    assert kinds["anonymous (Python objects, buffers)"]["private_dirty_kb"] > 0
    import subprocess

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert scale.smaps_by_kind(gone.pid) is None


def test_the_breakdown_is_kept_only_when_every_agent_read_answers() -> None:
    import os
    import subprocess

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    sampler = scale.PssSampler(os.getpid(), 0.25, expect=2)
    sampler.read_breakdown([os.getpid(), gone.pid])
    assert sampler.breakdown == {} and sampler.breakdown_agents == 0
    sampler.read_breakdown([os.getpid(), os.getpid()])
    assert sampler.breakdown_agents == 2 and set(sampler.breakdown) == set(scale.KINDS)
    text = scale.breakdown_table(
        [{"family": "tree", "n": 2, "run": {"agent_breakdown_kb": sampler.breakdown}}]
    )
    assert any(line.startswith("| tree | 2 | ") for line in text)
