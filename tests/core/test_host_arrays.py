"""Large host arrays touched by several threads before they are filled."""

from __future__ import annotations

import numpy as np
import pytest

from dcop import host_arrays


@pytest.mark.parametrize("threads", [1, 3, 4])
def test_touched_empty_is_zeros_of_its_size(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    monkeypatch.setattr(host_arrays, "TOUCH_IN_THREADS_BYTES", 64)  # threads even for this size
    for size in (1, 7, 1000, 1001):
        out = host_arrays.touched_empty(size, np.float64, threads=threads)
        assert out.shape == (size,) and out.dtype == np.float64
        if size * 8 >= 64 and threads > 1:
            assert not out.any()  # every stretch was touched (written)
