"""Several GPUs of one host, on a fake CuPy with several devices (no GPU needed): the backend
switch, device lists, the path of a UTIL handed between agents of different devices, agent
placement over devices, and a bucket split over devices."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop.backends import get_backend, gpu_count
from dcop.backends.base import BucketShape
from dcop.backends.numpy import NumpyBackend
from dcop.backends.placed import PlacedBackend
from dcop.errors import BackendUnavailable
from dcop.tables import Table
from tests.gpu import fake_cupy


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """A fake CuPy with two devices that can read each other's memory."""
    for name in ("CUPY_CACHE_DIR", "DCOP_KERNEL_CACHE", "DCOP_GPU_MIN_ENTRIES", "DCOP_CUDA_IPC"):
        monkeypatch.delenv(name, raising=False)
    with fake_cupy.installed(monkeypatch, devices=2) as module:
        yield module


# ---- the one backend switch ---------------------------------------------------------------------
def test_backend_switch_builds_every_kind(two_gpus: ModuleType) -> None:
    from dcop.gpu import CupyBackend
    from dcop.gpu.multi import MultiGpuBackend

    assert gpu_count() == 2
    assert isinstance(get_backend("numpy"), NumpyBackend)
    one = get_backend("cupy", 1)
    assert isinstance(one, CupyBackend) and one.device_id == 1
    assert isinstance(get_backend("cupy", devices=[1]), CupyBackend)
    placed: Any = get_backend("placed", 1, min_entries=123)
    assert isinstance(placed, PlacedBackend)
    assert placed.gpu.device_id == 1 and placed.min_entries == 123
    multi: Any = get_backend("cupy", devices=(0, 1))
    assert isinstance(multi, MultiGpuBackend) and multi.device_ids == (0, 1)
    assert isinstance(get_backend("auto"), CupyBackend)
    with pytest.raises(BackendUnavailable, match="unknown backend"):
        get_backend("tpu")
    with pytest.raises(BackendUnavailable, match="no device 2"):
        get_backend("cupy", 2)


def test_backend_switch_without_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "cupy", None)
    assert gpu_count() == 0
    assert isinstance(get_backend("auto"), NumpyBackend)
    for name in ("cupy", "placed"):
        with pytest.raises(BackendUnavailable):
            get_backend(name)


def test_fake_devices_keep_arrays_apart(two_gpus: ModuleType) -> None:
    cupy = two_gpus
    with cupy.cuda.Device(1):
        a = cupy.asarray(np.arange(4.0))
    assert a.device.id == 1
    b = cupy.asarray(a)  # on device 0 now: a peer copy
    assert b.device.id == 0 and fake_cupy.STATS["peer_copies"] == 1
    assert cupy.cuda.runtime.deviceGetByPCIBusId("0000:02:00") == 1


# ---- a bucket split over devices ----------------------------------------------------------------
def _bucket(seed: int, d: int = 6) -> tuple[list[Any], str]:
    from dcop.tables import Table

    rng = np.random.default_rng(seed)
    tables = [
        Table(("a", "b", "x"), rng.integers(0, 50, (d, d, d)).astype(np.float32)),
        Table(("x", "c"), rng.integers(0, 50, (d, d)).astype(np.float32)),
        Table(("c", "a"), rng.integers(0, 50, (d, d)).astype(np.float32)),
    ]
    return tables, "x"


def test_split_ranges_cover_the_units_once() -> None:
    from dcop.gpu.multi import split_ranges

    for n in (0, 1, 2, 7, 100):
        for k in (1, 2, 3, 4):
            ranges = split_ranges(n, k)
            assert len(ranges) == k and ranges[0][0] == 0 and ranges[-1][1] == n
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
            sizes = [hi - lo for lo, hi in ranges]
            assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("landing", ["device", "host"])
