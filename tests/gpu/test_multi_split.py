"""A bucket split over several fake devices by slices of its inputs (issue 37): the same
answers as one device, each device sent only its slices, and a memory plan that counts what each
device and the host really hold."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dcop.backends.numpy import NumpyBackend
from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.inference import plan_for, solve
from dcop.model import CostTable, Problem, Variable
from dcop.orders.choose import ChosenOrder
from dcop.orders.greedy import min_fill_order
from dcop.tables import Table
from tests.gpu import fake_cupy


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CUPY_CACHE_DIR", "DCOP_KERNEL_CACHE", "DCOP_GPU_MIN_ENTRIES", "DCOP_CUDA_IPC"):
        monkeypatch.delenv(name, raising=False)


def _bucket(seed: int, d: int = 7) -> tuple[list[Table], str]:
    """A bucket whose leading output variable ``b`` is the second axis of its largest table
    (a strided slice) and the first of another (a contiguous one); the third lacks it."""
    rng = np.random.default_rng(seed)
    tables = [
        Table(("x", "b", "c"), rng.integers(0, 50, (d, d, d)).astype(np.float32)),
        Table(("b", "x"), rng.integers(0, 50, (d, d)).astype(np.float32)),
        Table(("c", "x"), rng.integers(0, 50, (d, d)).astype(np.float32)),
    ]
    return tables, "x"


@pytest.mark.parametrize("devices", [2, 3])
@pytest.mark.parametrize(
    ("source", "runs"),
    [("device", 64), ("device", 0), ("host", 64)],
    ids=["device-runs", "device-cut", "host"],
)
def test_each_device_is_sent_only_its_slices(
    monkeypatch: pytest.MonkeyPatch, devices: int, source: str, runs: int
) -> None:
    from dcop.gpu import multi as multi_module
    from dcop.gpu.multi import MultiGpuBackend, split_ranges

    # host tables of any size are cut too (by default the first device uploads a small one)
    monkeypatch.setattr(multi_module, "SMALL_TABLE_BYTES", 0)
    # a device table's slice copied run by run, or cut out first (runs = 0)
    monkeypatch.setattr(multi_module, "MAX_RUN_COPIES", runs)
    with fake_cupy.installed(monkeypatch, devices=devices):
        tables, var = _bucket(devices)
        # generated kernels: no metadata to upload, so every byte moved is a slice or output
        multi = MultiGpuBackend(range(devices), split_min_entries=0, specialize_entries=0)
        if source == "device":  # as an earlier bucket's output: on the first device
            tables = [multi.table(t.scope, t.data, np.float32) for t in tables]
        fake_cupy.STATS["moved"].clear()
        got = multi.join_eliminate(tables, var, scope=("b", "c"))
        split = multi.splits[-1]
        assert split.lead == "b" and split.ranges == tuple(split_ranges(7, devices))
        gathered = 0
        for device, (lo, hi) in enumerate(split.ranges):
            if device == 0 and source == "device":
                want = 0  # the first device computes its range where the inputs lie
            else:
                # of a table holding b, only the share of b's values this device computes
                want = sum(
                    t.data.nbytes // 7 * (hi - lo) if "b" in t.scope else t.data.nbytes
                    for t in tables
                )
            assert split.moved[device] == want
            if device:
                assert fake_cupy.STATS["moved"][device] == want
                gathered += (hi - lo) * 7 * 4  # its output slice, copied to the first device
        assert fake_cupy.STATS["moved"].get(0, 0) == split.moved[0] + gathered
        # less than the whole inputs sent to every device that computes away from them
        copies = devices if source == "host" else devices - 1
        assert sum(split.moved) < sum(t.data.nbytes for t in tables) * copies
        if source == "host":
            assert fake_cupy.STATS["memcpy"] > 0  # the strided slice: 2-D copies from the host
        want_np = NumpyBackend().join_eliminate(tables_host(tables), var, scope=("b", "c"))
        np.testing.assert_array_equal(multi.to_numpy(got.data), want_np.data)


def tables_host(tables: list[Table]) -> list[Table]:
    return [Table(t.scope, t.data if isinstance(t.data, np.ndarray) else t.data.a) for t in tables]


def test_a_table_without_the_split_variable_goes_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from dcop.gpu.multi import MultiGpuBackend

    with fake_cupy.installed(monkeypatch, devices=2):
        rng = np.random.default_rng(1)
        tables = [
            Table(("a", "x"), rng.random((6, 5)).astype(np.float32)),
            Table(("x", "c"), rng.random((5, 4)).astype(np.float32)),
        ]
        multi = MultiGpuBackend((0, 1), split_min_entries=0)
        placed = [multi.table(t.scope, t.data, np.float32) for t in tables]
        got = multi.join_eliminate(placed, "x", scope=("a", "c"))
        # device 1 computes a in [3, 6): half of the first table, all of the second
        assert multi.splits[-1].moved == (0, 6 * 5 * 4 // 2 + 5 * 4 * 4)
        np.testing.assert_allclose(
            multi.to_numpy(got.data),
            NumpyBackend().join_eliminate(tables, "x", scope=("a", "c")).data,
            rtol=1e-6,
        )


@pytest.mark.parametrize("devices", [2, 3])
@pytest.mark.parametrize("algo", ["be", "mbe"])
@pytest.mark.parametrize("cap", [False, True], ids=["on-device", "through-host"])
def test_split_be_and_mbe_equal_one_device(
    monkeypatch: pytest.MonkeyPatch, devices: int, algo: str, cap: bool
) -> None:
    """Cost, bound and assignment of BE and MBE with every bucket split over 2 and 3 devices
    equal one device's and NumPy's; with a small device budget the large outputs go to pinned
    host memory and the buckets that read them take slices of them from there."""
    from dcop.gpu import CupyBackend
    from dcop.gpu.multi import MultiGpuBackend

    problem = random_network(11, 4, 0.5, 0.4, seed=devices)
    z = 3 if algo == "mbe" else None
    want = solve(problem, algo, z=z, backend="numpy")
    options: dict[str, Any] = {"max_device_bytes": 2048, "chunk_bytes": 512} if cap else {}
    with fake_cupy.installed(monkeypatch, devices=devices):
        one = solve(problem, algo, z=z, backend=CupyBackend(**options))
        multi = MultiGpuBackend(range(devices), split_min_entries=0, **options)
        got = solve(problem, algo, z=z, backend=multi)
        assert multi.splits
        assert {len(s.ranges) for s in multi.splits} == {devices}
        if cap and algo == "be":  # MBE's outputs (z = 3) all fit
            assert any(s.landing == "host" for s in multi.splits)
    for other in (one, want):
        assert got.upper_bound == pytest.approx(other.upper_bound)
        assert got.lower_bound == pytest.approx(other.lower_bound)
        assert got.assignment == other.assignment


@pytest.mark.parametrize("devices", [2, 3])
def test_dpop_agents_splitting_over_devices_find_the_cpu_answer(
    monkeypatch: pytest.MonkeyPatch, devices: int
) -> None:
    from dcop.backends import get_backend
    from tests.agents.conftest import run_in_process

    problem = random_network(9, 4, 0.45, 0.3, seed=5)
    cpu = run_in_process(problem)
    every = tuple(range(devices))

    def make(agent: int) -> tuple[Any, dict[str, Any]]:
        device = agent % devices
        order = (device, *(d for d in every if d != device))
        backend: Any = get_backend(
            "placed", device, devices=order, min_entries=0, split_min_entries=0
        )
        backend.gpu.primary.ipc_min_bytes = 0
        return backend, {"ipc": f"cuda/boot/ipc:[1]/pid:[1]/0000:{device + 1:02x}:00"}

    with fake_cupy.installed(monkeypatch, devices=devices):
        gpu = run_in_process(problem, per_agent=make)
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    figures = [r["backend"] for r in gpu["run"].agents.values()]
    assert sum(f["split_buckets"] for f in figures) > 0


def test_small_buckets_are_not_split_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    from dcop.gpu.multi import DEFAULT_SPLIT_MIN_ENTRIES, MultiGpuBackend

    with fake_cupy.installed(monkeypatch, devices=2):
        multi = MultiGpuBackend((0, 1))
        problem = random_network(10, 4, 0.5, 0.4, seed=1)
        solve(problem, backend=multi)
        assert not multi.splits and multi.split_min_entries == DEFAULT_SPLIT_MIN_ENTRIES


# ---- the memory plan --------------------------------------------------------------------------
def _wide_bucket(d: int, n_out: int) -> Problem:
    """A star: ``x`` (eliminated first) tied to ``n_out`` others, which a chain of small tables
    also ties, so the first bucket's joined table has ``d ** (n_out + 1)`` entries."""
    rng = np.random.default_rng(7)
    outs = [f"v{i}" for i in range(n_out)]
    names = ["x", *outs]
    tables = [CostTable(("x", u), rng.integers(0, 9, (d, d)).astype(float)) for u in outs]
    tables.append(CostTable(tuple(outs[:3]), rng.integers(0, 9, (d, d, d)).astype(float)))
    return Problem({v: Variable.with_size(v, d) for v in names}, tables, name="star")


