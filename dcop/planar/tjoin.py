"""A minimum-weight T-join of the dual graph: the edges left unsatisfied by a ground state.

Given the dual's edges (faces ``left[e]``, ``right[e]``) with weights ``w[e] > 0`` and the odd
faces T, the join is a set of edges whose odd-degree faces are exactly T, of least weight.
Loops (bridges of the primal graph) are never in one, and of parallel edges only the lightest
can be: both are dropped before solving.

Two exact ways:

* **PyMatching** (``pymatching``, sparse blossom): ``decode`` returns a minimum-weight set of
  edges whose boundary is the syndrome. It works on integers. Read from its source
  (``UserGraph::get_edge_weight_normalising_constant`` and ``iter_discretized_edges``): when every
  weight is a whole number (``round(w) == w``) the weights are used as they are, doubled;
  otherwise each is scaled by ``(2**24 - 1) / max|w|`` and rounded to the nearest integer, and an
  edge heavier than ``2**24 - 1`` is dropped with a warning. So this module hands it whole
  numbers only: the weights divided by their common unit (:func:`common_unit`: the weights are
  integer multiples of one unit, up to float noise), at most ``2**24 - 1`` units. The join is
  then a minimum for the whole numbers, and for the weights within ``2 * sum|w - unit * W|``
  (the noise, added to :attr:`TJoin.slack`).
* **networkx** (the fallback, without PyMatching or with weights of no common unit): shortest
  paths between the odd faces, a minimum-weight perfect matching of the complete graph they make
  (``min_weight_matching``), the join the symmetric difference of the matched paths. Exact up to
  float64 rounding; its matching is cubic in the odd faces, so it runs on at most
  ``FALLBACK_MOST_ODD`` of them.

Weights of no common unit with more odd faces than that go to PyMatching scaled to ``2**24 - 1``
levels, each rounded down: the join is then near-minimum, within what the rounding took off its
own edges (at most one level each: :attr:`TJoin.slack`), and the solver reports bounds instead
of a proof.

With a deadline (a :func:`time.monotonic` instant), the loops written here look at it: every
``CHECK_EDGES`` edges handed to PyMatching, and between the fallback's Dijkstra runs; a
matching, which cannot be stopped, starts only where it is predicted to end in time
(PyMatching's decode: :data:`PYMATCHING_S_PER_ODD2`; networkx's: :data:`MATCHING_S_PER_ODD3`). Past the deadline :class:`~dcop.planar.ising.PlanarLate` is raised: the solver then
answers without the join (:func:`dcop.planar.solver.solve_planar`).
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dcop.errors import BackendUnavailable
from dcop.planar.dual import Dual
from dcop.planar.ising import NotPlanar, PlanarLate

#: PyMatching's whole-number weights: at most ``NUM_DISTINCT_WEIGHTS - 1`` (2**24 - 1).
MOST_LEVELS = (1 << 24) - 1
#: Weights that are integer multiples of one unit up to this share of the unit are taken as
#: such (float noise: a UAI file's ``-ln`` of printed probabilities is off by about 1e-16).
UNIT_REL = 1e-9
#: The exact fallback (networkx's matching, cubic) takes at most this many odd faces.
FALLBACK_MOST_ODD = 300
#: The ways a join is found, as the result document names them.
METHODS = ("none", "pymatching", "networkx", "pymatching-scaled")
#: Edges handed to PyMatching between two looks at the deadline.
CHECK_EDGES = 4096
#: Seconds of networkx's matching per cubed odd face (2.5 s for 260 odd faces on the 2-core VM,
#: 1.4e-7; twice that: a prediction that errs long).
MATCHING_S_PER_ODD3 = 3e-7
#: Seconds of PyMatching's decode per squared odd face (0.016 s for 1944 odd faces, 0.29 s for
#: 8056 on the 2-core VM: 4.2e-9 and 4.5e-9; twice that).
PYMATCHING_S_PER_ODD2 = 1e-8

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class TJoin:
    """``chosen[e]``: edge ``e`` of the dual is in the join. ``slack``: how much lighter than
    this join a minimum one may be (0 for an exact one, float noise aside). ``method`` (one of
    :data:`METHODS`), ``unit`` the common unit of the weights PyMatching was given (None
    where none)."""

    chosen: BoolArray
    method: str
    unit: float | None
    slack: float


def pymatching_available() -> bool:
    """Whether PyMatching can be imported here (its wheel exists for this platform)."""
    import importlib.util

    return importlib.util.find_spec("pymatching") is not None


def common_unit(weights: npt.NDArray[np.float64]) -> float | None:
    """The largest ``u`` of which every weight is an integer multiple (up to ``UNIT_REL`` of
    ``u``), with at most ``MOST_LEVELS`` units in the heaviest; None where there is none.
    Euclid's algorithm on the distinct weights, a remainder below the noise counting as zero."""
    if weights.size == 0:
        return None
    heaviest = float(weights.max())
    least = heaviest / MOST_LEVELS
    unit = 0.0
    for w in np.unique(weights).tolist():
        a, b = max(unit, w), min(unit, w)
        while b > least * UNIT_REL and b > a * UNIT_REL:
            a, b = b, math.fmod(a, b)
            if a - b <= a * UNIT_REL:  # a remainder just under a whole multiple
                b = 0.0
        unit = a
        if unit < least:
            return None
    levels = weights / unit
    if np.abs(levels - np.rint(levels)).max() > UNIT_REL * max(1.0, float(levels.max())):
        return None
    return unit


