"""(Mini-)Bucket Elimination along an order, over any table backend: the bucket pass
(:func:`dcop.bucketpass.bucket_pass`), then the value-assignment phase, which walks the order
backwards and picks, for each variable, the best value of the sum of its bucket's tables given the
values already chosen.

The sum of the scalar outputs is the optimum (BE) or a lower bound (MBE); the decoded assignment's
true cost, recomputed on the Problem, is an upper bound.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from dcop.backends.base import TableBackend
from dcop.bucketpass import (
    EliminationStats,
    ProgressFn,
    bucket_pass,
    decode,
    too_large_message,
)
from dcop.model import Problem
from dcop.plan.bucket_plan import MemoryPlan
from dcop.tables import Op

__all__ = ["EliminationStats", "ProgressFn", "decode", "eliminate", "too_large_message"]


def eliminate(
    problem: Problem,
    order: Sequence[str],
    backend: TableBackend,
    z: int | None = None,
    op: Op = "min",
    dtype: Any = np.float64,
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
    plan: MemoryPlan | None = None,
) -> tuple[dict[str, int], EliminationStats]:
    """Run (mini-)bucket elimination along ``order``; return an assignment and the statistics
    (the arguments are :func:`~dcop.bucketpass.bucket_pass`'s)."""
    buckets = bucket_pass(problem, order, backend, z, op, dtype, max_bytes, progress, plan)
    start = time.perf_counter()
    assignment = decode(problem, buckets, backend, op)
    buckets.stats.seconds_assign = time.perf_counter() - start
    return assignment, buckets.stats
