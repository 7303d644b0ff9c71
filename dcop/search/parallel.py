"""The walk of one connected part on several CPU threads: the top of its pseudo-tree split.

The compiled walk (:func:`dcop.search.kernel.search`) releases the GIL (numba's ``nogil``), so
Python threads that each run slices of it run in parallel. A part whose pseudo-tree starts with
a *chain* (nodes with one child each: the dense random networks' trees are chains for their
first 6-13 nodes) is split on the values of the chain's first nodes: each combination of values
(a *prefix*) leaves one subproblem, the OR node below it in the context the prefix gives, and
the part's optimum is the least over the prefixes of their labels (``g``) plus the subproblem's
optimum. The most promising subproblem (least ``g`` + heuristic) is split on its top's values
again and again until there are SPLIT_PER_THREAD per thread, those whose bound reaches the
incumbent dropped; they are handed out best first. The best region is thus cut the finest:
the threads walk it in small pieces, whose solutions tighten everyone's budget early (a thread
walks under the incumbent it has; a single walk would have found a better one by then).

Each thread walks one subproblem at a time with its own :class:`~dcop.search.kernel.State` (its
frames and its own context cache: entries are written as two words, which another thread could
read half written), with the budget the shared incumbent leaves it (its cost on the part less
the prefix's ``g``). A subproblem proved below its budget becomes the incumbent on the part
(under the lock); every thread lowers its own budget to a better incumbent at its next slice
(:func:`dcop.search.kernel.tighten`). The part's lower bound is the least over the
subproblems of each one's proved bound (``g`` + heuristic before it starts, the paused walk's
bound while it runs, its answer once done) and the incumbent: it is valid at every moment.

With one thread, or a part whose top is not a chain, :mod:`dcop.search.solver` walks as it
always did. With several, the optimum is the same but the expansions, the trace and, between
assignments of equal cost, the one returned may differ from run to run.
"""

from __future__ import annotations

import enum
import heapq
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dcop.search import kernel
from dcop.search.compile import Compiled
from dcop.search.improve import complete
from dcop.search.local import nodes_cost

#: Subproblems per thread the split aims at: a thread that ends its subproblem takes the next
#: one, so that a few hard subproblems do not leave the others idle (at 16 a thread, random
#: n = 22 s1 left whole subtrees of the root's second value, a third of the work each, to the
#: end; each subproblem costs a kernel call's round trip, tens of microseconds).
SPLIT_PER_THREAD = 64
#: The subproblems (best first) whose greedy completions are offered as an incumbent.
GUESSES = 64
#: The split stops here whatever the count (each subproblem is a Python round trip).
SPLIT_MAX = 4096
#: Expansions of a part's walk on one thread before it is split (those are lost, but for its
#: cache): the easy parts (small files) are proved on one thread, as without threads; a ladder's
#: lower rung (2e5 expansions on the random networks) goes parallel early.
PARALLEL_AFTER = 20_000
#: Seconds between two looks of the coordinating thread at the clock and the bounds, and the
#: slice of each thread's walk (its expansions adapt to it).
SLICE_S = 0.05


class Stop(enum.Enum):
    """Why a parallel walk stopped before its part was proved."""

    DEADLINE = "deadline"
    NODES = "nodes"
    INTERRUPTED = "interrupted"


@dataclass(eq=False)
class Sub:
    """One subproblem: the values of the part's first ``len(prefix)`` nodes in preorder (a
    chain: each has one child), their labels' sum ``g``, ``g`` plus the heuristic of the node
    below them, its top (``f``), its proved lower bound of ``g`` + its optimum (``lower``), and
    whether it is done."""

    prefix: np.ndarray
    g: float
    f: float
    lower: float
    done: bool = False


@dataclass(frozen=True)
class Split:
    """The subproblems best first, the lowest ``g`` + heuristic of those dropped (inf: none),
    and the best of the subproblems' greedy completions (:func:`dcop.search.kernel.descend`):
    the part's values in its preorder, and their cost."""

    subs: list[Sub]
    dropped: float
    guess: np.ndarray
    guess_cost: float


