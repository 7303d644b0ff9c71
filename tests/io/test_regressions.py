"""Inputs that once broke a reader (found by the fuzzers or while writing them), replayed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.io.helpers import DATA
from tests.io.test_fuzz import _check

CASES = sorted((DATA / "regressions").iterdir())


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_regression(path: Path) -> None:
    fmt = {".wcsp": "wcsp", ".uai": "uai", ".yaml": "yaml", ".xml": "xml"}[path.suffix]
    _check(path.read_bytes(), fmt)
