"""UTILs handed over on the device by CUDA IPC between agents of one GPU, without a GPU: every
agent runs in process on one placed backend over the fake CuPy, whose IPC handles name live
host buffers (a freed one cannot be opened, as on a GPU). The device tests do it for real."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from dcop.backends.numpy import NumpyBackend
from dcop.backends.placed import PlacedBackend
from dcop.errors import DcopError
from dcop.generators import ising_grid, random_network
from dcop.protocol import RunSpec
from tests.agents.conftest import run_in_process
from tests.gpu import fake_cupy

DOMAIN = "cuda/boot/ipc:[1]/pid:[1]/0000:00:00"


def _placed(ipc_min_bytes: int = 0) -> PlacedBackend:
    """Every bucket on the "device"; every device table of at least ``ipc_min_bytes`` by IPC."""
    from dcop.gpu import CupyBackend

    gpu = CupyBackend()
    gpu.ipc_min_bytes = ipc_min_bytes
    return PlacedBackend(NumpyBackend(), gpu, 0)


@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2)])
def test_agents_of_one_gpu_hand_utils_over_by_ipc(
    fake_cupy_module: ModuleType, algo: str, z: int | None
) -> None:
    problem = random_network(9, 6, 0.4, 0.3, seed=4)  # UTILs larger than a handle
    cpu = run_in_process(problem, algo, z)
    gpu = run_in_process(problem, algo, z, backend=_placed(), ipc=DOMAIN)
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    m = gpu["metrics"]
    assert m["ipc_tables"] >= 1 and m["ipc_bytes"] > 0
    # each child offered one buffer when the tree was chosen; its parent mapped it then (one
    # open) and unmapped it once the UTIL's tables were copied out (one close)
    offers = m["messages"]["offer"]
    assert 1 <= offers <= m["messages"]["util"] and offers <= m["ipc_tables"]
    assert fake_cupy.STATS["ipc_open"] == fake_cupy.STATS["ipc_close"] == offers
    # the network carried headers only, the UTIL sizes still count the tables (paper's figure)
    per_agent = gpu["agents"].values()
    assert sum(a["util_bytes"] for a in per_agent) >= m["bytes"]["util"] + m["ipc_bytes"]
    if algo == "dpop":  # DPOP's UTILs outweigh a handle (ADPOP(2)'s mini-bucket tables may not)
        assert m["bytes"]["util"] < cpu["metrics"]["bytes"]["util"]
    assert m["largest_util_entries"] == cpu["metrics"]["largest_util_entries"]
    assert m["checks"]["util_messages_match"]


@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2)])
def test_gpu_agents_whose_buckets_stay_on_the_cpu_run_them_as_cpu_agents_do(
    fake_cupy_module: ModuleType, algo: str, z: int | None
) -> None:
    """Every bucket under the threshold: GPU agents hand each to the host backend (decided before
    the timed computation), nothing runs on the "device", every bucket is still counted, and the
    answers are the CPU agents'."""
    from dcop.gpu import CupyBackend

    problem = random_network(9, 6, 0.4, 0.3, seed=4)
    cpu = run_in_process(problem, algo, z)
    backend = PlacedBackend(NumpyBackend(), CupyBackend(), 10**12)
    gpu = run_in_process(problem, algo, z, backend=backend, ipc=DOMAIN)
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    assert not fake_cupy.LAUNCHED and fake_cupy.STATS["h2d"] == 0
    assert backend.placements and {p.where for p in backend.placements} == {"cpu"}
    if z is None:  # one bucket per agent in DPOP (ADPOP: one per mini-bucket)
        assert len(backend.placements) == problem.n
    assert gpu["metrics"]["messages"]["util"] == cpu["metrics"]["messages"]["util"]


@pytest.mark.parametrize(("domain", "min_bytes"), [("", 0), (DOMAIN, 1 << 20)])
def test_without_a_shared_domain_or_below_the_size_utils_travel_as_bytes(
    fake_cupy_module: ModuleType, domain: str, min_bytes: int
) -> None:
    problem = random_network(8, 3, 0.4, 0.3, seed=2)
    cpu = run_in_process(problem)
    gpu = run_in_process(problem, backend=_placed(min_bytes), ipc=domain)
    assert gpu["cost"] == cpu["cost"]
    assert gpu["metrics"]["ipc_bytes"] == 0 and fake_cupy.STATS["ipc_open"] == 0
    assert gpu["metrics"]["bytes"]["util"] == cpu["metrics"]["bytes"]["util"]


