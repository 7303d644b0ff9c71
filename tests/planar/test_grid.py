"""A full grid's embedding from its drawing (:mod:`dcop.planar.grid`): the same faces and the same
optimum as networkx's planarity test, and anything that is not a full grid left to networkx."""

from __future__ import annotations

import numpy as np
import pytest

from dcop import generators
from dcop.model import CostTable, Problem, Variable
from dcop.planar import embed, solve_planar
from dcop.planar.dual import dual_from_successors, dual_of, face_labels
from dcop.planar.grid import grid_coordinates, grid_successors
from dcop.planar.ising import ising_form, planar_embedding


def grid_problem(
    rows: int, cols: int, seed: int = 0, missing: int = 0, wrap: bool = False
) -> Problem:
    """A ±J model on a ``rows`` x ``cols`` grid, its variables named in a shuffled order (the
    recognition reads the graph, not the names); ``missing`` edges left out; ``wrap``: a torus's
    edges on the rows too."""
    rng = np.random.default_rng(seed)
    names = [f"s{k}" for k in rng.permutation(rows * cols)]
    at = {(i, j): names[i * cols + j] for i in range(rows) for j in range(cols)}
    edges = [(at[i, j], at[i, j + 1]) for i in range(rows) for j in range(cols - 1)]
    edges += [(at[i, j], at[i + 1, j]) for i in range(rows - 1) for j in range(cols)]
    if wrap:
        edges += [(at[i, cols - 1], at[i, 0]) for i in range(rows)]
    for k in sorted(rng.choice(len(edges), size=missing, replace=False).tolist(), reverse=True):
        del edges[k]
    return ising_on(names, edges, rng)


def ising_on(names: list[str], edges: list[tuple[str, str]], rng: np.random.Generator) -> Problem:
    """A ±J model without field on ``edges``."""
    spins = np.array([-1.0, 1.0])
    tables = [
        CostTable((u, v), -float(rng.choice((-1.0, 1.0))) * np.outer(spins, spins))
        for u, v in edges
    ]
    return Problem.build([Variable(x, (0, 1)) for x in names], tables)


def wheel(spokes: int) -> Problem:
    """A hub tied to every variable of a ring: planar, four corners of nothing."""
    ring = [f"r{k}" for k in range(spokes)]
    edges = [(ring[k], ring[(k + 1) % spokes]) for k in range(spokes)]
    edges += [("hub", r) for r in ring]
    return ising_on(["hub", *ring], edges, np.random.default_rng(spokes))


@pytest.mark.parametrize(("rows", "cols"), [(2, 2), (2, 5), (5, 2), (3, 7), (6, 6), (9, 4)])
def test_a_grid_is_recognised_and_its_faces_are_networkx_s(rows: int, cols: int) -> None:
    model = ising_form(grid_problem(rows, cols, seed=rows * cols))
    placed = grid_coordinates(model)
    assert placed is not None
    row, col = placed
    assert {int(row.max()) + 1, int(col.max()) + 1} == {rows, cols}
    successor = grid_successors(model)
    assert successor is not None
    mine = dual_from_successors(model, successor)
    theirs = dual_of(model, planar_embedding(model))
    n, m = rows * cols, len(model.a)
    assert mine.faces == theirs.faces == m - n + 2  # the squares and the outer face
    assert mine.frustrated == theirs.frustrated
    # the same faces on each edge's two sides, whatever their numbers
    pairs = {frozenset(p) for p in zip(mine.left.tolist(), mine.right.tolist(), strict=True)}
    assert len(pairs) == len(
        {frozenset(p) for p in zip(theirs.left.tolist(), theirs.right.tolist(), strict=True)}
    )


@pytest.mark.parametrize("seed", range(4))
def test_the_grid_path_gives_networkx_s_optimum(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    problem = generators.spin_glass(12, seed)
    fast = solve_planar(problem)
    monkeypatch.setattr(embed, "grid_successors", lambda model: None)
    slow = solve_planar(problem)
    assert fast.exact and slow.exact
    assert fast.upper_bound == pytest.approx(slow.upper_bound, abs=1e-9)
    assert fast.planar.faces == slow.planar.faces


@pytest.mark.parametrize(
    "problem",
    [
        grid_problem(5, 5, missing=1),  # a diluted grid: planar, not full
        grid_problem(4, 6, missing=3, seed=2),
        grid_problem(4, 6, wrap=True),  # a cylinder: planar, no corner
        grid_problem(1, 8),  # a path
        wheel(8),  # no grid at all
    ],
    ids=["diluted", "diluted3", "cylinder", "path", "wheel"],
)
def test_what_is_not_a_full_grid_goes_to_networkx(problem: Problem) -> None:
    model = ising_form(problem)
    assert grid_successors(model) is None
    _, how = embed.planar_successors(model)  # all planar: networkx embeds them
    assert how == "networkx"


def test_faces_are_the_cycles_of_the_successor() -> None:
    # two cycles (0 1 2) and (3 4), a fixed point 5
    labels = face_labels(np.array([1, 2, 0, 4, 3, 5]))
    assert labels.tolist() == [0, 0, 0, 1, 1, 2]
    rng = np.random.default_rng(0)
    permutation = rng.permutation(5000)
    labels = face_labels(permutation)
    for k in range(5000):  # every element is on its successor's face
        assert labels[k] == labels[permutation[k]]
    seen, cycles = np.zeros(5000, dtype=bool), 0
    for k in range(5000):
        if not seen[k]:
            cycles += 1
            while not seen[k]:
                seen[k] = True
                k = int(permutation[k])
    assert int(labels.max()) + 1 == cycles
