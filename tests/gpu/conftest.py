"""Fixtures of the GPU tests: a fake CuPy for the host side of the CuPy backend (no GPU needed)."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from dcop.backends import gpu_usable
from tests.gpu import fake_cupy


@pytest.fixture
def fake_cupy_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``cupy`` replaced by :mod:`tests.gpu.fake_cupy`; kernel caches and env restored after."""
    for name in ("CUPY_CACHE_DIR", "DCOP_KERNEL_CACHE", "DCOP_GPU_MIN_ENTRIES", "DCOP_CUDA_IPC"):
        monkeypatch.setenv(name, "unset")  # remembers the real value for the undo
        monkeypatch.delenv(name)
    with fake_cupy.installed(monkeypatch) as module:
        yield module


@pytest.fixture(scope="session")
def cp() -> Any:
    """The real CuPy on a usable GPU (the test skips without one)."""
    cupy = pytest.importorskip("cupy")
    if not gpu_usable():
        pytest.skip("no usable CUDA device")
    return cupy
