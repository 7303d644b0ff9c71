"""CupyBackend against NumpyBackend on random tables, and the errors when CuPy is missing.

GPU tests (``@pytest.mark.gpu``) skip cleanly without CuPy or a device; they run on the device
machine. Integer costs (with +inf) are compared exactly, whatever the summation order; real-valued
costs and logsumexp within rounding.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

from dcop.backends import get_backend
from dcop.backends.numpy import NumpyBackend
from dcop.errors import BackendUnavailable, ModelError
from dcop.tables import OPS, Table

OPS_ALL = list(OPS)
DTYPES = [np.float32, np.float64]


# ---- no GPU needed ---------------------------------------------------------------------------
def test_the_first_device_backend_freezes_the_heap(
    fake_cupy_module: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CuPy's long-lived objects leave the collector's full passes once, when a device backend
    is first made (later solves' full collections walk only what they allocated)."""
    import gc

    import dcop.backends as backends

    frozen: list[int] = []
    monkeypatch.setattr(backends, "_frozen", False)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(1))
    get_backend("numpy")
    assert frozen == []
    get_backend("cupy")
    get_backend("cupy", device=0)
    assert frozen == [1]


def test_missing_cupy_is_an_informative_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` raise ImportError
    from dcop.gpu import CupyBackend

    with pytest.raises(BackendUnavailable, match="needs CuPy"):
        CupyBackend()
    with pytest.raises(BackendUnavailable, match="--backend numpy"):
        get_backend("cupy")
    assert isinstance(get_backend("auto"), NumpyBackend)


def test_kernel_sources_generate_for_every_op_and_dtype() -> None:
    from dcop.gpu import kernels as K

    sig = K.FusedSig(
        dtype="float32",
        op="min",
        group_sizes=(3, 4),
        dy=5,
        ndom=6,
        tables=(
            K.TableSig(size=24, group_strides=(0, 6), sy=0, sx=1, shared=True),
            K.TableSig(size=15, group_strides=(5, 0), sy=1, sx=0, shared=False),
        ),
        stage=True,
    )
    source = K.fused_source(sig)
    assert sig.name in source and "__ldg(t1" in source and "sm[0 + b0 + x * 1u]" in source
    # the table without the eliminated variable is read outside the loop over its values
    x_loop = source[source.index("for (int x") :]
    assert "t1" not in x_loop.split("}")[0]
    for op in OPS_ALL:
        for dtype in ("float32", "float64"):
            assert f"dcop_join_elim_generic_{op}" in K.generic_source(op, dtype)
            assert f"dcop_eliminate_{op}" in K.eliminate_source(op, dtype)


# ---- GPU -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu(cp: Any) -> Any:
    from dcop.gpu import CupyBackend

    return CupyBackend()


def random_bucket(
    rng: np.random.Generator,
    n_vars: int,
    n_tables: int,
    max_arity: int,
    max_domain: int,
    dtype: type,
    integer: bool = True,
    p_inf: float = 0.1,
) -> tuple[list[Table], str, dict[str, int]]:
    names = [f"v{i}" for i in range(n_vars)]
    sizes = {v: int(rng.integers(1, max_domain + 1)) for v in names}
    var = names[int(rng.integers(n_vars))]
    tables = []
    for k in range(n_tables):
        arity = int(rng.integers(1, min(max_arity, n_vars) + 1))
        scope = [names[i] for i in rng.choice(n_vars, size=arity, replace=False)]
        if k == 0 and var not in scope:
            scope[int(rng.integers(arity))] = var  # the eliminated variable is in some table
        shape = tuple(sizes[v] for v in scope)
        if integer:
            costs = rng.integers(0, 50, size=shape).astype(dtype)
        else:
            costs = (rng.standard_normal(shape) * 3).astype(dtype)
        costs[rng.random(shape) < p_inf] = np.inf
        tables.append(Table(tuple(scope), costs))
    return tables, var, sizes


def assert_same(got: np.ndarray, want: np.ndarray, op: Any, dtype: type, exact: bool) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    if exact and op != "logsumexp":
        np.testing.assert_array_equal(got, want)
    else:
        rtol = 2e-5 if dtype == np.float32 else 1e-11
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("op", OPS_ALL)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["generic", "generated", "generated-rows"])
def test_join_eliminate_matches_numpy(gpu: Any, op: Any, dtype: type, path: str) -> None:
    from dcop.gpu import CupyBackend

    # generated: one thread per group of rows (min_groups=0); generated-rows: one row per thread
    backend = CupyBackend(
        specialize_entries=1 << 40 if path == "generic" else 0,
        min_groups=1 << 40 if path == "generated-rows" else 0,
    )
    cpu = NumpyBackend()
    rng = np.random.default_rng(hash((op, str(dtype), path)) % 2**32)
    for trial in range(12):
        integer = trial % 3 != 2
        tables, var, _ = random_bucket(
            rng,
            n_vars=int(rng.integers(1, 7)),
            n_tables=int(rng.integers(1, 7)),
            max_arity=4,
            max_domain=6,
            dtype=dtype,
            integer=integer,
        )
        want = cpu.join_eliminate(tables, var, op)
        dev = [backend.table(t.scope, t.data, dtype) for t in tables]
        got = backend.join_eliminate(dev, var, op)
        assert got.scope == want.scope
        assert_same(backend.to_numpy(got.data), want.data, op, dtype, integer)
        # an explicit, reordered output scope
        scope = tuple(reversed(want.scope))
        want2 = cpu.join_eliminate(tables, var, op, scope=scope)
        got2 = backend.join_eliminate(dev, var, op, scope=scope)
        assert_same(backend.to_numpy(got2.data), want2.data, op, dtype, integer)


@pytest.mark.gpu
@pytest.mark.parametrize("arity", range(1, 13))
def test_high_arity_buckets(gpu: Any, arity: int) -> None:
    from dcop.gpu import CupyBackend

    cpu = NumpyBackend()
    rng = np.random.default_rng(arity)
    for specialize in (0, 1 << 40):
        backend = CupyBackend(specialize_entries=specialize, min_groups=0)
        for dtype in DTYPES:
            names = [f"x{i}" for i in range(12)]
            sizes = {v: (2 if i % 3 else 3) for i, v in enumerate(names)}
            tables = []
            for _ in range(3):
                scope = tuple(names[i] for i in rng.choice(12, size=arity, replace=False))
                shape = tuple(sizes[v] for v in scope)
                costs = rng.integers(0, 9, size=shape).astype(dtype)
                costs[rng.random(shape) < 0.05] = np.inf
                tables.append(Table(scope, costs))
            var = tables[0].scope[-1]
            for op in ("min", "max", "sum"):
                want = cpu.join_eliminate(tables, var, op)
                got = backend.join_eliminate(tables, var, op)  # host arrays are uploaded
                assert_same(backend.to_numpy(got.data), want.data, op, dtype, True)


@pytest.mark.gpu
def test_large_bucket_rows_and_inf(cp: Any) -> None:
    """A bucket big enough for many blocks and warp tiles, a ragged last tile, rows all +inf."""
    from dcop.gpu import CupyBackend

    gpu = CupyBackend(specialize_entries=0, min_groups=0)
    cpu = NumpyBackend()
    rng = np.random.default_rng(7)
    sizes = {"a": 7, "b": 13, "c": 11, "d": 5, "x": 9}
    scopes = [("a", "x"), ("b", "x", "c"), ("c", "d"), ("x", "d"), ("a", "b"), ("d",), ("x",)]
    for dtype in DTYPES:
        tables = []
        for scope in scopes:
            costs = rng.integers(0, 100, size=tuple(sizes[v] for v in scope)).astype(dtype)
            costs[rng.random(costs.shape) < 0.3] = np.inf
            tables.append(Table(scope, costs))
        tables[0].data[2, :] = np.inf  # every value of x infeasible when a == 2
        for op in OPS_ALL:
            want = cpu.join_eliminate(tables, "x", op)
            got = gpu.join_eliminate(tables, "x", op)
            assert_same(gpu.to_numpy(got.data), want.data, op, dtype, True)
            assert np.isinf(gpu.to_numpy(got.data)[2]).all()


@pytest.mark.gpu
def test_mixed_dtypes_promote(gpu: Any) -> None:
    a = Table(("x", "y"), np.arange(6, dtype=np.float32).reshape(2, 3))
    b = Table(("y",), np.array([0.5, 1.5, 2.5]))
    got = gpu.join_eliminate([a, b], "y", "min")
    want = NumpyBackend().join_eliminate([a, b], "y", "min")
    assert got.data.dtype == want.data.dtype == np.float64
    np.testing.assert_array_equal(gpu.to_numpy(got.data), want.data)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_single_table_operations(gpu: Any, dtype: type) -> None:
    cpu = NumpyBackend()
    rng = np.random.default_rng(3)
    data = rng.integers(0, 30, size=(3, 4, 5)).astype(dtype)
    data[rng.random(data.shape) < 0.2] = np.inf
    t = Table(("a", "b", "c"), data)
    g = gpu.table(t.scope, data, dtype)
    host = gpu.to_numpy
    for var in "abc":
        for op in OPS_ALL:
            want = cpu.eliminate(t, var, op)
            got = gpu.eliminate(g, var, op)
            assert got.scope == want.scope
            assert_same(host(got.data), want.data, op, dtype, True)
        for op in ("min", "max"):
            want = cpu.argbest(t, var, op)
            got = gpu.argbest(g, var, op)
            np.testing.assert_array_equal(host(got.data), want.data)
    np.testing.assert_array_equal(
        host(gpu.transpose(g, ("c", "a", "b")).data),
        cpu.transpose(t, ("c", "a", "b")).data,
    )
    cond = gpu.condition(g, {"b": 2, "z": 0})
    assert cond.scope == ("a", "c")
    np.testing.assert_array_equal(host(cond.data), cpu.condition(t, {"b": 2}).data)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_join_is_the_paper_aggregation(gpu: Any, dtype: type) -> None:
    cpu = NumpyBackend()
    rng = np.random.default_rng(11)
    for _ in range(10):
        tables, _, _ = random_bucket(rng, 5, 4, 3, 4, dtype, integer=False)
        want = cpu.join(tables)
        got = gpu.join(tables)
        assert got.scope == want.scope
        # same order of additions as NumPy: bit-identical even for real-valued costs
        np.testing.assert_array_equal(gpu.to_numpy(got.data), want.data)
        scope = tuple(sorted(want.scope))
        np.testing.assert_array_equal(
            gpu.to_numpy(gpu.join(tables, scope).data),
            cpu.join(tables, scope).data,
        )
        # the two-kernel path (aggregate, then eliminate) equals the fused one
        var = tables[0].scope[0]
        two = gpu.eliminate(got, var, "min")
        fused = gpu.join_eliminate(tables, var, "min", scope=two.scope)
        np.testing.assert_allclose(gpu.to_numpy(two.data), gpu.to_numpy(fused.data), rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("path", ["generic", "generated"])
def test_chunked_output_to_pinned_host_memory(cp: Any, path: str) -> None:
    from dcop.gpu import CupyBackend

    cpu = NumpyBackend()
    backend = CupyBackend(
        max_device_bytes=1024,
        chunk_bytes=512,
        specialize_entries=0 if path == "generated" else 1 << 40,
    )
    rng = np.random.default_rng(5)
    sizes = {"a": 6, "b": 5, "c": 4, "d": 3, "x": 7}
    tables = []
    for scope in [("a", "x"), ("c", "b", "x"), ("d", "a", "c", "b"), ("x", "d"), ("b",)]:
        costs = rng.integers(0, 9, size=tuple(sizes[v] for v in scope)).astype(float)
        costs[rng.random(costs.shape) < 0.1] = np.inf
        tables.append(Table(scope, costs))
    var = "x"
    want = cpu.join_eliminate(tables, var, "min")
    got = backend.join_eliminate(tables, var, "min")
    assert isinstance(got.data, np.ndarray)  # too large for the device cap: came back chunked
    assert backend.transfers.chunks > 1
    np.testing.assert_array_equal(got.data, want.data)
    host = backend.join_eliminate_host(tables, var, "min")
    np.testing.assert_array_equal(host.data, want.data)
    # a host-resident table is accepted as input again
    nxt = backend.eliminate(got, got.scope[0], "min") if got.scope else got
    np.testing.assert_array_equal(
        backend.to_numpy(nxt.data), cpu.eliminate(want, want.scope[0], "min").data
    )


@pytest.mark.gpu
def test_bound_to_given_device_and_stream(cp: Any) -> None:
    import cupy

    from dcop.gpu import CupyBackend

    stream = cupy.cuda.Stream(non_blocking=True)
    backend = get_backend("cupy", device=0, stream=stream)
    assert isinstance(backend, CupyBackend)
    assert backend.stream is stream and backend.device_id == 0
    t = backend.table(("a", "b"), np.array([[1.0, 5.0], [0.0, np.inf]]))
    out = backend.join_eliminate([t], "b", "min")
    backend.synchronize()
    np.testing.assert_array_equal(backend.to_numpy(out.data), [1.0, 0.0])
    with pytest.raises(BackendUnavailable, match="no device"):
        CupyBackend(device=cupy.cuda.runtime.getDeviceCount())
    assert isinstance(get_backend("auto"), CupyBackend)


@pytest.mark.gpu
def test_best_value_and_errors(gpu: Any) -> None:
    cpu = NumpyBackend()
    a = Table(("x", "y"), np.array([[3.0, 1.0, 2.0], [0.0, np.inf, 5.0]]))
    b = Table(("y",), np.array([1.0, 0.0, 0.5]))
    for op in ("min", "max"):
        for x in (0, 1):
            assert gpu.best_value([a, b], "y", {"x": x}, op) == cpu.best_value(
                [a, b], "y", {"x": x}, op
            )
    rng = np.random.default_rng(9)
    for dtype in (np.float32, np.float64):
        for _ in range(20):
            tables, var, sizes = random_bucket(rng, 5, 4, 3, 5, dtype)
            tables = [t for t in tables if var in t.scope]
            values = {v: int(rng.integers(sizes[v])) for v in sizes if v != var}
            # host tables (chunked outputs stay in pinned host memory: only a row is uploaded),
            # device tables, and a mix of both
            on_device = [gpu.table(t.scope, t.data, t.data.dtype) for t in tables]
            mixed = [
                d if k % 2 else t for k, (t, d) in enumerate(zip(tables, on_device, strict=True))
            ]
            for op in ("min", "max"):
                want = cpu.best_value(tables, var, values, op)
                for given in (tables, on_device, mixed):
                    got = gpu.best_value(given, var, values, op)
                    assert got[0] == want[0] and (got[1] == want[1] or np.isinf(want[1]))
    with pytest.raises(ModelError, match="not resolved"):
        gpu.best_value([a, b], "y", {}, "min")
    with pytest.raises(ModelError):
        gpu.join_eliminate([a], "z")
    with pytest.raises(ModelError):
        gpu.join_eliminate([a], "y", "median")
    with pytest.raises(ModelError):
        gpu.join_eliminate([a, b], "y", scope=("z",))
