"""Random instances exactly as in the paper's experiments (binary networks, connected graphs).

* ``random``: n nodes and ``floor(p1 * n * (n - 1) / 2)`` edges, uniformly among connected graphs
  (rejection sampling). The paper's text says ``floor(n (n-1) p1)`` edges, but the induced widths it
  reports (2.9 at n=10, 5.3 at n=15, 8.5 at n=20 for p1=0.3, along the DFS pseudo-tree order) match
  ``p1 * n (n-1) / 2``, i.e. p1 is the density of the graph; we use that.
* ``scalefree``: Barabási–Albert: start from one edge, add nodes one at a time, each joined to two
  distinct existing nodes chosen with probability proportional to their degree (2(n-2)+1 edges).
* ``grid``: a side x side lattice, 4-neighbourhood (n must be a perfect square).

Every edge gets a d x d table of integer costs drawn uniformly from [0, 100]; each entry is +inf
(infeasible) with probability p2 (the tightness). Variables are ``x0..x{n-1}``, each owned by its own
agent ``a0..a{n-1}``. Everything is driven by one seed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from dcop.errors import ModelError
from dcop.model import CostTable, Problem, Variable

TOPOLOGIES = ("random", "scalefree", "grid")
MAX_COST = 100
_MAX_REJECTIONS = 10_000


def random_edges(n: int, p1: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """A connected graph with ``floor(p1 n (n-1) / 2)`` edges, uniform among such graphs."""
    if n < 1:
        raise ModelError("a network needs n >= 1")
    if not 0.0 <= p1 <= 1.0:
        raise ModelError(f"density p1 must be in [0, 1], not {p1}")
    m = random_edge_count(n, p1)
    if n > 1 and m < n - 1:
        raise ModelError(f"p1={p1} gives {m} edges: too few for a connected graph of {n} nodes")
    import networkx as nx  # only the random networks need it: imported on use

    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for _ in range(_MAX_REJECTIONS):
        chosen = rng.choice(len(pairs), size=m, replace=False) if m else np.array([], dtype=int)
        edges = [pairs[k] for k in sorted(chosen)]
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(edges)
        if nx.is_connected(graph):
            return edges
    raise ModelError(f"no connected graph found for n={n}, p1={p1} after {_MAX_REJECTIONS} draws")


def scale_free_edges(n: int, rng: np.random.Generator, m: int = 2) -> list[tuple[int, int]]:
    """Barabási–Albert graph grown from one edge, ``m`` preferential links per new node."""
    if n < 2:
        raise ModelError("a scale-free network needs n >= 2")
    if m < 1:
        raise ModelError(f"a scale-free network needs at least one link per new node, not {m}")
    edges = [(0, 1)]
    degree = [1, 1]
    for new in range(2, n):
        k = min(m, new)
        weights = np.asarray(degree, dtype=float)
        targets = rng.choice(new, size=k, replace=False, p=weights / weights.sum())
        for t in sorted(int(x) for x in targets):
            edges.append((t, new))
            degree[t] += 1
        degree.append(k)
    return edges


def grid_edges(n: int) -> list[tuple[int, int]]:
    """A side x side 4-neighbour lattice; ``n`` must be a perfect square."""
    side = math.isqrt(n)
    if side * side != n or n < 1:
        raise ModelError(f"a grid needs a square number of variables, not {n}")
    edges = []
    for r in range(side):
        for c in range(side):
            i = r * side + c
            if c + 1 < side:
                edges.append((i, i + 1))
            if r + 1 < side:
                edges.append((i, i + side))
    return edges


#: Bytes a generated network holds per edge besides its table (the edge list, the graph the
#: connectivity check builds, the table object and its name), measured roughly (~1 KB).
EDGE_OVERHEAD_BYTES = 1024


def network_bytes(edges: int, n: int, d: int, pairs: int = 0) -> int:
    """A rough peak of the memory generating a network of ``edges`` binary ``d x d`` tables over
    ``n`` variables takes (float64 tables, twice over while a table is drawn; ``pairs``: the
    candidate pairs the random generator lists), to refuse a size before making it."""
    return edges * (2 * 8 * d * d + EDGE_OVERHEAD_BYTES) + 64 * pairs + 512 * n


def random_edge_count(n: int, p1: float) -> int:
    """The edges of :func:`random_edges` for ``n`` and ``p1``."""
    return math.floor(p1 * n * (n - 1) / 2 + 1e-9)


def network_problem(
    edges: Iterable[tuple[int, int]],
    n: int,
    d: int,
    p2: float,
    rng: np.random.Generator,
    name: str,
) -> Problem:
    """Binary cost tables on the given edges: integers in [0, 100], +inf with probability p2."""
    if d < 1:
        raise ModelError(f"domain size d must be >= 1, not {d}")
    if not 0.0 <= p2 <= 1.0:
        raise ModelError(f"tightness p2 must be in [0, 1], not {p2}")
    variables = [Variable(f"x{i}", tuple(range(d)), agent=f"a{i}") for i in range(n)]
    tables = []
    for i, j in edges:
        costs = rng.integers(0, MAX_COST + 1, size=(d, d)).astype(np.float64)
        costs[rng.random((d, d)) < p2] = np.inf
        tables.append(CostTable((f"x{i}", f"x{j}"), costs, name=f"c_{i}_{j}"))
    return Problem.build(variables, tables, name=name)


def random_network(n: int, d: int, p1: float, p2: float, seed: int = 0) -> Problem:
    """The paper's random binary network."""
    rng = np.random.default_rng(seed)
    edges = random_edges(n, p1, rng)
    return network_problem(edges, n, d, p2, rng, f"random_n{n}_d{d}_p{p1}_t{p2}_s{seed}")


