"""GPU agents: every agent process on its own CuPy stream gives the CPU agents' answer exactly,
with buckets placed by size and with every bucket forced onto the device."""

from __future__ import annotations

import pytest

from dcop.backend import gpu_usable
from dcop.coordinator import run_local
from dcop.generators import random_network
from dcop.protocol import RunSpec

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not gpu_usable(), reason="needs CuPy and a GPU")]


@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2), ("auto", None)])
@pytest.mark.parametrize("min_entries", [None, 0])
def test_gpu_agents_equal_cpu_agents(algo: str, z: int | None, min_entries: int | None) -> None:
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
    assert gpu.metrics["setup_s_max"] > 0  # warmed up before the hello


def test_gpu_all_spreads_agents_over_the_devices() -> None:
    problem = random_network(8, 4, 0.4, 0.3, seed=3)
    run = run_local(problem, RunSpec(gpu_min_entries=0), gpu="all", timeout=120)
    assert run.status == "ok"
