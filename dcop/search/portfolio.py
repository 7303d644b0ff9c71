"""The orders the search's rungs choose among: the one whose mini-bucket pass bounds highest.

On the paper's dense random networks the order decides the search's size far more than its
width does: at the same z, min-fill's pseudo-tree needed 6e6+ expansions on n = 24 where
min-degree's needed 1.8e6 and a min-fill with other ties 0.7e6, and the pass's bound at that z
ranked them (its gap to the optimum is what the walk must close). So a rung whose passes are
cheap runs one pass per candidate order and searches along the best bound; the candidates are
the order chosen (first: it wins ties), min-degree, and min-fill with its ties broken in
other (seeded) variable orders.
"""

from __future__ import annotations

import random

from dcop.model import Problem
from dcop.orders.greedy import induced_width, min_degree_order, min_fill_order

#: Orders compared at a rung, the chosen one included.
CANDIDATES = 4
#: A candidate whose induced width exceeds the chosen order's by more than this is left out (its
#: passes would be larger at every z; on these graphs they differed by one at most).
WIDTH_SLACK = 1


def candidate_orders(problem: Problem, chosen: list[str], seed: int = 0) -> list[list[str]]:
    """``chosen`` first, then up to CANDIDATES - 1 other orders (distinct, within WIDTH_SLACK of
    its width): min-degree, then min-fill with ties broken in shuffled variable orders (seeded:
    the same input gives the same candidates)."""
    adjacency = problem.neighbours()
    width = induced_width(adjacency, chosen)
    out = [list(chosen)]
    seen = {tuple(chosen)}

    def offer(order: list[str]) -> None:
        if tuple(order) in seen or len(out) >= CANDIDATES:
            return
        seen.add(tuple(order))
        if induced_width(adjacency, order) <= width + WIDTH_SLACK:
            out.append(order)

    offer(min_degree_order(adjacency))
    rng = random.Random(seed)
    for _ in range(2 * CANDIDATES):  # a few tries: shuffles may repeat an order or widen it
        if len(out) >= CANDIDATES:
            break
        keys = list(adjacency)
        rng.shuffle(keys)
        offer(min_fill_order({k: adjacency[k] for k in keys}))
    return out
