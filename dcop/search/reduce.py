"""An exact reduction of a problem before the search: hard-zero pruning and the elimination of
variables of small degree, with what is needed to give the eliminated variables their values.

Three steps, repeated to a fixpoint (toulbar2 does the like in its preprocessing: its ``-p``
elimination of small degree and its node and arc consistencies on the infinite costs):

* **Pruning.** A value whose every tuple in some table costs ``+inf`` is in no finite
  assignment: it is removed (its entries set to ``+inf`` in every table of its variable, which
  may remove values of the neighbours in turn: arc consistency on the hard part). A domain left
  empty proves the problem infeasible (:class:`Infeasible`).
* **Fixing.** A variable left with one value is conditioned on it: its tables lose its axis.
* **Elimination.** A variable whose neighbours number at most ``max_degree`` (and whose new
  table stays under ``max_entries``) is summed into one table over its neighbours and minimised
  out (bucket elimination of that variable alone); the table of its best value per tuple of the
  neighbours is kept, and read back, last eliminated first, by :meth:`Reduction.expand`.

The reduced problem holds the remaining variables, each with its remaining values (the labels of
the file's values, in their order), its tables merged per scope, and the eliminated costs in its
constant: its optimum equals the original's, and :meth:`Reduction.expand` maps any of its
assignments to a full one of the original of the same cost. On the Promedas diagnosis networks
(noisy-OR with evidence) most variables go: many are fixed by the hard zeros, and chains of
degree two or three fold away.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dcop.model import CostTable, Problem, Variable

#: Eliminate a variable with at most this many neighbours.
MAX_DEGREE = 3
#: ... and only where its new table has at most this many entries.
MAX_ENTRIES = 1 << 12
#: No reduction where a table of the problem has more entries than this (its dense copy).
MAX_TABLE_ENTRIES = 1 << 16


class Infeasible(Exception):
    """Pruning emptied a domain: no assignment has a finite cost."""


@dataclass(frozen=True)
class Eliminated:
    """A variable minimised out: its neighbours then (variable indices) and its best value
    (an original value index) per tuple of theirs (original value indices)."""

    var: int
    scope: tuple[int, ...]
    best: np.ndarray


@dataclass
class Reduction:
    """The reduced problem and what maps its assignments back to the original's."""

    original: Problem
    problem: Problem
    #: per kept variable (by name): its original value index per reduced index
    values: dict[str, np.ndarray]
    #: variables fixed by pruning: their original value index
    fixed: dict[str, int]
    #: in elimination order
    eliminated: list[Eliminated] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    @property
    def removed(self) -> int:
        return self.original.n - self.problem.n

    def expand(self, assignment: Mapping[str, int]) -> dict[str, int]:
        """A full assignment of the original (value indices) from one of the reduced problem."""
        index = {v: i for i, v in enumerate(self.names)}
        full = np.full(len(self.names), -1, dtype=np.int64)
        for name, value in assignment.items():
            full[index[name]] = int(self.values[name][int(value)])
        for name, value in self.fixed.items():
            full[index[name]] = value
        for step in reversed(self.eliminated):
            at = tuple(int(full[u]) for u in step.scope)
            full[step.var] = int(step.best[at])
        return {v: int(full[i]) for i, v in enumerate(self.names)}

    def restrict(self, assignment: Mapping[str, int]) -> dict[str, int] | None:
        """The reduced problem's assignment of an original one (None where it uses a pruned
        value: its cost is infinite)."""
        out = {}
        for name, values in self.values.items():
            hit = np.flatnonzero(values == int(assignment[name]))
            if not len(hit):
                return None
            out[name] = int(hit[0])
        return out