def scale_free_network(n: int, d: int, p2: float, seed: int = 0, m: int = 2) -> Problem:
    """The paper's scale-free (Barabási–Albert) binary network.

    ``m = 2`` follows the paper's text (2(n-2)+1 edges) but gives w* of about 3.5; the induced
    widths of the paper's scale-free table (6.3 at n = 10 up to 12 at n = 20) are matched by
    ``m = 5`` (6.2 up to 10.6 on seeds 0-4, DFS pseudo-tree order), the benchmarks'
    ``scalefree-m5`` suite."""
    rng = np.random.default_rng(seed)
    edges = scale_free_edges(n, rng, m)
    tag = "" if m == 2 else f"_m{m}"
    return network_problem(edges, n, d, p2, rng, f"scalefree{tag}_n{n}_d{d}_t{p2}_s{seed}")


def grid_network(n: int, d: int, p2: float, seed: int = 0) -> Problem:
    """The paper's grid network (n = side * side)."""
    rng = np.random.default_rng(seed)
    return network_problem(grid_edges(n), n, d, p2, rng, f"grid_n{n}_d{d}_t{p2}_s{seed}")


def generate(
    topology: str,
    n: int,
    d: int,
    p1: float = 0.3,
    p2: float = 0.5,
    seed: int = 0,
    links: int = 2,
) -> Problem:
    """One of ``TOPOLOGIES`` by name (``p1`` is used by ``random`` only, ``links``, the edges
    each new node brings, by ``scalefree`` only)."""
    if topology == "random":
        return random_network(n, d, p1, p2, seed)
    if topology == "scalefree":
        return scale_free_network(n, d, p2, seed, m=links)
    if topology == "grid":
        return grid_network(n, d, p2, seed)
    raise ModelError(f"unknown topology {topology!r}; use one of {', '.join(TOPOLOGIES)}")


# ---- graphical models for probabilistic inference (PR / MAR) ------------------------------------
def ising_grid(
    side: int, coupling: float = 1.0, field: float = 0.1, seed: int = 0, name: str | None = None
) -> Problem:
    """An Ising model on a ``side`` x ``side`` 4-neighbour grid, as a MARKOV network.

    Spins ``s_i = ±1`` (value 0 is -1, value 1 is +1); each edge has the potential
    ``exp(J s_i s_j)`` with ``J`` uniform in ``[-coupling, coupling]``, each node
    ``exp(h s_i)`` with ``h`` uniform in ``[-field, field]`` (the UAI competition's "Grids"
    family). Costs are ``-ln`` of the potentials (``cost_kind="neg_ln"``); induced width ``side``.
    """
    if side < 1:
        raise ModelError(f"an Ising grid needs side >= 1, not {side}")
    rng = np.random.default_rng(seed)
    n = side * side
    fields = [rng.uniform(-field, field) for _ in range(n)]
    couplings = [rng.uniform(-coupling, coupling) for _ in grid_edges(n)]
    label = name or f"ising_{side}x{side}_c{coupling}_f{field}_s{seed}"
    return _spin_grid(side, fields, couplings, label)


