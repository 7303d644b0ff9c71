"""The mini-bucket pass's deadline on the CuPy backend's host side (fake CuPy): a pass whose
queued work is predicted far below one piece (:data:`dcop.gpu.plan.PIECE_S`) waits for nothing
and is stopped between buckets, as before, and its tables are the same inside a checked block as
outside. Stops inside a large bucket: ``test_deadline_pieces.py``."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import pytest

from dcop.backends import resolve_backend
from dcop.backends.between import checked_between
from dcop.bucketpass import bucket_pass
from dcop.generators import random_network
from dcop.orders.choose import choose_order
from dcop.search import solve_aobb


class Stop(Exception):
    """The hook's own exception."""


def gpu() -> Any:
    from dcop.gpu import CupyBackend

    return CupyBackend()


def test_a_hook_that_raises_stops_the_pass_between_buckets(fake_cupy_module: ModuleType) -> None:
    problem = random_network(12, 4, 0.4, 0.0, seed=3)
    order = choose_order(problem, "minfill", 0).order
    heard: list[str] = []

    def hook(done: int, total: int, var: str) -> None:
        heard.append(var)
        if len(set(heard)) == 3:  # the third bucket's first word
            raise Stop

    with pytest.raises(Stop):
        bucket_pass(problem, order, gpu(), 3, progress=hook)
    assert len(set(heard)) == 3


def test_a_checked_block_leaves_the_device_pass_as_it_was(fake_cupy_module: ModuleType) -> None:
    problem = random_network(12, 4, 0.4, 0.0, seed=4)
    order = choose_order(problem, "minfill", 0).order
    calls: list[int] = []
    with checked_between(lambda: calls.append(1)):
        device = bucket_pass(problem, order, gpu(), 3).stats.bound
    host = bucket_pass(problem, order, resolve_backend("numpy"), 3).stats.bound
    assert device == pytest.approx(host)
    assert calls == []  # microseconds of predicted work: no wait, so no check


def test_a_deadline_on_the_device_backend_keeps_a_valid_answer(
    fake_cupy_module: ModuleType,
) -> None:
    problem = random_network(30, 6, 0.3, 0.0, seed=5)
    result = solve_aobb(problem, z=4, backend=gpu(), deadline=time.monotonic() + 0.3)
    assert result.backend == "cupy"
    assert result.status in ("ok", "timeout")
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
    assert result.lower_bound <= result.upper_bound