def test_ipc_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from dcop.errors import InputError
    from dcop.gpu.ipc import DEFAULT_IPC_MIN_BYTES, ipc_domain, ipc_min_bytes

    monkeypatch.delenv("DCOP_CUDA_IPC_MIN_BYTES", raising=False)
    assert ipc_min_bytes() == DEFAULT_IPC_MIN_BYTES
    monkeypatch.setenv("DCOP_CUDA_IPC_MIN_BYTES", "4_096")
    assert ipc_min_bytes() == 4096
    monkeypatch.setenv("DCOP_CUDA_IPC_MIN_BYTES", "lots")
    with pytest.raises(InputError, match="DCOP_CUDA_IPC_MIN_BYTES"):
        ipc_min_bytes()
    cupy = fake_cupy.make_module()
    monkeypatch.setenv("DCOP_CUDA_IPC", "1")
    domain = ipc_domain(cupy, 0)
    assert domain.startswith("cuda/") and domain == ipc_domain(cupy, 0)  # stable in one process
    monkeypatch.setenv("DCOP_CUDA_IPC", "0")
    assert ipc_domain(cupy, 0) == ""  # switched off: nobody shares this agent's GPU


@pytest.mark.parametrize("task", ["pr", "mar"])
def test_sum_tasks_over_ipc_equal_the_cpu_agents(fake_cupy_module: ModuleType, task: str) -> None:
    problem = ising_grid(3, coupling=0.8, seed=1)
    spec = RunSpec(task=task)  # type: ignore[arg-type]
    cpu = run_in_process(problem, spec=spec)
    gpu = run_in_process(problem, spec=spec, backend=_placed(), ipc=DOMAIN)
    assert gpu["metrics"]["ipc_tables"] >= 1
    assert gpu["ln_partition"] == pytest.approx(cpu["ln_partition"], rel=1e-12)
    if task == "mar":
        for name, probs in cpu["marginals"].items():
            np.testing.assert_allclose(gpu["marginals"][name], probs, atol=1e-12)


def test_a_handle_whose_buffer_is_gone_fails_the_run_naming_the_child(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exporter that no longer holds its buffer (it exited): the parent's open fails, and the
    run ends with an error that names the child, not a hang or a wrong answer."""
    from dcop.gpu import ipc

    real = ipc.offer_buffer

    def forgetful(*args: object) -> ipc.Exported:
        exported = real(*args)  # type: ignore[arg-type]
        # the handle names an allocation that is gone (the child still writes its own buffer:
        # dropping that instead made the child fail first whenever it ran before the parent)
        return ipc.Exported(b"gone" + bytes(60), exported.nbytes, exported.memory)

    monkeypatch.setattr(ipc, "offer_buffer", forgetful)
    problem = random_network(6, 3, 0.5, 0.3, seed=1)
    with pytest.raises(DcopError, match=r"UTIL of agent \d+ .*on the GPU.*did agent \d+ exit"):
        run_in_process(problem, backend=_placed(), ipc=DOMAIN, timeout=20)


def test_a_table_with_nan_taken_by_ipc_is_refused(fake_cupy_module: ModuleType) -> None:
    """The parent tests every table it takes out of a mapped buffer for NaN with the backend's
    own kernel, as a framed table is tested on decode; a clean table passes."""
    from dcop.errors import ProtocolError
    from dcop.gpu import CupyBackend, ipc

    cupy = fake_cupy_module
    backend = CupyBackend()
    for values, bad in ((np.arange(6.0), False), (np.array([0.0, np.nan, 2.0]), True)):
        exported = ipc.export_array(cupy, cupy.asarray(values), backend.stream)
        pointer = ipc.open_handle(cupy, exported.handle)
        shape = values.shape
        if bad:
            with pytest.raises(ProtocolError, match="NaN"):
                backend.read_ipc(pointer, 0, shape, "float64")
        else:
            got = backend.read_ipc(pointer, 0, shape, "float64")
            np.testing.assert_array_equal(backend.to_numpy(got), values)
        ipc.close_handle(cupy, pointer)


def test_a_rehearsal_offers_nothing_even_where_every_size_goes_by_ipc(
    fake_cupy_module: ModuleType,
) -> None:
    """An agent's set-up rehearsal asks its backend for a 0-byte IPC offer (to have decided it
    once): no buffer comes of it, and the placement figures stay empty."""
    from dcop.agents.rehearsal import rehearse

    backend = _placed(ipc_min_bytes=0)  # every bucket on the device: the rehearsal's too
    rehearse(backend)
    assert backend.offer_ipc(0) is None
    assert "ipc_out" not in backend.gpu.transfers.seconds  # no buffer was offered
    assert backend.offer_ipc(8) is not None  # while any real size is
    assert backend.placements == []


def test_tables_of_an_offered_buffer_land_in_its_reserved_place_with_one_wait(
    fake_cupy_module: ModuleType,
) -> None:
    """A buffer mapped with its size gets a landing place on the parent's device: its tables
    are copied there at their own offsets, NaN-tested, and read back with one 4-byte wait; a NaN
    in any of them refuses the lot."""
    from dcop.errors import ProtocolError
    from dcop.gpu import CupyBackend, ipc

    cupy = fake_cupy_module
    backend = CupyBackend()
    first, second = np.arange(6.0).reshape(2, 3), np.arange(4.0) + 10
    for bad in (False, True):
        exported = ipc.offer_buffer(cupy, 512)
        values = second.copy()
        if bad:
            values[2] = np.nan
        ipc.copy_into(cupy, exported, 0, cupy.asarray(first), backend.stream)
        ipc.copy_into(cupy, exported, 256, cupy.asarray(values), backend.stream)
        pointer = backend.open_ipc(exported.handle, exported.nbytes)
        landing = backend._landing[pointer]
        reads = fake_cupy.STATS["d2h"]
        tables = [(0, (2, 3), "float64"), (256, (4,), "float64")]
        if bad:
            with pytest.raises(ProtocolError, match="NaN"):
                backend.read_ipc_tables(pointer, tables)
            assert fake_cupy.STATS["d2h"] == reads + 1
        else:
            got = backend.read_ipc_tables(pointer, tables)
            assert fake_cupy.STATS["d2h"] == reads + 1  # the flag: one wait for both tables
            np.testing.assert_array_equal(backend.to_numpy(got[0]), first)
            np.testing.assert_array_equal(backend.to_numpy(got[1]), second)
            assert [a.data.ptr for a in got] == [landing.data.ptr, landing.data.ptr + 256]
        backend.close_ipc(pointer)
        assert pointer not in backend._landing


def test_a_parent_unmaps_its_childrens_buffers_only_after_its_util_went_out(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unmap is off the path to the parent: no buffer is closed while the tables are taken
    over; each is closed once the agent's own UTIL has gone out (a root: before its VALUEs)."""
    import inspect

    from dcop.agents.session import Session

    callers: list[str] = []
    real_close = PlacedBackend.close_ipc

    def close(self: PlacedBackend, pointer: int) -> None:
        callers.append(inspect.stack()[1].function)
        real_close(self, pointer)

    real_unmap = Session.unmap_taken

    def unmap(self: Session) -> None:
        if self.handover.taken:
            assert self.tree is not None
            assert self.util_sent or (self.tree.parent is None and self.value is None)
        real_unmap(self)

    monkeypatch.setattr(PlacedBackend, "close_ipc", close)
    monkeypatch.setattr(Session, "unmap_taken", unmap)
    problem = random_network(9, 6, 0.4, 0.3, seed=4)
    gpu = run_in_process(problem, backend=_placed(), ipc=DOMAIN)
    assert gpu["metrics"]["messages"]["offer"] >= 1
    assert callers and set(callers) == {"unmap_taken"}
    assert fake_cupy.STATS["ipc_open"] == fake_cupy.STATS["ipc_close"]


