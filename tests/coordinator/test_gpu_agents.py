"""GPU agents: every agent process on its own CuPy stream gives the CPU agents' answer exactly."""

from __future__ import annotations

import pytest

from dcop.backend import gpu_usable
from dcop.coordinator import run_local
from dcop.generators import random_network
from dcop.protocol import RunSpec

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not gpu_usable(), reason="needs CuPy and a CUDA device")
@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2)])
def test_gpu_agents_equal_cpu_agents(algo: str, z: int | None) -> None:
    problem = random_network(12, 3, 0.35, 0.3, seed=21)
    spec = RunSpec(algo, z)  # type: ignore[arg-type]
    cpu = run_local(problem, spec, timeout=120)
    gpu = run_local(problem, spec, gpu=0, timeout=120)
    assert gpu.assignment == cpu.assignment
    assert gpu.cost == cpu.cost and gpu.bound == cpu.bound
    assert gpu.processes is not None and gpu.processes["gpu"] == 0
