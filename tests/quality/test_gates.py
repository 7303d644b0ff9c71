"""The quality gates are wired as the README says, and the soak harness works end to end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
tomllib = pytest.importorskip("tomllib")


def _make_rule(target: str) -> tuple[str, str]:
    """(prerequisites, recipe) of a Makefile target."""
    text = (ROOT / "Makefile").read_text()
    match = re.search(rf"^{target}:([^\n]*)\n((?:\t[^\n]*\n)*)", text, re.MULTILINE)
    assert match, f"no rule for {target}"
    return match.group(1), match.group(2)


def test_make_test_runs_lint_types_then_pytest_with_coverage() -> None:
    prereqs, recipe = _make_rule("test")
    assert "lint" in prereqs.split() and "typecheck" in prereqs.split()
    assert "pytest" in recipe and "--cov" in recipe
    _, lint = _make_rule("lint")
    assert "ruff check" in lint and "ruff format --check" in lint
    _, types = _make_rule("typecheck")
    assert "mypy" in types


def test_fuzz_and_soak_are_outside_the_test_gate() -> None:
    prereqs, _ = _make_rule("test")
    assert "fuzz" not in prereqs and "soak" not in prereqs
    assert "fuzz/run.py" in _make_rule("fuzz")[1]
    assert "tests/soak" in _make_rule("soak")[1]  # the soak suite (tests/soak/soak.py inside)


def test_mypy_is_strict_for_protocol_and_model() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mypy = config["tool"]["mypy"]
    assert "dcop" in mypy["packages"]
    strict = [o for o in mypy.get("overrides", []) if o.get("strict")]
    modules = {m for o in strict for m in o["module"]}
    assert {"dcop.protocol.*", "dcop.model"} <= modules
    assert config["tool"]["ruff"]["line-length"] == 100


def test_coverage_measures_every_dcop_package() -> None:
    """By import name: a folder "dcop" would leave out agents/, coordinator/, protocol/, gpu/."""
    run = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["run"]
    assert "dcop" in run.get("source_pkgs", [])
    assert "dcop" not in run.get("source", [])


@pytest.mark.slow
def test_soak_smoke(tmp_path: Path) -> None:
    """Two soak runs (a warm-up and one with a killed agent): both checks pass."""
    out = tmp_path / "soak"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tests" / "soak" / "soak.py"),
            "--runs",
            "2",
            "--modes",
            "kill",
            "--seed",
            "3",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(out.with_suffix(".json").read_text())["summary"]
    assert summary["runs"] == 2 and summary["kills_planned"] == 1
    assert summary["wrong_answers"] == summary["hangs"] == summary["leaks"] == 0