@pytest.mark.parametrize("specialize", [0, 1 << 62])  # generated kernel, generic kernel
@pytest.mark.parametrize("op", ["min", "logsumexp"])  # BE, PR
def test_split_bucket_equals_the_unsplit_one(
    monkeypatch: pytest.MonkeyPatch, landing: str, specialize: int, op: Any
) -> None:
    from dcop.gpu import CupyBackend
    from dcop.gpu.multi import MultiGpuBackend

    for devices in (2, 3):
        with fake_cupy.installed(monkeypatch, devices=devices):
            tables, var = _bucket(devices)
            # "host": an output over the device budget (chunks of 200 bytes, streamed out)
            cap = {"max_device_bytes": 600, "chunk_bytes": 200} if landing == "host" else {}
            one = CupyBackend(specialize_entries=specialize, **cap)
            want = one.to_numpy(one.join_eliminate(tables, var, op).data)
            multi = MultiGpuBackend(
                range(devices), split_min_entries=0, specialize_entries=specialize, **cap
            )
            got = multi.join_eliminate(tables, var, op)
            assert multi.splits and multi.splits[-1].landing == landing
            assert len(multi.splits[-1].ranges) == devices
            assert got.scope == ("a", "b", "c")
            data = multi.to_numpy(got.data)
            np.testing.assert_allclose(data, want, rtol=1e-6)
            want_np = NumpyBackend().join_eliminate(tables, var, op)
            np.testing.assert_allclose(data, want_np.data, rtol=1e-5)
            if landing == "device":
                assert got.data.device.id == 0  # the slices came to the first device
                assert fake_cupy.STATS["peer_copies"] >= devices - 1
            else:
                assert isinstance(got.data, np.ndarray)


def test_small_buckets_stay_on_the_first_device(two_gpus: ModuleType) -> None:
    from dcop.gpu.multi import MultiGpuBackend

    multi = MultiGpuBackend((1, 0))  # the default threshold: a tiny bucket is not split
    tables, var = _bucket(1)
    got = multi.join_eliminate(tables, var)
    assert not multi.splits and got.data.device.id == 1
    np.testing.assert_allclose(
        multi.to_numpy(got.data), NumpyBackend().join_eliminate(tables, var).data
    )
    with pytest.raises(BackendUnavailable, match="distinct"):
        MultiGpuBackend((0, 0))
    with pytest.raises(BackendUnavailable, match="distinct"):
        MultiGpuBackend((0,))


def test_split_be_solve_equals_one_device(two_gpus: ModuleType) -> None:
    """A whole BE solve with every large bucket split: the same bound as NumPy's."""
    from dcop.generators import random_network
    from dcop.gpu.multi import MultiGpuBackend
    from dcop.inference import solve

    problem = random_network(9, 4, 0.5, 0.5, seed=3)
    multi = MultiGpuBackend((0, 1), split_min_entries=16)
    got = solve(problem, backend=multi)
    want = solve(problem, backend="numpy")
    assert multi.splits
    assert got.cost == pytest.approx(want.cost)


# ---- UTILs between agents of different devices --------------------------------------------------
def _domain(device: int) -> str:
    """An IPC domain of this host naming the fake device's PCI bus (``device + 1``)."""
    return f"cuda/boot/ipc:[1]/pid:[1]/0000:{device + 1:02x}:00"


def _agents_on(devices: int, device_of: Any) -> Any:
    """Each agent its placed backend (every bucket and table on the device) on its device."""
    from dcop.gpu import CupyBackend

    def make(agent: int) -> tuple[PlacedBackend, dict[str, Any]]:
        device = device_of(agent)
        gpu = CupyBackend(device=device)
        gpu.ipc_min_bytes = 0
        return PlacedBackend(NumpyBackend(), gpu, 0), {"ipc": _domain(device)}

    return make


def _expected_paths(doc: dict[str, Any], device_of: Any, peer: Any) -> dict[int, str]:
    """The path each child's UTIL must take to its parent, from the tree the run chose."""
    agents = doc["run"].agents
    out: dict[int, str] = {}
    for result in agents.values():
        if result["parent"] is None:
            continue
        me, them = device_of(result["id"]), device_of(agents[result["parent"]]["id"])
        out[result["id"]] = "ipc" if me == them else ("p2p" if peer(them, me) else "host")
    return out


