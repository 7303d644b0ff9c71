"""Anytime improvement of the incumbent while the walk runs: local search and subtree moves.

A depth-first walk dives into one subtree and improves the upper bound of a connected part only
when it proves the part (its first solution there *is* its proof). Between two of its slices,
a round of this module improves the incumbent instead, in two ways:

* **Iterated local search** (:func:`~dcop.search.local.perturb_search`): kicks that give a ball
  of neighbouring nodes random values and repair it by conditional modes, kept when they cost
  no more, on the problem tables with each infinite cost replaced by a penalty
  (:func:`~dcop.search.local.penalised`): an infeasible first assignment is repaired first.
* **Subtree moves**, made exact by the walk's own kernel: a subtree of the pseudo-tree, given
  the values its ancestors hold in the incumbent, is a subproblem of its own (every table of
  its buckets lies in the subtree and its context), so :func:`dcop.search.kernel.search` from
  the subtree's top, with the incumbent's cost there as budget, returns a better completion or
  shows there is none. Each move has a node budget; a move that runs out changes nothing.
  Moves visit the subtrees of at most ``cap`` nodes in a seeded random order; a round of them
  without an improvement doubles ``cap`` (back to the smallest past the largest subtree). They
  share the walk's cache: each entry is a context's exact optimum or a lower bound, true for
  the walk as well.

Each kind works a multiple (its *gear*) of its share of a round, doubled after a round in which
it improved the incumbent and halved after one in which it did not. Everything is counted in
expansions and kicks, never seconds: the same input and seed take the same path.
"""

from __future__ import annotations

import math
import time

import numpy as np

from dcop.search import kernel
from dcop.search.compile import Compiled, new_state
from dcop.search.local import (
    incidence,
    local_search,
    neighbours,
    nodes_cost,
    penalised,
    perturb_search,
    total_cost,
)

#: The smallest subtree a move takes (nodes), and the node budget per node of a move's subtree
#: (at least MOVE_FLOOR expansions).
FIRST_CAP = 8
MOVE_STEPS_PER_NODE = 200
MOVE_FLOOR = 2_000
#: ICM sweeps after a round that improved the incumbent.
POLISH_SWEEPS = 5
#: Kicks of the iterated local search per round, and its block sizes, one per round in turn.
KICKS = 2_000
BLOCKS = (8, 16, 32)
#: Each kind of move works GEAR / 4 times its share, the gear doubled after a round in which it
#: improved the incumbent and halved after one in which it did not, between 1 and GEAR_MAX (a
#: quarter to 8 times the share): the kind that pays gets the time, and the walk gets most of
#: it back when neither pays.
GEAR_START = 4
GEAR_MAX = 32
#: A move's completion (:func:`complete`) may expand at most COMPLETE_FACTOR times the move's
#: own node budget, in slices of COMPLETE_SLICE expansions between two looks at the clock.
COMPLETE_FACTOR = 10
COMPLETE_SLICE = 100_000
#: Expansions a move is charged at least: its Python round trip (cost of the subtree, a kernel
#: call, the checks) takes as long as some tens of expansions. Charged one, a move that expands
#: nothing (answered by the cache, or a subtree the pass solved exactly) let the moves' share run
#: to 94k moves and 1.5 s on a 25-variable file (example.wcsp), whose whole walk takes 0.02 s.
MOVE_MIN_EXPANSIONS = 50
#: Pruning margin, as the walk's (:mod:`dcop.search.solver`).
EPS_ABS = 1e-9
EPS_REL = 1e-10


