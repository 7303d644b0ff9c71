"""The agent-memory bench (benchmarks/agent_memory.py) on a tiny run: every agent sampled at once,
its private pages broken down by mapping, the report written."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import agent_memory  # noqa: E402


def test_a_tiny_run_is_sampled_and_broken_down() -> None:
    # a loaded machine can run all six short-lived agents between two samples, or end them
    # between an agent's two reads: try again then
    for _ in range(5):
        row = agent_memory.measure(6, detail=True)
        if "agents" in row and row.get("one_agent_private_dirty_kb"):
            break
    assert row["status"] == "ok" and 0 < row["agents"] <= 6
    median = row["median_kb"]
    assert 0 < median["Private_Dirty"] <= median["Rss"] and median["Pss"] > 0
    assert row["sum_pss_mb"] > 0 and row["median_page_faults"] > 0
    breakdown = row["one_agent_private_dirty_kb"]
    assert breakdown and sum(breakdown.values()) > 0
    text = agent_memory.markdown(
        {"command": "x", "machine": "m", "date": "d", "load": "0", "rows": [row]}
    )
    assert "| 6 | ok |" in text and "private dirty kB by mapping" in text