@pytest.mark.parametrize(
    "peer",
    [lambda a, b: True, lambda a, b: False, lambda a, b: a == 0],
    ids=["peer-access", "no-peer-access", "device-0-reads-1-only"],
)
def test_multi_device_agents_hand_utils_over_by_the_right_path(
    monkeypatch: pytest.MonkeyPatch, peer: Any
) -> None:
    """Agents on two fake devices (k-th on k mod 2): a child on its parent's device hands its
    UTIL over by IPC, one on a device its parent's can read by IPC and a peer copy, else
    through the host as bytes; each agent's metrics name the path its UTIL took."""
    from dcop.generators import random_network
    from tests.agents.conftest import run_in_process

    problem = random_network(10, 5, 0.4, 0.3, seed=4)
    cpu = run_in_process(problem)

    def device_of(agent: int) -> int:
        return agent % 2

    with fake_cupy.installed(monkeypatch, devices=2, peer=peer):
        gpu = run_in_process(problem, per_agent=_agents_on(2, device_of))
        stats = dict(fake_cupy.STATS)
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    want = _expected_paths(gpu, device_of, peer)
    assert len(set(want.values())) > 1  # the tree has hand-overs of more than one kind
    by_id = {r["id"]: r for r in gpu["run"].agents.values()}
    took: dict[str, int] = {}
    for agent, path in want.items():
        figures = by_id[agent]["backend"]
        assert {k.split("_")[1] for k in figures if k.startswith("handover_")} == {path}
        took[path] = took.get(path, 0) + int(figures[f"handover_{path}_tables"])
        assert figures["device"] == device_of(agent)
    # one open (and one close) per buffer handed over on a device, across devices included
    assert stats["ipc_open"] == stats["ipc_close"] == took.get("ipc", 0) + took.get("p2p", 0)
    # another device's buffer was mapped on the parent's device, and its tables came over
    assert (stats["peer_opens"] > 0) == ("p2p" in took)
    p2p_bytes = sum(f.get("handover_p2p_bytes", 0) for f in (r["backend"] for r in by_id.values()))
    assert sum(r["backend"]["p2p_in_bytes"] for r in by_id.values()) == p2p_bytes
    assert gpu["metrics"]["ipc_tables"] == took.get("ipc", 0) + took.get("p2p", 0)
    # the run's metrics add them up by path
    assert gpu["metrics"]["handover_tables"] == {p: n for p, n in sorted(took.items()) if n}
    from tests.cli.conftest import assert_valid

    assert_valid(gpu["run"].to_json())  # the result document, paths and devices included


