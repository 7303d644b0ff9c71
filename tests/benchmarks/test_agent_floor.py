"""benchmarks/agent_floor.py: the floor's agents really run DPOP's message pattern to the end,
and the estimate at the floor swaps only the agent phase."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import agent_floor  # noqa: E402


def test_a_floor_run_ends_with_every_agent_accounted_for() -> None:
    # a fresh interpreter, as the benchmark runs it: it forks its agents; a broken message
    # pattern would hang (the timeout fails the test)
    one = [sys.executable, str(BENCH / "agent_floor.py"), "--one", "6"]
    out = subprocess.run(one, capture_output=True, text=True, timeout=60, check=True).stdout
    floor = json.loads(out)
    assert 0 < floor["hello_s"] < floor["wall_s"]  # every hello in before the run went on
    assert floor["parent_cpu_ms"] > 0
    assert floor["agent_cpu_ms"] > 0
    assert floor["agent_faults"] > 0
    # every agent's memory read while all six were alive: each holds private pages of its own
    assert 0 < floor["agent_private_mb"] <= floor["agent_pss_mb"]
    assert abs(floor["summed_pss_mb"] - 6 * floor["agent_pss_mb"]) < 1e-6
    assert floor["one_agent_private_kb"] and all(
        kb > 0 for kb in floor["one_agent_private_kb"].values()
    )


def test_each_floor_agent_has_four_neighbours_in_a_ring() -> None:
    assert agent_floor._ring(0, 10) == [1, 2, 8, 9]
    assert agent_floor._ring(5, 10) == [3, 4, 6, 7]
    for agent in range(10):
        assert all(agent in agent_floor._ring(peer, 10) for peer in agent_floor._ring(agent, 10))


def test_the_estimate_at_the_floor_replaces_only_the_agent_phase() -> None:
    dcop = {"run_wall_s": 0.45, "agent_phase_s": 0.29, "solve_wall_s": 0.15}
    assert abs(agent_floor.ratio_at_floor(dcop, {"wall_s": 0.12}) - 0.28 / 0.15) < 1e-9
    assert abs(agent_floor.ratio_at_floor(dcop, {"wall_s": 0.29}) - 3.0) < 1e-9


def test_the_report_has_one_row_per_n() -> None:
    dcop = {
        "run_wall_s": 0.45,
        "solve_wall_s": 0.15,
        "agent_phase_s": 0.29,
        "agent_cpu_ms": 13.5,
        "agent_faults": 1540.0,
        "template_cpu_ms": 160.0,
    }
    floor = {"wall_s": 0.12, "agent_cpu_ms": 5.5, "agent_faults": 700.0, "agent_pss_mb": 2.5,
             "agent_private_mb": 2.25, "summed_pss_mb": 25.0}  # fmt: skip
    rows = [
        {"n": n, "instance": f"random_n{n}_d3_s0.yaml", "dcop": dcop, "floor": floor}
        for n in (10, 30)
    ]
    meta = {
        "machine": {
            "cpu": "x",
            "cores": 2,
            "ram_gib": 1,
            "os": "Linux",
            "python": "3.11",
            "numpy": "2",
            "commit": "abc",
        },
        "command": "c",
        "repeat": 3,
        "date": "d",
    }
    text = agent_floor.markdown({"meta": meta, "rows": rows})
    table = [
        line for line in text.splitlines() if line.startswith("| 10 ") or line.startswith("| 30 ")
    ]
    assert len(table) == 4  # the comparison, then the floor's memory
    assert "| 3.00x |" in table[0] and "| 1.87x |" in table[0]
    assert "13.5 / 5.5" in table[1] and "1540 / 700" in table[1]
    assert table[2] == "| 10 | 0.12 | 5.5 | 700 | 2.50 | 2.25 | 25 |"
    # the floor alone (no dcop run at that n): its memory table only
    mapped = {**floor, "one_agent_private_kb": {"[heap]": 672, "anon 1024 kB": 664}}
    alone = agent_floor.markdown({"meta": meta, "rows": [{"n": 1000, "floor": mapped}]})
    assert "| [heap] | 672 |" in alone and "One agent of the n = 1000 run" in alone
    assert "dcop solve (s)" not in alone and "| 1000 | 0.12 | 5.5 | 700 | 2.50 |" in alone


def test_medians_keep_the_breakdown_of_the_median_run() -> None:
    runs = [
        {"wall_s": w, "summed_pss_mb": pss, "one_agent_private_kb": {"[heap]": heap}}
        for w, pss, heap in ((3.0, 30.0, 3), (1.0, 10.0, 1), (2.0, 20.0, 2))
    ]
    got = agent_floor._median(runs)
    assert got == {"wall_s": 2.0, "summed_pss_mb": 20.0, "one_agent_private_kb": {"[heap]": 2}}
