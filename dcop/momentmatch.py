"""Moment matching between the mini-buckets of one bucket (MBE-MM).

Plain MBE bounds ``min_x sum_j F_j(x, .)`` from below by ``sum_j min_x F_j(x, .)``, where the
``F_j`` are the bucket's mini-buckets (each the sum of its tables) and ``x`` the eliminated
variable. Any unary shifts ``d_j(x)`` that sum to zero leave the bucket's sum as it is, so
``sum_j min_x (F_j + d_j)`` is a lower bound too; moment matching picks the shifts that make the
mini-buckets' min-marginals on ``x`` agree: with ``mu_j(x) = min F_j(x, .)`` over the other
variables and ``mu(x)`` their mean, ``d_j = mu - mu_j`` (Flerova, Ihler, Dechter and Otten,
2011; daoopt's MBE-MM). The bound is often much tighter where mini-buckets split a bucket whose
parts disagree (deterministic gates with evidence, grids).

A value that some mini-bucket makes infinite for every tuple (``mu_j(x) = inf``) is infeasible
in the whole bucket: every mini-bucket gets an infinite shift there (no ``inf - inf``), which
keeps the bound valid and tells the other mini-buckets of it.

The shifts are computed with the backend's own table operations (a join and eliminations, where
the backend keeps its tables: the GPU for CuPy); only the vectors ``mu_j`` (one entry per value
of ``x``) come to the host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dcop.backends.base import TableBackend
from dcop.tables import Table

#: The largest mini-bucket (joined entries) whose min-marginal is computed: the join is built in
#: memory once (the fused elimination never builds it) and reduced an axis at a time, several
#: times the fused pass's cost. A bucket with a larger mini-bucket is eliminated unmatched (plain
#: MBE: still a lower bound). At 2^22 the random networks' (d = 10) z = 6 passes took 0.08 ->
#: 0.56 s for little; at 2^18 their z >= 6 passes are untouched and the diagnosis networks'
#: (binary, z up to 18) all matched.
MATCH_ENTRIES = 1 << 18


def min_marginal(backend: TableBackend, tables: Sequence[Table], var: str) -> np.ndarray:
    """``min`` of the sum of ``tables`` over every variable but ``var``, on the host."""
    joined = backend.join(tables)
    for other in joined.scope:
        if other != var:
            joined = backend.eliminate(joined, other, "min")
    return np.asarray(backend.to_numpy(joined.data), dtype=np.float64).reshape(-1)


def matching_shifts(marginals: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The shifts ``mean(mu) - mu_j`` for min-marginals ``mu_j`` (each a vector over the
    eliminated variable's values); infinite for every mini-bucket where any ``mu_j`` is. They sum
    to zero wherever finite."""
    stacked = np.stack([np.asarray(m, dtype=np.float64) for m in marginals])
    dead = np.isinf(stacked).any(axis=0)
    safe = np.where(dead, 0.0, stacked)
    mean = safe.mean(axis=0)
    shifts = mean[None, :] - safe
    shifts[:, dead] = np.inf
    return list(shifts)


def matched_groups(
    backend: TableBackend, groups: Sequence[Sequence[Table]], var: str, dtype: Any
) -> list[list[Table]]:
    """Each mini-bucket of ``groups`` with its shift on ``var`` added as a unary table; the
    groups unchanged where there is one mini-bucket or one is too large to match."""
    if len(groups) < 2:
        return [list(g) for g in groups]
    for group in groups:
        sizes = {v: s for t in group for v, s in zip(t.scope, t.shape, strict=True)}
        if int(np.prod(list(sizes.values()), dtype=np.float64)) > MATCH_ENTRIES:
            return [list(g) for g in groups]
    shifts = matching_shifts([min_marginal(backend, g, var) for g in groups])
    return [
        [*group, backend.table((var,), shift.astype(dtype), dtype)]
        for group, shift in zip(groups, shifts, strict=True)
    ]
