"""The host side of ``CupyBackend`` on a fake CuPy (no GPU): planning, metadata and pointers,
launch ranges, chunking, warm-up and prepared kernels, checked against ``NumpyBackend``.

The fake computes each kernel with NumPy from the arguments the backend launches it with (see
:mod:`tests.gpu.fake_cupy`); the CUDA sources themselves are tested on a device by
``test_cupy_backend.py``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop.backends.base import BucketShape
from dcop.backends.numpy import NumpyBackend
from dcop.errors import ModelError
from dcop.gpu.plan import BACKGROUND_SHARE
from dcop.tables import OPS, Table
from tests.gpu import fake_cupy

CPU = NumpyBackend()


def random_bucket(
    rng: np.random.Generator, dtype: Any, n_vars: int = 5, n_tables: int = 5
) -> tuple[list[Table], str]:
    names = [f"v{i}" for i in range(n_vars)]
    sizes = {v: int(rng.integers(1, 5)) for v in names}
    var = names[int(rng.integers(n_vars))]
    tables = []
    for k in range(n_tables):
        arity = int(rng.integers(1, 4))
        scope = [names[i] for i in rng.choice(n_vars, size=arity, replace=False)]
        if k == 0 and var not in scope:
            scope[0] = var
        shape = tuple(sizes[v] for v in scope)
        costs = rng.integers(0, 50, size=shape).astype(dtype)
        costs[rng.random(shape) < 0.1] = np.inf
        tables.append(Table(tuple(scope), costs))
    return tables, var


def backend(**kw: Any) -> Any:
    from dcop.gpu import CupyBackend

    return CupyBackend(**kw)


def host(gpu: Any, table: Table) -> np.ndarray:
    return gpu.to_numpy(table.data)


PATHS = {
    "generic": {"specialize_entries": 1 << 40},
    "generated": {"specialize_entries": 0, "min_groups": 0},
    "generated-rows": {"specialize_entries": 0, "min_groups": 1 << 20},
    "unstaged": {"specialize_entries": 0, "min_groups": 0, "stage_output": False},
}


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("op", list(OPS))
def test_join_eliminate_matches_numpy(fake_cupy_module: ModuleType, path: str, op: Any) -> None:
    gpu = backend(**PATHS[path])
    rng = np.random.default_rng(7)
    for _ in range(12):
        dtype = [np.float32, np.float64][int(rng.integers(2))]
        tables, var = random_bucket(rng, dtype)
        want = CPU.join_eliminate(tables, var, op)
        got = gpu.join_eliminate(tables, var, op)
        assert got.scope == want.scope
        if op == "logsumexp":
            np.testing.assert_allclose(host(gpu, got), want.data, rtol=1e-5)
        else:
            np.testing.assert_array_equal(host(gpu, got), want.data)
    generated = [n for n in fake_cupy.LAUNCHED if n.startswith("dcop_join_elim_")]
    assert generated and all(("generic" in n) == (path == "generic") for n in generated)


def test_given_output_scope_and_device_inputs(fake_cupy_module: ModuleType) -> None:
    gpu = backend(specialize_entries=0, min_groups=0)
    rng = np.random.default_rng(3)
    tables, var = random_bucket(rng, np.float32, n_vars=6)
    scope = tuple(
        reversed([v for v in dict.fromkeys(v for t in tables for v in t.scope) if v != var])
    )
    on_device = [gpu.table(t.scope, t.data, np.float32) for t in tables]
    got = gpu.join_eliminate(on_device, var, "min", scope=scope)
    want = CPU.join_eliminate(tables, var, "min", scope=scope)
    assert got.scope == scope
    np.testing.assert_array_equal(host(gpu, got), want.data)


@pytest.mark.parametrize("path", ["generic", "generated"])
def test_chunked_output_comes_back_to_the_host(fake_cupy_module: ModuleType, path: str) -> None:
    gpu = backend(max_device_bytes=64, chunk_bytes=24, **PATHS[path])
    rng = np.random.default_rng(5)
    tables, var = random_bucket(rng, np.float64, n_vars=6, n_tables=6)
    want = CPU.join_eliminate(tables, var, "min")
    got = gpu.join_eliminate(tables, var, "min")
    assert isinstance(got.data, np.ndarray)  # pinned host memory
    np.testing.assert_array_equal(got.data, want.data)
    if want.data.nbytes > 64:
        assert gpu.transfers.chunks > 1
    again = gpu.join_eliminate_host(tables, var, "min")
    np.testing.assert_array_equal(again.data, want.data)


def test_best_value_matches_numpy(fake_cupy_module: ModuleType) -> None:
    gpu = backend()
    rng = np.random.default_rng(11)
    for _ in range(20):
        tables, var = random_bucket(rng, np.float32)
        others = {v: s for t in tables for v, s in zip(t.scope, t.shape, strict=True)}
        assignment = {v: int(rng.integers(s)) for v, s in others.items() if v != var}
        tables = [t for t in tables if var in t.scope]
        device = [gpu.table(t.scope, t.data, np.float32) for t in tables]
        device[-1] = tables[-1]  # a table left on the host (a chunked output)
        for op in ("min", "max"):
            index, value = gpu.best_value(device, var, assignment, op)
            want_index, want_value = CPU.best_value(tables, var, assignment, op)
            assert (index, value) == (want_index, want_value)
    with pytest.raises(ModelError, match="not resolved"):
        gpu.best_value(device, var, {}, "min")


def test_single_table_operations_match_numpy(fake_cupy_module: ModuleType) -> None:
    gpu = backend()
    rng = np.random.default_rng(13)
    data = rng.integers(0, 9, size=(2, 3, 4)).astype(np.float32)
    table = Table(("a", "b", "c"), data)
    dev = gpu.table(table.scope, data, np.float32)
    for op in OPS:
        want = CPU.eliminate(table, "b", op)
        got = gpu.eliminate(dev, "b", op)
        assert got.scope == want.scope
        np.testing.assert_allclose(host(gpu, got), want.data, rtol=1e-6)
    for op in ("min", "max"):
        np.testing.assert_array_equal(
            host(gpu, gpu.argbest(dev, "a", op)), CPU.argbest(table, "a", op).data
        )
    np.testing.assert_array_equal(
        host(gpu, gpu.transpose(dev, ("c", "a", "b"))), CPU.transpose(table, ("c", "a", "b")).data
    )
    got = gpu.condition(dev, {"a": 1, "c": 2})
    assert got.scope == ("b",)
    np.testing.assert_array_equal(host(gpu, got), data[1, :, 2])
    other = Table(("c", "d"), rng.integers(0, 9, size=(4, 2)).astype(np.float32))
    joined = gpu.join([dev, other])
    np.testing.assert_array_equal(host(gpu, joined), CPU.join([table, other]).data)


def test_copy_to_host_fills_the_callers_array(fake_cupy_module: ModuleType) -> None:
    """Straight into a view of the caller's flat array (as the search reads its heuristic), a
    transposed device table too; a host array is copied as it is."""
    gpu = backend()
    data = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    moved = gpu.transpose(gpu.table(("a", "b", "c"), data), ("c", "a", "b"))
    flat = np.full(30, -1.0)
    gpu.copy_to_host(moved.data, flat[3:27].reshape(4, 2, 3))
    np.testing.assert_array_equal(flat[3:27].reshape(4, 2, 3), np.transpose(data, (2, 0, 1)))
    assert flat[:3].tolist() == [-1.0] * 3 and flat[27:].tolist() == [-1.0] * 3
    out = np.empty((2, 3, 4))
    gpu.copy_to_host(data, out)
    CPU.copy_to_host(data + 1, flat[:24].reshape(2, 3, 4))
    np.testing.assert_array_equal(out, data)
    np.testing.assert_array_equal(flat[:24], np.arange(1, 25))


def test_warm_up_loads_the_generic_kernels_and_launches_them(
    fake_cupy_module: ModuleType,
) -> None:
    gpu = backend()
    times = gpu.warm_up(dtypes=("float32", "float64"), ops=("min", "sum"))
    assert set(times) == {"pool_s", "kernels_s", "launch_s", "total_s"}
    for name in ("f32", "f64"):
        for op in ("min", "sum"):
            assert f"dcop_join_elim_generic_{op}_{name}" in fake_cupy.COMPILED
            assert f"dcop_join_elim_generic_{op}_{name}" in fake_cupy.LAUNCHED
    assert gpu.setup.warm_up_s == times["total_s"]
    assert gpu.setup.solve_compiles == 0
    assert gpu.transfers.h2d_bytes == 0  # counters start with the solve
    with pytest.raises(ModelError, match="float32 or float64"):
        gpu.warm_up(dtypes=("int32",))


def test_prepare_bucket_compiles_ahead_of_the_data(fake_cupy_module: ModuleType) -> None:
    gpu = backend(specialize_entries=0, min_groups=0)
    rng = np.random.default_rng(17)
    tables, var = random_bucket(rng, np.float32, n_vars=6, n_tables=5)
    scope = tuple(v for v in dict.fromkeys(v for t in tables for v in t.scope) if v != var)
    spent = gpu.prepare_bucket(
        BucketShape(
            [t.scope for t in tables], [t.shape for t in tables], var, "min", np.float32, scope
        )
    )
    assert gpu.setup.prepared == 1 and gpu.setup.prepare_s == spent
    compiled = list(fake_cupy.COMPILED)
    assert len(compiled) == 1 and compiled[0].startswith("dcop_join_elim_min_f32_")
    # the data arrive in another order: the prepared kernel runs, nothing compiles
    shuffled = [tables[j] for j in rng.permutation(len(tables))]
    got = gpu.join_eliminate(shuffled, var, "min", scope=scope)
    np.testing.assert_array_equal(host(gpu, got), CPU.join_eliminate(tables, var, scope=scope).data)
    assert compiled == fake_cupy.COMPILED and gpu.setup.solve_compiles == 0
    # a bucket nobody prepared compiles while solving, and says so
    other, ovar = random_bucket(rng, np.float64, n_vars=4, n_tables=2)
    gpu.join_eliminate(other, ovar, "min")
    assert gpu.setup.solve_compiles == 1 and len(fake_cupy.COMPILED) == 2


def test_kernel_cache_directory(
    fake_cupy_module: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dcop.gpu import kernels as K

    assert K.use_cache_dir() is None  # neither set: CuPy's default
    chosen = tmp_path / "from-arg"
    gpu = backend(kernel_cache=chosen)
    assert gpu.kernel_cache == str(chosen) and chosen.is_dir()
    assert os.environ["CUPY_CACHE_DIR"] == str(chosen)
    monkeypatch.setenv("DCOP_KERNEL_CACHE", str(tmp_path / "from-env"))
    assert backend().kernel_cache == str(tmp_path / "from-env")
    assert os.environ["CUPY_CACHE_DIR"] == str(tmp_path / "from-env")
    monkeypatch.delenv("DCOP_KERNEL_CACHE")
    assert K.use_cache_dir() == str(tmp_path / "from-env")  # CuPy's own setting stays


def test_unwritable_kernel_cache_is_a_clear_error(tmp_path: Path) -> None:
    from dcop.errors import BackendUnavailable
    from dcop.gpu import kernels as K

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(BackendUnavailable, match="kernel cache directory"):
        K.use_cache_dir(blocker / "sub")


def prepare_in_background(gpu: Any, tables: list[Table], var: str) -> None:
    """``prepare_bucket`` of these tables' bucket (min, their dtype) on a thread of its own."""
    scopes, shapes = [t.scope for t in tables], [t.shape for t in tables]
    gpu.prepare_bucket(
        BucketShape(scopes, shapes, var, "min", tables[0].data.dtype), background=True
    )


