"""BE/MBE on the GPU backend against the NumPy backend: random problems, the paper's networks, and
every reference instance that fits. Skipped without CuPy or a CUDA device."""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path
from typing import Any

import pytest

from dcop.backends import gpu_usable
from dcop.generators import generate
from dcop.inference import solve
from tests.conftest import INSTANCES, brute_force, random_problem

pytestmark = pytest.mark.gpu

#: Largest BE table (entries) of an instance this test solves on both backends.
MAX_ENTRIES = 1 << 25


@pytest.fixture(scope="module")
def backends() -> tuple[Any, Any]:
    pytest.importorskip("cupy")
    if not gpu_usable():
        pytest.skip("no usable CUDA device")
    from dcop.gpu import CupyBackend

    # one backend with the run-time generic kernel only, one that generates a kernel per bucket
    return CupyBackend(specialize_entries=1 << 40), CupyBackend(specialize_entries=0, min_groups=0)


def same_result(problem: Any, gpu: Any, **kw: Any) -> None:
    cpu = solve(problem, backend="numpy", **kw)
    got = solve(problem, backend=gpu, **kw)
    assert got.backend == "cupy" and got.dtype == cpu.dtype
    if math.isinf(cpu.lower_bound):
        assert math.isinf(got.lower_bound)
        return
    assert got.lower_bound == pytest.approx(cpu.lower_bound, rel=1e-9, abs=1e-9)
    assert got.upper_bound == pytest.approx(problem.evaluate(got.assignment), rel=1e-12)
    if kw.get("algo", "be") == "be":
        assert got.upper_bound == pytest.approx(cpu.upper_bound, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_random_problems_equal_numpy_and_brute_force(backends: tuple[Any, Any], seed: int) -> None:
    problem = random_problem(seed, integer=seed % 2 == 0)
    best = brute_force(problem)
    for gpu in backends:
        result = solve(problem, backend=gpu)
        if math.isinf(best):
            assert math.isinf(result.lower_bound)
            continue
        assert result.lower_bound == pytest.approx(best, rel=1e-9)
        assert result.upper_bound == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("topology", ["random", "scalefree", "grid"])
def test_paper_networks_equal_numpy(backends: tuple[Any, Any], topology: str) -> None:
    n = 16 if topology == "grid" else 10
    for seed in range(2):
        problem = generate(topology, n, 6, p1=0.4, p2=0.5, seed=seed)
        for gpu in backends:
            same_result(problem, gpu)
            same_result(problem, gpu, algo="mbe", z=3)


FOLDER = Path(os.environ.get("DCOP_INSTANCES", INSTANCES))


def _instances() -> list[tuple[str, int]]:
    index = FOLDER / "INDEX.tsv"
    if not index.exists():
        return []
    with index.open() as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [(r["file"], int(r["max_table_entries"])) for r in rows]


@pytest.mark.parametrize(
    "name,entries", _instances() or [pytest.param("none", 0, marks=pytest.mark.skip)]
)
def test_reference_instances_equal_numpy(
    backends: tuple[Any, Any], name: str, entries: int
) -> None:
    if entries > MAX_ENTRIES:
        pytest.skip(f"{name}: largest BE table {entries:.3g} entries is too large for this test")
    read_problem = pytest.importorskip("dcop.io").read_problem
    problem = read_problem(FOLDER / name)
    same_result(problem, backends[0])
    same_result(problem, backends[1])
