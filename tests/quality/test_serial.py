"""Under pytest-xdist a test marked ``serial`` runs alone (tests/serial.py), and `make test`
spreads the suite over workers with that lock in place."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Every test writes when it started and ended; the sleeps make overlaps likely without the lock.
TESTS = """
import json, os, time

import pytest


def _record(name):
    start = time.monotonic()
    time.sleep(0.25)
    line = json.dumps([name, start, time.monotonic()])
    with open(os.environ["SERIAL_LOG"], "a") as fh:
        fh.write(line + "\\n")


@pytest.mark.parametrize("i", range(8))
def test_plain(i):
    _record(f"plain{i}")


@pytest.mark.serial
@pytest.mark.parametrize("i", range(3))
def test_alone(i):
    _record(f"serial{i}")


@pytest.mark.docker
def test_docker():
    _record("docker")
"""


def test_a_serial_test_overlaps_no_other(tmp_path: Path) -> None:
    (tmp_path / "test_overlap.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    log = tmp_path / "log.jsonl"
    private_tmp = tmp_path / "tmp"  # where the controller makes the lock's folder
    private_tmp.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.serial",
         "-n", "2", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path),
         str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
        env={**os.environ, "SERIAL_LOG": str(log), "TMPDIR": str(private_tmp)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    spans = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(spans) == 12
    alone = [s for s in spans if not s[0].startswith("plain")]
    for name, start, end in alone:
        beside = [s[0] for s in spans if s[0] != name and s[1] < end and start < s[2]]
        assert beside == [], f"{name} ran beside {beside}"
    assert list(private_tmp.glob("dcop-pytest-lock-*")) == []  # the controller removed it


def test_make_test_spreads_the_suite_over_workers() -> None:
    makefile = (ROOT / "Makefile").read_text()
    xdist = re.search(r"^XDIST\s*:?=\s*(.*)$", makefile, re.MULTILINE)
    assert xdist and "-n " in xdist.group(1)
    test_rule = re.search(r"^test:[^\n]*\n((?:\t[^\n]*\n)*)", makefile, re.MULTILINE)
    assert test_rule and "$(XDIST)" in test_rule.group(1) and "not slow" in test_rule.group(1)
    ci = (ROOT / ".ci/run").read_text().splitlines()
    assert ci.index("make test") < ci.index("make test-slow")
