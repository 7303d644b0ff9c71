"""Helpers of the CLI tests: the dcop command as a subprocess, schema validators, small files."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dcop.io import read_problem
from dcop.schema import batch_schema, result_schema

#: A WCSP whose only table costs ``top`` everywhere: no assignment has a finite cost.
INFEASIBLE_WCSP = "infeasible 2 2 1 10\n2 2\n2 0 1 10 0\n"
#: A WCSP that names a variable it does not have (line 3): bad input.
BROKEN_WCSP = "p 2 2 1 100\n2 2\n2 0 7 0 1\n0 0 5\n"


def run_dcop(
    *args: str, cwd: Path | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """``python -m dcop ARGS`` with stdout and stderr captured."""
    return subprocess.run(
        [sys.executable, "-m", "dcop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


RESULT_VALIDATOR = jsonschema.Draft202012Validator(result_schema())
BATCH_VALIDATOR = jsonschema.Draft202012Validator(batch_schema())


def assert_valid(doc: Any) -> None:
    """Fail with every schema error of a result document."""
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in RESULT_VALIDATOR.iter_errors(doc)]
    assert not errors, errors


def assert_timeout_answer(doc: Any, path: Path) -> None:
    """A valid document of a run stopped by its deadline, with an assignment of the file at
    ``path`` whose cost is the document's."""
    assert_valid(doc)
    assert doc["status"] == "timeout" and doc["assignment"] and not doc["exact"]
    problem = read_problem(path)
    values = {v: problem.variables[v].values.index(x) for v, x in doc["assignment"].items()}
    assert math.isclose(problem.evaluate(values), doc["cost"])


def assert_valid_batch(doc: Any) -> None:
    """Fail with every schema error of a batch document."""
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in BATCH_VALIDATOR.iter_errors(doc)]
    assert not errors, errors


@pytest.fixture
def infeasible_file(tmp_path: Path) -> Path:
    path = tmp_path / "infeasible.wcsp"
    path.write_text(INFEASIBLE_WCSP)
    return path


@pytest.fixture
def broken_file(tmp_path: Path) -> Path:
    path = tmp_path / "broken.wcsp"
    path.write_text(BROKEN_WCSP)
    return path
