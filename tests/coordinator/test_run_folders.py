"""A run's folder while other runs end: each run that ends removes the runs' folder once it is
empty, and a run starting beside it makes that folder again (two runs of the test suite met
there: the later one ended in a traceback, without its document)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from dcop.coordinator import launch


def test_a_run_folder_is_made_where_other_runs_removed_the_runs_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = launch.runs_folder
    removed: list[Path] = []

    def made_then_removed() -> Path:
        path = real()
        if len(removed) < 3:  # another run ends between the two makings, its folder the last
            path.rmdir()
            removed.append(path)
        return path

    monkeypatch.setattr(launch, "runs_folder", made_then_removed)
    folder = launch.new_run_folder()
    assert len(removed) == 3
    assert folder.is_dir() and folder.name.startswith(launch.RUN_PREFIX)
    assert folder.parent == tmp_path / launch.RUNS_FOLDER


def test_a_runs_folder_removed_at_every_attempt_is_an_error_not_a_loop(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = launch.runs_folder
    calls: list[int] = []

    def always_removed() -> Path:
        path = real()
        path.rmdir()
        calls.append(1)
        return path

    monkeypatch.setattr(launch, "runs_folder", always_removed)
    with pytest.raises(FileNotFoundError):
        launch.new_run_folder()
    assert len(calls) == launch.RUN_FOLDER_TRIES
