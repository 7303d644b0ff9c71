"""The agent-phases bench (benchmarks/agent_phases.py) on a tiny run: every forked agent writes
its phases (DCOP_AGENT_PHASES, dcop.agents.phases) and they add up to its own CPU."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import agent_phases  # noqa: E402


def test_a_tiny_run_is_measured_phase_by_phase() -> None:
    row = agent_phases.measure(6)
    assert row["status"] == "ok"
    phases = row["phases"]
    assert phases["agents"] == 6  # each agent wrote its file before it left
    by_name = {r["phase"]: r for r in phases["rows"]}
    # every agent forked, started, said hello, took its setup and its stop, once each
    for name in ("fork", "start-up", "hello", "msg:setup", "msg:stop", "loop:recv"):
        assert name in by_name, name
    assert by_name["msg:setup"]["per_agent"] == by_name["msg:stop"]["per_agent"] == 1
    assert by_name["hello"]["per_agent"] >= 1
    # the phases split the agent's own account: never more than the kernel's at its exit
    assert 0 < phases["cpu_ms"] <= row["agent_cpu_ms_mean"] * 1.05
    text = agent_phases.markdown(
        {"command": "x", "machine": "m", "date": "d", "load": "0", "rows": [row]}
    )
    assert "**n = 6** (ok" in text and "| msg:setup | 1.0 |" in text
