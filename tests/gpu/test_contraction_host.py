"""Contraction PR/MAR on the fake CuPy (no GPU): the plan meets the device's free memory, not
the host's, and is sliced to fit it; numbers equal NumPy's."""

from __future__ import annotations

from types import ModuleType

import pytest

from dcop.errors import TableTooLarge
from dcop.generators import ising_grid
from dcop.inference.partition import infer


def test_device_memory_check_refuses_on_a_fake_gpu(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CuPy the plan meets the device's free memory, not the host's: a device with 1 KiB free
    refuses (with no --max-memory, which alone would have let the host's memory decide), and one
    with room runs and equals NumPy."""
    from dcop.contraction.memory import contraction_room
    from dcop.gpu import CupyBackend

    problem = ising_grid(5, seed=1)
    gpu = CupyBackend()
    assert contraction_room(gpu, None).bytes == pytest.approx(0.8 * (1 << 34))
    ok = infer(problem, "mar", backend=gpu)
    cpu = infer(problem, "mar")
    assert ok.backend == "cupy" and ok.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
    monkeypatch.setattr(fake_cupy_module.cuda.runtime, "memGetInfo", lambda: (1024, 1 << 34))
    with pytest.raises(TableTooLarge, match="device's free memory"):
        infer(problem, "pr", backend=gpu)
    # --max-memory lowers the device's room further, never raises it
    monkeypatch.setattr(fake_cupy_module.cuda.runtime, "memGetInfo", lambda: (1 << 34, 1 << 34))
    with pytest.raises(TableTooLarge, match="memory limit of"):
        infer(problem, "pr", backend=gpu, max_bytes=1024.0)
    assert contraction_room(gpu, 1e15).bytes == pytest.approx(0.8 * (1 << 34))


def test_fake_gpu_plans_are_sliced_to_the_device(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dcop.gpu import CupyBackend

    problem = ising_grid(6, 0.7, 0.1, seed=3)
    whole = infer(problem, "pr")
    assert whole.tree is not None
    inputs = sum(t.entries for t in problem.tables) * 8
    free = (inputs + (whole.tree["peak_bytes_pr"] - inputs) / 2) / 0.8
    monkeypatch.setattr(fake_cupy_module.cuda.runtime, "memGetInfo", lambda: (int(free), 1 << 34))
    sliced = infer(problem, "pr", backend=CupyBackend())
    assert sliced.tree is not None and sliced.tree["slices"] > 1
    assert sliced.ln_partition == pytest.approx(whole.ln_partition, rel=1e-12)


def test_an_agents_bucket_on_the_fake_gpu_equals_numpy(fake_cupy_module: ModuleType) -> None:
    import numpy as np

    from dcop.backends import get_backend
    from dcop.contraction.bucket import sum_bucket
    from dcop.gpu import CupyBackend
    from dcop.tables import Table

    rng = np.random.default_rng(1)
    tables = [
        Table(("a", "b", "c"), rng.normal(size=(3, 2, 4)) + 50.0),
        Table(("a", "c"), rng.normal(size=(3, 4))),
        Table(("a", "d"), rng.normal(size=(3, 2)) - 80.0),
    ]
    cpu = get_backend("numpy")
    gpu = CupyBackend()
    expected = cpu.join_eliminate(tables, "a", "logsumexp", scope=("b", "c", "d"))
    on_device = [gpu.table(t.scope, t.data) for t in tables]
    got = sum_bucket(gpu, on_device, "a", ("b", "c", "d"))
    assert got is not None
    np.testing.assert_allclose(gpu.to_numpy(got.data), expected.data, rtol=1e-12)


@pytest.mark.parametrize("plain", [True, False])
def test_a_narrow_model_on_the_fake_gpu_by_one_opt_einsum_call_or_by_steps(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch, plain: bool
) -> None:
    """A network whose range fits float unscaled: its PR is one opt_einsum contraction on the
    backend's library (CuPy here) where PLAIN_ON_DEVICE says so, else the engine's steps (the
    default); either equals NumPy's run."""
    from dcop.contraction import engine
    from dcop.gpu import CupyBackend

    monkeypatch.setattr(engine, "HOST_LARGEST", 0)
    monkeypatch.setattr(engine, "PLAIN_ON_DEVICE", plain)
    calls: list[int] = []
    real = engine._plain
    monkeypatch.setattr(engine, "_plain", lambda *a: calls.append(1) or real(*a))
    problem = ising_grid(4, 0.3, 0.1, seed=2)
    cpu = infer(problem, "pr", space="log")
    gpu = infer(problem, "pr", backend=CupyBackend())
    assert gpu.space == "scaled" and len(calls) == int(plain)
    assert gpu.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)


@pytest.mark.parametrize("task", ["pr", "mar"])
def test_a_contraction_reads_the_device_a_constant_number_of_times(
    fake_cupy_module: ModuleType, task: str
) -> None:
    """A 60-table grid whose range is wider than float64's (every step scaled, checked): its
    leaves go up in one transfer, and its peaks, counts and (MAR) every belief come back in one;
    the numbers equal NumPy's. The strided kernels' index tables go up once each: a second run
    of the same tree uploads nothing but its leaves."""
    import numpy as np

    from dcop.gpu import CupyBackend
    from tests.gpu import fake_cupy

    problem = ising_grid(6, 6.0, 1.0, seed=1)
    gpu = CupyBackend()
    cpu = infer(problem, task)
    fake_cupy.reset()
    got = infer(problem, task, backend=gpu)
    assert got.space == "scaled"
    uploads = gpu._strided.uploads if gpu._strided is not None else 0
    assert fake_cupy.STATS["h2d"] == 1 + uploads and fake_cupy.STATS["d2h"] == 1
    fake_cupy.reset()
    again = infer(problem, task, backend=gpu)
    assert fake_cupy.STATS["h2d"] == 1 and fake_cupy.STATS["d2h"] == 1
    assert again.ln_partition == got.ln_partition
    assert got.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
    if task == "mar":
        assert got.marginals is not None and cpu.marginals is not None
        for v, probs in cpu.marginals.items():
            np.testing.assert_allclose(got.marginals[v], probs, atol=1e-12)


def test_a_tiny_tree_runs_on_the_host_and_says_so(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree whose largest intermediate is at most HOST_LARGEST entries runs on the host
    whatever the backend (a device's launches cost more than its steps): nothing goes to the
    fake device, the numbers equal NumPy's, and the result's tree says where it ran."""
    from dcop.contraction import engine
    from dcop.gpu import CupyBackend
    from tests.gpu import fake_cupy

    monkeypatch.setattr(engine, "HOST_LARGEST", 4096)
    problem = ising_grid(6, 0.5, 0.1, seed=4)
    for task in ("pr", "mar"):
        cpu = infer(problem, task)
        fake_cupy.reset()
        gpu = infer(problem, task, backend=CupyBackend())
        assert gpu.tree is not None and gpu.tree["largest_intermediate"] <= 4096
        assert gpu.tree.get("on_host") is True and cpu.tree is not None
        assert "on_host" not in cpu.tree  # asked for the host: nothing to say
        assert fake_cupy.STATS["h2d"] == 0 and not fake_cupy.LAUNCHED
        assert gpu.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
    monkeypatch.setattr(engine, "HOST_LARGEST", 0)
    fake_cupy.reset()
    device = infer(problem, "pr", backend=CupyBackend())
    assert device.tree is not None and "on_host" not in device.tree
    assert fake_cupy.STATS["h2d"] >= 1


def test_a_large_pair_summing_little_is_one_launch_in_the_larger_operands_layout(
    fake_cupy_module: ModuleType,
) -> None:
    """A 2 x 2 factor into a 2^19-entry table, one variable summed (DIRECT_SUMMED): one strided
    launch instead of layout copies and a matrix product; the output keeps the large table's
    axis order; the numbers equal einsum's."""
    import numpy as np

    from dcop.contraction.execute import DIRECT_PAIR, DIRECT_SUMMED, pair_product
    from dcop.gpu import CupyBackend
    from tests.gpu import fake_cupy

    backend = CupyBackend()
    cp = fake_cupy_module
    rng = np.random.default_rng(3)
    scope_big = tuple(f"v{i}" for i in range(19))
    big, factor = rng.random((2,) * 19), rng.random((2, 2))
    assert big.size * 2 > DIRECT_PAIR and DIRECT_SUMMED >= 2
    keep = frozenset(scope_big[1:]) | {"w"}
    fake_cupy.reset()
    got, scope = pair_product(
        cp, cp.asarray(factor), ("w", "v0"), cp.asarray(big), scope_big, keep,
        backend.strided.product_sum,
    )  # fmt: skip
    assert [k for k in fake_cupy.LAUNCHED if k.startswith("dcop_psum")] == [
        "dcop_psum_rows_i32_f64"
    ]
    assert scope == (*scope_big[1:], "w")
    want = np.einsum("wa,a...->...w", factor, big)
    np.testing.assert_allclose(got.a, want, rtol=1e-12)
