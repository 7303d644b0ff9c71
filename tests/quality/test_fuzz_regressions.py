"""Replays of the atheris fuzzers' inputs (fuzz/): every crash they found stays fixed.

The checks are the fuzz targets' own (fuzz/targets.py): an input is rejected with the project's
own error (InputError for readers, ProtocolError for the decoder) or accepted and self-consistent
(a parsed file round-trips through its writer, a decoded frame re-encodes stably). The seed
corpus is replayed too, so the harness itself is exercised in CI without atheris.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_targets() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dcop_fuzz_targets", ROOT / "fuzz" / "targets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


targets = _load_targets()
REGRESSIONS = targets.regression_inputs()
SEEDS = [(t, p) for t in targets.TARGETS for p in sorted((targets.CORPUS / t).glob("*"))]


def _id(case: tuple[str, Path]) -> str:
    return f"{case[0]}/{case[1].name}"


@pytest.mark.parametrize("case", REGRESSIONS, ids=[_id(c) for c in REGRESSIONS])
def test_regression_input(case: tuple[str, Path], tmp_path: Path) -> None:
    target, path = case
    assert targets.check(target, path.read_bytes(), tmp_path) in ("rejected", "accepted")


@pytest.mark.parametrize("case", SEEDS, ids=[_id(c) for c in SEEDS])
def test_seed_is_accepted(case: tuple[str, Path], tmp_path: Path) -> None:
    """Seeds are valid files and frames: each parses and survives the round trip."""
    target, path = case
    assert targets.check(target, path.read_bytes(), tmp_path) == "accepted"


def test_every_target_has_seeds_and_a_regression_folder() -> None:
    for target in targets.TARGETS:
        assert any((targets.CORPUS / target).iterdir()), target
    assert targets.REGRESSIONS.is_dir()


def test_broken_inputs_are_rejected_not_accepted(tmp_path: Path) -> None:
    frame = (targets.CORPUS / "protocol" / "util.bin").read_bytes()
    assert targets.check("protocol", frame[:-3], tmp_path) == "rejected"
    for fmt in targets.READER_EXT:
        assert targets.check(fmt, b"", tmp_path) == "rejected"
