"""The coordinator's elimination pseudo-tree: the tree of its ordering engine's order, offered
to the agents beside their DFS candidates.

A DFS tree must follow graph edges, so on many structured problems (pedigrees, Bayesian
networks) every DFS candidate is far wider than a good elimination order. The coordinator reads
the whole problem anyway: it orders it (:func:`dcop.orders.best_order`), builds that order's
pseudo-tree (:func:`dcop.trees.induced.order_pseudo_tree`, whose width is the order's) and,
where its largest UTIL is smaller than the first DFS candidate's, gives every agent its place in it
(:class:`~dcop.protocol.messages.GivenTree`) and links each agent to a tree parent or child that
is not a neighbour. The agents size it as they size their DFS trees, and the run keeps the
candidate with the smallest predicted UTILs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from dcop.coordinator.topology import Layout
from dcop.errors import DcopError
from dcop.model import Problem
from dcop.orders import CostModel, best_order
from dcop.protocol.messages import GivenTree
from dcop.trees.induced import order_pseudo_tree


@dataclass(frozen=True)
class EliminationTree:
    """The elimination tree in agent ids: each agent's :class:`GivenTree`, the roots (one per
    component), each agent's tree relatives that are not graph neighbours (its extra links), the
    tree's width and largest predicted DPOP UTIL (entries), the ordering method and seconds."""

    given: dict[int, GivenTree]
    roots: list[int]
    links: dict[int, tuple[int, ...]]
    width: int
    largest: int
    method: str
    seconds: float


def elimination_tree(
    problem: Problem, layout: Layout, budget_s: float | None = None
) -> EliminationTree:
    """The pseudo-tree of the ordering engine's order over the agents of ``layout`` (``budget_s``:
    the engine's search budget; None: its default)."""
    t0 = time.perf_counter()
    var = layout.variable
    ident = {v: a for a, v in var.items()}
    adjacency = {var[a]: {var[n] for n in ns} for a, ns in layout.neighbours.items()}
    sizes = {v: problem.variables[v].size for v in adjacency}
    if set(adjacency) == set(problem.variables):
        # the very order dcop solve takes (the file's order breaks ties and is a candidate)
        engine = best_order(problem, budget_s)
    else:
        engine = best_order(adjacency, budget_s, CostModel(sizes=sizes))
    tree = order_pseudo_tree(adjacency, engine.order)
    separators = tree.separators()
    given: dict[int, GivenTree] = {}
    links: dict[int, set[int]] = {a: set() for a in var}
    largest = 0
    for v in tree.order:  # parents first
        a = ident[v]
        path: list[str] = []
        p = tree.parent[v]
        while p is not None:
            path.append(p)
            p = tree.parent[p]
        path.reverse()
        given[a] = GivenTree(
            tuple(ident[u] for u in path),
            tuple(sizes[u] for u in path),
            tuple(ident[c] for c in tree.children[v]),
        )
        parent = tree.parent[v]
        if parent is not None:
            largest = max(largest, math.prod(sizes[u] for u in separators[v]))
            if ident[parent] not in layout.neighbours[a]:
                links[a].add(ident[parent])
                links[ident[parent]].add(a)
    width = max((len(s) for s in separators.values()), default=0)
    return EliminationTree(
        given,
        [ident[r] for r in tree.roots],
        {a: tuple(sorted(ls)) for a, ls in links.items() if ls},
        width,
        largest,
        engine.method,
        time.perf_counter() - t0,
    )


def offer(
    problem: Problem,
    layout: Layout,
    policy: str = "auto",
    first: float | None = None,
    budget_s: float | None = None,
    alone: bool = False,
) -> tuple[EliminationTree | None, str]:
    """The elimination tree the coordinator offers under ``policy`` (None: none) and a line
    saying why. ``auto`` offers it where its largest UTIL is smaller than the first DFS
    candidate's (``first``, simulated by :class:`~dcop.coordinator.plan.RunPlan`; needed unless
    the policy is ``dfs`` or there is one agent), or as small where it would run ``alone``
    (the plan's single DFS candidate left out: see ``RunPlan.spec``); ``elimination`` always;
    ``dfs`` never."""
    if policy == "dfs" or len(layout.variable) < 2:
        return None, "not offered (--tree dfs: the agents' DFS trees only)"
    if first is None:
        raise DcopError("the elimination tree is offered against the first DFS tree's size")
    tree = elimination_tree(problem, layout, budget_s)
    if policy == "auto" and (tree.largest > first or (tree.largest == first and not alone)):
        return None, (
            f"not offered: its largest UTIL ({tree.largest:.4g} entries, width {tree.width}) is "
            f"no smaller than the first DFS tree's ({first:.4g})"
        )
    if policy == "auto" and alone:
        return tree, (
            f"runs alone: the pseudo-tree of the {tree.method} order, width {tree.width}, largest "
            f"UTIL {tree.largest:.4g} entries, no larger than the one DFS tree's ({first:.4g}), "
            f"whose walk of 2(n - 1) tokens in turn is left out; built in {tree.seconds:.3f} s"
        )
    return tree, (
        f"offered: the pseudo-tree of the {tree.method} order, width {tree.width}, largest UTIL "
        f"{tree.largest:.4g} entries (the first DFS tree's: {first:.4g}), built in "
        f"{tree.seconds:.3f} s"
    )
