"""Candidate pseudo-trees: how each is built (DFS heuristic, root rule and rank, seed).

The coordinator names each candidate tree's roots in ``Start``; every agent then builds the same
K candidates by distributed DFS (:mod:`dcop.trees.dfs`). Both sides take the candidates from
here, so neither imports the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from dcop.errors import DcopError

#: DFS heuristics: the order in which an agent tries its unvisited neighbours.
HEURISTICS = ("most-connected", "close-ancestors", "max-cardinality", "random")
#: How each component's root is picked.
ROOT_RULES = ("most-connected", "least-connected", "random")


def seeded_rank(seed: int, name: str) -> bytes:
    """A seeded pseudo-random rank of ``name``, the same in every agent (no shared generator)."""
    return hashlib.blake2b(f"{seed}\x00{name}".encode(), digest_size=8).digest()


def check_heuristic(heuristic: str) -> None:
    """Raise a one-line :class:`DcopError` for an unknown heuristic name."""
    if heuristic not in HEURISTICS:
        raise DcopError(f"unknown DFS heuristic {heuristic!r}; use one of {', '.join(HEURISTICS)}")


def choose_roots(
    adjacency: Mapping[int, Collection[int]],
    names: Mapping[int, str],
    rule: str = "most-connected",
    rank: int = 0,
    seed: int | None = None,
) -> list[int]:
    """One root per connected component, components in the order of their most connected agent.

    ``most-connected``: the agent with the most neighbours, ties by variable name (today's
    :func:`dcop.coordinator.choose_roots`); ``least-connected``: the fewest neighbours, ties
    by name (a peripheral start, as profile-reducing orders such as Cuthill-McKee's begin);
    ``random``: by a seeded hash of the name. ``rank`` k takes the k-th agent of that order in each
    component (modulo its size): K candidates from K different roots.
    """
    if rule not in ROOT_RULES:
        raise DcopError(f"unknown root rule {rule!r}; use one of {', '.join(ROOT_RULES)}")
    if rank < 0:
        raise DcopError(f"a root rank must be >= 0, not {rank}")

    def key(i: int) -> tuple[object, ...]:
        if rule == "most-connected":
            return (-len(adjacency[i]), names[i])
        if rule == "least-connected":
            return (len(adjacency[i]), names[i])
        return (seeded_rank(seed or 0, names[i]),)

    seen: set[int] = set()
    roots: list[int] = []
    for start in sorted(adjacency, key=lambda i: (-len(adjacency[i]), names[i])):
        if start in seen:
            continue
        component = connected_component(adjacency, start)
        seen |= component
        ranked = sorted(component, key=key)
        roots.append(ranked[rank % len(ranked)])
    return roots


@dataclass(frozen=True)
class Candidate:
    """How one candidate tree is built: the DFS heuristic, the root rule and rank
    (:func:`choose_roots`), and a seed for seeded tie-breaks and random roots (None: ties by
    name)."""

    heuristic: str = "most-connected"
    root: str = "most-connected"
    rank: int = 0
    seed: int | None = None

    def roots(
        self, adjacency: Mapping[int, Collection[int]], names: Mapping[int, str]
    ) -> list[int]:
        """This candidate's roots, one per connected component."""
        return choose_roots(adjacency, names, self.root, self.rank, self.seed)


DEFAULT_CANDIDATE = Candidate("close-ancestors", "least-connected")


def default_candidates(k: int) -> list[Candidate]:
    """The ``k`` candidate trees recommended: close-ancestors from the least connected agent of
    each component, today's tree (most-connected from the most connected agent), then
    close-ancestors from the 2nd, 3rd, ... least connected agents."""
    if k < 1:
        raise DcopError(f"at least one candidate tree is needed, not {k}")
    out = [DEFAULT_CANDIDATE, Candidate()]
    out += [Candidate("close-ancestors", "least-connected", rank) for rank in range(1, k - 1)]
    return out[:k]


def connected_component(adjacency: Mapping[int, Collection[int]], start: int) -> set[int]:
    """The agents reachable from ``start`` over the constraint graph ``adjacency``."""
    seen = {start}
    stack = [start]
    while stack:
        for u in adjacency[stack.pop()]:
            if u not in seen:
                seen.add(u)
                stack.append(u)
    return seen
