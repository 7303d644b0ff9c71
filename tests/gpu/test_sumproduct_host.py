"""PR and MAR through ``CupyBackend`` on the fake CuPy (no GPU): the host side of the sum-product
steps (0-d UTILs, merged-axis reductions, neutral tables, transposes, downloads) gives the NumPy
backend's numbers. The CUDA sources are checked on a device by
``tests/inference/test_sumproduct.py``."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from dcop.inference.partition import infer
from tests.inference.test_sumproduct import observe, random_markov


@pytest.mark.parametrize("seed", range(6))
def test_pr_and_mar_on_the_fake_gpu_equal_numpy(fake_cupy_module: ModuleType, seed: int) -> None:
    from dcop.gpu import CupyBackend

    problem = random_markov(seed, n=7, zeros=0.1, shift=(-1) ** seed * 200.0)
    if seed % 2:
        problem = observe(problem, seed)
    cpu = infer(problem, "mar")
    gpu = infer(problem, "mar", backend=CupyBackend())
    assert gpu.status == cpu.status and gpu.backend == "cupy"
    if cpu.status != "ok":
        return
    assert gpu.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
    assert gpu.marginals is not None and cpu.marginals is not None
    for v, probs in cpu.marginals.items():
        np.testing.assert_allclose(gpu.marginals[v], probs, atol=1e-12)
    bounds_cpu = infer(problem, "pr", z=2)
    bounds_gpu = infer(problem, "pr", z=2, backend=CupyBackend())
    assert bounds_gpu.ln_upper == pytest.approx(bounds_cpu.ln_upper, rel=1e-12)
    assert bounds_gpu.ln_lower == pytest.approx(bounds_cpu.ln_lower, rel=1e-12) or (
        bounds_gpu.ln_lower == bounds_cpu.ln_lower
    )
