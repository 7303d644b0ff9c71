"""The agent-dirty bench (benchmarks/agent_dirty.py) with two children of each kind: every step
of an agent's start-up measured, the floor's beside it, the report written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "agent_dirty.py"


def test_every_start_up_step_is_measured(tmp_path: Path) -> None:
    # its own interpreter: the bench makes that process a template (imports, log handler)
    done = subprocess.run(
        [sys.executable, str(BENCH), "--children", "2", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "agent_dirty.json").read_text())
    steps = [r["step"] for r in report["dcop"]]
    assert steps[0] == "after the fork" and steps[-1] == "hello"
    assert "rehearsal" in steps and len(steps) == 9
    assert [r["step"] for r in report["floor"]][-1] == "hello"
    assert report["dcop"][0]["dirty_kb"] > 0  # the fork's own pages
    text = (tmp_path / "agent_dirty.md").read_text()
    assert "## dcop's agent" in text and "## the floor's agent" in text
