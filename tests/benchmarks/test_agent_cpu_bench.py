"""The agent-CPU bench (benchmarks/agent_cpu.py) on a tiny run: the document's CPU by role, every
forked agent profiled (DCOP_AGENT_PROFILE) and the profiles added up, the report written."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import agent_cpu  # noqa: E402


def test_a_tiny_run_is_profiled_agent_by_agent() -> None:
    row = agent_cpu.measure(6)
    assert row["status"] == row["profiled_status"] == "ok"
    assert row["agent_cpu_s_sum"] > 0 and row["agent_cpu_ms_median"] > 0
    functions = row["functions"]
    assert functions["profiles"] == 6  # each agent wrote its profile before it left
    names = [f["function"] for f in functions["with_callees"]]
    assert any("run_agent" in name for name in names)
    text = agent_cpu.markdown(
        {"command": "x", "machine": "m", "date": "d", "load": "0", "rows": [row]}
    )
    assert "| 6 | ok |" in text and "under cProfile (6 agents profiled" in text
