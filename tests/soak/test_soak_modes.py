"""The soak's fault modes end to end, one tiny run each: SIGTERM to a real ``dcop run``, forged
coordinator frames (open and secure), and both self-connect attempts. Checks what the soak
judged (answers, refusals, clear errors, nothing left behind), never its timings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parent / "soak.py"
MODES = (
    "sigterm:ready",
    "forge:ready",
    "forge:solve:secure",
    "self-connect:setup",
    "self-connect:setup:secure",
    "self-connect:peers",
)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_every_new_fault_mode_passes_its_checks(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    proc = subprocess.run(
        [sys.executable, str(SOAK), "--runs", str(len(MODES) + 1), "--max-n", "5",
         "--seed", "4", "--timeout", "30", "--grace", "30", "--modes", ",".join(MODES),
         "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = json.loads(out.with_suffix(".json").read_text())
    summary, runs = doc["summary"], doc["runs"]
    assert [r["fault"] for r in runs] == [None, *(m.split(":")[0] for m in MODES)]
    assert summary["failed_runs"] == summary["leaks"] == summary["hangs"] == 0
    assert summary["wrong_answers"] == summary["harness_failures"] == 0
    sigterm = summary["sigterm"]
    assert sigterm["runs"] == 1 and sigterm["signalled"] == 1
    assert sigterm["interrupted_with_document"] + sigterm["finished_first_answer_right"] == 1
    forge = summary["forge"]
    assert forge["runs"] == forge["runs_ok_and_right"] == 2 and forge["secure_runs"] == 1
    # the forger at "ready" waits for every agent's refusal before the run goes on
    ready = next(r for r in runs if r["fault"] == "forge" and r["variant"] == "ready")
    assert ready["forge_refusals_logged"] == ready["forge_targets"] == ready["n"]
    connect = summary["self_connect"]
    assert connect["variants"] == {"setup_open": 1, "setup_secure": 1, "peers": 1}
    # open: the agent refused its own endpoint (unless the late agent beat the stranger)
    assert connect["refused_with_clear_error"] + connect["stranger_too_late_run_right"] == 2
    assert connect["secure_stranger_refused_run_right"] == 1
    peers = next(r for r in runs if r["variant"] == "peers")
    assert "own endpoint" in peers["error"] and f"agent {peers['victim']} " in peers["error"]
    md = out.with_suffix(".md").read_text()
    assert "| **failed runs** | **0** |" in md
