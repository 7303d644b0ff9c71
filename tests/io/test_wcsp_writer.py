"""The .wcsp writer writes what toulbar2 can read (integer, non-negative costs) and records the
scale and shift that map its optimum back; our reader applies them (no toulbar2 needed here)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from dcop.errors import ModelError
from dcop.io import read_problem, write_problem
from dcop.io.wcsp import join_title, split_title
from dcop.model import CostTable, Problem, Variable
from tests.conftest import brute_force, random_problem


def _assignments(problem: Problem) -> list[dict[str, int]]:
    names = list(problem.variables)
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(range(problem.variables[n].size) for n in names))
    ]


def _same(q: Problem, a: dict[str, int]) -> dict[str, int]:
    """The assignment for the copy read back (.wcsp names variables x0, x1, ...)."""
    return dict(zip(q.variables, a.values(), strict=True))


def _cost_tokens(path: Path) -> list[str]:
    """Every token of the file after the header's name (all must be integers for toulbar2)."""
    return path.read_text().split()[1:]


def _shifted(seed: int) -> Problem:
    """A random integer problem with negative costs and a negative constant."""
    p = random_problem(seed)
    tables = [t.map_costs(lambda c: c - 12) for t in p.tables]
    return Problem.build(p.variables.values(), tables, name=f"neg {seed}", constant=-7.0)


@pytest.mark.parametrize("seed", range(8))
def test_negative_integer_costs_are_shifted_and_restored_exactly(seed: int, tmp_path: Path) -> None:
    p = _shifted(seed)
    out = tmp_path / "neg.wcsp"
    write_problem(p, out)
    tokens = _cost_tokens(out)
    assert all(int(t) >= 0 for t in tokens), "toulbar2 needs integer costs >= 0"
    title, scale, shift = split_title(out.read_text().split()[0])
    assert title == f"neg_{seed}" and scale == 1 and shift > 0
    q = read_problem(out)
    assert q.name == f"neg_{seed}" and q.meta["wcsp_shift"] == shift
    for a in _assignments(p):
        assert q.evaluate(_same(q, a)) == p.evaluate(a)
    assert brute_force(q) == brute_force(p)


def test_decimal_costs_are_scaled_exactly(tmp_path: Path) -> None:
    v = [Variable.with_size("a", 2), Variable.with_size("b", 3)]
    costs = np.array([[0.25, -1.5, 3.0], [math.inf, 0.1, -0.05]])
    p = Problem.build(v, [CostTable(("a", "b"), costs)], constant=0.5, name="dec")
    out = tmp_path / "dec.wcsp"
    write_problem(p, out)
    assert split_title(out.read_text().split()[0]) == ("dec", 100, 150)
    q = read_problem(out)
    for a in _assignments(p):
        assert q.evaluate(_same(q, a)) == pytest.approx(p.evaluate(a), abs=1e-12)
    assert all(t.lstrip("-").isdigit() for t in _cost_tokens(out))


def test_costs_that_need_too_many_decimals_are_refused_or_rounded(tmp_path: Path) -> None:
    p = random_problem(3, integer=False)
    out = tmp_path / "r.wcsp"
    with pytest.raises(ModelError, match="pass a precision") as info:
        write_problem(p, out)
    assert "\n" not in str(info.value) and "cannot" in str(info.value)
    for precision in (0, 3, 6):
        write_problem(p, out, precision=precision)
        assert split_title(out.read_text().split()[0])[1] == 10**precision
        q = read_problem(out)
        error = 0.5 / 10**precision * (len(p.tables) + 1)
        for a in _assignments(p)[:50]:
            want, got = p.evaluate(a), q.evaluate(_same(q, a))
            assert got == pytest.approx(want, abs=error) or (math.isinf(want) and math.isinf(got))
    # integer costs are not scaled, whatever precision is allowed
    write_problem(random_problem(2), out, precision=6)
    assert split_title(out.read_text().split()[0])[1] == 1
    with pytest.raises(ModelError, match="only"):
        write_problem(p, tmp_path / "r.yaml", precision=3)


def _bounded_round_trip(
    tmp_path: Path, costs: list[list[float]], ub: float
) -> tuple[Problem, Problem]:
    """A 2 x 2 table of ``costs`` under the upper bound ``ub``, and the copy read back."""
    v = [Variable.with_size("a", 2), Variable.with_size("b", 2)]
    p = Problem.build(v, [CostTable(("a", "b"), np.array(costs))], upper_bound=ub)
    out = tmp_path / "ub.wcsp"
    write_problem(p, out)
    return p, read_problem(out)


def test_the_upper_bound_keeps_its_meaning_after_a_shift(tmp_path: Path) -> None:
    p, q = _bounded_round_trip(tmp_path, [[-3.0, 4.0], [2.0, 9.0]], 5.0)
    assert q.upper_bound == 5.0
    for a in _assignments(p):
        assert q.evaluate(_same(q, a)) == p.evaluate(a)
    assert [p.evaluate(a) for a in _assignments(p)] == [-3.0, 4.0, 2.0, math.inf]


def test_title_marks_round_trip() -> None:
    assert join_title("my problem", 1, 0) == "my_problem"
    assert split_title(join_title("x#1", 1000, 17)) == ("x#1", 1000, 17)
    assert split_title("plain#scale=10") == ("plain#scale=10", 1, 0)


def test_costs_beyond_exact_integers_are_refused(tmp_path: Path) -> None:
    v = [Variable.with_size("a", 2)]
    for costs, words in (([1e16, 0.0], "limit 2\\*\\*53"), ([-math.inf, 1.0], "-inf")):
        p = Problem.build(v, [CostTable(("a",), np.array(costs))])
        with pytest.raises(ModelError, match=words):
            write_problem(p, tmp_path / "x.wcsp")
    # an upper bound far above every total is harmless, even when scaling overflows it
    p = Problem.build(v, [CostTable(("a",), np.array([1.5, 2.0]))], upper_bound=1e308)
    write_problem(p, tmp_path / "x.wcsp")
    assert read_problem(tmp_path / "x.wcsp").evaluate({"x0": 1}) == 2.0


def test_a_shift_that_reaches_the_bound_keeps_the_same_problem(tmp_path: Path) -> None:
    """Found by the long fuzz run: a table whose costs -1 and 0 sit below an upper bound of 1 is
    written shifted to 0 and 1, with the bound on totals moved by the same shift; read back, the
    1 stays finite (the constant -1 makes the total 0), and both problems are the same."""
    from tests.io.helpers import assert_same_problem

    p, q = _bounded_round_trip(tmp_path, [[-1.0, 0.0], [0.0, 0.0]], 1.0)
    assert [q.evaluate(_same(q, a)) for a in _assignments(p)] == [-1.0, 0.0, 0.0, 0.0]
    assert_same_problem(p, q, by_name=False)