def split(
    c: Compiled, s: kernel.State, root: int, budget: float, want: int, eps_abs: float,
    eps_rel: float,
) -> Split | None:  # fmt: skip
    """The subproblems of the part of ``root`` (``s`` is used to price nodes): the most promising
    one (least ``g`` + heuristic) split on its top's values, again and again, until there are
    ``want`` or none can be split (its top is not a chain node: a leaf, several children, or a
    subtree the pass solved exactly), those whose bound reaches ``budget`` (the incumbent's cost
    on the part) dropped. The most promising subproblems are thus the smallest: the incumbent
    they hold comes soon. None where the part's root is not a chain node, or a single
    subproblem is left."""
    m = c.model
    nodes = c.preorder[root]

    def chain_node(v: int) -> bool:
        return m.ch_off[v + 1] - m.ch_off[v] == 1 and not (m.exact.shape[0] > 0 and m.exact[v] == 1)

    if not chain_node(root):
        return None
    margin = budget + eps_abs + eps_rel * abs(budget)
    dropped = math.inf
    # (f, order made, prefix, g): a heap of those still to split, and those that cannot be
    made = 0
    heap: list[tuple[float, int, tuple[int, ...], float]] = [(c.root_h[root], 0, (), 0.0)]
    final: list[tuple[float, int, tuple[int, ...], float]] = []
    while heap and len(heap) + len(final) < want:
        f0, k0, prefix, g = heapq.heappop(heap)
        depth = len(prefix)
        v = int(nodes[depth])
        if not chain_node(v) or len(heap) + len(final) + int(m.dom[v]) > SPLIT_MAX:
            final.append((f0, k0, prefix, g))
            continue
        s.asg[nodes[:depth]] = prefix
        kernel.price(m, s, v, c.width)
        b = v * c.width
        for x in range(int(m.dom[v])):
            f = g + float(s.fval[b + x])
            if f >= margin:
                dropped = min(dropped, f)
                continue
            made += 1
            heapq.heappush(heap, (f, made, (*prefix, x), g + float(s.lab[b + x])))
    level = sorted(final + heap)  # best first; ties in the order made
    if len(level) == 1 and not level[0][2]:
        return None  # nothing split
    subs = [Sub(np.array(p, dtype=np.int32), g, f, f) for f, _, p, g in level]
    guess, guess_cost = nodes[:0].copy(), math.inf
    for sub in subs[:GUESSES]:  # each one's greedy completion: the best is an incumbent now
        depth = sub.prefix.shape[0]
        s.asg[nodes[:depth]] = sub.prefix
        kernel.descend(m, s, nodes, depth, c.width)
        cost = float(nodes_cost(m, s.asg, nodes))
        if cost < guess_cost:
            guess, guess_cost = s.asg[nodes].copy(), cost
    return Split(subs, dropped, guess, guess_cost)


