"""Per-bucket placement (CPU or GPU) and agents on several GPUs, without a GPU: the device backend
is the real ``CupyBackend`` over a fake CuPy whose "device" arrays refuse implicit conversion."""

from __future__ import annotations

import inspect
import math
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop.backends.base import BucketShape
from dcop.backends.numpy import NumpyBackend
from dcop.backends.placed import PlacedBackend
from dcop.errors import BackendUnavailable, InputError
from dcop.generators import random_network
from dcop.inference import solve
from dcop.placement import (
    DEFAULT_GPU_MIN_ENTRIES,
    device_for_agent,
    gpu_devices,
    gpu_min_entries,
    place,
)
from dcop.tables import Table
from tests.conftest import brute_force, random_problem
from tests.gpu import fake_cupy


def placed(min_entries: int | None) -> PlacedBackend:
    from dcop.gpu import CupyBackend

    return PlacedBackend(NumpyBackend(), CupyBackend(), min_entries)


def bucket(d: int, n_sep: int) -> tuple[list[Table], str]:
    """x with a separator of ``n_sep`` variables, domain ``d``: d ** (n_sep + 1) joined entries."""
    rng = np.random.default_rng(d * 100 + n_sep)
    sep = [f"s{i}" for i in range(n_sep)]
    tables = [Table(("x", s), rng.integers(0, 9, (d, d)).astype(np.float32)) for s in sep]
    tables.append(Table((*sep, "x"), rng.integers(0, 9, (d,) * (n_sep + 1)).astype(np.float32)))
    return tables, "x"


# ---- the decision -------------------------------------------------------------------------------
def test_threshold_from_argument_environment_or_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DCOP_GPU_MIN_ENTRIES", raising=False)
    assert gpu_min_entries() == DEFAULT_GPU_MIN_ENTRIES
    assert gpu_min_entries(0) == 0 and gpu_min_entries(5000) == 5000
    monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", "1e5")
    assert gpu_min_entries() == 100_000
    assert gpu_min_entries(7) == 7  # an argument wins over the environment
    monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", "1_000")
    assert gpu_min_entries() == 1000
    for bad in ("lots", "-1", "2.5", "inf"):
        monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", bad)
        with pytest.raises(InputError, match="DCOP_GPU_MIN_ENTRIES"):
            gpu_min_entries()
    with pytest.raises(InputError, match=">= 0"):
        gpu_min_entries(-3)


def test_place() -> None:
    assert place(999, 1000) == "cpu"
    assert place(1000, 1000) == "gpu"
    assert place(1, 0) == "gpu" and place(0, 0) == "gpu"  # 0 forces the device


