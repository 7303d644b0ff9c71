"""GPU agents: every agent process on its own CuPy stream gives the CPU agents' answer exactly."""

from __future__ import annotations

import pytest

from dcop.backend import gpu_usable
from dcop.coordinator import run_local
from dcop.generators import random_network

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not gpu_usable(), reason="needs CuPy and a CUDA device")
@pytest.mark.parametrize(("algo", "z"), [("dpop", None), ("adpop", 2)])
def test_gpu_agents_equal_cpu_agents(algo: str, z: int | None) -> None:
    problem = random_network(12, 3, 0.35, 0.3, seed=21)
    cpu = run_local(problem, algo, z, timeout=120)
    gpu = run_local(problem, algo, z, gpu=0, timeout=120)
    assert gpu["assignment"] == cpu["assignment"]
    assert gpu["cost"] == cpu["cost"] and gpu["lower_bound"] == cpu["lower_bound"]
    assert gpu["processes"]["gpu"] == 0
