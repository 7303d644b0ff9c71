"""The strided sum-of-products kernels (dcop.gpu.strided): their index metadata (CI), the same
numbers as einsum on the fake CuPy (CI) and on a GPU, for every shape of work: copies into a new
axis order, broadcast products, sums of one operand, small outputs of large operands (the
``blocks`` kernel, its parts added in order) and views that are not contiguous."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop.gpu import strided
from dcop.gpu.strided import divide, divider, index_dims, metadata, reference_product_sum


def test_dimensions_adjacent_in_both_operands_merge() -> None:
    # a: (2, 3, 4) contiguous; b broadcast along the first two and contiguous along the last
    assert index_dims([2, 3, 4], [12, 4, 1], [0, 0, 1]) == [(6, 4, 0), (4, 1, 1)]
    # both contiguous and in order: one dimension
    assert index_dims([2, 3, 4], [12, 4, 1], [12, 4, 1]) == [(24, 1, 1)]
    # a transposed view does not merge; a dimension of one value disappears
    assert index_dims([3, 1, 2], [1, 7, 3], [0, 0, 0]) == [(3, 1, 0), (2, 3, 0)]


def _row(n: int, sa: int, sb: int) -> tuple[int, ...]:
    magic, shifts = divider(n)
    return (n, magic, divider(n, 32)[0], shifts, sa, sb)


def test_metadata_gives_each_dimension_its_size_dividers_and_strides() -> None:
    words = metadata([(6, 4, 0), (4, 1, 1)], [(5, 2, 9)])
    assert words == _row(6, 4, 0) + _row(4, 1, 1) + _row(5, 2, 9)
    assert divider(6)[1] == divider(6, 32)[1]  # the shifts do not depend on the width
    assert all(-(1 << 63) <= w < 1 << 63 for w in words)  # int64 words
    # a dimension too large for 32-bit indexing has no 32-bit magic number
    assert metadata([(1 << 40, 1, 1)], [])[2] == 0


def test_the_kernels_division_by_magic_numbers_is_exact() -> None:
    rng = np.random.default_rng(7)
    top = (1 << 64) - 1
    divisors = [1, 2, 3, 5, 6, 7, 641, 1 << 20, (1 << 32) - 1, 1 << 32, (1 << 32) + 1]
    divisors += [(1 << 63) - 1, 1 << 63, (1 << 63) + 1, top]
    divisors += [int(d) for d in rng.integers(2, 1 << 62, 40, dtype=np.int64)]
    xs = [0, 1, 2, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, top - 1, top]
    xs += [int(x) for x in rng.integers(0, 1 << 63, 200, dtype=np.int64)]
    for d in divisors:
        magic, shifts = divider(d)
        for x in [*xs, d - 1, d, d + 1, 3 * d - 1, 3 * d] if d < top // 4 else xs:
            assert divide(x, magic, shifts) == x // d, (x, d)
    top32 = (1 << 32) - 1
    for d in [1, 2, 3, 7, 10, 641, 1 << 16, 65537, (1 << 31) - 1, 1 << 31, top32 - 1, top32]:
        magic, shifts = divider(d, 32)
        for x in [0, 1, d - 1, d, top32 - 1, top32, *(int(x) for x in rng.integers(0, top32, 300))]:
            assert divide(x, magic, shifts, 32) == x // d, (x, d)
    with pytest.raises(ValueError):
        divider(0)
    with pytest.raises(ValueError):
        divider(1 << 32, 32)


Case = tuple[str, Any, Any, tuple[str, ...], Any, tuple[str, ...], tuple[str, ...]]


def _same(xp: Any, x: Any) -> Any:
    return x


def _cases(rng: np.random.Generator) -> list[Case]:
    """(name, a, view of a, sa, b, sb, out): host arrays; ``view(xp, a)`` (as it is, or a
    transposed or sliced view: not contiguous) is what the kernels read."""
    big = rng.random((4, 3, 2, 5, 2, 3, 2))  # scope p q r s t u w
    sbig = ("p", "q", "r", "s", "t", "u", "w")
    return [
        ("copy into a new order", rng.random((3, 4, 5)), _same, ("x", "y", "z"), None, (), ("z", "x", "y")),
        ("sum of one operand", rng.random((3, 4, 5)), _same, ("x", "y", "z"), None, (), ("y",)),
        ("sum to a scalar", rng.random((6, 7)), _same, ("x", "y"), None, (), ()),
        ("broadcast product", rng.random((3, 4)), _same, ("x", "y"), rng.random((4, 5)), ("y", "z"), ("x", "y", "z")),
        ("matrix product", rng.random((30, 40)), _same, ("x", "y"), rng.random((40, 5)), ("y", "z"), ("z", "x")),
        ("small output of large operands", big, _same, sbig, rng.random((2, 3, 2)), ("t", "u", "w"), ("r",)),
        ("one output, many summed", big, _same, sbig, None, (), ("q",)),
        ("transposed view", rng.random((3, 4, 5)), lambda xp, x: xp.transpose(x, (2, 0, 1)), ("z", "x", "y"), rng.random((5,)), ("z",), ("x", "z")),
        ("sliced view", rng.random((4, 6, 3)), lambda xp, x: x[:, 2, :], ("x", "z"), rng.random((3, 2)), ("z", "y"), ("y", "x")),
    ]  # fmt: skip


def test_launches_index_in_32_bits_only_where_every_index_and_offset_fits() -> None:
    limit = (1 << 31) - 1
    assert strided._narrow(1 << 20, 64, [(1 << 20, 1, 0), (64, 1 << 20, 1)])
    # an offset (reach) of 2^31 - 1 fits, one more does not
    assert strided._narrow(2, 2, [(2, limit, 0)])
    assert not strided._narrow(2, 2, [(2, limit + 1, 0)])
    assert not strided._narrow(2, 2, [(3, 0, (1 << 30) + 1)])
    assert not strided._narrow(1 << 31, 1, [])  # the index itself
    assert not strided._narrow(4, 4, [(4, -1, 0)])  # a negative stride


def _force_wide(monkeypatch: pytest.MonkeyPatch, wide: bool) -> None:
    """Have the kernels index in 64 bits (``wide``) or as they choose, with plans of their own
    (none kept from before, none left for after)."""
    monkeypatch.setattr(strided, "_SHARED", {})
    if wide:
        monkeypatch.setattr(strided, "_narrow", lambda *args: False)


@pytest.mark.parametrize("wide", [False, True], ids=["as-chosen", "64-bit"])
def test_fake_gpu_kernels_equal_einsum(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch, wide: bool
) -> None:
    from dcop.gpu import CupyBackend

    _force_wide(monkeypatch, wide)

    backend = CupyBackend()
    rng = np.random.default_rng(5)
    cp = fake_cupy_module
    for name, a, view, sa, b, sb, out in _cases(rng):
        want = reference_product_sum(np, view(np, a), sa, b, sb, out)
        db = None if b is None else cp.asarray(b)
        got = backend.strided.product_sum(view(cp, cp.asarray(a)), sa, db, sb, out)
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got.a, want, rtol=1e-12, err_msg=name)


def test_the_blocks_kernel_adds_its_parts_in_order(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Few outputs of many summed entries split the sum into parts (forced small here); the
    parts, added by a second launch, give the whole sum."""
    from dcop.gpu import CupyBackend
    from tests.gpu import fake_cupy

    monkeypatch.setattr(strided, "BLOCK_MIN_SUMMED", 16)
    monkeypatch.setattr(strided, "ROWS_MAX_SUMMED", 4)
    backend = CupyBackend()
    data = np.random.default_rng(2).random((3, 500))
    fake_cupy.reset()
    got = backend.strided.product_sum(fake_cupy_module.asarray(data), ("x", "y"), None, (), ("x",))
    assert fake_cupy.LAUNCHED == ["dcop_psum_blocks_i32_f64", "dcop_psum_rows_i32_f64"]
    np.testing.assert_allclose(got.a, data.sum(axis=1), rtol=1e-12)


