"""MB-DPOP's batched chunk on the CuPy backend: equal to the per-context loop, on the fake CuPy
(host side) and on a real device; and a whole MB-DPOP run whose agents hold CuPy backends."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop.conditioned import CTX, chunk_util, chunk_util_loop, contexts
from dcop.generators import random_network
from dcop.inference import solve_be
from dcop.protocol import RunSpec
from dcop.tables import Table


def _tables(backend: Any, seed: int) -> list[Table]:
    rng = np.random.default_rng(seed)
    sizes = {"x": 4, "a": 3, "b": 5, "c": 2, "e": 3}
    scopes = [("x", "a", "b"), ("x", "c"), ("x", "e", "a"), ("b", "c"), ("a", "c"), ("x",)]
    return [backend.table(s, rng.random(tuple(sizes[v] for v in s)) * 10) for s in scopes]


def _check(backend: Any) -> None:
    for seed in range(3):
        tables = _tables(backend, seed)
        for var, cut in (("x", ["a", "c"]), ("a", ["a", "c"]), ("x", ["c", "e", "b"])):
            sizes = {v: s for t in tables for v, s in zip(t.scope, t.shape, strict=True)}
            ctx = contexts([sizes[v] for v in cut], 1, int(np.prod([sizes[v] for v in cut])))
            batched = chunk_util(backend, tables, var, cut, ctx)
            loop = chunk_util_loop(backend, tables, var, cut, ctx)
            assert batched.scope[0] == CTX and set(batched.scope) == set(loop.scope)
            got = backend.to_numpy(backend.transpose(batched, loop.scope).data)
            assert np.allclose(got, backend.to_numpy(loop.data))


def test_the_batched_chunk_equals_the_loop_on_the_fake_cupy(fake_cupy_module: ModuleType) -> None:
    from dcop.gpu import CupyBackend

    _check(CupyBackend())


def test_the_batched_chunk_equals_the_loop_on_the_device(cp: Any) -> None:
    from dcop.gpu import CupyBackend

    _check(CupyBackend())


def test_mbdpop_with_device_agents_equals_be(cp: Any) -> None:
    from dcop.backends import get_backend
    from tests.agents.conftest import run_in_process

    problem = random_network(12, 4, 0.5, 0.0, seed=3)
    # cuts by --width, and every UTIL and chunk over the tiny message limit in parts
    limit = 4096 + 8 * 64
    spec = RunSpec("mbdpop", max_message_bytes=limit, width=2, trees=1, gpu_min_entries=0)
    doc = run_in_process(
        problem,
        spec=spec,
        timeout=120,
        per_agent=lambda _: (get_backend("placed", min_entries=0), {}),
    )
    assert doc["pseudo_tree"]["cuts"]
    assert doc["cost"] == pytest.approx(solve_be(problem).cost)
    assert doc["metrics"]["largest_message_bytes"] <= limit