def test_the_plan_accepts_a_joined_table_larger_than_a_device_when_the_slices_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dcop.gpu.multi import MultiGpuBackend

    problem = _wide_bucket(6, 5)  # the bucket of x: 6**6 joined entries
    order = ChosenOrder("given", ["x", "v0", "v1", "v2", "v3", "v4"])
    memory = 64 << 10
    with fake_cupy.installed(monkeypatch, devices=2, memory=memory):
        multi = MultiGpuBackend((0, 1), split_min_entries=0)
        plan = plan_for(problem, order.order, None, "float32", multi, resident=0)
        assert plan.largest_joined * 4 > memory  # the joined table would not fit one device
        assert plan.devices is not None and plan.devices.device_bytes == memory
        assert 0 < plan.device_peak_bytes <= memory and plan.fits(1 << 30)
        got = solve(problem, ordering=order, backend=multi, dtype="float32")
        assert multi.splits and multi.splits[0].joined == 6**6
    want = solve(problem, ordering=order, backend="numpy")
    assert got.cost == want.cost and got.assignment == want.assignment


def test_the_plan_refuses_when_a_devices_slices_do_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dcop.gpu.multi import MultiGpuBackend

    problem = _wide_bucket(6, 5)
    order = ChosenOrder("given", ["x", "v0", "v1", "v2", "v3", "v4"])
    with fake_cupy.installed(monkeypatch, devices=2, memory=64 << 10):
        multi = MultiGpuBackend((0, 1), split_min_entries=0)
        roomy = plan_for(problem, order.order, None, "float32", multi, resident=0)
    assert roomy.fits(1 << 30)
    small = 4 << 10  # less than the inputs and the slices of the bucket of x
    with fake_cupy.installed(monkeypatch, devices=2, memory=small):
        multi = MultiGpuBackend((0, 1), split_min_entries=0)
        plan = plan_for(problem, order.order, None, "float32", multi, resident=0)
        assert plan.device_peak_bytes > small and not plan.fits(1 << 30)
        assert plan.peak_bytes <= 1 << 30  # the host would have room: the devices have not
        with pytest.raises(TableTooLarge, match=r"on device \d of 2"):
            solve(problem, ordering=order, backend=multi, dtype="float32", max_bytes=1 << 30)


