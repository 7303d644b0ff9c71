"""The toulbar2 comparison runs end to end on one small generated instance."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_toulbar2_settings_smoke(tmp_path: Path) -> None:
    pytest.importorskip("pytoulbar2")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "toulbar2_settings.py"), "--only", "grid n",
         "--limit", "20", "--rounds", "1", "--out", str(tmp_path), "--name", "t"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads((tmp_path / "t.json").read_text())
    (row,) = doc["rows"]
    assert row["exact_answers_agree"]
    assert all(row[s]["exact"] for s in ("tb2", "tb2 -B=1", "dcop BE")), row
    assert "| grid n=36" in (tmp_path / "t.md").read_text()