@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2)])
def test_an_agent_whose_bucket_runs_on_the_device_has_its_tables_there_before_the_bucket(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch, algo: str, z: int | None
) -> None:
    """Own tables go up at Go and each child's UTIL as it comes: when the UTIL computation
    starts, every table of the bucket is on the "device"; tables that only pass through stay on
    the host; the answers are the CPU agents'."""
    from dcop.agents.session import Session

    seen: list[bool] = []
    real = Session._util_compute

    def compute(self: Session, passing: list, z: int | None):  # type: ignore[no-untyped-def]
        if self.staged is not None:
            seen.append(all(not PlacedBackend.on_host(t.data) for t in self.bucket))
            assert all(PlacedBackend.on_host(t.data) for t in passing)
        return real(self, passing, z)

    monkeypatch.setattr(Session, "_util_compute", compute)
    problem = random_network(9, 6, 0.4, 0.3, seed=4)
    cpu = run_in_process(problem, algo, z)
    gpu = run_in_process(problem, algo, z, backend=_placed(1 << 40), ipc=DOMAIN)
    assert gpu["cost"] == cpu["cost"] and gpu["assignment"] == cpu["assignment"]
    assert seen and all(seen)


def test_without_room_for_a_landing_place_the_tables_get_arrays_of_their_own(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reserving the landing place at the offer is best effort: out of device memory then, the
    map still succeeds and the tables are copied into arrays of their own when they come."""
    from dcop.gpu import CupyBackend, ipc

    cupy = fake_cupy_module
    backend = CupyBackend()
    values = np.arange(6.0)
    exported = ipc.export_array(cupy, cupy.asarray(values), backend.stream)
    real_empty = cupy.empty

    def no_room(shape: object, dtype: object = np.float64) -> object:
        if np.dtype(dtype) == np.uint8:
            raise cupy.cuda.memory.OutOfMemoryError("out of memory")
        return real_empty(shape, dtype)

    monkeypatch.setattr(cupy, "empty", no_room)
    pointer = backend.open_ipc(exported.handle, exported.nbytes)
    assert pointer not in backend._landing
    got = backend.read_ipc_tables(pointer, [(0, (6,), "float64")])
    np.testing.assert_array_equal(backend.to_numpy(got[0]), values)
    backend.close_ipc(pointer)
