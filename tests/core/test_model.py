"""CostTable's two forms (dense, sparse) against each other, and Problem on sparse tables."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.errors import ModelError, TableTooLarge
from dcop.model import CostTable, Problem, Variable
from dcop.tables import choose_dtype

COSTS = st.one_of(st.integers(-20, 50).map(float), st.just(math.inf), st.floats(-5, 5))


@st.composite
def sparse_tables(draw: st.DrawFn) -> tuple[CostTable, np.ndarray]:
    """A sparse table (duplicates listed, last wins) and the dense array it stands for."""
    arity = draw(st.integers(0, 4))
    shape = tuple(draw(st.integers(1, 3)) for _ in range(arity))
    default = draw(COSTS)
    dense = np.full(shape, default)
    rows, values = [], []
    for _ in range(draw(st.integers(0, 2 * math.prod(shape)))):
        row = tuple(draw(st.integers(0, s - 1)) for s in shape)
        cost = draw(COSTS)
        rows.append(row)
        values.append(cost)
        dense[row] = cost
    scope = tuple(f"v{i}" for i in range(arity))
    index = np.array(rows, dtype=np.int64).reshape(len(rows), arity)
    return CostTable.sparse(scope, shape, default, index, values, name="s"), dense


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a, b)


@settings(max_examples=200, deadline=None)
@given(sparse_tables())
def test_sparse_table_stands_for_its_dense_array(data: tuple[CostTable, np.ndarray]) -> None:
    table, dense = data
    assert table.is_sparse
    assert table.shape == dense.shape and table.entries == dense.size
    for index in itertools.product(*(range(s) for s in dense.shape)):
        assert table.cost_of(dict(zip(table.scope, index, strict=True))) == dense[index]
    assert set(table.cost_values().tolist()) == set(dense.ravel().tolist())
    assert set(table.finite_costs().tolist()) == set(dense[np.isfinite(dense)].tolist())
    assert table.sparse_form() is not None
    assert same(table.costs, dense)  # built now, and cached
    assert table.costs is table.costs
    assert not table.costs.flags.writeable


@settings(max_examples=150, deadline=None)
@given(sparse_tables(), st.data())
def test_restrict_and_map_match_the_dense_form(
    data: tuple[CostTable, np.ndarray], draw: st.DataObject
) -> None:
    table, dense = data
    plain = CostTable(table.scope, dense, name="d")
    fixed = {
        v: draw.draw(st.integers(0, s - 1))
        for v, s in zip(table.scope, table.shape, strict=True)
        if draw.draw(st.booleans())
    }
    for keep in (False, True):
        a, b = table.restrict(fixed, keep_axes=keep), plain.restrict(fixed, keep_axes=keep)
        assert a.is_sparse and not b.is_sparse
        assert a.scope == b.scope and a.shape == b.shape
        assert same(a.costs, b.costs)
    assert same(table.map_costs(np.negative).costs, -dense)
    moved = table.on_scope(tuple(f"w{i}" for i in range(table.arity)), name="w")
    assert moved.name == "w" and same(moved.costs, dense)


def test_a_tuple_listed_twice_keeps_its_last_cost() -> None:
    table = CostTable.sparse(("a", "b"), (2, 2), 0.0, [[1, 0], [0, 1], [1, 0]], [5.0, 2.0, 7.0])
    assert table.costs.tolist() == [[0.0, 2.0], [7.0, 0.0]]
    const = CostTable.sparse((), (), 1.0, np.zeros((2, 0), dtype=int), [3.0, 4.0])
    assert const.costs.tolist() == 4.0 and const.cost_of({}) == 4.0


def test_sparse_tables_are_checked() -> None:
    with pytest.raises(ModelError, match="out of its domain"):
        CostTable.sparse(("a",), (2,), 0.0, [[2]], [1.0])
    with pytest.raises(ModelError, match="repeats a variable"):
        CostTable.sparse(("a", "a"), (2, 2), 0.0, [[0, 0]], [1.0])
    with pytest.raises(ModelError, match="index rows"):
        CostTable.sparse(("a", "b"), (2, 2), 0.0, [[0]], [1.0])
    with pytest.raises(ModelError, match="integers"):
        CostTable.sparse(("a",), (2,), 0.0, [[0.5]], [1.0])
    with pytest.raises(ModelError, match=r"out of 0\.\.1"):
        CostTable.sparse(("a",), (2,), 0.0, [[0]], [1.0]).restrict({"a": 2})
    table = CostTable(("a",), [1.0, 2.0])
    with pytest.raises(AttributeError, match="immutable"):
        table.name = "x"  # type: ignore[misc]


def test_a_huge_sparse_table_is_never_materialised_by_the_model() -> None:
    """2**40 entries: shape, costs of assignments, dtype choice and validation need no dense array."""
    names = [f"x{i}" for i in range(40)]
    rows = np.array([[0] * 40, [1] * 40])
    table = CostTable.sparse(names, (2,) * 40, 3.0, rows, [0.0, math.inf], name="big")
    problem = Problem.build([Variable.with_size(v, 2) for v in names], [table], constant=1.0)
    assert table.entries == 2**40
    assert problem.evaluate(dict.fromkeys(names, 0)) == 1.0
    assert problem.evaluate(dict.fromkeys(names, 1)) == math.inf
    assert problem.evaluate({v: i % 2 for i, v in enumerate(names)}) == 4.0
    assert choose_dtype(problem) == np.float32
    assert table.restrict({v: 0 for v in names[:38]}).costs.tolist() == [[0.0, 3.0], [3.0, 3.0]]
    with pytest.raises(TableTooLarge, match="big"):
        _ = table.costs


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.booleans())
def test_problem_on_sparse_tables_equals_problem_on_dense_tables(seed: int, integer: bool) -> None:
    rng = np.random.default_rng(seed)
    variables = [Variable.with_size(f"v{i}", int(rng.integers(1, 4))) for i in range(5)]
    sparse, dense = [], []
    for k in range(6):
        arity = int(rng.integers(0, 4))
        scope = tuple(f"v{i}" for i in rng.choice(5, size=arity, replace=False))
        shape = tuple(variables[int(v[1:])].size for v in scope)
        default = float(rng.integers(-3, 9)) if integer else float(rng.normal())
        count = int(rng.integers(0, math.prod(shape) + 2))
        rows = np.array([[int(rng.integers(0, s)) for s in shape] for _ in range(count)])
        values = rng.integers(-5, 30, size=count).astype(float)
        if not integer:
            values += rng.random(count)
        values[rng.random(count) < 0.15] = math.inf
        args = (scope, shape, default, rows.reshape(count, arity), values)
        sparse.append(CostTable.sparse(*args, name=f"t{k}"))  # never materialised below
        dense.append(CostTable(scope, CostTable.sparse(*args).costs, f"t{k}"))
    p = Problem.build(variables, sparse, constant=1.5)
    q = Problem.build(variables, dense, constant=1.5)
    names = list(p.variables)
    for values in itertools.product(*(range(v.size) for v in variables)):
        assignment = dict(zip(names, values, strict=True))
        assert p.evaluate(assignment) == q.evaluate(assignment)
    assert choose_dtype(p) == choose_dtype(q)


def test_validate_finds_nan_in_a_sparse_table_without_building_it() -> None:
    v = [Variable.with_size("a", 2), Variable.with_size("b", 2)]
    nan_default = CostTable.sparse(("a", "b"), (2, 2), math.nan, [[0, 0]], [1.0])
    with pytest.raises(ModelError, match="NaN"):
        Problem.build(v, [nan_default])
    # a NaN default that no tuple takes is harmless
    covered = CostTable.sparse(("a",), (2,), math.nan, [[0], [1]], [1.0, 2.0])
    Problem.build(v, [covered])
    negative = CostTable.sparse(("a",), (2,), 0.0, [[1]], [-1.0])
    with pytest.raises(ModelError, match="negative"):
        Problem.build(v, [negative]).validate(allow_negative=False)
    with pytest.raises(ModelError, match="shape"):
        Problem.build(v, [CostTable.sparse(("a",), (3,), 0.0, [[1]], [1.0])])
