"""One BLAS thread for the processes of a distributed run, set before NumPy is imported.

NumPy's OpenBLAS starts a pool of worker threads at import, and they spin waiting for work: the
coordinator of a 30-agent run and the agents' template spent 88 and 47 ms of CPU in
``blas_thread_server`` (``perf``, 2-core VM), and `dcop run` took 0.60 s instead of 0.70 with one
thread. Nothing in a distributed run wants more: the coordinator does no BLAS work, and agents are
already one process each (their sum-product einsum on one thread each). ``dcop solve`` keeps the
library's default. A value the user set wins.
"""

from __future__ import annotations

import os

#: Thread-count variables of the BLAS builds NumPy ships with (OpenBLAS) or may be built with (MKL).
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_blas_thread() -> None:
    """Ask for one BLAS thread, unless the user chose; effective only before NumPy's import."""
    for name in BLAS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")
