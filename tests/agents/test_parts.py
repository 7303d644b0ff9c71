"""MB-DPOP's UTILs in parts (:mod:`dcop.agents.parts`): every block fits one message, the blocks
add up to the table they came from, a torn or repeated series is refused, and the sum of an
agent's tables is what its parent would add up."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.agents.parts import Assembly, split, summed
from dcop.errors import ProtocolError
from dcop.protocol.messages import ROWS, WireTable
from dcop.trees.cutset import CutLimit


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=5),
    st.integers(1, 40),
    st.randoms(use_true_random=False),
)
def test_the_blocks_fit_the_limit_and_add_up_to_the_table(shape: list[int], room: int, rnd) -> None:  # type: ignore[no-untyped-def]
    scope = tuple("abcde"[: len(shape)])
    data = np.arange(int(np.prod(shape)), dtype=float).reshape(shape)
    whole, blocks = split(scope, data, CutLimit(float(room)))
    assert whole.scope == scope and whole.shape == tuple(shape)
    assert all(b.scope[0] == ROWS for b in blocks)
    # a block holds at most a message's entries, unless one row alone is more (never: the
    # rows are the leading axes that leave a rest within the room)
    assert all(b.entries <= room for b in blocks)
    order = list(range(len(blocks)))
    rnd.shuffle(order)  # the blocks may arrive in any order; the part number places them
    assembly = Assembly()
    out = None
    for k in order:
        assert out is None
        out = assembly.take((3, -1), whole, k, len(blocks), blocks[k])
    assert out is not None and np.array_equal(out, data)
    assert not assembly.series


def test_a_repeated_or_torn_series_is_refused() -> None:
    data = np.ones((4, 3))
    whole, blocks = split(("a", "b"), data, CutLimit(3.0))
    assert len(blocks) == 4
    assembly = Assembly()
    assembly.take((1, -1), whole, 0, 4, blocks[0])
    with pytest.raises(ProtocolError, match="repeated or torn"):
        assembly.take((1, -1), whole, 0, 4, blocks[0])
    with pytest.raises(ProtocolError, match="repeated or torn"):
        assembly.take((1, -1), whole, 1, 5, blocks[1])
    for k in (1, 2):
        assembly.take((1, -1), whole, k, 4, blocks[k])
    with pytest.raises(ProtocolError, match="do not make"):
        assembly.take((1, -1), whole, 3, 4, WireTable.from_array((ROWS, "b"), np.ones((2, 3))))


def test_the_sum_of_tables_is_their_broadcast_sum() -> None:
    rng = np.random.default_rng(0)
    ab = rng.random((2, 3))
    cb = rng.random((4, 3))
    scope, out = summed(
        [WireTable.from_array(("a", "b"), ab), WireTable.from_array(("c", "b"), cb)], 1.5
    )
    assert scope == ("a", "b", "c")
    expected = ab[:, :, None] + cb.T[None, :, :] + 1.5
    assert np.allclose(out, expected)


def test_a_table_is_put_together_in_the_array_its_backend_uploads_fastest() -> None:
    """A GPU agent's parts land in page-locked memory (``empty``): the one copy from the
    socket's frames, with no second one before the upload."""
    made: list[np.ndarray] = []

    def empty(shape: tuple[int, ...], dtype: object) -> np.ndarray:
        made.append(np.empty(shape, dtype))  # type: ignore[call-overload]
        return made[-1]

    data = np.arange(24.0).reshape(2, 3, 4)
    whole, blocks = split(("a", "b", "c"), data, CutLimit(5.0))
    assembly = Assembly(empty)
    out = [assembly.take((1, 0), whole, k, len(blocks), b) for k, b in enumerate(blocks)][-1]
    assert out is not None and np.array_equal(out, data)
    assert len(made) == 1 and np.shares_memory(out, made[0])
