"""GPU agents: every agent process on its own CuPy stream gives the CPU agents' answer exactly,
with buckets placed by size and with every bucket forced onto the device."""

from __future__ import annotations

import pytest

from dcop.backends import gpu_usable
from dcop.coordinator import run_local
from dcop.generators import random_network
from dcop.protocol import RunSpec

# serial: each agent holds a CUDA context (hundreds of MiB of device memory); beside other GPU
# agent runs under xdist (16 workers on the H200) they ran out of device memory during hello
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.serial,
    pytest.mark.skipif(not gpu_usable(), reason="needs CuPy and a GPU"),
]


@pytest.fixture
def every_table_by_ipc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Agents (forked with this environment) hand every device UTIL over by CUDA IPC."""
    monkeypatch.setenv("DCOP_CUDA_IPC", "1")
    monkeypatch.setenv("DCOP_CUDA_IPC_MIN_BYTES", "0")


@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2), ("auto", None)])
@pytest.mark.parametrize("min_entries", [None, 0])
def test_gpu_agents_equal_cpu_agents(
    algo: str, z: int | None, min_entries: int | None, every_table_by_ipc: None
) -> None:
    problem = random_network(12, 10, 0.35, 0.3, seed=21)
    spec = RunSpec(algo, z, gpu_min_entries=min_entries)  # type: ignore[arg-type]
    cpu = run_local(problem, spec, timeout=120)
    gpu = run_local(problem, spec, gpu=0, timeout=120)
    assert gpu.assignment == cpu.assignment
    assert gpu.cost == cpu.cost and gpu.bound == cpu.bound
    assert gpu.processes is not None and gpu.processes["gpu"] == 0
    placed = gpu.metrics["buckets_gpu"]
    if min_entries == 0:
        assert placed >= problem.n  # every bucket on the device
        assert gpu.metrics["ipc_tables"] >= 1  # ... and its UTIL handed over by CUDA IPC
    assert gpu.metrics["setup_s_max"] > 0  # warmed up before the hello


def test_gpu_agents_without_ipc_send_bytes_and_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DCOP_CUDA_IPC", "0")
    problem = random_network(11, 10, 0.35, 0.3, seed=5)
    spec = RunSpec(gpu_min_entries=0)
    cpu = run_local(problem, spec, timeout=120)
    gpu = run_local(problem, spec, gpu=0, timeout=120)
    assert gpu.cost == cpu.cost and gpu.assignment == cpu.assignment
    assert gpu.metrics["ipc_tables"] == 0
    assert gpu.metrics["bytes"]["util"] == cpu.metrics["bytes"]["util"]


def test_a_child_that_dies_after_its_ipc_util_fails_the_run_clearly(
    every_table_by_ipc: None,
) -> None:
    """Every agent kills itself just after sending its UTIL (handed over by CUDA IPC): the run
    ends with an error naming an agent, whether its parent had copied the table yet or not."""
    from dcop.errors import DcopError

    problem = random_network(8, 10, 0.4, 0.3, seed=3)
    with pytest.raises(DcopError, match=r"agent \d+"):
        run_local(
            problem,
            RunSpec(gpu_min_entries=0),
            gpu=0,
            timeout=90,
            agent_argv=lambda i, argv: [*argv, "--fault", "crash-after-util"],
        )


def test_gpu_all_spreads_agents_over_the_devices() -> None:
    problem = random_network(8, 4, 0.4, 0.3, seed=3)
    run = run_local(problem, RunSpec(gpu_min_entries=0), gpu="all", timeout=120)
    assert run.status == "ok"


@pytest.mark.parametrize("task", ["pr", "mar"])
def test_gpu_agents_sum_tasks_equal_cpu_agents(task: str, every_table_by_ipc: None) -> None:
    """PR/MAR with every bucket (UTIL and down messages) on the device: the CPU agents' ln Z and
    marginals (log-sum-exp sums in another order: equal to rounding)."""
    import numpy as np

    from dcop.generators import ising_grid

    problem = ising_grid(4, coupling=1.0, seed=5)
    spec = RunSpec(gpu_min_entries=0, task=task)  # type: ignore[arg-type]
    cpu = run_local(problem, spec, timeout=120)
    gpu = run_local(problem, spec, gpu=0, timeout=120)
    assert cpu.partition is not None and gpu.partition is not None
    assert gpu.partition.ln_partition == pytest.approx(cpu.partition.ln_partition, rel=1e-12)
    assert gpu.metrics["buckets_gpu"] >= problem.n and gpu.metrics["ipc_tables"] >= 1
    if task == "mar":
        assert cpu.partition.marginals is not None and gpu.partition.marginals is not None
        for name, probs in cpu.partition.marginals.items():
            np.testing.assert_allclose(gpu.partition.marginals[name], probs, atol=1e-12)
