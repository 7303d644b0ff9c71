"""Every shell block of the README runs as written (```sh blocks, in order, in one folder), and
the README stays short enough to read."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def shell_blocks(text: str) -> list[str]:
    """The ```sh blocks of a Markdown text, in order."""
    return re.findall(r"^```sh\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_readme_is_short_and_has_runnable_blocks() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    blocks = shell_blocks(text)
    assert len(blocks) >= 5
    commands = "\n".join(blocks)
    for needed in ("dcop solve", "dcop run", "dcop-agent", "dcop coordinator", "dcop batch"):
        assert needed in commands, needed
    assert "```\nmake demo\nmake test\n```" in text  # the quickstart, exactly


@pytest.mark.slow
def test_readme_shell_blocks_run(tmp_path: Path) -> None:
    """The tour, as a user would type it after `. .venv/bin/activate`: the venv's bin first."""
    script = "set -euo pipefail\n" + "\n".join(shell_blocks(README.read_text()))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "run.json").exists() and (tmp_path / "hosts.json").exists()
    assert (tmp_path / "rows.csv").read_text().count("\n") >= 2
    out = proc.stdout.splitlines()
    assert any(line.startswith("ok True") for line in out), proc.stdout[-2000:]
