"""The search loop's rate suite runs (one small instance) and writes JSON and Markdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_search_rate_quick(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "search_rate.py"), "--quick", "--limit", "5",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "search_rate_quick.json").read_text())
    walks = [r for r in doc["rows"] if r["measure"] == "walk"]
    assert walks and all(r["expanded"] > 0 and r["proved"] for r in walks)
    assert all(r["proved"] for r in doc["rows"] if r["measure"] == "auto")
    assert (tmp_path / "search_rate_quick.md").read_text().startswith("## Search loop")