class ParallelPart:
    """The walk of one part on ``len(states)`` threads (``states[0]`` is the calling walk's:
    its cache is the one its moves share, :class:`dcop.search.improve.Improver`). The part's
    values in ``incumbent`` change under ``lock`` only."""

    def __init__(
        self,
        c: Compiled,
        root: int,
        plan: Split,
        states: list[kernel.State],
        incumbent: np.ndarray,
        eps_abs: float,
        eps_rel: float,
    ) -> None:
        self.c = c
        self.root = root
        self.plan = plan
        self.states = states
        self.incumbent = incumbent
        self.eps_abs, self.eps_rel = eps_abs, eps_rel
        self.lock = threading.Lock()
        self.nodes = c.preorder[root]
        self.upper = float(nodes_cost(c.model, incumbent, self.nodes))
        self.next = 0  # the next subproblem to hand out
        self.stop: Stop | None = None
        self.interrupt = ""
        self.failure: BaseException | None = None
        self.changed = False  # the incumbent changed since the coordinator last looked

    def lower(self) -> float:
        """A lower bound of the part's optimum, now."""
        least = min((sub.lower for sub in self.plan.subs), default=math.inf)
        return min(self.upper, least, self.plan.dropped)

    def expanded(self) -> int:
        """The expansions of every thread's state (the walk's included)."""
        return sum(int(st.reg[kernel.R_EXPANDED]) for st in self.states)

    def snapshot(self) -> np.ndarray:
        """A copy of the incumbent, consistent (taken under the lock)."""
        with self.lock:
            return self.incumbent.copy()

    def offer(
        self, candidate: np.ndarray, parts: dict[int, np.ndarray], root_of: np.ndarray
    ) -> bool:
        """Take ``candidate``'s values on each of ``parts`` (the preorders of the parts not
        proved, by root; ``root_of``: each node's root) where they cost less than the
        incumbent's; True when one did. Only the parts where the two differ are priced (a
        problem may have thousands of parts)."""
        m = self.c.model
        took = False
        with self.lock:
            moved = np.flatnonzero(candidate != self.incumbent)
            if moved.shape[0] == 0:
                return False
            roots = {int(r) for r in root_of[moved]}
            for r in sorted(roots):
                nodes = parts.get(r)
                if nodes is None:
                    continue
                cost = float(nodes_cost(m, candidate, nodes))
                if cost < float(nodes_cost(m, self.incumbent, nodes)):
                    self.incumbent[nodes] = candidate[nodes]
                    took = True
            self.upper = float(nodes_cost(m, self.incumbent, self.nodes))
            self.changed = self.changed or took
        return took

    def run(
        self,
        deadline: float | None,
        max_expanded: int | None,
        report: Callable[[], None],
        between: Callable[[int, kernel.State], None] | None = None,
    ) -> Stop | None:
        """Walk the subproblems on the threads until all are done (None: the part's optimum is
        the incumbent's cost on it), or the deadline, ``max_expanded`` expansions in all, or an
        interrupt. ``report`` is called from this thread every SLICE_S; ``between(k, state)``
        by each thread ``k`` between two of its slices (the moves on the incumbent)."""
        workers = [
            threading.Thread(target=self._work, args=(k, deadline, max_expanded, between),
                             name=f"dcop-search-{k}", daemon=True)
            for k in range(len(self.states))
        ]  # fmt: skip
        try:
            for w in workers:
                w.start()
            while alive := [w for w in workers if w.is_alive()]:
                alive[0].join(SLICE_S)  # a thread that ended returns at once: one still running
                if self.stop is None and deadline is not None and time.monotonic() >= deadline:
                    self.stop = Stop.DEADLINE
                report()
        except KeyboardInterrupt as exc:  # only this thread hears it: the others stop
            self.interrupt = str(exc)
            self.stop = Stop.INTERRUPTED
        finally:
            if self.stop is None and any(w.is_alive() for w in workers):
                self.stop = Stop.INTERRUPTED  # an exception here: every thread stops
            for w in workers:
                if w.is_alive():
                    w.join()
        if self.failure is not None:
            raise self.failure
        return self.stop

    def _take(self) -> Sub | None:
        """The next subproblem worth walking (those the incumbent prunes are done on the way),
        or None."""
        with self.lock:
            while self.next < len(self.plan.subs):
                sub = self.plan.subs[self.next]
                self.next += 1
                if sub.f >= self.upper + self.eps_abs + self.eps_rel * abs(self.upper):
                    sub.done = True  # its bound, f, stays its lower bound
                    continue
                return sub
        return None

    def _work(
        self,
        k: int,
        deadline: float | None,
        max_expanded: int | None,
        between: Callable[[int, kernel.State], None] | None,
    ) -> None:
        try:
            self._walk(k, deadline, max_expanded, between)
        except BaseException as exc:  # a bug: the coordinator raises it after the join
            self.failure = exc
            self.stop = Stop.INTERRUPTED

    def _walk(
        self,
        k: int,
        deadline: float | None,
        max_expanded: int | None,
        between: Callable[[int, kernel.State], None] | None,
    ) -> None:
        m, c, st = self.c.model, self.c, self.states[k]
        threads = len(self.states)
        steps = 2000
        while self.stop is None:
            sub = self._take()
            if sub is None:
                return
            depth = sub.prefix.shape[0]
            top = int(self.nodes[depth])  # the chain's nodes come first in preorder
            st.asg[self.nodes[:depth]] = sub.prefix
            seen = self.upper
            kernel.start(st, top, seen - sub.g)
            h_top = sub.f - sub.g
            while True:
                if between is not None:
                    between(k, st)
                if self.stop is not None:
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    self.stop = Stop.DEADLINE
                    return
                if max_expanded is not None:
                    left = max_expanded - self.expanded()
                    if left <= 0:
                        self.stop = Stop.NODES
                        return
                    steps = max(1, min(steps, -(-left // threads)))
                if self.upper < seen:  # a better incumbent: a lower budget
                    seen = self.upper
                    kernel.tighten(m, st, top, seen - sub.g)
                t0 = time.monotonic()
                done = kernel.search(m, st, top, steps, c.width, self.eps_abs, self.eps_rel)
                spent = time.monotonic() - t0
                if done:
                    break
                steps = int(min(max(steps * SLICE_S / max(spent, 1e-6), 100), 10_000_000))
                bound = kernel.stack_bound(m, st, top, c.width, h_top)
                sub.lower = max(sub.lower, sub.g + min(float(st.budget[top]), bound))
            self._finish(st, sub, deadline)

    def _finish(self, st: kernel.State, sub: Sub, deadline: float | None) -> None:
        """A subproblem's walk returned: its optimum below its budget becomes the incumbent on
        the part; either way its answer is its lower bound."""
        depth = sub.prefix.shape[0]
        top, below = int(self.nodes[depth]), self.nodes[depth:]  # its subtree, in preorder
        value = float(st.fre[0])
        if st.reg[kernel.R_EXACT] != 1 or not value < float(st.budget[top]):
            sub.lower = max(sub.lower, sub.g + value)
            sub.done = True
            return
        st.reg[kernel.R_WORK_LIMIT] = 0  # the completion's solves run to their end
        if not complete(self.c, st, below, deadline):
            sub.lower = max(sub.lower, sub.g + value)  # proved, its assignment not had
            self.stop = Stop.DEADLINE
            return
        m = self.c.model
        with self.lock:
            candidate = self.incumbent[self.nodes].copy()
            self.incumbent[self.nodes[:depth]] = sub.prefix
            self.incumbent[below] = st.asg[below]
            cost = float(nodes_cost(m, self.incumbent, self.nodes))
            if cost < self.upper:
                self.upper = cost
                self.changed = True
            else:  # rounding called it better: the incumbent stays
                self.incumbent[self.nodes] = candidate
            sub.lower = max(sub.lower, sub.g + value)
            sub.done = True
