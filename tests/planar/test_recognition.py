"""What the planar solver applies to, and its one-line refusals elsewhere."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dcop import generators
from dcop.model import CostTable, Problem, Variable
from dcop.planar import NotPlanar, solve_planar, why_not
from dcop.planar.ising import FIELD_REL, ising_form

PAIR = np.array([[0.0, 1.0], [1.0, 0.0]])  # 1 when the two differ


def pairwise(n: int, edges: list[tuple[int, int]], costs: np.ndarray = PAIR) -> Problem:
    variables = [Variable(f"x{i}", (0, 1)) for i in range(n)]
    tables = [CostTable((f"x{u}", f"x{v}"), costs) for u, v in edges]
    return Problem.build(variables, tables)


def test_a_spin_glass_applies() -> None:
    assert why_not(generators.spin_glass(6, 0)) is None


@pytest.mark.parametrize(
    ("problem", "reason"),
    [
        (generators.random_network(6, 3, 0.5, 0.2, seed=1), "planar: x0 takes 3 values"),
        (
            Problem.build(
                [Variable(f"x{i}", (0, 1)) for i in range(3)],
                [CostTable(("x0", "x1", "x2"), np.zeros((2, 2, 2)), name="t")],
            ),
            "planar: a table over 3 variables (t)",
        ),
        (
            pairwise(2, [(0, 1)], np.array([[0.0, np.inf], [np.inf, 0.0]])),
            "planar: table",
        ),
        (generators.ising_grid(4, 1.0, 0.3, seed=2), "has a field (its unary parts cost"),
        (pairwise(5, list(itertools.combinations(range(5), 2))), "planar: the graph is not planar"),
        (
            pairwise(6, [(u, v) for u in range(3) for v in range(3, 6)]),  # K3,3: 9 <= 3n - 6
            "planar: the graph is not planar",
        ),
    ],
    ids=["3 values", "ternary", "infinite", "field", "K5", "K33"],
)
def test_refusals_say_why_in_one_line(problem: Problem, reason: str) -> None:
    said = why_not(problem)
    assert said is not None and reason in said and "\n" not in said
    with pytest.raises(NotPlanar, match=r"^planar: "):
        solve_planar(problem)


def test_a_field_within_the_noise_is_dropped_and_counted() -> None:
    """A field of at most FIELD_REL of the costs' size is float noise: the model applies, the
    field goes into the slack, and the bounds still meet (it is far below the proof margin)."""
    problem = generators.spin_glass(4, 1)
    noise = FIELD_REL * 0.5
    problem.tables.append(CostTable(("x5",), np.array([0.0, 2 * noise])))
    model = ising_form(problem)
    assert model.slack == pytest.approx(noise)
    result = solve_planar(problem)
    assert result.exact and result.lower_bound == result.upper_bound


def test_a_field_just_over_the_tolerance_is_refused() -> None:
    problem = generators.spin_glass(4, 1)
    problem.tables.append(CostTable(("x5",), np.array([0.0, 4 * FIELD_REL])))
    assert "x5 has a field" in (why_not(problem) or "")


def test_cancelling_fields_and_both_orientations_are_one_coupling() -> None:
    """Two tables over one pair, in either order, with fields that cancel through a unary
    table: one edge, the summed coupling, no field."""
    variables = [Variable("a", (0, 1)), Variable("b", (0, 1))]
    tables = [
        CostTable(("a", "b"), np.array([[0.0, 2.0], [3.0, 1.0]])),  # field on a and on b
        CostTable(("b", "a"), np.array([[1.0, 0.0], [0.0, 1.0]])),  # K = -1
        CostTable(("a",), np.array([0.5, -0.5])),  # cancels table 1's field on a
        CostTable(("b",), np.array([1.0, 1.0])),  # a constant
    ]
    model = ising_form(Problem.build(variables, tables, constant=0.5))
    assert model.a.tolist() == [0] and model.b.tolist() == [1]
    assert model.coupling.tolist() == pytest.approx([2.0 - 1.0])
    assert model.slack == 0.0


def test_one_valued_variables_are_refused() -> None:
    """Evidence leaves a variable of one value: refused, not guessed."""
    problem = pairwise(3, [(0, 1), (1, 2)])
    problem.variables["x2"] = Variable("x2", (0,))
    problem.tables = [t for t in problem.tables if "x2" not in t.scope]
    assert why_not(problem) == "planar: x2 takes 1 value (two are needed)"
