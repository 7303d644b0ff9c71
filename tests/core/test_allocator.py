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


def test_a_forked_child_gives_the_kept_pages_back() -> None:
    """The parent keeps a freed 64 MiB table; a forked child returns it at once (its writes to
    it would copy the parent's pages one by one)."""
    import subprocess
    import sys

    code = """
import os, numpy as np
from dcop.allocator import keep_freed_memory
def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20
assert keep_freed_memory()
table = np.ones((64 << 20) // 8)
del table
parent = resident()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(write, str(resident()).encode())
    os._exit(0)
os.waitpid(pid, 0)
print(parent, int(os.read(read, 64)))
"""
    if not keep_freed_memory():
        pytest.skip("not glibc: the allocator's thresholds are left alone")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    parent, child = map(int, run.stdout.split())
    assert child <= parent - 48, (parent, child)  # MiB: the kept table is not the child's


def test_keeping_is_asked_once() -> None:
    assert keep_freed_memory() is keep_freed_memory()
