"""The minimum T-join: the weights' common unit, PyMatching's discretisation, the fallback."""

from __future__ import annotations

import numpy as np
import pytest

from dcop.errors import BackendUnavailable
from dcop.planar import tjoin
from dcop.planar.dual import Dual
from dcop.planar.tjoin import MOST_LEVELS, common_unit, lightest_edges, min_tjoin

needs_pymatching = pytest.mark.skipif(not tjoin.pymatching_available(), reason="PyMatching missing")


@pytest.mark.parametrize(
    ("weights", "unit"),
    [
        ([2.0, 2.0000000000000004, 1.9999999999999998], 2.0),  # -ln of printed exp(±1)
        ([0.5, 1.5, 3.0], 0.5),
        ([0.1, 0.3, 0.7], 0.1),
        ([7.0, 3.5, 10.5], 3.5),
        ([4.0, 6.0, 9.0], 1.0),
    ],
)
def test_common_unit(weights: list[float], unit: float) -> None:
    assert common_unit(np.array(weights)) == pytest.approx(unit, rel=1e-9)


@pytest.mark.parametrize(
    "weights",
    [
        np.random.default_rng(0).normal(size=50) ** 2,  # Gaussian couplings
        np.array([1.0, float(MOST_LEVELS) + 0.5]),  # a unit of 0.5: more than 2**24 - 1 levels
        np.array([1.0, np.sqrt(2.0)]),
    ],
)
def test_no_common_unit(weights: np.ndarray) -> None:
    assert common_unit(weights) is None


def dual_of_edges(edges: list[tuple[int, int]], odd: list[int], faces: int) -> Dual:
    mask = np.zeros(faces, dtype=bool)
    mask[odd] = True
    return Dual(
        faces=faces,
        left=np.array([u for u, _ in edges], dtype=np.int64),
        right=np.array([v for _, v in edges], dtype=np.int64),
        odd=mask,
    )


#: Two ways from face 0 to face 2 (0-1-2 and 0-3-2), a loop at 1, an edge parallel to 0-1, an
#: edge 0-4 to an even face (a heavy one sets PyMatching's own scale).
EDGES = [(0, 1), (1, 2), (0, 3), (3, 2), (1, 1), (1, 0), (0, 4)]
ROUND_THE_OTHER_WAY = [False, False, True, True, False, False, False]


def test_loops_and_heavier_parallels_are_left_out() -> None:
    dual = dual_of_edges(EDGES, [0, 2], 5)
    kept = lightest_edges(dual, np.array([1.0, 1.0, 1.0, 1.0, 0.1, 5.0, 1.0]))
    assert kept.tolist() == [0, 1, 2, 3, 6]


@needs_pymatching
def test_pymatching_rounds_non_whole_weights_to_its_levels() -> None:
    """What tjoin relies on, seen from outside: given weights that are not all whole numbers,
    PyMatching scales the largest to 2**24 - 1 levels and rounds each to a whole level, so two
    ways that differ by less than a level are a tie to it (here 0-1-2, 2.01, and 0-3-2, 2.0,
    are both 4 levels of 1e7 / (2**24 - 1))."""
    import pymatching

    matching = pymatching.Matching()
    weights = [1.01, 1.0, 1.0, 1.0, 1e7]
    for k, ((u, v), w) in enumerate(zip([EDGES[i] for i in (0, 1, 2, 3, 6)], weights, strict=True)):
        matching.add_edge(u, v, fault_ids=k, weight=w)
    _, weight = matching.decode(np.array([1, 0, 1, 0, 0]), return_weight=True)
    assert weight == pytest.approx(4 * 1e7 / MOST_LEVELS, rel=1e-12)


@pytest.mark.parametrize("use", [None, False], ids=["pymatching-if-installed", "fallback"])
def test_a_difference_finer_than_pymatchings_levels(use: bool | None) -> None:
    """The same two ways with an irrational difference: no common unit within 2**24 levels,
    so the exact fallback decides, and takes the lighter way."""
    weights = np.array([1.0 + np.pi * 1e-3, 1.0, 1.0, 1.0, 0.1, 5.0, 1e7])
    join = min_tjoin(dual_of_edges(EDGES, [0, 2], 5), weights, use)
    assert join.method == "networkx" and join.slack == 0.0
    assert join.chosen.tolist() == ROUND_THE_OTHER_WAY


@needs_pymatching
def test_whole_number_weights_reach_pymatching_exactly() -> None:
    """Weights of a common unit go to PyMatching as whole numbers, which it uses as they are:
    one level of 2**24 - 1 is seen (0-1-2 costs one more than 0-3-2)."""
    top = float(MOST_LEVELS)
    weights = np.array([top - 1, 2.0, 2.0**23, 2.0**23 - 1, 1.0, top, top])
    join = min_tjoin(dual_of_edges(EDGES, [0, 2], 5), weights, True)
    assert join.method == "pymatching" and join.unit == 1.0 and join.slack == 0.0
    assert join.chosen.tolist() == ROUND_THE_OTHER_WAY


@needs_pymatching
def test_the_scaled_path_bounds_its_gap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights of no common unit and more odd faces than the fallback takes: PyMatching on
    levels rounded down; its slack covers the rounding of the join's own edges."""
    from dcop import generators
    from dcop.planar import solve_planar

    problem = generators.ising_grid(10, 1.0, 0.0, seed=3)
    exact = solve_planar(problem, use_pymatching=False)
    monkeypatch.setattr(tjoin, "FALLBACK_MOST_ODD", 2)
    scaled = solve_planar(problem)
    assert scaled.planar.tjoin == "pymatching-scaled"
    assert scaled.lower_bound <= exact.upper_bound + 1e-12 <= scaled.upper_bound + 2e-12
    assert scaled.upper_bound - scaled.lower_bound <= scaled.planar.slack + 1e-12


def test_required_pymatching_missing_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tjoin, "pymatching_available", lambda: False)
    weights = np.array([1.0, 1.0, 1.0, 1.0, 0.1, 5.0, 1.0])
    dual = dual_of_edges(EDGES, [0, 2], 5)
    with pytest.raises(BackendUnavailable, match="PyMatching is not installed"):
        min_tjoin(dual, weights, True)
    assert min_tjoin(dual, weights).method == "networkx"  # None: the fallback without it


def test_too_many_odd_faces_for_the_fallback_without_pymatching(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dcop import generators
    from dcop.planar import NotPlanar, solve_planar

    monkeypatch.setattr(tjoin, "pymatching_available", lambda: False)
    monkeypatch.setattr(tjoin, "FALLBACK_MOST_ODD", 4)
    with pytest.raises(NotPlanar, match="frustrated faces; without PyMatching"):
        solve_planar(generators.spin_glass(6, 0))


@pytest.mark.parametrize("use", [None, False], ids=["pymatching-if-installed", "fallback"])
def test_a_minimum_join_may_pass_through_an_odd_face(use: bool | None) -> None:
    """A star: centre 0 and leaves 1, 2, 3 all odd. Every minimum join (the three spokes)
    pairs two leaves through the centre, itself odd: the matching must see that pair (a
    fallback that stopped its shortest paths at odd faces found no perfect matching here)."""
    star = dual_of_edges([(0, 1), (0, 2), (0, 3)], [0, 1, 2, 3], 4)
    join = min_tjoin(star, np.array([1.0, 1.0, 1.0]), use)
    assert join.chosen.tolist() == [True, True, True]