class Improver:
    """Subtree moves over the parts of ``compiled`` not proved yet, sharing ``cache``."""

    def __init__(self, compiled: Compiled, cache: np.ndarray, seed: int) -> None:
        self.c = compiled
        m = compiled.model
        # a state of its own (the walk's frames stay as they are), the walk's cache
        self.s = new_state(m, compiled.width, 0, cache)
        # each inner node's subtree: a contiguous run of its part's preorder
        self.subtree: dict[int, np.ndarray] = {}
        self.root_of: dict[int, int] = {}
        for r, order in compiled.preorder.items():
            size = np.ones(order.shape[0], dtype=np.int64)
            at = {int(v): i for i, v in enumerate(order)}
            for i in range(order.shape[0] - 1, 0, -1):
                size[at[int(m.parent[order[i]])]] += size[i]
            for i, v in enumerate(order):
                if size[i] > 1:
                    self.subtree[int(v)] = order[i : i + size[i]]
                    self.root_of[int(v)] = r
        self.largest = max((t.shape[0] for t in self.subtree.values()), default=0)
        self.cap = FIRST_CAP
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.queue: list[int] = []
        self.round_improved = False
        self.inc_off, self.inc_fun = incidence(m)
        self.nb_off, self.nb = neighbours(m, self.inc_off, self.inc_fun)
        self.soft = penalised(m)
        self.rounds = 0
        self.kick_gear = GEAR_START
        self.move_gear = GEAR_START
        self.expanded = 0
        self.moves = 0
        self.improvements = 0

    def perturb(self, incumbent: np.ndarray) -> bool:
        """One round of the iterated local search on ``incumbent`` (in place); True when it
        improved it (a move that only rounding calls better is undone)."""
        m = self.c.model
        block = BLOCKS[self.rounds % len(BLOCKS)]
        self.rounds += 1
        before = incumbent.copy()
        cost = float(total_cost(m, before))
        seed = self.seed * 7919 + self.rounds
        perturb_search(
            self.soft, self.inc_off, self.inc_fun, self.nb_off, self.nb, incumbent,
            max(1, KICKS * self.kick_gear // 4), block, seed,
        )  # fmt: skip
        after = float(total_cost(m, incumbent))
        if math.isinf(cost) and math.isinf(after):  # still infeasible: fewer broken zeros?
            soft_gain = float(total_cost(self.soft, incumbent)) < float(
                total_cost(self.soft, before)
            )
            self.kick_gear = _shift(self.kick_gear, soft_gain)
            return False
        better = after < cost
        self.kick_gear = _shift(self.kick_gear, better)
        if not better:
            incumbent[:] = before  # rounding alone called it better
        return better

    def _next_round(self, closed: set[int]) -> None:
        if not self.round_improved:
            self.cap = FIRST_CAP if self.cap >= self.largest else self.cap * 2
        self.round_improved = False
        nodes = [
            v
            for v, t in self.subtree.items()
            if t.shape[0] <= self.cap and self.root_of[v] not in closed
        ]
        self.queue = [int(v) for v in self.rng.permutation(np.array(nodes, dtype=np.int64))]

    def run(
        self, incumbent: np.ndarray, expansions: int, deadline: float | None, closed: set[int]
    ) -> bool:
        """Moves on ``incumbent`` (changed in place) for about ``expansions`` node expansions,
        or until ``deadline``; ``closed``: the roots whose parts are proved. True when it
        improved the incumbent."""
        m, s, c = self.c.model, self.s, self.c
        improved = self.perturb(incumbent)
        if not self.subtree:
            return improved
        start = self.expanded
        empty_rounds = 0
        moved = False
        expansions = max(1, expansions * self.move_gear // 4)
        while self.expanded - start < expansions:
            if deadline is not None and time.monotonic() >= deadline:
                break
            if not self.queue:
                self._next_round(closed)
                if not self.queue:
                    empty_rounds += 1
                    if empty_rounds > math.ceil(math.log2(max(2, self.largest))) + 1:
                        break  # every part proved
                    continue
            v = self.queue.pop()
            if self.root_of[v] in closed:
                continue
            nodes = self.subtree[v]
            budget = float(nodes_cost(m, incumbent, nodes))
            s.asg[:] = incumbent
            kernel.start(s, v, budget)
            s.reg[kernel.R_EXPANDED] = 0
            limit = max(MOVE_FLOOR, MOVE_STEPS_PER_NODE * nodes.shape[0])
            done = kernel.search(m, s, v, limit, c.width, EPS_ABS, EPS_REL)
            # a move answered by the cache expands nothing: it counts as its round trip
            self.expanded += max(MOVE_MIN_EXPANSIONS, int(s.reg[kernel.R_EXPANDED]))
            self.moves += 1
            if not done or s.reg[kernel.R_EXACT] != 1 or not s.fre[0] < budget:
                continue
            if not complete(c, s, nodes, deadline, COMPLETE_FACTOR * limit):
                continue  # its completion gave up: the move is dropped
            before = incumbent.copy()
            incumbent[nodes] = s.asg[nodes]
            if nodes_cost(m, incumbent, nodes) < budget:
                improved = moved = self.round_improved = True
                self.improvements += 1
            else:  # rounding: keep what was there
                incumbent[:] = before
        self.move_gear = _shift(self.move_gear, moved)
        if improved:
            polished = local_search(
                m, self.inc_off, self.inc_fun, incumbent, POLISH_SWEEPS, self.seed + self.moves
            )
            if float(nodes_cost(m, polished, _all(c))) < float(nodes_cost(m, incumbent, _all(c))):
                incumbent[:] = polished
        return improved


def _shift(gear: int, paid: bool) -> int:
    return min(GEAR_MAX, gear * 2) if paid else max(1, gear // 2)


def _all(c: Compiled) -> np.ndarray:
    return np.arange(c.model.dom.shape[0], dtype=np.int32)


def complete(
    c: Compiled,
    s: kernel.State,
    nodes: np.ndarray,
    deadline: float | None = None,
    max_expanded: int | None = None,
) -> bool:
    """Write into ``s.asg`` the best values of a subtree whose optimum ``s`` just proved
    (``nodes``: its preorder, its top's value already in ``s.asg``): from exact cache entries
    and the leaves' labels, solving again each uncached inner node on the way. False where it
    gave up at ``deadline`` or past ``max_expanded`` expansions (``s.asg`` then holds a partial
    completion, which the caller drops): an uncached node solved again from scratch can take
    far longer than the walk that proved the subtree (40 s on a diagnosis network)."""
    m = c.model
    at = 1
    spent = 0
    while 0 <= at < nodes.shape[0]:
        missing = kernel.solution_of(m, s, nodes, at, c.width)
        if missing < 0:
            break
        v = int(nodes[missing])  # an uncached inner node: solve it again in this context
        kernel.start(s, v, math.inf)
        while True:
            before = int(s.reg[kernel.R_EXPANDED])
            done = kernel.search(m, s, v, COMPLETE_SLICE, c.width, EPS_ABS, EPS_REL)
            spent += int(s.reg[kernel.R_EXPANDED]) - before
            if done:
                break
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if max_expanded is not None and spent >= max_expanded:
                return False
        at = missing + 1
    return True