def test_the_plan_counts_only_host_outputs_against_the_host_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Outputs that stay on the devices are not host memory; one over the device budget is."""
    from dcop.gpu.multi import MultiGpuBackend

    problem = random_network(12, 5, 0.6, 0.3, seed=5)
    order = min_fill_order(problem.neighbours())
    host_plan = plan_for(problem, order, None, "float32", "numpy", resident=0)
    with fake_cupy.installed(monkeypatch, devices=2):
        roomy = plan_for(problem, order, None, "float32", MultiGpuBackend((0, 1)), resident=0)
        tight = MultiGpuBackend((0, 1), max_device_bytes=4096, chunk_bytes=1024)
        capped = plan_for(problem, order, None, "float32", tight, resident=0)
    assert roomy.peak_bytes == 0  # everything on the first device
    assert 0 < capped.peak_bytes <= host_plan.peak_bytes
    largest = max(m.out_entries for b in capped.buckets for m in b.minibuckets) * 4
    assert largest > 4096 and capped.peak_bytes >= largest
    assert capped.fits_devices() and capped.device_peak_bytes > 0


@pytest.mark.parametrize("max_pitch", [1 << 30, 8])  # one 2-D copy; a copy per row
def test_host_slices_by_rows_equal_numpy(monkeypatch: pytest.MonkeyPatch, max_pitch: int) -> None:
    """Strided host slices copied by one 2-D copy or row by row (a pitch over the 2-D limit),
    and a strided host table cut on the host: the answer is NumPy's."""
    from dcop.gpu import multi as multi_module
    from dcop.gpu.multi import MultiGpuBackend

    monkeypatch.setattr(multi_module, "SMALL_TABLE_BYTES", 0)
    monkeypatch.setattr(multi_module, "MAX_PITCH", max_pitch)
    tables, var = _bucket(5)
    # not C-contiguous: cut (and made contiguous) on the host, then uploaded
    tables.append(Table(("b", "c"), np.arange(49, dtype=np.float32).reshape(7, 7).T))
    with fake_cupy.installed(monkeypatch, devices=2):
        multi = MultiGpuBackend((0, 1), split_min_entries=0)
        got = multi.join_eliminate(tables, var, scope=("b", "c"))
        rows = 7 if max_pitch == 8 else 1  # the (x, b, c) table: x's 7 runs of b's range
        assert fake_cupy.STATS["memcpy"] >= 2 * rows
        data = multi.to_numpy(got.data)
    want = NumpyBackend().join_eliminate(tables, var, scope=("b", "c")).data
    np.testing.assert_allclose(data, want, rtol=1e-6)


