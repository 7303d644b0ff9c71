"""Inputs of 2^32 entries or more (a 16 GiB float32 table): the kernels' offsets into them must
not wrap at 32 bits; nor may the group counter of an output of 2^32 groups or more (a bucket
of a table larger than one H200, made on two of them, had 1.9e10). A BE run whose bucket read a 10^10-entry message on one H100 gave a wrong
bound and an infeasible assignment before the offsets were widened (the 2-GPU split, whose
slices were smaller, gave the optimum)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dcop.gpu import kernels as K
from dcop.tables import Table


def _sig(size: int, groups: tuple[int, ...] = (1 << 20,)) -> Any:
    return K.FusedSig(
        dtype="float32",
        op="min",
        group_sizes=groups,
        dy=1,
        ndom=5,
        tables=(K.TableSig(size=size, group_strides=(1,), sy=0, sx=1 << 20, shared=False),),
        stage=False,
    )


def test_generated_kernels_index_wide_inputs_in_64_bits() -> None:
    small = K.fused_source(_sig(5 << 20))
    assert "const unsigned int b0" in small and "ull" not in small.split("(void)q;")[1]
    wide = K.fused_source(_sig(1 << 32))
    assert "const unsigned long long b0" in wide and f"x * {1 << 20}ull" in wide
    for op in ("min", "max"):
        assert "unsigned long long base[" in K.generic_source(op, "float32")


def test_generated_kernels_count_groups_in_64_bits_past_2_to_the_32() -> None:
    narrow = K.fused_source(_sig(5 << 20, (1 << 20, 1 << 11)))
    assert "unsigned int g_begin, unsigned int g_end" in narrow and "unsigned int q" in narrow
    wide = K.fused_source(_sig(5 << 20, (1 << 20, 1 << 12)))
    assert "unsigned long long g_begin, unsigned long long g_end" in wide
    assert "unsigned long long q" in wide and f"q /= {1 << 12}ull" in wide


@pytest.fixture(scope="module")
def cp(cp: Any) -> Any:
    """The GPU fixture (conftest), on a device with 30 GiB free."""
    if cp.cuda.runtime.memGetInfo()[0] < 30 * 2**30:
        pytest.skip("needs 30 GiB of free device memory")
    return cp


def test_a_table_past_32_bit_offsets_is_read_right(cp: Any) -> None:
    from dcop.gpu import CupyBackend

    backend = CupyBackend()
    rows = 1 << 30  # x (5 values) leads: entries from 2^32 on are x = 4
    data = cp.ones((5, rows), dtype=cp.float32)
    marked = np.array([0, 7, rows // 2, rows - 1])
    data[4, cp.asarray(marked)] = 0.0  # only x = 4 makes these rows' minimum 0
    cp.cuda.get_current_stream().synchronize()  # written before the backend's stream reads it
    table = Table(("x", "y"), data)
    try:
        out = backend.join_eliminate([table], "x", "min")
        got = backend.to_numpy(out.data) if not isinstance(out.data, np.ndarray) else out.data
        assert out.scope == ("y",)
        assert np.flatnonzero(got == 0.0).tolist() == marked.tolist()
        assert int(np.count_nonzero(got == 1.0)) == rows - len(marked)
        del out, got
        # the value phase: the best x of a marked row is 4, at an offset past 2^32
        for y in marked[:2]:
            assert backend.best_value([table], "x", {"y": int(y)}, "min") == (4, 0.0)
        assert backend.best_value([table], "x", {"y": 3}, "min") == (0, 1.0)
    finally:
        del data, table
        cp.get_default_memory_pool().free_all_blocks()


def test_an_output_of_2_to_the_32_groups_is_computed_right(cp: Any) -> None:
    """x eliminated from A(x, y0..y15) + B(x, y16..y31) + C(y31, z), z of one value last: the
    output holds 2^32 groups of one row (16 GiB); sampled entries against the host."""
    from dcop.gpu import CupyBackend

    rng = np.random.default_rng(3)
    ys = [f"y{i}" for i in range(32)]
    a = rng.integers(0, 50, (2,) + (2,) * 16).astype(np.float32)
    b = rng.integers(0, 50, (2,) + (2,) * 16).astype(np.float32)
    c = rng.integers(0, 50, (2, 1)).astype(np.float32)
    tables = [Table(("x", *ys[:16]), a), Table(("x", *ys[16:]), b), Table(("y31", "z"), c)]
    backend = CupyBackend()
    try:
        out = backend.join_eliminate(tables, "x", "min")
        assert out.scope == (*ys, "z")
        # the kernel ran on the backend's stream; the gather below runs on CuPy's current one
        # (a run without this read the output before it was written)
        backend.synchronize()
        flat = out.data.reshape(-1)
        picks = [*rng.integers(0, 1 << 32, 64).tolist(), 0, (1 << 31) + 5, (1 << 32) - 1]
        got = backend.to_numpy(flat[cp.asarray(picks)])
        for k, value in zip(picks, got, strict=True):
            bits = [(k >> (31 - i)) & 1 for i in range(32)]
            lo, hi = tuple(bits[:16]), tuple(bits[16:])
            want = c[bits[31], 0] + min(a[(0, *lo)] + b[(0, *hi)], a[(1, *lo)] + b[(1, *hi)])
            assert value == want, k
    finally:
        out = flat = None
        cp.get_default_memory_pool().free_all_blocks()
