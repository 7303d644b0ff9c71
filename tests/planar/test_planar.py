"""The planar solver's optimum against brute force, BE and toulbar2, on both T-join paths."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from dcop import generators
from dcop.inference import solve
from dcop.io import read_problem, write_problem
from dcop.io.wcsp import split_title
from dcop.model import CostTable, Problem, Variable
from dcop.planar import solve_planar
from dcop.planar.tjoin import pymatching_available
from tests.conftest import brute_force, check_exact_answer

#: None: PyMatching where installed; False: the exact fallback (networkx's matching).
PATHS = [
    pytest.param(None, id="pymatching"),
    pytest.param(False, id="fallback"),
]
needs_pymatching = pytest.mark.skipif(not pymatching_available(), reason="PyMatching missing")


def random_planar_graph(rng: np.random.Generator, n: int, parts: int = 1) -> nx.Graph:
    """A random planar graph of ``n`` nodes in ``parts`` connected parts (at least): a random
    tree per part, then random chords kept where the graph stays planar."""
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    cuts = sorted(rng.choice(np.arange(1, n), size=parts - 1, replace=False).tolist())
    for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
        for v in range(lo + 1, hi):
            graph.add_edge(v, int(rng.integers(lo, v)))
        for _ in range(3 * (hi - lo)):
            u, v = (int(x) for x in rng.integers(lo, hi, size=2))
            if u != v and not graph.has_edge(u, v):
                graph.add_edge(u, v)
                if not nx.check_planarity(graph)[0]:
                    graph.remove_edge(u, v)
    return graph


def ising_problem(
    graph: nx.Graph, rng: np.random.Generator, gaussian: bool, messy: bool = True
) -> Problem:
    """A field-free Ising model on ``graph``: couplings ±1..3 or Gaussian; ``messy``: each
    table with a constant, a field on one end cancelled by a unary table, and its scope in
    either order (the recognition must see through all three)."""
    variables = [Variable(f"v{i}", (0, 1)) for i in graph.nodes]
    tables = []
    for u, v in graph.edges:
        j = rng.normal() if gaussian else float(rng.choice((-1, 1)) * rng.integers(1, 4))
        costs = -j * np.array([[1.0, -1.0], [-1.0, 1.0]])  # -J s_u s_v
        if messy:
            h = float(rng.normal())
            costs = costs + rng.normal() + h * np.array([[-1.0, -1.0], [1.0, 1.0]])
            tables.append(CostTable((f"v{u}",), np.array([h, -h]) + rng.normal()))
        if messy and rng.random() < 0.5:
            tables.append(CostTable((f"v{v}", f"v{u}"), costs.T))
        else:
            tables.append(CostTable((f"v{u}", f"v{v}"), costs))
    return Problem.build(variables, tables, constant=float(rng.normal()))


@pytest.mark.parametrize("use", PATHS)
@pytest.mark.parametrize(("side", "seed"), [(3, 0), (3, 1), (4, 0), (4, 1), (4, 2)])
def test_spin_glass_grids_equal_brute_force(side: int, seed: int, use: bool | None) -> None:
    if use is None and not pymatching_available():
        pytest.skip("PyMatching missing")
    problem = generators.spin_glass(side, seed)
    result = solve_planar(problem, use_pymatching=use)
    check_exact_answer(problem, result, brute_force(problem))
    assert result.planar.tjoin in (("none", "pymatching") if use is None else ("none", "networkx"))


@pytest.mark.parametrize("use", PATHS)
@pytest.mark.parametrize("gaussian", [False, True], ids=["pmJ", "gauss"])
@pytest.mark.parametrize("seed", range(8))
def test_random_planar_models_equal_brute_force(
    seed: int, gaussian: bool, use: bool | None
) -> None:
    if use is None and not pymatching_available():
        pytest.skip("PyMatching missing")
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(4, 13))
    problem = ising_problem(random_planar_graph(rng, n), rng, gaussian)
    check_exact_answer(problem, solve_planar(problem, use_pymatching=use), brute_force(problem))


@pytest.mark.parametrize("use", PATHS)
@pytest.mark.parametrize("seed", range(4))
def test_disconnected_models_equal_brute_force(seed: int, use: bool | None) -> None:
    if use is None and not pymatching_available():
        pytest.skip("PyMatching missing")
    rng = np.random.default_rng(200 + seed)
    graph = random_planar_graph(rng, 13, parts=3)
    graph.add_node(13)  # a variable of no table
    problem = ising_problem(graph, rng, gaussian=seed % 2 == 1)
    problem.variables["v13"] = Variable("v13", (0, 1))
    result = solve_planar(problem, use_pymatching=use)
    check_exact_answer(problem, result, brute_force(problem))
    assert nx.number_connected_components(graph) >= 3


@needs_pymatching
@pytest.mark.parametrize("seed", range(6))
def test_the_fallback_equals_pymatching(seed: int) -> None:
    """Both paths on grids too large to enumerate: the same optimum."""
    problem = generators.spin_glass(10, seed)
    fast = solve_planar(problem, use_pymatching=True)
    slow = solve_planar(problem, use_pymatching=False)
    assert (fast.planar.tjoin, slow.planar.tjoin) == ("pymatching", "networkx")
    assert fast.exact and slow.exact
    assert fast.upper_bound == pytest.approx(slow.upper_bound, abs=1e-9)


@pytest.mark.parametrize(("side", "seed"), [(8, 0), (8, 1), (12, 0), (16, 0)])
def test_spin_glasses_equal_be(side: int, seed: int) -> None:
    problem = generators.spin_glass(side, seed)
    be = solve(problem, "be")
    result = solve(problem, "planar")  # through the API's dispatch
    assert result.algo == "planar" and result.exact
    assert result.upper_bound == pytest.approx(be.upper_bound, abs=1e-9)
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment), abs=1e-12)


@pytest.mark.parametrize("fmt", ["uai", "wcsp"])
def test_files_read_back_solve_to_be(fmt: str, tmp_path: Path) -> None:
    """The bench's spin glasses as it writes them (MARKOV .uai: -ln of printed exp(±1)), and
    as .wcsp (integer costs after the writer's scaling)."""
    problem = generators.spin_glass(10, 3)
    path = tmp_path / f"sg.{fmt}"
    write_problem(problem, path)
    read = read_problem(path)
    result = solve_planar(read)
    assert result.exact and result.planar.unit is not None  # a common unit: PyMatching's path
    assert result.upper_bound == pytest.approx(solve(read, "be").upper_bound, abs=1e-9)


def test_a_uniform_coupling_grid_without_field_equals_be() -> None:
    """Couplings uniform in [-1, 1]: no common unit, so the exact fallback runs."""
    problem = generators.ising_grid(8, 1.0, 0.0, seed=4)
    result = solve_planar(problem)
    assert result.planar.tjoin == "networkx" and result.exact
    assert result.upper_bound == pytest.approx(solve(problem, "be").upper_bound, abs=1e-9)


def test_an_infeasible_wcsp_is_proved_so() -> None:
    """Every assignment reaches the problem's top (a WCSP's upper bound): infeasible."""
    problem = generators.spin_glass(3, 0)
    problem.upper_bound = brute_force(problem) - 1e-3
    result = solve_planar(problem)
    assert result.status == "infeasible"


SOLVE_TB2 = """
import sys, pytoulbar2
cfn = pytoulbar2.CFN(verbose=-1)
cfn.Read(sys.argv[1])
res = cfn.Solve()
print("RESULT", repr(float(res[1])))
"""


@pytest.mark.parametrize("seed", [0, 1])
def test_spin_glasses_equal_toulbar2(seed: int, tmp_path: Path) -> None:
    """toulbar2 on the .wcsp of an 8x8 spin glass (its optimum in the file's integer units:
    the writer's scale and shift are read back with the file)."""
    pytest.importorskip("pytoulbar2", reason="pytoulbar2 is not installed")
    path = tmp_path / "sg.wcsp"
    write_problem(generators.spin_glass(8, seed), path)
    run = subprocess.run(
        [sys.executable, "-c", SOLVE_TB2, str(path)], capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT")]
    assert lines, run.stderr[-2000:]
    _, scale, shift = split_title(path.read_text().split()[0])
    toulbar2 = (float(lines[-1].split()[1]) - shift) / scale  # the recorded scale and shift
    result = solve_planar(read_problem(path))
    assert result.exact
    assert result.upper_bound == pytest.approx(toulbar2, abs=1e-9)


def test_the_optimum_is_the_minimum_over_flips() -> None:
    """A proved optimum: no single flip of the answer's spins is cheaper (a cheap necessary
    check on a grid too large for brute force or BE's quick run)."""
    problem = generators.spin_glass(24, 5)
    result = solve_planar(problem)
    assert result.exact
    base = problem.evaluate(result.assignment)
    for name in list(problem.variables)[::23]:
        flipped = dict(result.assignment)
        flipped[name] ^= 1
        assert problem.evaluate(flipped) >= base - 1e-9
    assert math.isfinite(base)


def test_a_ferromagnet_has_no_frustrated_face() -> None:
    """All couplings positive: every face satisfied, no join, all spins equal."""
    variables = [Variable(f"v{i}", (0, 1)) for i in range(9)]
    grid = [(i, i + 1) for i in range(9) if i % 3 != 2] + [(i, i + 3) for i in range(6)]
    tables = [CostTable((f"v{u}", f"v{v}"), [[0.0, 2.0], [2.0, 0.0]]) for u, v in grid]
    problem = Problem.build(variables, tables)
    result = solve_planar(problem)
    assert result.planar.tjoin == "none" and result.planar.frustrated == 0
    check_exact_answer(problem, result, brute_force(problem))


def test_no_coupling_at_all() -> None:
    """Unary constants only (and a variable of no table): no edge, no face."""
    variables = [Variable(f"v{i}", (0, 1)) for i in range(3)]
    problem = Problem.build(variables, [CostTable(("v0",), [1.5, 1.5])], constant=2.0)
    result = solve_planar(problem)
    assert result.planar.faces == 0 and result.exact and result.upper_bound == 3.5
