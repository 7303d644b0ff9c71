"""The search on the CuPy backend's host side (fake CuPy): its heuristic's tables are built by
the backend's kernels and read back, and ``auto`` never forks after CUDA."""

from __future__ import annotations

import multiprocessing
import os
from types import ModuleType
from typing import Any

import pytest

from dcop.generators import random_network
from dcop.inference import anytime, solve
from dcop.search import solve_aobb
from tests.conftest import brute_force, random_problem


def gpu() -> Any:
    from dcop.gpu import CupyBackend

    return CupyBackend()


@pytest.mark.parametrize("seed", range(6))
def test_the_heuristic_compiles_on_the_device_backend(
    fake_cupy_module: ModuleType, seed: int
) -> None:
    problem = random_problem(seed, n=7, n_tables=9)
    best = brute_force(problem)
    for z in (2, None):
        result = solve_aobb(problem, z=z, backend=gpu())
        assert result.backend == "cupy"
        assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
        if best < float("inf"):
            assert result.exact and result.upper_bound == pytest.approx(best)


def test_auto_on_the_device_backend_never_forks(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA refuses a forked child (cudaErrorInitializationError): any fork fails here."""

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("fork after CUDA")

    monkeypatch.setattr(os, "fork", refused)
    monkeypatch.setattr(multiprocessing, "get_context", refused)
    problem = random_network(16, 6, 0.4, 0.0, seed=2)
    monkeypatch.setattr(anytime, "BE_FIRST_S", -1.0)  # the search, not BE
    result = anytime.solve_auto(problem, backend=gpu(), timeout=60)
    assert result.algo == "aobb" and result.exact
    assert result.upper_bound == pytest.approx(solve(problem, "be").upper_bound)
    late = anytime.solve_until(problem, "be", None, 0.0, backend=gpu())  # a past deadline
    assert late.exact and late.upper_bound == pytest.approx(result.upper_bound)


@pytest.mark.parametrize("seed", range(4))
def test_the_matched_heuristic_agrees_on_the_device_backend(
    fake_cupy_module: ModuleType, seed: int
) -> None:
    from dcop.backends import resolve_backend
    from dcop.bucketpass import bucket_pass
    from dcop.orders.choose import choose_order

    problem = random_problem(seed, n=8, n_tables=12, p_inf=0.15)
    order = choose_order(problem, "minfill", 0).order
    for z in (1, 2):
        host = bucket_pass(problem, order, resolve_backend("numpy"), z, match=True).stats.bound
        device = bucket_pass(problem, order, gpu(), z, match=True).stats.bound
        assert device == pytest.approx(host)
        assert device <= brute_force(problem) + 1e-9
