"""Table operations against plain loops over every tuple."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.backends.numpy import NumpyBackend, _logsumexp_linear
from dcop.errors import ModelError
from dcop.tables import Table, domain_sizes

VARS = "abcde"


@st.composite
def table_sets(draw: st.DrawFn) -> tuple[list[Table], dict[str, int]]:
    sizes = {v: draw(st.integers(1, 3)) for v in VARS}
    tables = []
    for _ in range(draw(st.integers(1, 4))):
        scope = tuple(draw(st.permutations(VARS))[: draw(st.integers(1, 4))])
        shape = tuple(sizes[v] for v in scope)
        flat = draw(
            st.lists(
                st.one_of(st.integers(0, 50).map(float), st.just(math.inf)),
                min_size=math.prod(shape),
                max_size=math.prod(shape),
            )
        )
        tables.append(Table(scope, np.array(flat, dtype=float).reshape(shape)))
    return tables, sizes


def loop_join(tables: list[Table], scope: tuple[str, ...], sizes: dict[str, int]) -> np.ndarray:
    out = np.zeros(tuple(sizes[v] for v in scope))
    for idx in itertools.product(*(range(sizes[v]) for v in scope)):
        values = dict(zip(scope, idx, strict=True))
        out[idx] = sum(t.data[tuple(values[v] for v in t.scope)] for t in tables)
    return out


REDUCE = {
    "min": np.min,
    "max": np.max,
    "sum": np.sum,
    "logsumexp": lambda a, axis: np.log(np.sum(np.exp(a), axis=axis)),
}


@settings(max_examples=60, deadline=None)
@given(table_sets(), st.sampled_from(["min", "max", "sum"]), st.integers(1, 64))
def test_join_eliminate_matches_loops(data, op, block) -> None:
    tables, _ = data
    backend = NumpyBackend(block_entries=block)
    sizes = domain_sizes(tables)
    joined = backend.join(tables)
    assert np.array_equal(joined.data, loop_join(tables, joined.scope, sizes))
    for var in joined.scope:
        separate = backend.eliminate(joined, var, op)
        fused = backend.join_eliminate(tables, var, op)
        assert separate.scope == fused.scope
        axis = joined.scope.index(var)
        with np.errstate(invalid="ignore"):
            expected = REDUCE[op](joined.data, axis=axis)
        np.testing.assert_array_equal(fused.data, expected)
        np.testing.assert_array_equal(separate.data, expected)


def test_logsumexp_handles_infinities() -> None:
    backend = NumpyBackend()
    t = Table(("a", "b"), np.array([[0.0, math.log(3.0)], [-math.inf, -math.inf], [math.inf, 1.0]]))
    out = backend.eliminate(t, "b", "logsumexp").data
    assert out[0] == pytest.approx(math.log(4.0))
    assert out[1] == -math.inf
    assert out[2] == math.inf


def test_logsumexp_of_a_run_with_inf_and_large_entries_warns_nothing() -> None:
    """A run holding +inf is shifted by 0, so its large finite entries overflow in exp; its
    value is its peak anyway: the overflow is expected and must not warn (four such
    RuntimeWarnings came out of the test suite)."""
    import warnings

    t = Table(("a", "b"), np.array([[math.inf, 1000.0], [1000.0, 1000.0]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = NumpyBackend().eliminate(t, "b", "logsumexp").data
    assert out[0] == math.inf and out[1] == pytest.approx(1000.0 + math.log(2.0))


def stable_logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    peak = np.max(a, axis=axis, keepdims=True)
    shift = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(np.log(np.sum(np.exp(a - shift), axis=axis, keepdims=True)) + shift, axis)


@st.composite
def log_table_sets(draw: st.DrawFn) -> list[Table]:
    """Log-weights with exact zeros (-inf) and peaks up to 1500 apart: some buckets underflow in
    linear space and must come out exactly as in log space."""
    sizes = {v: draw(st.integers(1, 3)) for v in VARS}
    tables = []
    for _ in range(draw(st.integers(1, 4))):
        scope = tuple(draw(st.permutations(VARS))[: draw(st.integers(1, 4))])
        shape = tuple(sizes[v] for v in scope)
        entry = st.one_of(st.integers(-1500, 40).map(float), st.just(-math.inf))
        flat = draw(st.lists(entry, min_size=math.prod(shape), max_size=math.prod(shape)))
        tables.append(Table(scope, np.array(flat, dtype=float).reshape(shape)))
    return tables


@settings(max_examples=80, deadline=None)
@given(log_table_sets(), st.integers(1, 64))
def test_logsumexp_join_eliminate_matches_log_space(tables, block) -> None:
    backend = NumpyBackend(block_entries=block, linear_min_entries=0)  # linear path where it can
    joined = backend.join(tables)
    for var in joined.scope:
        fused = backend.join_eliminate(tables, var, "logsumexp")
        expected = stable_logsumexp(joined.data, joined.scope.index(var))
        assert np.array_equal(np.isneginf(fused.data), np.isneginf(expected))
        np.testing.assert_allclose(fused.data, expected, rtol=1e-12, atol=1e-12)


def test_linear_sum_product_refuses_underflow_but_keeps_exact_zeros() -> None:
    backend = NumpyBackend(linear_min_entries=0)
    # every product pairs a peak of one factor with an entry 1000 below the other's peak
    t1 = Table(("b", "a"), np.array([[0.0, -1000.0], [-1000.0, 0.0]]))  # symmetric
    t2 = Table(("b",), np.array([-1000.0, 0.0]))
    assert _logsumexp_linear([t1, t2], "b", ("a",), 2, 64) is None
    out = backend.join_eliminate([t1, t2], "b", "logsumexp").data
    np.testing.assert_allclose(out, [-1000.0 + math.log(2.0), 0.0], rtol=1e-15)
    # an exact zero (a = 0 has no assignment with a positive weight) is no underflow
    t3 = Table(("b", "a"), np.array([[-math.inf, 1.0], [-math.inf, 2.0]]))
    linear = _logsumexp_linear([t3, Table(("b",), np.array([0.5, 0.0]))], "b", ("a",), 2, 64)
    assert linear is not None
    assert linear[0] == -math.inf
    assert linear[1] == pytest.approx(math.log(math.exp(1.5) + math.exp(2.0)))


def test_condition_and_best_value() -> None:
    backend = NumpyBackend()
    t1 = Table(("a", "b"), np.array([[3.0, 1.0], [0.0, 5.0]]))
    t2 = Table(("b",), np.array([0.0, 4.0]))
    assert backend.condition(t1, {"a": 1}).scope == ("b",)
    assert np.array_equal(backend.condition(t1, {"a": 1}).data, [0.0, 5.0])
    assert backend.best_value([t1, t2], "b", {"a": 0}) == (0, 3.0)
    assert backend.best_value([t1, t2], "b", {"a": 0}, op="max") == (1, 5.0)


def test_explicit_output_scope_and_errors() -> None:
    backend = NumpyBackend()
    t = Table(("a", "b", "c"), np.arange(8.0).reshape(2, 2, 2))
    out = backend.join_eliminate([t], "b", scope=("c", "a"))
    assert out.scope == ("c", "a")
    assert np.array_equal(out.data, np.transpose(t.data.min(axis=1)))
    with pytest.raises(ModelError):
        backend.join_eliminate([t], "z")
    with pytest.raises(ModelError):
        backend.eliminate(t, "b", "median")  # type: ignore[arg-type]
    with pytest.raises(ModelError):
        domain_sizes([t, Table(("a",), np.zeros(3))])


def test_shares_run_in_threads_and_the_first_error_is_raised() -> None:
    from dcop.backends.numpy import in_threads

    done: list[int] = []
    in_threads(done.append, [3, 1, 2])
    assert sorted(done) == [1, 2, 3]

    def fail(share: int) -> None:
        if share:
            raise ValueError(f"share {share}")
        done.append(share)

    done.clear()
    with pytest.raises(ValueError, match="share 1"):
        in_threads(fail, [0, 1, 2])
    assert done == [0]  # every share ran to its end first


def test_blocks_taken_in_turn_go_each_to_one_thread() -> None:
    import threading

    from dcop.backends.numpy import TakenInTurn

    taken = TakenInTurn(list(range(2000)))
    seen: list[list[int]] = [[] for _ in range(4)]

    def take(k: int) -> None:
        for item in taken:
            seen[k].append(item)

    threads = [threading.Thread(target=take, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(item for s in seen for item in s) == list(range(2000))
    assert all(s == sorted(s) for s in seen)  # in turn: each thread's items in list order


@pytest.mark.parametrize("op", ["min", "max", "sum", "logsumexp"])
def test_blocks_in_threads_give_the_one_thread_answer(op: str) -> None:
    rng = np.random.default_rng(7)
    tables = [
        Table(("a", "b", "c", "d"), rng.normal(size=(3, 4, 5, 2))),
        Table(("c", "d", "e"), rng.normal(size=(5, 2, 3))),
        Table(("a", "e"), rng.normal(size=(3, 3))),
    ]
    one = NumpyBackend(block_entries=4, threads=1, linear_min_entries=1 << 30)
    four = NumpyBackend(block_entries=4, threads=4, linear_min_entries=1 << 30)
    for var in "abcde":
        expected = one.join_eliminate(tables, var, op)  # type: ignore[arg-type]
        got = four.join_eliminate(tables, var, op)  # type: ignore[arg-type]
        assert got.scope == expected.scope
        assert np.array_equal(got.data, expected.data)