def test_the_bench_clique_larger_than_a_device_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/gpu_multi.py's big case in small: the first bucket's output (over a device's
    budget) goes to pinned host memory, split; the next bucket (its joined table that size, its
    output a third of it) reads it there, the first device in place and the other its slice of
    it; the plan accepts it and the optimum is the closed form."""
    import sys
    from pathlib import Path

    from dcop.gpu.multi import MultiGpuBackend

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import gpu_multi

    problem, optimum = gpu_multi.big_problem(3000, seed=2)
    out_bytes = gpu_multi.largest_output_bytes(problem)
    with fake_cupy.installed(monkeypatch, devices=2, memory=8 << 10):
        multi = MultiGpuBackend((0, 1), split_min_entries=0, max_device_bytes=2048, chunk_bytes=256)
        plan = plan_for(problem, min_fill_order(problem.neighbours()), None, "float32", multi)
        assert plan.fits_devices() and plan.largest_output * 4 == out_bytes > 2048
        got = solve(problem, backend=multi, dtype="float32", ordering="minfill")
        producer, consumer = multi.splits[0], multi.splits[1]
        assert producer.landing == "host" and producer.out_bytes == out_bytes
        assert consumer.joined * 4 == out_bytes  # the joined table: the host table's size
        assert consumer.moved[0] == 0  # the first device reads the host table where it lies
        lo, hi = consumer.ranges[1]
        assert consumer.moved[1] >= out_bytes // 2 * (hi - lo)  # the other: its slice of it
        assert consumer.moved[1] < out_bytes
    assert got.lower_bound == optimum == got.upper_bound


def test_an_agents_warm_up_makes_every_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent is given several devices only when its bucket will be split: its warm-up (before
    the solve) makes and warms every device, rather than its first split."""
    from dcop.backends import get_backend

    with fake_cupy.installed(monkeypatch, devices=3):
        backend: Any = get_backend("placed", 2, devices=(0, 1, 2), min_entries=0)
        assert [p.device_id for p in backend.gpu.parts] == [2]
        backend.warm_up(dtypes=("float32",), ops=("min",))
        assert [p.device_id for p in backend.gpu.parts] == [2, 0, 1]
        assert all(p.setup.warm_up_s > 0 for p in backend.gpu.parts)
