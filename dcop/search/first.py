"""A first answer before any planning: conditional modes and iterated local search on the
problem's own tables.

An anytime run (``--timeout``) has an answer from here on, whatever the later phases (the order,
the i-bound's planning, the mini-bucket pass, the search's arrays) cost: on a 6400-variable grid
on a loaded machine they can take the whole limit. It costs a flat copy of the tables (no order,
no induced scopes) and the search's compiled local search (:mod:`dcop.search.local`): a start
where each variable takes its best value by its unary tables, ICM sweeps, then rounds of kicks
(a ball of neighbouring variables set at random, repaired, kept when no worse), counted in kicks
so that the same input and seed give the same answer; a deadline only ends the rounds early.
Where the search's set-up would not leave it the time, the run's rounds go on to the deadline
(:func:`dcop.search.solver.setup_fits`).
The lower bound beside it is the sum of every table's least cost: proved, and free.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from dcop.model import Problem
from dcop.search.kernel import Model, own_strides
from dcop.search.local import (
    incidence,
    local_search,
    neighbours,
    penalised,
    perturb_search,
    total_cost,
)

#: ICM sweeps (with restarts) from the greedy start.
FIRST_SWEEPS = 30
#: Rounds of kicks, KICKS_PER_NODE kicks per variable each, their ball sizes in turn. On the
#: 80x80 grids with evidence, 6 rounds (about a second) beat toulbar2's 15 s answer.
KICKS_PER_NODE = 1.0
BLOCKS = (8, 16, 32)
#: The first answer's rounds (one costs a tenth of a second on an 80x80 grid): more where the
#: caller gives the local search the time (:meth:`LocalSearch.rounds`).
FIRST_ROUNDS = 1
#: A round runs in this many pieces, the deadline looked at between them (a round of an 80x80
#: grid takes a second on a loaded machine).
PIECES = 8
#: The most table entries the flat copy takes (float64: 512 MiB).
MAX_ENTRIES = 1 << 26
#: Share of the run's memory limit the flat copies may take.
MEMORY_SHARE = 0.25
#: Rounds run whatever the deadline says (one costs a tenth of a second on an 80x80 grid):
#: the first answer of a loaded machine is worth them.
MIN_ROUNDS = 1


@dataclass(frozen=True)
class FirstAnswer:
    """An assignment (value indices, keyed by variable), its internal cost, a proved lower bound
    (the sum of every table's least cost), the rounds of kicks run, and the local search that
    found it (:class:`LocalSearch`: more rounds go on from it)."""

    assignment: dict[str, int]
    cost: float
    lower: float
    rounds: int
    search: LocalSearch


def problem_model(problem: Problem, names: Sequence[str]) -> Model:
    """The problem's tables of one or more variables as a search :class:`Model` over nodes
    ``names`` (labels only: no pseudo-tree, no heuristic; the constant is left out)."""
    node = {v: i for i, v in enumerate(names)}
    n = len(names)
    dom = np.array([problem.variables[v].size for v in names], dtype=np.int32)
    kept = [t for t in problem.tables if t.scope]
    sizes = [int(t.entries) for t in kept]
    f_off = np.zeros(len(kept), dtype=np.int64)
    if kept:
        f_off[1:] = np.cumsum(sizes[:-1])
    tables = np.empty(max(1, sum(sizes)))
    f_sc = np.zeros(len(kept) + 1, dtype=np.int32)
    sc_var: list[int] = []
    sc_stride: list[int] = []
    for k, t in enumerate(kept):
        at = int(f_off[k])
        tables[at : at + sizes[k]] = t.dense(np.float64).reshape(-1)
        stride = 1
        strides = []
        for size in reversed(t.shape):
            strides.append(stride)
            stride *= int(size)
        sc_var.extend(node[u] for u in t.scope)
        sc_stride.extend(reversed(strides))
        f_sc[k + 1] = len(sc_var)
    funs = np.arange(len(kept), dtype=np.int32)
    empty32 = np.zeros(0, dtype=np.int32)
    zeros = np.zeros(n + 1, dtype=np.int32)
    lab_off = np.array([0] * n + [len(kept)], dtype=np.int32)  # every table at the last node
    sc_var_a = np.array(sc_var, dtype=np.int32)
    sc_stride_a = np.array(sc_stride, dtype=np.int64)
    model = Model(
        dom=dom,
        parent=np.full(n, -1, dtype=np.int32),
        ch_off=zeros,
        ch_list=empty32,
        lab_off=lab_off,
        lab_fun=funs,
        lab_sv=own_strides(lab_off, funs, np.arange(n), f_sc, sc_var_a, sc_stride_a),
        cr_off=zeros,
        cr_fun=empty32,
        cr_sv=np.zeros(0, dtype=np.int64),
        f_off=f_off,
        f_sc=f_sc,
        sc_var=sc_var_a,
        sc_stride=sc_stride_a,
        tables=tables,
        ctx_off=zeros,
        ctx_var=empty32,
        ctx_mul=np.zeros(0, dtype=np.int64),
        ca_off=np.full(n, -1, dtype=np.int64),
    )
    return model


def least_cost(problem: Problem) -> float:
    """A proved lower bound: the constant plus every table's least cost."""
    total = float(problem.constant)
    for t in problem.tables:
        sparse = t.sparse_form()
        if sparse is not None:  # no dense copy of a large sparse table
            default, _, values = sparse
            total += min([float(default), *([float(values.min())] if values.size else [])])
        else:
            total += float(np.min(t.costs))
    return total


def greedy_start(problem: Problem, names: Sequence[str]) -> np.ndarray:
    """Each variable's best value by its unary tables alone (0 where it has none)."""
    node = {v: i for i, v in enumerate(names)}
    unary = [np.zeros(problem.variables[v].size) for v in names]
    for t in problem.tables:
        if len(t.scope) == 1:
            unary[node[t.scope[0]]] += t.costs
    return np.array([int(np.argmin(u)) for u in unary], dtype=np.int32)


class LocalSearch:
    """ICM and rounds of kicks on ``problem``'s own tables, from the greedy start. ``build_s``:
    the seconds its flat copy of the tables took (pure Python and NumPy, no compiled code: a
    measure of the machine's speed now, load included, on this problem's size)."""

    def __init__(self, problem: Problem, seed: int = 0) -> None:
        t0 = time.monotonic()
        self.problem = problem
        self.names = list(problem.variables)
        self.model = problem_model(problem, self.names)
        self.inc_off, self.inc_fun = incidence(self.model)
        self.nb_off, self.nb = neighbours(self.model, self.inc_off, self.inc_fun)
        self.build_s = time.monotonic() - t0
        self.seed = seed
        self.soft: Model | None = None  # the penalised tables, made for the first round
        self.done = 0
        self.lower = least_cost(problem)
        start = greedy_start(problem, self.names)
        self.asg = local_search(self.model, self.inc_off, self.inc_fun, start, FIRST_SWEEPS, seed)

    def rounds(
        self,
        most: int,
        deadline: float | None,
        report: Callable[[float], None] | None = None,
    ) -> int:
        """Up to ``most`` rounds of kicks, until ``deadline`` (looked at between pieces of a
        round); the rounds run. ``report`` hears of each better cost (internal, the problem's
        constant left out)."""
        if len(self.names) < 2:
            return 0
        m, asg = self.model, self.asg
        if self.soft is None:
            self.soft = penalised(m)
        kicks = max(1, int(KICKS_PER_NODE * len(self.names)))
        ran = 0
        while ran < most:
            if deadline is not None and time.monotonic() >= deadline:
                break
            k = self.done
            before = asg.copy()
            cost = float(total_cost(m, asg))
            for j in range(PIECES):  # the deadline is looked at between pieces of a round
                if j and deadline is not None and time.monotonic() >= deadline:
                    break
                perturb_search(
                    self.soft, self.inc_off, self.inc_fun, self.nb_off, self.nb, asg,
                    max(1, kicks // PIECES), BLOCKS[k % len(BLOCKS)], (self.seed * 31 + k) * 8 + j,
                )  # fmt: skip
            self.done += 1
            ran += 1
            after = float(total_cost(m, asg))
            if not after <= cost and not math.isinf(cost):
                asg[:] = before  # rounding alone called it better
                after = cost
            if after < cost and report is not None:
                report(after)
        return ran

    def answer(self) -> FirstAnswer:
        """The assignment now, its cost on the problem, and the bound."""
        assignment = {v: int(self.asg[i]) for i, v in enumerate(self.names)}
        cost = self.problem.evaluate(assignment)
        return FirstAnswer(assignment, cost, min(self.lower, cost), self.done, self)


def first_answer(
    problem: Problem,
    seed: int = 0,
    rounds: int = FIRST_ROUNDS,
    max_bytes: float = math.inf,
) -> FirstAnswer | None:
    """A quick assignment of ``problem`` (see the module docstring): ICM sweeps from the greedy
    start, then ``rounds`` rounds of kicks (a count: no clock). None where the tables' flat
    copies (two:
    the tables and their penalised twin) would exceed MEMORY_SHARE of ``max_bytes``, or
    MAX_ENTRIES (a large sparse table: the search's memory plan refuses it, or not, later).
    """
    entries = sum(t.entries for t in problem.tables)
    if entries > MAX_ENTRIES or 2 * 8 * entries > MEMORY_SHARE * max_bytes:
        return None
    search = LocalSearch(problem, seed)
    search.rounds(rounds, None)
    return search.answer()