class _Work:
    """The tables in the original domains (dense, one axis per scope variable), by id."""

    def __init__(self, problem: Problem) -> None:
        self.names = list(problem.variables)
        index = {v: i for i, v in enumerate(self.names)}
        self.sizes = [problem.variables[v].size for v in self.names]
        self.alive = [np.ones(s, dtype=bool) for s in self.sizes]
        self.gone = [False] * len(self.names)  # fixed or eliminated
        self.tables: dict[int, tuple[tuple[int, ...], np.ndarray]] = {}
        self.of: list[set[int]] = [set() for _ in self.names]
        self.constant = float(problem.constant)
        self.next_id = 0
        self.fixed: dict[int, int] = {}
        self.eliminated: list[Eliminated] = []
        for table in problem.tables:
            self.add(tuple(index[v] for v in table.scope), np.array(table.costs, dtype=np.float64))

    def add(self, scope: tuple[int, ...], costs: np.ndarray) -> None:
        if not scope:
            self.constant += float(costs)
            return
        t = self.next_id
        self.next_id += 1
        self.tables[t] = (scope, costs)
        for v in scope:
            self.of[v].add(t)

    def drop(self, t: int) -> tuple[tuple[int, ...], np.ndarray]:
        scope, costs = self.tables.pop(t)
        for v in scope:
            self.of[v].discard(t)
        return scope, costs

    def neighbours(self, v: int) -> set[int]:
        out: set[int] = set()
        for t in self.of[v]:
            out.update(self.tables[t][0])
        out.discard(v)
        return out

    # ---- pruning ---------------------------------------------------------------------------
    def prune(self, queue: set[int]) -> set[int]:
        """Arc consistency on the infinite costs from the tables of ``queue`` to a fixpoint; the
        variables whose domains shrank."""
        shrunk: set[int] = set()
        while queue:
            t = queue.pop()
            if t not in self.tables:
                continue
            scope, costs = self.tables[t]
            finite = np.isfinite(costs)
            for axis, v in enumerate(scope):
                others = tuple(a for a in range(len(scope)) if a != axis)
                supported = finite.any(axis=others) if others else finite
                keep = self.alive[v] & supported
                if keep.sum() == self.alive[v].sum():
                    continue
                if not keep.any():
                    raise Infeasible
                self.alive[v] = keep
                shrunk.add(v)
                dead = np.flatnonzero(~keep)
                for u in self.of[v]:
                    uscope, ucosts = self.tables[u]
                    ucosts = np.moveaxis(ucosts.copy(), uscope.index(v), 0)
                    ucosts[dead] = math.inf
                    ucosts = np.moveaxis(ucosts, 0, uscope.index(v))
                    self.tables[u] = (uscope, ucosts)
                    queue.add(u)
                finite = np.isfinite(self.tables[t][1])
        return shrunk

    def fix(self, v: int) -> list[int]:
        """Condition on the one value left to ``v``; the ids of the tables made."""
        value = int(np.flatnonzero(self.alive[v])[0])
        self.fixed[v] = value
        self.gone[v] = True
        made = []
        for t in list(self.of[v]):
            scope, costs = self.drop(t)
            select = tuple(value if u == v else slice(None) for u in scope)
            rest = tuple(u for u in scope if u != v)
            before = self.next_id
            self.add(rest, np.array(costs[select]))
            if self.next_id > before:
                made.append(before)
        return made

    def eliminate(self, v: int, scope: tuple[int, ...]) -> list[int]:
        """Minimise ``v`` out into one table over ``scope`` (its neighbours)."""
        full = (v, *scope)
        shape = tuple(self.sizes[u] for u in full)
        joined = np.zeros(shape)
        for t in list(self.of[v]):
            tscope, costs = self.drop(t)
            order = sorted(range(len(tscope)), key=lambda a: full.index(tscope[a]))
            placed = np.transpose(costs, order)
            view = tuple(self.sizes[u] if u in tscope else 1 for u in full)
            joined = joined + placed.reshape(view)
        joined[~self.alive[v]] = math.inf
        best = np.argmin(joined, axis=0)
        self.eliminated.append(Eliminated(v, scope, best))
        self.gone[v] = True
        before = self.next_id
        self.add(scope, joined.min(axis=0))
        return [before] if self.next_id > before else []


