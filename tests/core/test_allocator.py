"""A process that made a NumPy backend reuses freed tables' pages (see dcop.allocator)."""

from __future__ import annotations

import resource

import numpy as np
import pytest

from dcop.allocator import KEEP_BYTES, keep_freed_memory
from dcop.backends.numpy import NumpyBackend


def _faults_filling(entries: int) -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    table = np.empty(entries)
    table.fill(1.0)  # every page touched
    del table
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_a_freed_table_s_pages_serve_the_next_one() -> None:
    NumpyBackend()
    if not keep_freed_memory():
        pytest.skip("not glibc: the allocator's thresholds are left alone")
    entries = (64 << 20) // 8  # 64 MiB: glibc alone would map and unmap it (above 32 MiB)
    assert entries * 8 < KEEP_BYTES
    _faults_filling(entries)
    # unkept: every fill maps the table anew, 544 faults here (huge pages), 16,384 without them
    assert _faults_filling(entries) < 8


def test_keeping_is_asked_once() -> None:
    assert keep_freed_memory() is keep_freed_memory()
