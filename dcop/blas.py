"""One BLAS thread for ``dcop``'s commands, set before NumPy is imported.

NumPy's OpenBLAS starts a pool of worker threads at import, and they spin waiting for work: the
coordinator of a 30-agent run and the agents' template spent 88 and 47 ms of CPU in
``blas_thread_server`` (``perf``, 2-core VM), and `dcop run` took 0.60 s instead of 0.70 with one
thread. Nothing in a distributed run wants more: the coordinator does no BLAS work, and agents are
already one process each (their sum-product einsum on one thread each).

``dcop solve`` and ``dcop info`` take one thread too. A min-sum solve does no BLAS work at all,
and NumPy's import is 30-90 ms quicker without the pool (2-core VM). A PR/MAR contraction's
matrix products gained nothing from the second thread there: ten calls of Grids_11's PR in one
process spread 3.1-6.6x between the fastest and the slowest warm call with the library's two
threads (0.09-0.60 s, waiting workers on a core another process held) and 1.2-3.2x with one
(0.05-0.16 s); a 24x24 spin glass's PR took 16.3 s against 24.1 s. A value the user set wins
(``OPENBLAS_NUM_THREADS``), for a large contraction on a quiet machine of many cores.
"""

from __future__ import annotations

import os

#: Thread-count variables of the BLAS builds NumPy ships with (OpenBLAS) or may be built with (MKL).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """Ask for one BLAS thread, unless the user chose; effective only before NumPy's import."""
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
