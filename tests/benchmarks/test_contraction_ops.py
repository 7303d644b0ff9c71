"""Smoke test of benchmarks/probes/contraction_ops.py: the phases and the array-module calls of a small
MAR are timed and printed, and the run's numbers are not changed by the profiling."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "probes"
sys.path.insert(0, str(BENCH))

import contraction_ops  # noqa: E402


def test_a_small_mar_prints_its_phases_and_calls() -> None:
    import dcop.contraction.execute as execute

    text = contraction_ops.profile("ising4", "numpy", "mar", top=5)
    assert "upward" in text and "backward" in text and "finish" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "caller" not in line]
    assert 0 < len(rows) <= 5
    assert any("pair_product" in row for row in rows)
    assert execute.PHASES is None  # restored: later runs keep no phases
