"""Several real GPUs of one host (skipped with fewer than two): a bucket split over devices, BE
on them, and distributed agents over them give the one-GPU answers; UTILs between agents of
different devices take the path peer access allows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dcop.backends import get_backend, gpu_count
from dcop.backends.numpy import NumpyBackend
from dcop.generators import random_network
from dcop.inference import solve
from dcop.tables import Table

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(gpu_count() < 2, reason="needs CuPy and two CUDA devices"),
]


def _bucket(d: int = 12) -> tuple[list[Table], str]:
    rng = np.random.default_rng(5)
    return [
        Table(("a", "b", "c", "x"), rng.integers(0, 100, (d,) * 4).astype(np.float32)),
        Table(("x", "e"), rng.integers(0, 100, (d, d)).astype(np.float32)),
        Table(("e", "a"), rng.integers(0, 100, (d, d)).astype(np.float32)),
    ], "x"


@pytest.mark.parametrize("host", [False, True], ids=["on-device", "to-host"])
@pytest.mark.parametrize("op", ["min", "logsumexp"])
def test_multi_device_split_bucket_equals_one_device(host: bool, op: Any) -> None:
    from dcop.gpu import CupyBackend
    from dcop.gpu.multi import MultiGpuBackend

    tables, var = _bucket()
    cap: dict[str, Any] = {"max_device_bytes": 1 << 12, "chunk_bytes": 1 << 11} if host else {}
    one = CupyBackend(0, **cap)
    want = one.to_numpy(one.join_eliminate(tables, var, op).data)
    multi = MultiGpuBackend(range(gpu_count()), split_min_entries=0, **cap)
    got = multi.join_eliminate(tables, var, op)
    assert multi.splits[-1].landing == ("host" if host else "device")
    np.testing.assert_allclose(multi.to_numpy(got.data), want, rtol=1e-6)
    np.testing.assert_allclose(
        multi.to_numpy(got.data), NumpyBackend().join_eliminate(tables, var, op).data, rtol=1e-5
    )


def test_multi_device_be_equals_one_device() -> None:
    problem = random_network(16, 8, 0.35, 0.5, seed=2)
    multi: Any = get_backend("cupy", devices=range(gpu_count()), split_min_entries=1 << 16)
    got = solve(problem, backend=multi)
    assert multi.splits
    assert got.cost == pytest.approx(solve(problem, backend="cupy").cost)
    assert got.cost == pytest.approx(solve(problem, backend="numpy").cost)


@pytest.mark.parametrize("placement", ["round-robin", "balanced", "split"])
def test_multi_device_agents_find_the_one_gpu_answer(
    placement: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cupy

    from dcop.coordinator import run_local
    from dcop.protocol import RunSpec

    monkeypatch.setenv("DCOP_CUDA_IPC", "1")
    monkeypatch.setenv("DCOP_CUDA_IPC_MIN_BYTES", "0")  # every UTIL by its device path
    spec = RunSpec(gpu_min_entries=0)  # every bucket on a device
    problem = random_network(14, 6, 0.2, 0.5, seed=2)  # a tree that branches
    one = run_local(problem, spec, gpu=0, timeout=120)
    many = run_local(problem, spec, gpu="0,1", gpu_placement=placement, timeout=120)
    assert many.cost == one.cost and many.assignment == one.assignment
    agents = many.agents
    paths: set[str] = set()
    for result in agents.values():
        if result["parent"] is None:
            continue
        me = int(result["backend"]["device"])
        parent = int(agents[result["parent"]]["backend"]["device"])
        took = {k.split("_")[1] for k in result["backend"] if k.startswith("handover_")}
        if me == parent:
            want = "ipc"
        else:
            want = "p2p" if cupy.cuda.runtime.deviceCanAccessPeer(parent, me) else "host"
        assert took == {want}, (result["id"], result["backend"])
        paths.add(want)
    assert {int(r["backend"]["device"]) for r in agents.values()} == {0, 1}


@pytest.mark.parametrize("source", ["device", "pageable", "pinned"])
def test_multi_device_slices_of_the_inputs_give_the_one_device_answer(
    source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs cut along the leading output variable (strided: a 2-D copy from the first
    device, or from host memory, pageable or page-locked) give NumPy's answer, and each other
    device is sent only its share of the tables that hold that variable."""
    import cupy

    from dcop.gpu import multi as multi_module
    from dcop.gpu.backend import pinned_empty
    from dcop.gpu.multi import MultiGpuBackend

    monkeypatch.setattr(multi_module, "SMALL_TABLE_BYTES", 0)
    d = 24
    rng = np.random.default_rng(3)
    tables = [
        Table(("x", "b", "c"), rng.integers(0, 100, (d, d, d)).astype(np.float32)),
        Table(("b", "x", "e"), rng.integers(0, 100, (d, d, d)).astype(np.float32)),
        Table(("e", "x"), rng.integers(0, 100, (d, d)).astype(np.float32)),
    ]
    want = NumpyBackend().join_eliminate(tables, "x", scope=("b", "c", "e")).data
    multi = MultiGpuBackend(range(gpu_count()), split_min_entries=0)
    if source == "device":
        given = [multi.table(t.scope, t.data, np.float32) for t in tables]
    elif source == "pinned":
        given = []
        for t in tables:
            host = pinned_empty(cupy, t.data.shape, t.data.dtype)
            host[...] = t.data
            given.append(Table(t.scope, host))
    else:
        given = tables
    got = multi.join_eliminate(given, "x", scope=("b", "c", "e"))
    np.testing.assert_array_equal(multi.to_numpy(got.data), want)
    split = multi.splits[-1]
    lo, hi = split.ranges[1]
    share = sum(t.data.nbytes // d * (hi - lo) if "b" in t.scope else t.data.nbytes for t in tables)
    assert split.moved[1] == share