def lightest_edges(dual: Dual, weights: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
    """The dual edges a minimum join may use: no loop, the lightest of parallel ones."""
    keep = np.flatnonzero(dual.left != dual.right)
    lo = np.minimum(dual.left[keep], dual.right[keep])
    hi = np.maximum(dual.left[keep], dual.right[keep])
    order = np.lexsort((weights[keep], hi, lo))
    first = np.ones(order.size, dtype=bool)
    first[1:] = (lo[order][1:] != lo[order][:-1]) | (hi[order][1:] != hi[order][:-1])
    return np.sort(keep[order[first]])


def min_tjoin(
    dual: Dual,
    weights: npt.NDArray[np.float64],
    use_pymatching: bool | None = None,
    deadline: float | None = None,
) -> TJoin:
    """A minimum-weight T-join of ``dual`` (T: its odd faces) for ``weights`` (> 0, one per
    edge). ``use_pymatching``: None uses it where it is installed; False forces the fallback;
    True requires it (:class:`~dcop.errors.BackendUnavailable` without it). ``deadline``: see the
    module docstring (:class:`~dcop.planar.ising.PlanarLate`)."""
    chosen = np.zeros(len(dual.left), dtype=bool)
    if not dual.odd.any():
        return TJoin(chosen, "none", None, 0.0)
    if use_pymatching is None:
        use_pymatching = pymatching_available()
    elif use_pymatching and not pymatching_available():
        raise BackendUnavailable("planar: PyMatching is not installed (pip install pymatching)")
    edges = lightest_edges(dual, weights)
    w = weights[edges]
    unit = common_unit(w)
    odd = int(dual.odd.sum())
    if use_pymatching and unit is not None:
        levels = np.rint(w / unit)
        picked = _pymatching(dual, edges, levels, deadline)
        noise = float(np.abs(w - unit * levels).sum())
        chosen[edges[picked]] = True
        return TJoin(chosen, "pymatching", unit, 2 * noise)
    if odd <= FALLBACK_MOST_ODD or not use_pymatching:
        if odd > FALLBACK_MOST_ODD:
            raise NotPlanar(
                f"planar: {odd} frustrated faces; without PyMatching the exact matching "
                f"(networkx) takes at most {FALLBACK_MOST_ODD} (pip install pymatching)"
            )
        chosen[edges[_networkx(dual, edges, w, deadline)]] = True
        return TJoin(chosen, "networkx", None, 0.0)
    # no common unit and too many odd faces for the fallback: PyMatching on 2**24 levels, each
    # weight rounded down: any join J has w(J) >= per_level * levels(J) >= per_level *
    # levels(picked), so picked is within w(picked) - per_level * levels(picked) of a minimum
    per_level = float(w.max()) / MOST_LEVELS
    levels = np.floor(w / per_level)
    picked = _pymatching(dual, edges, levels, deadline)
    slack = float(w[picked].sum() - per_level * levels[picked].sum())
    chosen[edges[picked]] = True
    return TJoin(chosen, "pymatching-scaled", None, slack)


def _late(deadline: float | None, seconds: float = 0.0) -> None:
    """Raise :class:`PlanarLate` where ``seconds`` (a step's prediction) from now is past
    ``deadline``."""
    if deadline is None:
        return
    if seconds and time.monotonic() + seconds >= deadline:
        raise PlanarLate(
            f"the T-join's matching (predicted {seconds:.3g} s) would not end before the deadline"
        )
    if time.monotonic() >= deadline:
        raise PlanarLate("the deadline came before the T-join was found")


def _pymatching(
    dual: Dual,
    edges: npt.NDArray[np.int64],
    levels: npt.NDArray[np.float64],
    deadline: float | None = None,
) -> BoolArray:
    """PyMatching's minimum join over ``edges`` (whole-number weights ``levels``): a mask over
    ``edges``. Each edge carries its position as its fault id; ``decode`` flips the ids of the
    edges it picks."""
    graph = _matching_extension().MatchingGraph()
    for k, (u, v, level) in enumerate(
        zip(dual.left[edges].tolist(), dual.right[edges].tolist(), levels.tolist(), strict=True)
    ):
        if k % CHECK_EDGES == 0:
            _late(deadline)
        # (node, node, fault ids, weight, error probability: none, merge: parallel edges are
        # gone already)
        graph.add_edge(u, v, {k}, level, -1.0, "disallow")
    graph.set_min_num_observables(len(edges))
    odd = np.flatnonzero(dual.odd[: graph.get_num_detectors()]).astype(np.int64)
    _late(deadline, PYMATCHING_S_PER_ODD2 * float(odd.size) ** 2)  # decode cannot be stopped
    flipped, _weight = graph.decode(odd, enable_correlations=False)
    return np.asarray(flipped[: len(edges)], dtype=bool)


def _matching_extension() -> Any:
    """PyMatching's compiled module (``pymatching._cpp_pymatching``), loaded on its own: the
    package's ``__init__`` imports its ``Matching`` class, and with it matplotlib and SciPy
    (0.6 s of a 1 s solve of a 36x36 spin glass). The extension's ``MatchingGraph`` is what
    ``Matching.add_edge`` and ``Matching.decode`` call; the version is pinned (2.4.0)."""
    import importlib.machinery
    import importlib.util
    import sys

    name = "pymatching._cpp_pymatching"
    if name in sys.modules:
        return sys.modules[name]
    package = importlib.util.find_spec("pymatching")
    if package is None or not package.submodule_search_locations:
        raise BackendUnavailable("planar: PyMatching is not installed (pip install pymatching)")
    finder = importlib.machinery.PathFinder()
    spec = finder.find_spec(name.rsplit(".", 1)[1], list(package.submodule_search_locations))
    if spec is None or spec.loader is None:
        raise BackendUnavailable("planar: PyMatching's compiled module is missing")
    spec.name = name  # the extension's init is named after its last part; its full name kept
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def _networkx(
    dual: Dual,
    edges: npt.NDArray[np.int64],
    w: npt.NDArray[np.float64],
    deadline: float | None = None,
) -> BoolArray:
    """The exact fallback: a mask over ``edges``. Dijkstra from each odd face; the complete graph
    of the odd faces weighted by their distances; its minimum-weight perfect matching; the
    symmetric difference of the matched pairs' shortest paths."""
    import networkx as nx

    graph = nx.Graph()
    for k, (u, v, weight) in enumerate(
        zip(dual.left[edges].tolist(), dual.right[edges].tolist(), w.tolist(), strict=True)
    ):
        graph.add_edge(u, v, weight=weight, k=k)
    odd = np.flatnonzero(dual.odd).tolist()
    paths: dict[int, dict[int, list[int]]] = {}
    pairs = nx.Graph()
    for i, source in enumerate(odd):
        _late(deadline)
        distance, paths[source] = nx.single_source_dijkstra(graph, source, weight="weight")
        for target in odd[i + 1 :]:
            if target in distance:
                pairs.add_edge(source, target, weight=distance[target])
    _late(deadline, MATCHING_S_PER_ODD3 * len(odd) ** 3)  # it cannot be stopped once begun
    picked = np.zeros(len(edges), dtype=bool)
    for source, target in nx.min_weight_matching(pairs, weight="weight"):
        path = paths[source][target] if source in paths else paths[target][source]
        for u, v in itertools.pairwise(path):
            picked[graph[u][v]["k"]] ^= True
    return picked