def _blocking_compiles(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Make every generated kernel's compile wait for the returned event (generic ones do not)."""
    import threading

    release = threading.Event()
    original = fake_cupy.FakeRawKernel.kernel

    def slow(self: Any) -> Any:
        if "generic" not in self.name:
            assert release.wait(60), "the test never let the compile finish"
        return original.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(fake_cupy.FakeRawKernel, "kernel", property(slow))
    return release


def test_a_background_compile_leaves_the_bucket_to_the_generic_kernel_meanwhile(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = backend(specialize_entries=0, min_groups=0)
    gpu.warm_up(dtypes=("float32",), ops=("min",))
    release = _blocking_compiles(monkeypatch)
    warm_compiles = gpu.setup.solve_compiles  # the warm-up's own launch
    rng = np.random.default_rng(23)
    tables, var = random_bucket(rng, np.float32, n_vars=6, n_tables=5)
    scope = tuple(v for v in dict.fromkeys(v for t in tables for v in t.scope) if v != var)
    shapes = ([t.scope for t in tables], [t.shape for t in tables])
    gpu.prepare_bucket(BucketShape(*shapes, var, "min", np.float32, scope), background=True)
    assert gpu.setup.prepared == 0  # still compiling
    before = list(fake_cupy.COMPILED)
    want = CPU.join_eliminate(tables, var, scope=scope).data
    got = gpu.join_eliminate(tables, var, "min", scope=scope)  # its kernel is not ready
    np.testing.assert_array_equal(host(gpu, got), want)
    assert gpu.setup.generic_fallbacks == 1 and gpu.setup.compile_wait_s == 0.0
    assert before == fake_cupy.COMPILED  # nothing compiled on the way
    release.set()
    gpu._compiling[gpu._plan(*shapes, np.float32, var, "min", scope).kernel_name].result(60)
    assert gpu.setup.prepared == 1
    launched = len(fake_cupy.LAUNCHED)
    got = gpu.join_eliminate(tables, var, "min", scope=scope)  # now with its own kernel
    np.testing.assert_array_equal(host(gpu, got), want)
    assert fake_cupy.LAUNCHED[launched].startswith("dcop_join_elim_min_f32_")
    assert gpu.setup.generic_fallbacks == 1 and gpu.setup.solve_compiles == warm_compiles


def test_a_shape_that_earns_its_kernel_in_a_solve_compiles_beside_it(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bucket shape whose joined entries, summed over its calls, pass the threshold in a call
    of a repeated solve gets its kernel compiled on a thread; that call runs the generic kernel
    and compiles nothing itself (no compile inside one call of ten), the next ones run its own."""
    rng = np.random.default_rng(31)
    tables, var = random_bucket(rng, np.float32, n_vars=6, n_tables=5)
    scope = tuple(v for v in dict.fromkeys(v for t in tables for v in t.scope) if v != var)
    joined = math.prod(dict(p for t in tables for p in zip(t.scope, t.shape, strict=True)).values())
    # earned in the second call: a shape the generic kernel runs while its own compiles earns
    # it at BACKGROUND_SHARE of specialize_entries
    gpu = backend(specialize_entries=int(2 * joined / BACKGROUND_SHARE), min_groups=0)
    want = CPU.join_eliminate(tables, var, scope=scope).data
    release = _blocking_compiles(monkeypatch)
    launched = len(fake_cupy.LAUNCHED)
    np.testing.assert_array_equal(host(gpu, gpu.join_eliminate(tables, var, scope=scope)), want)
    assert "generic" in fake_cupy.LAUNCHED[launched]  # below the threshold: the generic kernel
    compiles = gpu.setup.solve_compiles
    np.testing.assert_array_equal(host(gpu, gpu.join_eliminate(tables, var, scope=scope)), want)
    assert gpu.setup.generic_fallbacks == 1 and gpu.setup.compile_wait_s == 0.0
    assert gpu.setup.solve_compiles == compiles  # the call compiled nothing itself
    release.set()
    name = gpu._plan(
        [t.scope for t in tables], [t.shape for t in tables], np.float32, var, "min", scope
    )
    gpu._compiling[name.kernel_name].result(60)
    launched = len(fake_cupy.LAUNCHED)
    np.testing.assert_array_equal(host(gpu, gpu.join_eliminate(tables, var, scope=scope)), want)
    assert fake_cupy.LAUNCHED[launched].startswith("dcop_join_elim_min_f32_")
    assert gpu.setup.prepared == 1 and gpu.setup.solve_compiles == compiles


@pytest.mark.parametrize("why", ["too large for the generic kernel", "generic kernel not loaded"])
def test_a_bucket_waits_for_its_kernel_when_the_generic_one_will_not_do(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    import threading

    from dcop.gpu import backend as gpu_backend

    gpu = backend(specialize_entries=0, min_groups=0)
    if why.startswith("too large"):
        monkeypatch.setattr(gpu_backend, "GENERIC_FALLBACK_MAX_ENTRIES", 0)
        gpu.warm_up(dtypes=("float64",), ops=("min",))
    compiles = gpu.setup.solve_compiles
    release = _blocking_compiles(monkeypatch)
    rng = np.random.default_rng(29)
    tables, var = random_bucket(rng, np.float64, n_vars=5, n_tables=4)
    prepare_in_background(gpu, tables, var)
    threading.Timer(0.2, release.set).start()
    got = gpu.join_eliminate(tables, var, "min")  # waits for the compile
    np.testing.assert_array_equal(host(gpu, got), CPU.join_eliminate(tables, var).data)
    assert gpu.setup.generic_fallbacks == 0 and gpu.setup.compile_wait_s > 0
    assert gpu.setup.prepared == 1 and gpu.setup.solve_compiles == compiles


def test_a_failed_background_compile_fails_the_bucket(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dcop.gpu import backend as gpu_backend

    monkeypatch.setattr(gpu_backend, "GENERIC_FALLBACK_MAX_ENTRIES", 0)

    def broken(self: Any) -> Any:
        raise RuntimeError("nvrtc: out of resources")

    monkeypatch.setattr(fake_cupy.FakeRawKernel, "kernel", property(broken))
    gpu = backend(specialize_entries=0, min_groups=0)
    tables, var = random_bucket(np.random.default_rng(31), np.float32, n_vars=4, n_tables=3)
    prepare_in_background(gpu, tables, var)
    with pytest.raises(RuntimeError, match="nvrtc: out of resources"):
        gpu.join_eliminate(tables, var, "min")
