"""Barren nodes of a Bayesian network: variables that are no ancestor of an observed one.

Summing a BAYES model over its barren variables multiplies ``P(e)`` by one, as long as their
conditional tables are normalised: they can be dropped before computing ``Z`` (pgmpy does the same
for its queries). We drop them only where that stays exact: the file is a BAYES network whose
every table is the table of its last variable given the others (one per variable), and each
dropped table sums to 1 over its child within 1e-12 for every parent assignment.
"""

from __future__ import annotations

import numpy as np

from dcop.model import CostTable, Problem

#: How far from 1 a dropped conditional table's rows may sum (relative).
NORMALISED = 1e-12


def barren_tables(problem: Problem) -> list[CostTable]:
    """The tables of ``problem`` that PR needs: all of them, except for a BAYES network the
    conditional tables of variables that are no ancestor of an observed variable."""
    tables = [t for t in problem.tables if t.scope]
    if problem.meta.get("uai_network") != "BAYES":
        return tables
    child = {t.scope[-1]: t for t in tables}
    if len(child) != len(tables):
        return tables  # not one table per variable: not a plain Bayesian network
    evidence = problem.meta.get("evidence")
    observed = set(evidence) if isinstance(evidence, dict) else set()
    keep: set[str] = set()
    stack = [v for v in observed if v in child]
    while stack:
        v = stack.pop()
        if v in keep:
            continue
        keep.add(v)
        stack.extend(u for u in child[v].scope[:-1] if u not in keep)
    dropped = [t for v, t in child.items() if v not in keep]
    for table in dropped:
        with np.errstate(over="ignore"):
            rows = np.exp(-np.asarray(table.costs, np.float64)).sum(axis=-1)
        if not np.all(np.abs(rows - 1.0) <= NORMALISED):
            return tables
    return [t for t in tables if t.scope[-1] in keep]
