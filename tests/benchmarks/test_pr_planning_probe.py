"""Smoke test of benchmarks/probes/pr_planning.py: it plans a small spin glass's PR and prints each
candidate's seconds, the chosen tree and the planning share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "probes" / "pr_planning.py"


def test_the_probe_prints_the_search_and_the_share() -> None:
    run = subprocess.run(
        [sys.executable, str(PROBE), "--size", "6", "--backend", "numpy", "--calls", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "6x6 spin glass" in out and "call 0: search" in out
    assert "elimination_order" in out and "tree order:minfill" in out
    assert "chosen " in out and "planning share" in out
