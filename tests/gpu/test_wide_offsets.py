"""Inputs of 2^32 entries or more (a 16 GiB float32 table): the kernels' offsets into them must
not wrap at 32 bits. A BE run whose bucket read a 10^10-entry message on one H100 gave a wrong
bound and an infeasible assignment before the offsets were widened (the 2-GPU split, whose
slices were smaller, gave the optimum)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dcop.backend import gpu_usable
from dcop.gpu import kernels as K
from dcop.tables import Table


def _sig(size: int) -> Any:
    return K.FusedSig(
        dtype="float32",
        op="min",
        group_sizes=(1 << 20,),
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


@pytest.fixture(scope="module")
def cp() -> Any:
    cupy = pytest.importorskip("cupy")
    if not gpu_usable():
        pytest.skip("no usable CUDA device")
    if cupy.cuda.runtime.memGetInfo()[0] < 30 * 2**30:
        pytest.skip("needs 30 GiB of free device memory")
    return cupy


def test_a_table_past_32_bit_offsets_is_read_right(cp: Any) -> None:
    from dcop.gpu import CupyBackend

    backend = CupyBackend()
    rows = 1 << 30  # x (5 values) leads: entries from 2^32 on are x = 4
    data = cp.ones((5, rows), dtype=cp.float32)
    marked = np.array([0, 7, rows // 2, rows - 1])
    data[4, cp.asarray(marked)] = 0.0  # only x = 4 makes these rows' minimum 0
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
