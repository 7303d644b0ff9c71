"""(Mini-)Bucket Elimination along an order, over any table backend.

BE is MBE with an unbounded mini-bucket size. The variable-elimination phase processes variables
in the given order; each bucket goes through the shared bucket step (:mod:`dcop.buckets`): split
into mini-buckets of at most ``z`` variables (one for BE), each joined and eliminated in one fused
pass, its output placed in the bucket of its earliest variable. The value-assignment phase walks
the order backwards and picks, for each variable, the best value of the sum of its bucket's tables
given the values already chosen.

The sum of the scalar outputs is the optimum (BE) or a lower bound (MBE); the decoded assignment's
true cost, recomputed on the Problem, is an upper bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.buckets import choose_value, eliminate_bucket
from dcop.errors import TableTooLarge
from dcop.model import Problem
from dcop.tables import Op, Table, TableBackend

#: progress(done_buckets, total_buckets, variable)
ProgressFn = Callable[[int, int, str], None]


@dataclass
class EliminationStats:
    """What the elimination phase did: sizes, times and the bound it proves."""

    bound: float = 0.0
    largest_output: int = 0
    largest_joined: int = 0
    messages: int = 0
    seconds_eliminate: float = 0.0
    seconds_assign: float = 0.0
    bucket_seconds: dict[str, float] = field(default_factory=dict)


def eliminate(
    problem: Problem,
    order: Sequence[str],
    backend: TableBackend,
    z: int | None = None,
    op: Op = "min",
    dtype: Any = np.float64,
    max_bytes: float | None = None,
    progress: ProgressFn | None = None,
) -> tuple[dict[str, int], EliminationStats]:
    """Run (mini-)bucket elimination along ``order``; return an assignment and the statistics."""
    position = {v: i for i, v in enumerate(order)}
    itemsize = np.dtype(dtype).itemsize
    stats = EliminationStats(bound=float(problem.constant))
    buckets: dict[str, list[Table]] = {v: [] for v in order}
    for cost_table in problem.tables:
        if not cost_table.scope:
            stats.bound += float(cost_table.costs)
            continue
        first = min(cost_table.scope, key=position.__getitem__)
        buckets[first].append(backend.table(cost_table.scope, cost_table.costs, dtype))

    def check(var: str, scope: tuple[str, ...], out_entries: int) -> None:
        if max_bytes is not None and out_entries * itemsize > max_bytes:
            raise TableTooLarge(
                too_large_message(
                    var, scope, problem.domain_sizes(), out_entries, itemsize, max_bytes
                )
            )

    start = time.perf_counter()
    for done, var in enumerate(order):
        if progress is not None:
            progress(done, len(order), var)
        t0 = time.perf_counter()
        if not buckets[var]:  # a variable no table mentions: any value will do
            continue
        output = eliminate_bucket(
            backend, buckets[var], var, z=z, op=op, order=position, check=check
        )
        for plan in output.plans:
            stats.largest_output = max(stats.largest_output, plan.out_entries)
            stats.largest_joined = max(stats.largest_joined, plan.joined_entries)
        stats.messages += len(output.plans)
        stats.bound += output.scalar
        for message in output.tables:
            buckets[min(message.scope, key=position.__getitem__)].append(message)
        stats.bucket_seconds[var] = time.perf_counter() - t0
    backend.synchronize()
    stats.seconds_eliminate = time.perf_counter() - start
    if progress is not None:
        progress(len(order), len(order), "")

    start = time.perf_counter()
    assignment: dict[str, int] = {}
    for var in reversed(order):
        assignment[var] = choose_value(backend, buckets[var], var, assignment, op)
    stats.seconds_assign = time.perf_counter() - start
    return {v: assignment[v] for v in problem.variables}, stats


def too_large_message(
    var: str,
    scope: Sequence[str],
    sizes: dict[str, int],
    out_entries: int,
    itemsize: int,
    max_bytes: float,
) -> str:
    """Why a bucket's table is refused, and the largest MBE z whose outputs would fit."""
    d = max((sizes[v] for v in scope), default=2)
    # the largest z whose mini-bucket outputs (d^(z-1) entries) fit the limit
    fit = max(1, int(math.log(max(max_bytes / itemsize, 1.0)) / math.log(max(d, 2)))) + 1
    return (
        f"bucket of {var!r}: its table over {len(scope)} variables has {out_entries:.3g} entries "
        f"({out_entries * itemsize / 2**30:.2f} GiB) > the memory limit of "
        f"{max_bytes / 2**30:.2f} GiB; use --max-memory to raise it or "
        f"--algo mbe --z {min(fit, len(scope))} for bounds"
    )