def spin_glass(side: int, seed: int = 0, name: str | None = None) -> Problem:
    """A ±J spin glass on a ``side`` x ``side`` 4-neighbour grid, as a MARKOV network: each edge's
    coupling is +1 or -1 with equal odds, no field (a Grids-like MPE with many ties, where
    pruning is weak). Costs are ``-ln`` of the potentials ``exp(J s_i s_j)``."""
    if side < 1:
        raise ModelError(f"a spin glass needs side >= 1, not {side}")
    rng = np.random.default_rng(seed)
    couplings = [float(rng.choice((-1.0, 1.0))) for _ in grid_edges(side * side)]
    return _spin_grid(side, None, couplings, name or f"spinglass_{side}x{side}_s{seed}")


def _spin_grid(
    side: int, fields: Sequence[float] | None, couplings: Sequence[float], label: str
) -> Problem:
    """Spins on a grid with a field per node (None: no node tables) and a coupling per edge (in
    :func:`grid_edges` order), costs ``-ln`` of ``exp(h s_i)`` and ``exp(J s_i s_j)``."""
    n = side * side
    spins = np.array([-1.0, 1.0])
    variables = [Variable(f"x{i}", (0, 1), agent=f"a{i}") for i in range(n)]
    tables = [] if fields is None else [
        CostTable((f"x{i}",), -h * spins, name=f"h{i}") for i, h in enumerate(fields)
    ]  # fmt: skip
    for (i, j), coupling_ij in zip(grid_edges(n), couplings, strict=True):
        tables.append(
            CostTable((f"x{i}", f"x{j}"), -coupling_ij * np.outer(spins, spins), name=f"J_{i}_{j}")
        )
    return Problem.build(
        variables, tables, name=label, cost_kind="neg_ln", meta={"uai_network": "MARKOV"}
    )


def random_bayes(
    n: int, d: int = 2, parents: int = 3, window: int | None = None, seed: int = 0
) -> Problem:
    """A random Bayesian network: variable ``i`` gets up to ``parents`` parents drawn uniformly
    among the ``window`` variables before it (all of them when ``window`` is None), and a
    conditional probability table whose rows are uniform draws from the simplex (Dirichlet(1)).

    Costs are ``-ln p`` (``cost_kind="neg_ln"``); the scope of each table lists the parents, then
    the child (the UAI BAYES layout), so ``Z = 1``. A smaller ``window`` keeps the induced width
    down; a larger ``parents`` raises it.
    """
    if n < 1 or d < 1 or parents < 0:
        raise ModelError(
            f"random_bayes needs n >= 1, d >= 1, parents >= 0 (got {n}, {d}, {parents})"
        )
    rng = np.random.default_rng(seed)
    variables = [Variable(f"x{i}", tuple(range(d)), agent=f"a{i}") for i in range(n)]
    tables = []
    for i in range(n):
        low = 0 if window is None else max(0, i - window)
        pool = np.arange(low, i)
        k = min(parents, len(pool))
        chosen = sorted(int(v) for v in rng.choice(pool, size=k, replace=False)) if k else []
        probs = rng.dirichlet(np.ones(d), size=d**k).reshape((d,) * k + (d,))
        with np.errstate(divide="ignore"):
            costs = -np.log(probs)
        scope = (*(f"x{p}" for p in chosen), f"x{i}")
        tables.append(CostTable(scope, costs, name=f"p{i}"))
    label = f"bayes_n{n}_d{d}_k{parents}_w{window}_s{seed}"
    return Problem.build(
        variables, tables, name=label, cost_kind="neg_ln", meta={"uai_network": "BAYES"}
    )
