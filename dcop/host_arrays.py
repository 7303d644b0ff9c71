"""Large host arrays whose pages are in place before they are filled.

A fresh array of many GB is paid for at its first touch: the kernel maps and zeroes each page as
it is first written. On the H200 host, touching 9.4 GB from one thread took 2.6 s (3.6 GB/s),
most of the 3-4.8 s that reading a z = 9 pass's messages into the search's arrays took, while the
device's copy into page-locked memory ran at 55 GB/s. Pages are touched by several threads at
once (NumPy fills without the GIL), each over its own stretch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dcop.backends.between import Pieces
from dcop.backends.numpy import HOST_CPUS, TakenInTurn, in_threads

#: Below this many bytes one thread touches the pages as the array is filled.
TOUCH_IN_THREADS_BYTES = 256 << 20
#: Bytes a thread touches between two looks at the caller's check.
TOUCH_PIECE_BYTES = 32 << 20


def touched_empty(size: int, dtype: Any = np.float64, threads: int = HOST_CPUS) -> np.ndarray:
    """A 1-d array of ``size`` entries whose pages are already mapped (its values are zeros);
    small ones are plain ``np.empty``. The pages are touched in pieces of TOUCH_PIECE_BYTES,
    taken in turn by the threads, with the check of an enclosing
    :func:`~dcop.backends.between.checked_between` between them (1.4 GB took 3.7 s on the loaded
    2-core VM: the search's deadline falls there too)."""
    out = np.empty(size, dtype=dtype)
    if out.nbytes < TOUCH_IN_THREADS_BYTES or threads <= 1:
        return out
    step = max(1, TOUCH_PIECE_BYTES // out.itemsize)
    between = Pieces()

    def touch(share: tuple[TakenInTurn, bool]) -> None:
        starts, checks = share
        for start in starts:
            if between.stop(checks):
                return
            out[start : start + step] = 0

    taken = TakenInTurn(range(0, size, step))
    in_threads(touch, [(taken, k == 0) for k in range(threads)], between.poll)
    return out