def test_handover_path_choice(two_gpus: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    from dcop.gpu.ipc import handover_path

    cupy = two_gpus
    zero, one = _domain(0), _domain(1)
    assert handover_path(cupy, zero, 0, zero, True) == "ipc"
    assert handover_path(cupy, zero, 0, one, True) == "p2p"
    assert handover_path(cupy, zero, 0, "", True) == "net"  # a CPU agent
    assert handover_path(cupy, "", 0, one, True) == "net"  # IPC off here
    other_host = "cuda/other-boot/ipc:[1]/pid:[1]/0000:02:00"
    assert handover_path(cupy, zero, 0, other_host, True) == "net"
    unseen = "cuda/boot/ipc:[1]/pid:[1]/0000:09:00"  # a GPU this process does not see
    assert handover_path(cupy, zero, 0, unseen, True) == "host"
    monkeypatch.setenv("DCOP_CUDA_P2P", "0")
    assert handover_path(cupy, zero, 0, one, True) == "host"
    monkeypatch.delenv("DCOP_CUDA_P2P")
    fake_cupy.PEER["access"] = lambda a, b: a == 1  # device 1 reads device 0, not the reverse
    assert handover_path(cupy, zero, 0, one, reading=True) == "host"  # I (0) read 1: no
    assert handover_path(cupy, zero, 0, one, reading=False) == "p2p"  # 1 reads me: yes


# ---- agents over devices ------------------------------------------------------------------------
def test_balanced_placement_puts_the_heaviest_subtrees_on_different_devices() -> None:
    from dcop.placement import balanced_devices

    # root 0 with two heavy branches (1 -> 3, 2 -> 4) and a light one (5)
    parent: dict[int, int | None] = {0: None, 1: 0, 2: 0, 3: 1, 4: 2, 5: 0}
    work = {0: 10.0, 1: 100.0, 2: 90.0, 3: 1000.0, 4: 900.0, 5: 1.0}
    got = balanced_devices(parent, work, (0, 1))
    assert got[1] == got[3] and got[2] == got[4]  # a subtree stays on one device
    assert got[3] != got[4]  # the two heaviest buckets run at once on different devices
    assert got[0] == got[1]  # the cut root goes with its heaviest child (its largest UTIL)
    four = balanced_devices(parent, work, (3, 2, 1, 0))
    assert four[3] != four[4] and set(four.values()) <= {0, 1, 2, 3}
    # nothing on a GPU: round robin
    assert balanced_devices(parent, dict.fromkeys(parent, 0.0), (0, 1)) == {
        v: v % 2 for v in parent
    }
    assert set(balanced_devices(parent, work, (1,)).values()) == {1}
    with pytest.raises(BackendUnavailable):
        balanced_devices(parent, work, ())


def test_a_chain_is_cut_until_the_branches_balance() -> None:
    from dcop.placement import balanced_devices

    # a chain 0 -> 1 -> 2 that forks into two equal heavy leaves 3 and 4
    parent: dict[int, int | None] = {0: None, 1: 0, 2: 1, 3: 2, 4: 2}
    work = {0: 1.0, 1: 1.0, 2: 1.0, 3: 500.0, 4: 500.0}
    got = balanced_devices(parent, work, (0, 1))
    assert got[3] != got[4] and got[0] == got[1] == got[2]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agent_devices_spread_agents_over_the_listed_devices(
    two_gpus: ModuleType, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    from dcop.coordinator.gpus import _planned_tree, agent_devices
    from dcop.coordinator.plan import RunPlan
    from dcop.errors import InputError
    from dcop.generators import random_network
    from dcop.protocol import RunSpec

    monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", "0")  # every bucket counts as GPU work
    problem = random_network(14, 4, 0.2, 0.5, seed=seed)  # trees that branch
    plan = RunPlan(problem, None, RunSpec())
    rr = agent_devices(plan, "all")  # two fake devices: found with CuPy
    assert rr == {k: k % 2 for k in range(problem.n)}
    assert agent_devices(plan, "1") == dict.fromkeys(range(problem.n), 1)
    assert agent_devices(plan, 0, "balanced") == dict.fromkeys(range(problem.n), 0)
    got = agent_devices(plan, "1,0", "balanced")
    assert set(got) == set(range(problem.n)) and set(got.values()) == {0, 1}
    parent, work = _planned_tree(plan)

    def crossing(devices: dict[int, int]) -> float:
        """UTIL work that crosses devices: a child's bucket work where its parent is elsewhere."""
        return sum(
            w for v, w in work.items() if parent[v] is not None and devices[v] != devices[parent[v]]
        )  # type: ignore[index]

    assert crossing(got) < crossing(rr)  # whole subtrees per device: fewer hand-overs cross
    with pytest.raises(InputError, match="placement"):
        agent_devices(plan, "0,1", "random")


def test_balanced_agents_on_two_devices_find_the_cpu_agents_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole chain on fakes: the coordinator's balanced placement, agents each on its
    device, UTILs across devices by P2P: the same cost and assignment as CPU agents."""
    from dcop.coordinator.gpus import agent_devices
    from dcop.coordinator.plan import RunPlan
    from dcop.generators import random_network
    from dcop.protocol import RunSpec
    from tests.agents.conftest import run_in_process

    problem = random_network(14, 4, 0.2, 0.5, seed=2)  # a tree that branches
    cpu = run_in_process(problem)
    with fake_cupy.installed(monkeypatch, devices=2):
        monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", "0")
        devices = agent_devices(RunPlan(problem, None, RunSpec()), "0,1", "balanced")
        gpu = run_in_process(problem, per_agent=_agents_on(2, devices.__getitem__))
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    used = {r["backend"]["device"] for r in gpu["run"].agents.values()}
    assert used == {0, 1}


def test_run_local_starts_each_agent_on_its_device(
    two_gpus: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dcop run's launcher gives each agent process its own --gpu device (none is started
    here: the hook keeps them back, and the run ends at its hello timeout); with ``split``, the
    devices to split over to the agents whose bucket will be split."""
    from dcop.coordinator import gpus, run_local
    from dcop.errors import DcopError
    from dcop.generators import random_network

    problem = random_network(6, 3, 0.5, 0.5, seed=1)
    threshold = {"entries": 1 << 40}
    monkeypatch.setattr(gpus, "_split_threshold", lambda: threshold["entries"])
    monkeypatch.setenv("DCOP_GPU_MIN_ENTRIES", "0")
    for gpu, placement, want, split_at in (
        ("all", "round-robin", [str(k % 2) for k in range(6)], 1 << 40),
        ("1", "round-robin", ["1"] * 6, 1 << 40),
        ("0,1", "split", [str(k % 2) for k in range(6)], 1 << 40),  # no bucket large enough
        ("0,1", "split", [f"{k % 2}/0,1" for k in range(6)], 0),
    ):
        threshold["entries"] = split_at
        argvs: dict[int, list[str]] = {}

        def keep(agent: int, argv: list[str], into: dict[int, list[str]] = argvs) -> None:
            into[agent] = argv

        with pytest.raises(DcopError):
            run_local(
                problem,
                gpu=gpu,
                gpu_placement=placement,
                agent_argv=keep,
                hello_timeout=0.2,
                timeout=2.0,
                fork=False,
            )
        got = [argvs[k][argvs[k].index("--gpu") + 1] for k in range(6)]
        assert got == want


def test_dcop_solve_device_list_builds_the_split_backend(two_gpus: ModuleType) -> None:
    from dcop.backends import resolve_backend
    from dcop.cli.solving import engine_for
    from dcop.errors import InputError
    from dcop.gpu import CupyBackend
    from dcop.gpu.multi import MultiGpuBackend
    from dcop.starting import StartingBackend

    def engine(name: str, device: str) -> object:
        return resolve_backend(engine_for(name, device, False))

    assert engine_for("numpy", "0,1", False) == "numpy"
    # a device backend starts on its own thread, taken once the solve needs it
    assert isinstance(engine_for("cupy", "0", False), StartingBackend)
    assert isinstance(engine("cupy", "0"), CupyBackend)
    assert isinstance(engine("cupy", "all"), MultiGpuBackend)
    assert isinstance(engine("auto", "0,1"), MultiGpuBackend)
    single = engine("cupy", "1")
    assert isinstance(single, CupyBackend) and single.device_id == 1
    with pytest.raises(BackendUnavailable, match="no device 2"):
        engine("cupy", "0,2")
    with pytest.raises(InputError):
        engine("cupy", "0,x")


def test_a_table_larger_than_a_device_is_solved_exactly(two_gpus: ModuleType) -> None:
    """BE whose largest tables exceed each (fake) device's budget: the buckets that make them
    are split over both devices and stream their slices to pinned host memory, and the buckets
    that take them read them there in place (zero copy); the optimum is NumPy's."""
    from dcop.generators import random_network
    from dcop.gpu import CupyBackend
    from dcop.gpu.multi import MultiGpuBackend
    from dcop.inference import solve

    problem = random_network(12, 5, 0.6, 0.3, seed=5)
    want = solve(problem, backend="numpy")
    cap = {"max_device_bytes": 4096, "chunk_bytes": 1024}
    multi = MultiGpuBackend((0, 1), split_min_entries=0, **cap)
    got = solve(problem, backend=multi)
    assert got.cost == pytest.approx(want.cost) and got.assignment == want.assignment
    assert any(s.landing == "host" and s.out_bytes > 4096 for s in multi.splits)
    assert fake_cupy.STATS["zero_copy"] > 0  # a host table read where it lies
    assert sum(p.transfers.zero_copy_bytes for p in multi.parts) > 4096
    one = CupyBackend(**cap)  # one device does it too, in chunks: the same answer
    assert solve(problem, backend=one).cost == pytest.approx(want.cost)


def test_a_pageable_host_table_is_uploaded_not_read_in_place(two_gpus: ModuleType) -> None:
    from dcop.gpu import CupyBackend

    gpu = CupyBackend(max_device_bytes=64)
    host = Table(("a", "x"), np.arange(64, dtype=np.float32).reshape(8, 8))
    data = gpu._device_data(host)  # 256 bytes > half the budget, but not page-locked
    assert fake_cupy.STATS["zero_copy"] == 0 and data.a is not host.data


def test_the_run_summary_names_the_hand_over_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from dcop.cli.report import write_summary
    from dcop.generators import random_network
    from tests.agents.conftest import run_in_process

    problem = random_network(10, 5, 0.4, 0.3, seed=4)
    with fake_cupy.installed(monkeypatch, devices=2, peer=False):
        gpu = run_in_process(problem, per_agent=_agents_on(2, lambda agent: agent % 2))
    out = io.StringIO()
    write_summary(gpu["run"], out)
    paths = gpu["metrics"]["handover_tables"]
    assert set(paths) == {"host", "ipc"}  # no peer access: between devices through the host
    want = ", ".join(f"{p} {n}" for p, n in paths.items())
    assert f"UTIL tables handed over: {want}" in out.getvalue()


# ---- agents whose large buckets are split over every device -----------------------------------
def test_an_agents_gpu_value_names_its_device_and_its_split(two_gpus: ModuleType) -> None:
    from dcop.errors import InputError
    from dcop.placement import agent_gpu

    assert agent_gpu("1/0,1", 5, None) == (1, (0, 1))
    assert agent_gpu("0/all", 5, 2) == (0, (0, 1))
    assert agent_gpu("0,1", 3, None) == (1, ())
    assert agent_gpu("all", 2, 2) == (0, ())
    for bad in ("2/0,1", "1,0/0,1", "1/x"):
        with pytest.raises(InputError):
            agent_gpu(bad, 0, 2)


def test_split_placement_gives_each_agent_its_device_and_every_device(
    two_gpus: ModuleType,
) -> None:
    from dcop.coordinator.gpus import agent_gpu_values
    from dcop.coordinator.plan import RunPlan
    from dcop.generators import random_network
    from dcop.protocol import RunSpec

    problem = random_network(6, 3, 0.5, 0.5, seed=1)
    every_gpu = RunSpec(gpu_min_entries=0)  # every bucket on a device
    every = RunPlan(problem, None, every_gpu)
    plain = RunPlan(problem, None, RunSpec())
    got = agent_gpu_values(every, "all", "split", split_min_entries=0)
    assert got == {k: f"{k % 2}/0,1" for k in range(6)}
    # only agents whose bucket will be split get the list (none: these buckets are small)
    assert agent_gpu_values(every, "all", "split") == {k: str(k % 2) for k in range(6)}
    heavy = agent_gpu_values(every, "all", "split", split_min_entries=27)
    assert {v for v in heavy.values() if "/" in v} and {v for v in heavy.values() if "/" not in v}
    assert agent_gpu_values(plain, "1", "split") == dict.fromkeys(range(6), "1")
    assert agent_gpu_values(plain, "0,1") == {k: str(k % 2) for k in range(6)}
    assert RunPlan(problem, None, RunSpec(), gpu="0,1").devices == {k: str(k % 2) for k in range(6)}
    assert plain.devices is None  # no --gpu: no device


def test_agents_splitting_their_buckets_over_two_devices_find_the_cpu_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each agent's placed backend over both fake devices (its own first, made lazily): every
    bucket is split, UTILs still go by IPC or P2P from each agent's own device, and the answer
    is the CPU agents'."""
    from dcop.generators import random_network
    from tests.agents.conftest import run_in_process

    problem = random_network(10, 5, 0.4, 0.3, seed=4)
    cpu = run_in_process(problem)

    def make(agent: int) -> tuple[Any, dict[str, Any]]:
        device = agent % 2
        backend: Any = get_backend(
            "placed", device, devices=(0, 1), min_entries=0, split_min_entries=0
        )
        backend.gpu.primary.ipc_min_bytes = 0
        return backend, {"ipc": _domain(device)}

    with fake_cupy.installed(monkeypatch, devices=2):
        gpu = run_in_process(problem, per_agent=make)
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    figures = [r["backend"] for r in gpu["run"].agents.values()]
    assert sum(f["split_buckets"] for f in figures) > 0
    assert {f["device"] for f in figures} == {0, 1}
    assert set(gpu["metrics"]["handover_tables"]) <= {"ipc", "p2p"}


def test_an_agent_with_small_buckets_never_opens_the_other_devices(two_gpus: ModuleType) -> None:
    from dcop.gpu.multi import MultiGpuBackend

    backend: Any = get_backend("placed", 1, devices=(0, 1), min_entries=0)
    gpu = backend.gpu
    assert isinstance(gpu, MultiGpuBackend) and gpu.device_ids == (1, 0)
    assert [p.device_id for p in gpu.parts] == [1]  # the other device is not made yet
    gpu.prepare_bucket(BucketShape([("a", "x")], [(4, 4)], "x"))  # small: on its own device only
    assert len(gpu.parts) == 1
    gpu.prepare_bucket(BucketShape([("a", "b", "x")], [(2000, 2000, 1000)], "x"))  # splittable
    assert [p.device_id for p in gpu.parts] == [1, 0]


def test_a_split_prepared_in_the_background_is_waited_for(two_gpus: ModuleType) -> None:
    from dcop.gpu.multi import MultiGpuBackend

    gpu = MultiGpuBackend((0, 1), split_min_entries=0, lazy=True)
    tables, var = _bucket(2)
    gpu.prepare_bucket(
        BucketShape([t.scope for t in tables], [t.shape for t in tables], var), background=True
    )
    got = gpu.join_eliminate(tables, var)  # the other device is made (or waited for) first
    assert len(gpu.parts) == 2 and gpu.splits
    np.testing.assert_allclose(
        gpu.to_numpy(got.data), NumpyBackend().join_eliminate(tables, var).data
    )


@pytest.mark.parametrize("task", ["pr", "mar"])
def test_partition_function_over_two_devices_equals_numpy(two_gpus: ModuleType, task: str) -> None:
    from dcop.generators import ising_grid
    from dcop.gpu.multi import MultiGpuBackend
    from dcop.inference.partition import infer

    problem = ising_grid(4, coupling=0.7, seed=3)
    want = infer(problem, task, backend="numpy")
    multi = MultiGpuBackend((0, 1), split_min_entries=0)
    got = infer(problem, task, backend=multi)
    # exact PR and MAR run the contraction engine, whose contractions stay on the first device
    assert got.ln_partition == pytest.approx(want.ln_partition, rel=1e-9)
    if task == "mar":
        for name, probs in want.marginals.items():
            np.testing.assert_allclose(got.marginals[name], probs, atol=1e-9)


def test_partition_function_bounds_split_their_buckets(two_gpus: ModuleType) -> None:
    from dcop.generators import ising_grid
    from dcop.gpu.multi import MultiGpuBackend
    from dcop.inference.partition import infer

    problem = ising_grid(4, coupling=0.7, seed=3)
    want = infer(problem, "pr", z=3, backend="numpy")
    multi = MultiGpuBackend((0, 1), split_min_entries=0)
    got = infer(problem, "pr", z=3, backend=multi)
    assert multi.splits  # mini-buckets eliminated bucket by bucket, each split
    bounds, expected = got.to_json()["bounds"], want.to_json()["bounds"]
    assert bounds["ln_lower"] == pytest.approx(expected["ln_lower"], rel=1e-9)
    assert bounds["ln_upper"] == pytest.approx(expected["ln_upper"], rel=1e-9)


def test_a_local_run_simulates_each_candidate_tree_once(
    two_gpus: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--gpu balanced, --trees auto and the elimination offer read the same simulated trees:
    each candidate is built once in the coordinator, not once per question."""
    from dcop.coordinator import plan as plans
    from dcop.generators import random_network
    from dcop.protocol import RunSpec

    built: list[int] = []
    real = plans.simulate

    def counting(*args: Any, **kwargs: Any) -> Any:
        built.append(kwargs.get("tree", 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(plans, "simulate", counting)
    problem = random_network(30, 10, 0.3, 0.5, seed=1)  # UTILs past 65536 entries: 8 candidates
    plan = plans.RunPlan(problem, None, RunSpec(), gpu="0,1", gpu_placement="balanced")
    assert plan.devices is not None and set(plan.devices.values()) == {"0", "1"}
    assert "first DFS tree" in plan.elimination_note  # the offer compared with candidate 0
    assert plan.spec.trees == plan.tree_count == 8
    assert built == list(range(8))
