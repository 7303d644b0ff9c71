"""Generated instances for the distributed comparisons, written in each tool's own format."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np

from dcop.model import CostTable, Problem, Variable


def max_discsp(n: int, d: int, p1: float, p2: float, seed: int) -> Problem:
    """FRODO's random Max-DisCSP model: round(p1 n(n-1)/2) distinct random edges, each binary
    tuple costs 1 with probability p2 (else 0); the graph may be disconnected, as in FRODO's
    generator. Seeded, so the same instance can be rebuilt."""
    rng = np.random.default_rng(seed)
    pairs = list(itertools.combinations(range(n), 2))
    m = round(p1 * n * (n - 1) / 2)
    chosen = sorted(rng.choice(len(pairs), size=m, replace=False).tolist())
    variables = [Variable(f"x{i}", tuple(range(1, d + 1)), agent=f"a_x{i}") for i in range(n)]
    tables = []
    for k in chosen:
        i, j = pairs[k]
        costs = (rng.random((d, d)) < p2).astype(np.float64)
        tables.append(CostTable((f"x{i}", f"x{j}"), costs, name=f"c{i}_{j}"))
    return Problem.build(variables, tables, name=f"maxdiscsp_n{n}_d{d}_p{p1}_t{p2}_s{seed}")


def random_dcop(n: int, d: int, p1: float, p2: float, seed: int) -> Problem:
    """The paper's random network (dcop.generators), one agent per variable."""
    from dcop.generators import random_network

    return random_network(n, d, p1, p2, seed)


def write(problem: Problem, path: Path) -> Path:
    """Write with dcop's own writer (format from the suffix: .yaml pyDCOP, .xml FRODO)."""
    from dcop.io import write_problem

    path.parent.mkdir(parents=True, exist_ok=True)
    write_problem(problem, path)
    return path


def finite_version(problem: Problem, big: float = 1e6) -> Problem:
    """The same problem with every +inf cost replaced by ``big``.

    pyDCOP's process mode ships constraints as JSON, which cannot carry infinity. ``big`` exceeds
    any finite total (costs are at most 100 per table here), so the optimum is unchanged whenever
    a feasible assignment exists; assignments are still re-evaluated on the original problem.
    """
    worst = sum(float(np.max(t.costs[np.isfinite(t.costs)], initial=0.0)) for t in problem.tables)
    if big <= worst:
        raise ValueError(f"big-M {big} must exceed the largest finite total {worst}")
    tables = [
        CostTable(t.scope, np.where(np.isinf(t.costs), big, t.costs), name=t.name)
        for t in problem.tables
    ]
    return Problem.build(problem.variables.values(), tables, name=problem.name)