def reduce(
    problem: Problem, max_degree: int | None = None, max_entries: int = MAX_ENTRIES
) -> Reduction | None:
    """The reduced problem (see the module docstring), or None where nothing is removed or a
    table is too large to copy (MAX_TABLE_ENTRIES); ``max_degree`` defaults to MAX_DEGREE. Raises :class:`Infeasible` where pruning
    empties a domain."""
    if any(t.entries > MAX_TABLE_ENTRIES for t in problem.tables):
        return None
    if max_degree is None:
        max_degree = MAX_DEGREE
    work = _Work(problem)
    queue = set(work.tables)
    while True:
        work.prune(queue)
        queue = set()
        for v in range(len(work.names)):  # evidence: one value from the start
            if not work.gone[v] and work.alive[v].sum() == 1:
                queue.update(work.fix(v))
        if queue:
            continue
        # the variables of fewest neighbours first; a table made may unlock more pruning
        for v in sorted(
            (u for u in range(len(work.names)) if not work.gone[u]),
            key=lambda u: len(work.neighbours(u)),
        ):
            if work.gone[v]:
                continue
            around = work.neighbours(v)
            entries = math.prod(work.sizes[u] for u in around)
            if len(around) > max_degree or entries > max_entries:
                continue
            queue.update(work.eliminate(v, tuple(sorted(around))))
        if not queue:
            break
    if not any(work.gone):
        return None
    return _reduced(problem, work)


def _reduced(problem: Problem, work: _Work) -> Reduction:
    names = work.names
    keep = [v for v in range(len(names)) if not work.gone[v]]
    values = {names[v]: np.flatnonzero(work.alive[v]) for v in keep}
    variables = {
        names[v]: Variable(
            names[v],
            tuple(problem.variables[names[v]].values[i] for i in values[names[v]]),
            problem.variables[names[v]].agent,
        )
        for v in keep
    }
    merged: dict[tuple[int, ...], np.ndarray] = {}
    for scope, costs in work.tables.values():
        key = tuple(sorted(scope))
        placed = np.transpose(costs, [scope.index(u) for u in key])
        merged[key] = merged[key] + placed if key in merged else placed
    tables = []
    for key, costs in merged.items():
        sliced = costs[np.ix_(*(work.alive[u] for u in key))]
        tables.append(CostTable(tuple(names[u] for u in key), np.ascontiguousarray(sliced)))
    reduced = dataclasses.replace(
        problem, variables=variables, tables=tables, constant=work.constant, meta=dict(problem.meta)
    )
    return Reduction(
        original=problem,
        problem=reduced,
        values=values,
        fixed={names[v]: x for v, x in work.fixed.items()},
        eliminated=work.eliminated,
        names=names,
    )


#: The search reduces a problem of at least this many variables (a smaller one's search is
#: quick as it is, and its documents keep their variables' own counts)...
MIN_VARIABLES = 1000
#: ... where the reduction removes at least this share of them.
MIN_SHARE = 0.1


def for_search(problem: Problem) -> Reduction | None:
    """The reduction the search runs on (see MIN_VARIABLES, MIN_SHARE), or None: too small, too
    little removed, or infeasible (the search on the original proves it)."""
    if problem.n < MIN_VARIABLES:
        return None
    # a quick look first (the reduction of an 80x80 grid costs most of a second): without hard
    # zeros, what goes is at most the variables of one value or few neighbours, and what their
    # elimination brings down to few
    if not any(np.isinf(t.cost_values()).any() for t in problem.tables):
        adjacency = problem.neighbours()
        few = sum(
            1
            for v, around in adjacency.items()
            if problem.variables[v].size == 1 or len(around) <= MAX_DEGREE
        )
        if few < MIN_SHARE * problem.n:
            return None
    try:
        reduction = reduce(problem)
    except Infeasible:
        return None
    if reduction is None or reduction.problem.n == 0 or reduction.removed < MIN_SHARE * problem.n:
        return None
    return reduction