@pytest.mark.parametrize("wide", [False, True], ids=["as-chosen", "64-bit"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gpu_kernels_equal_einsum(
    cp: Any, dtype: Any, monkeypatch: pytest.MonkeyPatch, wide: bool
) -> None:
    from dcop.gpu import CupyBackend

    _force_wide(monkeypatch, wide)

    backend = CupyBackend()
    rng = np.random.default_rng(7)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    for name, a, view, sa, b, sb, out in _cases(rng):
        a, b = a.astype(dtype), None if b is None else b.astype(dtype)
        want = reference_product_sum(np, view(np, a), sa, b, sb, out)
        db = None if b is None else backend.asarray(b, dtype)
        got = backend.strided.product_sum(view(cp, backend.asarray(a, dtype)), sa, db, sb, out)
        assert got.dtype == dtype and got.flags.c_contiguous, name
        np.testing.assert_allclose(backend.to_numpy(got), want, rtol=rtol, err_msg=name)


def test_gpu_kernels_on_large_operands(cp: Any) -> None:
    """2^22-entry operands: a large copy (rows kernel), a belief-like sum to one variable
    (blocks kernel with parts) and a small output of two large operands."""
    from dcop.gpu import CupyBackend

    backend = CupyBackend()
    rng = np.random.default_rng(11)
    scope = tuple(f"v{i}" for i in range(22))
    a = rng.random((2,) * 22)
    b = rng.random((2,) * 12)
    da, db = backend.asarray(a), backend.asarray(b)
    moved = scope[11:] + scope[:11]
    np.testing.assert_array_equal(
        backend.to_numpy(backend.strided.product_sum(da, scope, None, (), moved)), np.transpose(a, list(range(11, 22)) + list(range(11)))
    )  # fmt: skip
    np.testing.assert_allclose(
        backend.to_numpy(backend.strided.product_sum(da, scope, None, (), ("v3",))),
        a.sum(axis=tuple(k for k in range(22) if k != 3)),
        rtol=1e-12,
    )
    got = backend.strided.product_sum(da, scope, db, scope[5:17], ("v7", "v0"))
    want = reference_product_sum(np, a, scope, b, scope[5:17], ("v7", "v0"))
    np.testing.assert_allclose(backend.to_numpy(got), want, rtol=1e-12)


def _check_reductions(backend: Any, cp: Any, n: int) -> None:
    """Peak-divide, count and sum (and a sum over a view that is not contiguous) against NumPy;
    data goes up and comes back on the backend's stream, where the kernels run."""
    host = backend.to_numpy
    rng = np.random.default_rng(n)
    data = rng.random(n) * 3.0
    device = backend.asarray(data)
    kernels = backend.strided
    c, counted = kernels.peak_divide(device, 1e-300, 0.25)
    assert float(host(c)) == data.max() + 1e-300
    scaled = data / (data.max() + 1e-300)
    np.testing.assert_allclose(host(device), scaled, rtol=1e-15)
    assert float(host(counted)) == np.count_nonzero(scaled < 0.25)
    again = backend.asarray(data)
    c, counted = kernels.peak_divide(again, 0.0)
    assert counted is None and float(host(c)) == data.max()
    assert float(host(kernels.count_below(device, 0.25))) == np.count_nonzero(scaled < 0.25)
    np.testing.assert_allclose(
        float(host(kernels.reduce(device, 2, 0.0, 1.0))), scaled.sum() + 1.0, rtol=1e-12
    )
    square = rng.random((64, 48))
    view = cp.transpose(backend.asarray(square), (1, 0))[3:40]
    np.testing.assert_allclose(
        float(host(kernels.reduce(view, 2, 0.0, 0.0))), square.T[3:40].sum(), rtol=1e-12
    )
    assert float(host(kernels.reduce(view, 0, 0.0, 0.0))) == square.T[3:40].max()


def test_fake_gpu_peaks_counts_and_sums(fake_cupy_module: ModuleType) -> None:
    from dcop.gpu import CupyBackend

    _check_reductions(CupyBackend(), fake_cupy_module, 1000)


@pytest.mark.parametrize("n", [1, 1000, (1 << 16) + 1, 1 << 22])
def test_gpu_peaks_counts_and_sums(cp: Any, n: int) -> None:
    from dcop.gpu import CupyBackend

    _check_reductions(CupyBackend(), cp, n)
