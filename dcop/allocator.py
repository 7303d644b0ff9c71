"""The C allocator keeps the memory of freed tables for the next ones, once per process.

glibc hands an allocation above its mmap threshold (128 KiB, raised as large blocks are freed,
at most 32 MiB) to ``mmap`` and gives the pages back at ``free``; freed memory at the top of the
heap goes back too, past the trim threshold. Every call of a PR or a BE solve then touches its
tables' pages anew, and each first touch is a page fault the kernel zeroes a page for. On the
2-core VM the warm calls of ``benchmarks/startup.py --only steady`` took 2,800 faults each
(Grids_11's PR; 30 % of its time in the kernel), 3,000 (a 20x20 spin glass's PR), 7,700 and
33,000 (16x16 and 18x18 BE solves). With both thresholds raised (to 1 GiB then: every table
of these rows is far below :data:`KEEP_BYTES`) they took 8-120,
and the fastest warm calls ran 0.026 -> 0.018 s, 0.171 -> 0.161 s, 0.083 -> 0.050 s and
0.33 -> 0.32 s (interleaved, load 3-7).

The cost: a process keeps up to :data:`KEEP_BYTES` of freed memory on top of what it holds
(its peak was reached anyway; the next table takes it back without a fault): the peak RSS of
``--max-memory``'s rows (``benchmarks/expansion.py``, 31-190 MiB) moved by at most 12 MiB,
down as often as up. Setting either
threshold turns off glibc's own adjustment, so both are set. Elsewhere than glibc (musl, macOS)
nothing changes.
"""

from __future__ import annotations

import ctypes
import os

#: glibc's ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: The largest block kept on the heap, and the most freed memory kept at its top: a table of
#: 2^25 float64 entries, past the bench's largest; a larger one, and the naive join of
#: ``benchmarks/cpu_be.py`` (800 MB), goes back to the system when freed.
KEEP_BYTES = 256 << 20

_kept: bool | None = None


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed memory of up to :data:`KEEP_BYTES` for reuse (once per process);
    whether it did (False where the C library is not glibc)."""
    global _kept
    if _kept is None:
        _kept = _set_thresholds(KEEP_BYTES)
    return _kept


def _set_thresholds(keep: int) -> bool:
    try:
        # the symbols the interpreter was linked with, its C library's among them (dlopen(NULL):
        # no search for a library file, which ctypes.util.find_library runs programs for)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # a C library without mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not (mallopt(M_MMAP_THRESHOLD, keep) and mallopt(M_TRIM_THRESHOLD, keep)):
        return False
    # A forked child (multiprocessing, the agents' template) shares the kept pages with its
    # parent: each first write to one copies it, slower than a fresh page (BE of n = 17 random
    # networks in children of cpu_be.py, forked after its 800 MB join: 0.25 s against 0.13).
    # The child gives its free pages back first (malloc_trim: the free chunks inside the heap
    # too) and faults fresh ones as before.
    trim = ctypes.CDLL(None).malloc_trim
    trim.argtypes = (ctypes.c_size_t,)
    os.register_at_fork(after_in_child=lambda: trim(0))
    return True
