"""BE's argbest decoding on the CuPy backend's host side (fake CuPy): the slices, the running
best and the uint8 argbest tables are device arrays, and the answers equal NumPy's and brute
force; the plan runs it on one device and not on several."""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop.backends.numpy import NumpyBackend
from dcop.bucketpass import ArgbestTable, bucket_pass, decode
from dcop.inference.elimination import eliminate
from dcop.orders.greedy import elimination_order
from dcop.plan.bucket_plan import plan_for
from tests.conftest import brute_force, random_problem
from tests.gpu import fake_cupy


def gpu(generated: bool = False) -> Any:
    """The device backend: with the run-time generic kernel, or (``generated``) a kernel
    generated for every bucket shape from its first call."""
    from dcop.gpu import CupyBackend

    return CupyBackend(specialize_entries=0, min_groups=0) if generated else CupyBackend()


@pytest.mark.parametrize("generated", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_argbest_decoding_on_the_device_backend(
    fake_cupy_module: ModuleType, seed: int, generated: bool
) -> None:
    problem = random_problem(seed, n=7, n_tables=9)
    best = brute_force(problem)
    order = elimination_order("minfill", problem.neighbours())
    backend = gpu(generated)
    plan = plan_for(problem, order, None, np.float64, backend, resident=0)
    assert plan.lean is not None
    assignment, stats = eliminate(problem, order, backend, plan=plan.lean)
    cpu_assignment, cpu_stats = eliminate(problem, order, NumpyBackend(), plan=plan)
    if math.isinf(best):
        assert math.isinf(stats.bound)
        return
    assert stats.bound == cpu_stats.bound == best  # integer costs: exact
    assert problem.evaluate(assignment) == best == problem.evaluate(cpu_assignment)


def test_argbest_tables_stay_on_the_device_in_uint8(fake_cupy_module: ModuleType) -> None:
    problem = random_problem(3, n=8, n_tables=12, max_domain=4)
    order = elimination_order("minfill", problem.neighbours())
    backend = gpu()
    plan = plan_for(problem, order, None, np.float64, backend, resident=0)
    assert plan.lean is not None
    buckets = bucket_pass(problem, order, backend, plan=plan.lean)
    assert buckets.argbest is not None
    tables = [t for t in buckets.argbest.values() if isinstance(t, ArgbestTable)]
    assert tables and all(isinstance(t.data, fake_cupy.FakeArray) for t in tables)
    assert {t.data.dtype for t in tables} == {np.dtype(np.uint8)}
    assert {t.packed for t in tables} == {True, False}  # binary variables' bits, and bytes
    best = brute_force(problem)
    assert problem.evaluate(decode(problem, buckets, backend)) == best == buckets.stats.bound


def test_several_devices_keep_their_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several GPUs place tables on either side: no argbest decoding planned there."""
    with fake_cupy.installed(monkeypatch, devices=2):
        from dcop.gpu.multi import MultiGpuBackend

        problem = random_problem(1, n=7, n_tables=9)
        order = elimination_order("minfill", problem.neighbours())
        plan = plan_for(problem, order, None, np.float64, MultiGpuBackend((0, 1)), resident=0)
        assert plan.lean is None


@pytest.mark.gpu
@pytest.mark.parametrize("side", [8, 12])
def test_argbest_decoding_on_a_device(side: int) -> None:
    """On a real GPU (skipped without one): the spin glass's argbest decode equals the CPU's
    kept-messages decode."""
    pytest.importorskip("cupy")
    from dcop.backends import gpu_usable
    from dcop.generators import spin_glass

    if not gpu_usable():
        pytest.skip("no usable CUDA device")
    problem = spin_glass(side, seed=1)
    order = elimination_order("minfill", problem.neighbours())
    backend = gpu()
    plan = plan_for(problem, order, None, np.float64, backend, resident=0)
    assert plan.lean is not None
    assignment, stats = eliminate(problem, order, backend, plan=plan.lean)
    _, cpu_stats = eliminate(problem, order, NumpyBackend(), plan=plan)
    assert stats.bound == cpu_stats.bound  # costs of ±1: exact sums
    assert problem.evaluate(assignment) == stats.bound
    for seed in range(4):  # domains of 1-4 values: argbest in bytes, and bits
        small = random_problem(seed, n=8, n_tables=12, max_domain=4)
        order = elimination_order("minfill", small.neighbours())
        plan = plan_for(small, order, None, np.float64, backend, resident=0)
        assert plan.lean is not None
        assignment, stats = eliminate(small, order, backend, plan=plan.lean)
        assert stats.bound == brute_force(small)
        if math.isfinite(stats.bound):
            assert small.evaluate(assignment) == stats.bound
