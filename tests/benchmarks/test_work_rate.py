"""The work-model calibration runs (tiny sizes) and writes JSON and Markdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_work_rate_quick(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "work_rate.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "work_rate_quick.json").read_text())
    assert doc["rows"] and all(r["work"] > 0 and r["entries_per_s"] > 0 for r in doc["rows"])
    assert (tmp_path / "work_rate_quick.md").read_text().startswith("## Work model")
