"""A backend's own out-of-memory error (CuPy's, say) reaches the user as TableTooLarge."""

from __future__ import annotations

from typing import Any

import pytest

from dcop.backends.numpy import NumpyBackend
from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.inference import solve


class DeviceFull(Exception):
    pass


class FullBackend(NumpyBackend):
    out_of_memory_errors = (DeviceFull,)

    def join_eliminate(self, *args: Any, **kwargs: Any) -> Any:
        raise DeviceFull("Out of memory allocating 40,000,000,000 bytes")


def test_device_out_of_memory_is_table_too_large() -> None:
    problem = random_network(8, 3, 0.4, 0.2, seed=1)
    with pytest.raises(TableTooLarge, match="out of memory"):
        solve(problem, backend=FullBackend())
    # the same problem on the plain backend solves
    assert solve(problem, backend=NumpyBackend()).lower_bound >= 0
