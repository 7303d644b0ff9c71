"""Tests that change the machine (Docker, network namespaces) run only when asked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import system_tests_skipped

ROOT = Path(__file__).resolve().parents[2]


def test_docker_and_netns_need_their_variable() -> None:
    assert system_tests_skipped("docker", {}) is not None
    assert system_tests_skipped("docker", {"DCOP_TEST_DOCKER": "0"}) is not None
    assert system_tests_skipped("docker", {"DCOP_TEST_DOCKER": "1"}) is None
    assert "DCOP_TEST_NETNS=1" in (system_tests_skipped("netns", {}) or "")
    assert system_tests_skipped("slow", {}) is None


def test_collected_docker_tests_are_skipped_without_asking() -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--co",
            "-m",
            "docker or netns",
            "-rs",
            str(ROOT / "tests/deploy/test_docker.py"),
            str(ROOT / "tests/coordinator/test_netns.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            str(ROOT / "tests/coordinator/test_netns.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert "DCOP_TEST_NETNS=1" in proc.stdout, proc.stdout


def test_ci_asks_for_them() -> None:
    text = (ROOT / ".ci/run").read_text()
    assert "DCOP_TEST_DOCKER=1" in text and "DCOP_TEST_NETNS=1" in text
