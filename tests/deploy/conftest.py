"""Fixtures for the deployment tests: a small generated instance with a finite optimum."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcop.generators import random_network
from dcop.io import write_problem
from dcop.model import Problem


def small_problem(n: int = 8, seed: int = 3) -> Problem:
    """The paper's random network, loose enough (p2 = 0.1) to have a finite optimum."""
    return random_network(n, 3, 0.3, 0.1, seed)


@pytest.fixture
def problem_file(tmp_path: Path) -> Path:
    path = tmp_path / "random8.wcsp"
    write_problem(small_problem(), path)
    return path