# ---- the placed backend -------------------------------------------------------------------------
def test_same_methods_as_numpy_backend() -> None:
    for name, member in inspect.getmembers(NumpyBackend, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(PlacedBackend, name)
        want = list(inspect.signature(member).parameters)
        assert list(inspect.signature(ours).parameters) == want, name
    assert isinstance(PlacedBackend.name, str)


def test_small_buckets_stay_on_the_cpu_large_ones_go_to_the_gpu(
    fake_cupy_module: ModuleType,
) -> None:
    backend = placed(min_entries=1000)  # d = 10: one separator variable 100, three 10_000
    cpu = NumpyBackend()
    small, var = bucket(10, 1)
    large, _ = bucket(10, 3)
    got_small = backend.join_eliminate([backend.table(t.scope, t.data) for t in small], var)
    assert isinstance(got_small.data, np.ndarray) and not fake_cupy.LAUNCHED
    assert fake_cupy.STATS["h2d"] == 0  # nothing went to the device
    got_large = backend.join_eliminate([backend.table(t.scope, t.data) for t in large], var)
    assert not backend.on_host(got_large.data) and fake_cupy.LAUNCHED
    for got, tables in ((got_small, small), (got_large, large)):
        np.testing.assert_array_equal(
            backend.to_numpy(got.data), cpu.join_eliminate(tables, var).data
        )
    assert [(p.joined, p.out_entries, p.where) for p in backend.placements] == [
        (100, 10, "cpu"),
        (10_000, 1000, "gpu"),
    ]
    figures = backend.placement_metrics()
    # uploads: the large bucket's tables (float64, as backend.table made them) and kernel metadata
    assert figures.pop("h2d_bytes") >= (3 * 10 * 10 + 10**4) * 8
    assert figures.pop("d2h_bytes") == 1000 * 8  # its output, downloaded above
    assert figures.pop("device") == 0  # the GPU this backend runs on
    assert figures.pop("p2p_in_bytes") == 0  # nothing taken from another GPU
    assert figures == {
        "gpu_min_entries": 1000,
        "buckets_cpu": 1,
        "joined_cpu": 100,
        "buckets_gpu": 1,
        "joined_gpu": 10_000,
        "ipc_out_bytes": 0,
        "ipc_in_bytes": 0,
        "ipc_out_s": 0.0,
        "ipc_open_s": 0.0,
        "ipc_in_s": 0.0,
        "ipc_in_alloc_s": 0.0,
        "ipc_in_copy_s": 0.0,
        "ipc_in_check_s": 0.0,
    }


def test_a_bucket_whose_mini_buckets_all_stay_on_the_cpu_runs_on_the_host_backend(
    fake_cupy_module: ModuleType,
) -> None:
    """eliminate_bucket hands such a bucket to the host backend (no placement call by call) and
    the placements are still recorded; one GPU-sized mini-bucket, or a table on the device, keeps
    the placed backend. The answers are the host's either way."""
    from dcop.buckets import eliminate_bucket

    backend = placed(min_entries=1000)
    host = NumpyBackend()
    tables, var = bucket(10, 4)
    tables = tables[:-1]  # x with four others, a table each: 100_000 joined, the GPU's whole...
    whole = backend.runner_for(tables, var, [_plan(tables, 100_000)])
    assert whole is backend and backend.placements == []
    out = eliminate_bucket(backend, tables, var, z=1)  # ...mini-buckets of 100 entries: the CPU's
    assert not fake_cupy.LAUNCHED and all(backend.on_host(t.data) for t in out.tables)
    assert {(p.joined, p.where) for p in backend.placements} == {(100, "cpu")}
    assert len(backend.placements) == len(out.plans) == 4
    expected = eliminate_bucket(host, tables, var, z=1)
    for got, want in zip(out.tables, expected.tables, strict=True):
        np.testing.assert_array_equal(got.data, want.data)
    on_device = [backend.gpu.table(t.scope, t.data) if k == 0 else t for k, t in enumerate(tables)]
    assert backend.runner_for(on_device, var, [_plan(tables, 100)]) is backend
    assert backend.runner_for(tables, var, [_plan(tables, 100)]) is backend.cpu


def _plan(tables: list[Table], joined: int) -> Any:
    from dcop.buckets import MiniBucketPlan

    return MiniBucketPlan(tuple(range(len(tables))), (), 1, joined)


def test_zero_forces_every_bucket_onto_the_device(fake_cupy_module: ModuleType) -> None:
    backend = placed(min_entries=0)
    tables, var = bucket(2, 1)
    out = backend.join_eliminate(tables, var)
    assert not backend.on_host(out.data)
    assert [p.where for p in backend.placements] == ["gpu"]


def test_environment_sets_the_threshold(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", "0")
    assert placed(None).min_entries == 0


def test_device_outputs_move_to_a_cpu_bucket_and_back(fake_cupy_module: ModuleType) -> None:
    backend = placed(min_entries=500)
    cpu = NumpyBackend()
    big, var = bucket(10, 2)  # 1000 joined: GPU, output over (s0, s1) on the device
    message = backend.join_eliminate(big, var)
    assert not backend.on_host(message.data)
    # eliminating s0 from that message with a small table: 100 joined entries, on the CPU
    extra = Table(("s0",), np.arange(10, dtype=np.float32))
    got = backend.join_eliminate([message, extra], "s0")
    assert backend.on_host(got.data)
    want = cpu.join_eliminate([cpu.join_eliminate(big, var), extra], "s0")
    np.testing.assert_array_equal(got.data, want.data)
    # single-table operations run where the table is
    assert not backend.on_host(backend.eliminate(message, "s1").data)
    assert backend.on_host(backend.eliminate(got, "s1").data)
    assert not backend.on_host(backend.condition(message, {"s0": 1}).data)
    # best value: on the GPU when a table is there, else on the CPU
    assignment = {"s0": 3}
    on_gpu = backend.best_value([message], "s1", assignment)
    assert on_gpu == cpu.best_value([cpu.join_eliminate(big, var)], "s1", assignment)
    assert backend.best_value([extra], "s0", {}) == (0, 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_be_through_placement_equals_brute_force(fake_cupy_module: ModuleType, seed: int) -> None:
    problem = random_problem(seed, n=7, max_domain=4, n_tables=9)
    backend = placed(min_entries=24)
    result = solve(problem, backend=backend)
    want = brute_force(problem)
    assert result.upper_bound == want or (math.isinf(want) and math.isinf(result.upper_bound))
    assert result.lower_bound == want or (math.isinf(want) and math.isinf(result.lower_bound))


def test_be_on_a_network_uses_both_sides(fake_cupy_module: ModuleType) -> None:
    problem = random_network(12, 5, 0.3, 0.2, seed=2)
    backend = placed(min_entries=600)
    result = solve(problem, backend=backend, ordering="pseudotree")
    want = solve(problem, backend="numpy", ordering="pseudotree")
    assert result.upper_bound == want.upper_bound and result.lower_bound == want.lower_bound
    sides = {p.where for p in backend.placements}
    assert sides == {"cpu", "gpu"}
    assert all((p.where == "gpu") == (p.joined >= 600) for p in backend.placements)


def test_dpop_agents_with_placement(fake_cupy_module: ModuleType) -> None:
    from tests.agents.conftest import run_in_process

    problem = random_network(10, 4, 0.3, 0.2, seed=1)
    backend = placed(min_entries=64)
    result = run_in_process(problem, backend=backend)
    assert result["cost"] == solve(problem, backend="numpy").upper_bound
    assert {p.where for p in backend.placements} == {"cpu", "gpu"}


def test_prepare_bucket_only_for_gpu_buckets(fake_cupy_module: ModuleType) -> None:
    from dcop.gpu import CupyBackend

    backend = PlacedBackend(NumpyBackend(), CupyBackend(specialize_entries=0), 1000)
    small, var = bucket(10, 1)
    large, _ = bucket(10, 3)
    small_shape = BucketShape([t.scope for t in small], [t.shape for t in small], var)
    assert backend.prepare_bucket(small_shape) == 0.0
    assert not fake_cupy.COMPILED
    backend.prepare_bucket(
        BucketShape([t.scope for t in large], [t.shape for t in large], var, "min", "float32")
    )
    assert len(fake_cupy.COMPILED) == 1 and backend.setup.prepared == 1
    backend.join_eliminate(large, var)
    assert backend.setup.solve_compiles == 0
    times = backend.warm_up(dtypes=("float32",))
    assert "total_s" in times


# ---- agents on several GPUs ---------------------------------------------------------------------
def test_gpu_devices() -> None:
    assert gpu_devices("all", 4) == (0, 1, 2, 3)
    assert gpu_devices("2", 4) == (2,)
    assert gpu_devices(" 0, 2 ", 4) == (0, 2)
    assert gpu_devices("3,1", None) == (3, 1)  # unknown count: not checked
    with pytest.raises(BackendUnavailable, match="no CUDA device"):
        gpu_devices("all", 0)
    with pytest.raises(BackendUnavailable, match="no CUDA device"):
        gpu_devices("all", None)
    with pytest.raises(BackendUnavailable, match="no device 4"):
        gpu_devices("0,4", 4)
    for bad in ("", "x", "-1", "0,,1", "1.5"):
        with pytest.raises(InputError, match="--gpu"):
            gpu_devices(bad, 4)
    with pytest.raises(InputError, match="twice"):
        gpu_devices("1,1", 4)


@pytest.mark.parametrize("count", [1, 2, 3, 8])
def test_agents_round_robin_over_any_number_of_gpus(count: int) -> None:
    devices = gpu_devices("all", count)
    got = [device_for_agent(k, devices) for k in range(20)]
    assert got == [k % count for k in range(20)]
    # every device gets n // count or n // count + 1 agents
    per = [got.count(d) for d in devices]
    assert max(per) - min(per) <= 1


def test_agents_on_an_explicit_list() -> None:
    assert [device_for_agent(k, (0, 2)) for k in range(5)] == [0, 2, 0, 2, 0]
    with pytest.raises(BackendUnavailable):
        device_for_agent(0, ())


def test_agents_compile_their_kernels_before_the_util_data_arrive(
    fake_cupy_module: ModuleType,
) -> None:
    """Once the pseudo-tree is known, each GPU agent prepares its bucket's kernel from the
    sizing's scopes and shapes: the joins then find it compiled (no compile during the solve)."""
    from dcop.gpu import CupyBackend
    from tests.agents.conftest import run_in_process

    problem = random_network(10, 4, 0.4, 0.2, seed=2)
    backend = PlacedBackend(NumpyBackend(), CupyBackend(specialize_entries=0), 64)
    result = run_in_process(problem, backend=backend)
    assert result["cost"] == solve(problem, backend="numpy").upper_bound
    on_gpu = [p for p in backend.placements if p.where == "gpu"]
    assert on_gpu and backend.setup.prepared >= 1
    assert backend.setup.solve_compiles == 0


def test_synchronize_touches_the_device_only_once_it_has_tables(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = placed(min_entries=1000)
    synced: list[bool] = []
    monkeypatch.setattr(backend.gpu, "synchronize", lambda: synced.append(True))
    small, var = bucket(10, 1)
    backend.join_eliminate(small, var)  # on the CPU
    backend.synchronize()
    assert synced == []  # nothing can be queued on the device yet
    large, _ = bucket(10, 3)
    backend.join_eliminate(large, var)  # on the GPU
    backend.synchronize()
    assert synced == [True]
