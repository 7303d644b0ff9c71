"""The C allocator keeps the memory of freed tables for the next ones, once per process.

glibc hands an allocation above its mmap threshold (128 KiB, raised as large blocks are freed,
at most 32 MiB) to ``mmap`` and gives the pages back at ``free``; freed memory at the top of the
heap goes back too, past the trim threshold. Every call of a PR or a BE solve then touches its
tables' pages anew, and each first touch is a page fault the kernel zeroes a page for. On the
2-core VM the warm calls of Grids_11's PR took 2,100 faults each, 30 % of their time in the
kernel (``getrusage``: 0.074 s of system time in nine calls of 0.028-0.037 s), and 20x20 spin
glass's PR 4,000. With both thresholds at :data:`KEEP_BYTES` the warm calls faulted 5-80 times,
and ran 20-40 % faster (Grids_11 0.028 -> 0.018 s, 20x20's PR 0.243 -> 0.153 s at best).

The cost: a process keeps up to :data:`KEEP_BYTES` of freed memory on top of what it holds
(its peak was reached anyway; the next table takes it back without a fault). Setting either
threshold turns off glibc's own adjustment, so both are set. Elsewhere than glibc (musl, macOS)
nothing changes.
"""

from __future__ import annotations

import ctypes

#: glibc's ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: The largest block kept on the heap, and the most freed memory kept at its top: larger tables
#: than this are rare, and their page faults weigh little beside their own arithmetic.
KEEP_BYTES = 1 << 30

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
    return bool(mallopt(M_MMAP_THRESHOLD, keep)) and bool(mallopt(M_TRIM_THRESHOLD, keep))
