"""The coordinator hashes a table chunk by chunk (a default-only table of 2^25 entries need not
exist whole in float64): the digest must equal the one an agent computes from the whole array."""

from __future__ import annotations

import numpy as np
import pytest

from dcop.model import CostTable
from dcop.protocol.digest import combine_digests, part_digest, table_digest


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("seed", range(4))
def test_a_chunked_digest_equals_the_whole_arrays(seed: int, chunk: int) -> None:
    rng = np.random.default_rng(seed)
    shape = tuple(int(d) for d in rng.integers(1, 5, size=int(rng.integers(1, 5))))
    scope = [f"x{i}" for i in range(len(shape))]
    rows = np.stack([rng.integers(0, d, size=6) for d in shape], axis=1)  # repeats: last wins
    tables = [
        CostTable.sparse(scope, shape, float(rng.normal()), rows, rng.normal(size=6)),
        CostTable.sparse(scope, shape, 3.0, np.zeros((0, len(shape)), int), np.zeros(0)),
        CostTable(tuple(scope), rng.normal(size=shape)),
    ]
    whole = part_digest("x0", shape[0], [(t.scope, t.dense(np.float64)) for t in tables])
    chunked = combine_digests(
        "x0",
        shape[0],
        [table_digest(t.scope, t.shape, t.dense_chunks(np.float64, chunk)) for t in tables],
    )
    assert chunked == whole
    for t in tables:
        assert np.array_equal(
            np.concatenate(list(t.dense_chunks(np.float64, chunk))), t.dense().ravel()
        )
