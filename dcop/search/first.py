"""A first answer before any planning: conditional modes and iterated local search on the
problem's own tables.

An anytime run (``--timeout``) has an answer from here on, whatever the later phases (the order,
the i-bound's planning, the mini-bucket pass, the search's arrays) cost: on a 6400-variable grid
on a loaded machine they can take the whole limit. It costs a flat copy of the tables (no order,
no induced scopes; each table with its widest variable last) and the search's compiled local
search (:mod:`dcop.search.local`): a start where each variable takes its best value by its unary
tables, ICM sweeps, then rounds of kicks (a ball of neighbouring variables set at random,
repaired, kept when no worse), counted in sweeps and kicks so that the same input and seed give
the same answer. A deadline ends any of it early: the copy and the sweeps run in pieces of a
few milliseconds (a 200,000-value variable's six tables hold 12M entries, and pricing it reads
1.2M), the deadline looked at between two, and the answer is the best assignment so far (at
worst the greedy start). Where the search's set-up would not leave it the time, the run's rounds
go on to the deadline (:func:`dcop.search.solver.setup_fits`).
The lower bound beside it is the sum of every table's least cost: proved, and read from the
copy's pieces as they pass.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from dcop.model import CostTable, Problem
from dcop.search.kernel import Model, own_strides
from dcop.search.local import (
    incidence,
    neighbours,
    penalised_pieces,
    perturb_search,
    sweep_piece,
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
#: Entries of one piece of the flat copy (2 MiB; the deadline is looked at between pieces).
COPY_ENTRIES = 1 << 18
#: Entries of one block of a table's copy (256 KiB: a transposed block stays in the cache).
TRANSPOSE_BLOCK = 1 << 15
#: Table entries one piece of the ICM sweeps reads (about a millisecond; one node at the least).
SWEEP_WORK = 1 << 19
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
    copy = TableCopy(problem, names)
    for _ in copy.pieces():
        pass
    return copy.model


class TableCopy:
    """The flat copy behind :func:`problem_model`, made in pieces of about COPY_ENTRIES entries
    (:meth:`pieces` yields between two: its caller looks at a deadline there), each table's
    least cost and whether it has an infinite cost read from the pieces as they pass."""

    def __init__(self, problem: Problem, names: Sequence[str]) -> None:
        node = {v: i for i, v in enumerate(names)}
        n = len(names)
        self.kept = [t for t in problem.tables if t.scope]
        sizes = [int(t.entries) for t in self.kept]
        self.f_off = np.zeros(len(self.kept), dtype=np.int64)
        if self.kept:
            self.f_off[1:] = np.cumsum(sizes[:-1])
        self.entries = sum(sizes)
        self.tables = np.empty(max(1, self.entries))  # its pages are touched by the pieces
        self.copied = 0  # entries copied so far
        #: each kept table's least cost, None until its pieces have passed
        self.least: list[float | None] = [None] * len(self.kept)
        self.infinite = False  # an infinite cost was seen
        f_sc = np.zeros(len(self.kept) + 1, dtype=np.int32)
        sc_var: list[int] = []
        sc_stride: list[int] = []
        #: each kept table's axes in the copy: its largest domain last, so that the node most
        #: costly to price reads adjacent entries (a 200,000-value node's 1.2M reads a sweep
        #: had touched a cache line each)
        self.axes: list[tuple[int, ...]] = []
        for k, t in enumerate(self.kept):
            widest = int(np.argmax(t.shape))
            axes = (*(a for a in range(t.arity) if a != widest), widest)
            self.axes.append(axes)
            shape = [int(t.shape[a]) for a in axes]
            stride = 1
            strides = []
            for size in reversed(shape):
                strides.append(stride)
                stride *= size
            sc_var.extend(node[t.scope[a]] for a in axes)
            sc_stride.extend(reversed(strides))
            f_sc[k + 1] = len(sc_var)
        self.dom = np.array([problem.variables[v].size for v in names], dtype=np.int32)
        self.f_sc = f_sc
        self.sc_var = np.array(sc_var, dtype=np.int32)
        self.sc_stride = np.array(sc_stride, dtype=np.int64)
        self.n = n

    def pieces(self) -> Iterator[None]:
        """Copy the tables, a yield after each COPY_ENTRIES entries or so (small tables share
        a piece: a yield per table of a 1000-table model cost more than its copy)."""
        since = 0  # entries copied since the last yield
        for k, t in enumerate(self.kept):
            at, size = int(self.f_off[k]), int(t.entries)
            out = self.tables[at : at + size]
            sparse = t.sparse_form()
            axes = self.axes[k]
            if sparse is None:
                if axes == tuple(range(t.arity)):  # the widest axis is last already: as is
                    source, rows = t.costs.reshape(1, -1), out.reshape(1, -1)
                else:  # a view in the copy's axes: no copy but the one into ``out``
                    source = t.costs.transpose(axes)
                    rows = out.reshape(source.shape)
                # blocks of the last axis, about TRANSPOSE_BLOCK entries each (a transposed copy
                # row by row read 12M entries a cache line each: 2 s)
                width = rows.shape[-1]
                step = max(1, TRANSPOSE_BLOCK * width // max(1, size))
                least = math.inf
                for lo in range(0, width, step):
                    hi = min(width, lo + step)
                    piece = rows[..., lo:hi]
                    piece[...] = source[..., lo:hi]
                    least = min(least, float(piece.min()))
                    self.infinite = self.infinite or not math.isfinite(float(piece.max()))
                    self.copied += piece.size
                    since += piece.size
                    if since >= COPY_ENTRIES:
                        since = 0
                        yield
            else:  # the default in pieces, then the listed entries (no dense twin)
                default, index, values = sparse
                for lo in range(0, size, COPY_ENTRIES):
                    hi = min(size, lo + COPY_ENTRIES)
                    out[lo:hi] = default
                    self.copied += hi - lo
                    since += hi - lo
                    if since >= COPY_ENTRIES:
                        since = 0
                        yield
                if values.size:
                    shape = tuple(t.shape[a] for a in axes)
                    out[np.ravel_multi_index(tuple(index[:, list(axes)].T), shape)] = values
                    since += values.size
                least = table_least(t)
                self.infinite = self.infinite or not math.isfinite(float(default))
                self.infinite = self.infinite or not bool(np.isfinite(values).all())
            self.least[k] = least
        yield

    @property
    def done(self) -> bool:
        """Whether every table is copied."""
        return all(x is not None for x in self.least)

    def lower(self) -> float:
        """The kept tables' least costs summed: those not copied yet read from the problem's
        tables (a read, no copy)."""
        return sum(
            x if x is not None else table_least(t)
            for x, t in zip(self.least, self.kept, strict=True)
        )

    @property
    def model(self) -> Model:
        """The copy as a search :class:`Model` (every piece copied)."""
        if not self.done:
            raise RuntimeError("the tables' flat copy is not finished")
        n = self.n
        funs = np.arange(len(self.kept), dtype=np.int32)
        empty32 = np.zeros(0, dtype=np.int32)
        zeros = np.zeros(n + 1, dtype=np.int32)
        lab_off = np.array(
            [0] * n + [len(self.kept)], dtype=np.int32
        )  # every table at the last node
        return Model(
            dom=self.dom,
            parent=np.full(n, -1, dtype=np.int32),
            ch_off=zeros,
            ch_list=empty32,
            lab_off=lab_off,
            lab_fun=funs,
            lab_sv=own_strides(lab_off, funs, np.arange(n), self.f_sc, self.sc_var, self.sc_stride),
            cr_off=zeros,
            cr_fun=empty32,
            cr_sv=np.zeros(0, dtype=np.int64),
            f_off=self.f_off,
            f_sc=self.f_sc,
            sc_var=self.sc_var,
            sc_stride=self.sc_stride,
            tables=self.tables,
            ctx_off=zeros,
            ctx_var=empty32,
            ctx_mul=np.zeros(0, dtype=np.int64),
            ca_off=np.full(n, -1, dtype=np.int64),
        )


def table_least(t: CostTable) -> float:
    """A table's least cost (a sparse one's default counted, as if some entry had it)."""
    sparse = t.sparse_form()
    if sparse is not None:  # no dense copy of a large sparse table
        default, _, values = sparse
        return min([float(default), *([float(values.min())] if values.size else [])])
    return float(np.min(t.costs))


def least_cost(problem: Problem) -> float:
    """A proved lower bound: the constant plus every table's least cost."""
    return float(problem.constant) + sum(table_least(t) for t in problem.tables)


def greedy_start(problem: Problem, names: Sequence[str]) -> np.ndarray:
    """Each variable's best value by its unary tables alone (0 where it has none)."""
    node = {v: i for i, v in enumerate(names)}
    unary = [np.zeros(problem.variables[v].size) for v in names]
    for t in problem.tables:
        if len(t.scope) == 1:
            unary[node[t.scope[0]]] += t.costs
    return np.array([int(np.argmin(u)) for u in unary], dtype=np.int32)


class LocalSearch:
    """ICM and rounds of kicks on ``problem``'s own tables, from the greedy start.

    Its set-up (the tables' flat copy, the ICM sweeps, the penalised tables where a cost is
    infinite) runs in pieces of a few milliseconds until ``deadline``, and goes on from there
    in :meth:`rounds`; until then the answer is the best assignment found so far (at first the
    greedy start), and the bound the tables' least costs. ``build_s``: the seconds its flat
    copy of the tables took, or is predicted to take from the pieces run (pure Python and
    NumPy, no compiled code: a measure of the machine's speed now, load included, on this
    problem's size). ``pieces``: the set-up's pieces run."""

    def __init__(self, problem: Problem, seed: int = 0, deadline: float | None = None) -> None:
        self.problem = problem
        self.names = list(problem.variables)
        self.seed = seed
        self.soft: Model | None = None  # the penalised tables, made in the set-up
        self.done = 0
        self.pieces = 0
        self.complete = False
        self.build_s = 0.0
        #: the problem's cost less the tables': its constant and its tables of no variable
        self.base = float(problem.constant) + sum(
            float(t.costs.reshape(-1)[0]) for t in problem.tables if not t.scope
        )
        self.asg = greedy_start(problem, self.names)
        self._copy = TableCopy(problem, self.names)
        self._model: Model | None = None
        self._incidence: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._setup: Iterator[None] | None = self._set_up()
        self.complete = self.advance(deadline)
        # the bound: every table's least cost (those the copy did not reach read from the
        # problem: a read, no copy)
        self.lower = self.base + self._copy.lower()

    @property
    def copied(self) -> tuple[int, int]:
        """The entries the flat copy holds so far, and the tables' entries."""
        return self._copy.copied, self._copy.entries

    @property
    def model(self) -> Model:
        """The tables as a search model (the set-up's copy finished)."""
        if self._model is None:
            raise RuntimeError("the local search's set-up has not copied the tables yet")
        return self._model

    @property
    def inc_off(self) -> np.ndarray:
        return self._csr()[0]

    @property
    def inc_fun(self) -> np.ndarray:
        return self._csr()[1]

    @property
    def nb_off(self) -> np.ndarray:
        return self._csr()[2]

    @property
    def nb(self) -> np.ndarray:
        return self._csr()[3]

    def _csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._incidence is None:
            raise RuntimeError("the local search's set-up has not made its incidence yet")
        return self._incidence

    def advance(self, deadline: float | None) -> bool:
        """Run the set-up's pieces until ``deadline`` (looked at before each: none past it);
        whether the set-up is complete."""
        if self._setup is None:
            return True
        while deadline is None or time.monotonic() < deadline:
            try:
                next(self._setup)
            except StopIteration:
                self._setup = None
                self.complete = True
                return True
            self.pieces += 1
        return False

    def _set_up(self) -> Iterator[None]:
        """The flat copy, the incidence, the ICM sweeps and the penalised tables, in pieces."""
        copy = self._copy
        spent = 0.0
        t0 = time.monotonic()
        for _ in copy.pieces():
            spent += time.monotonic() - t0
            # as measured so far, scaled to the whole copy (a deadline may end it here)
            self.build_s = spent * max(1, copy.entries) / max(1, copy.copied)
            yield
            t0 = time.monotonic()
        m = copy.model
        inc_off, inc_fun = incidence(m)
        nb_off, nb = neighbours(m, inc_off, inc_fun)
        self.build_s = spent + time.monotonic() - t0
        self._model = m
        self._incidence = (inc_off, inc_fun, nb_off, nb)
        yield
        yield from self._icm(m, inc_off, inc_fun)
        if copy.infinite:
            self.soft = yield from penalised_pieces(m, COPY_ENTRIES)
        else:
            self.soft = m  # no copy where every cost is finite

    def _icm(self, m: Model, inc_off: np.ndarray, inc_fun: np.ndarray) -> Iterator[None]:
        """:func:`dcop.search.local.local_search` from the greedy start in pieces of about
        SWEEP_WORK entries read: FIRST_SWEEPS sweeps, restarts from the best with n/20
        variables set at random once the sweeps stop moving. ``self.asg`` is the best
        assignment at every yield (a sweep's moves only lower its cost)."""
        n = len(self.names)
        if n == 0:
            return
        buf = np.zeros(max(1, int(m.dom.max())))
        best = self.asg  # changed in place: each move lowers its cost
        left = FIRST_SWEEPS
        left -= yield from self._sweeps(m, inc_off, inc_fun, best, buf, left)
        best_cost = float(total_cost(m, best))
        rng = np.random.default_rng(self.seed)
        kick = max(1, n // 20)
        asg = best.copy()
        while left > 0:
            asg[:] = best
            at = rng.integers(0, n, kick)
            asg[at] = (rng.random(kick) * m.dom[at]).astype(np.int32)
            left -= yield from self._sweeps(m, inc_off, inc_fun, asg, buf, left)
            cost = float(total_cost(m, asg))
            if cost < best_cost:
                best_cost = cost
                best[:] = asg

    @staticmethod
    def _sweeps(
        m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, asg: np.ndarray, buf: np.ndarray,
        most: int,
    ) -> Generator[None, None, int]:  # fmt: skip
        """Up to ``most`` ICM sweeps on ``asg`` until one moves nothing, a yield after each
        piece; the sweeps run."""
        n = asg.shape[0]
        done = 0
        while done < most:
            done += 1
            moved = False
            v = 0
            while v < n:
                v, piece_moved = sweep_piece(m, inc_off, inc_fun, asg, buf, v, SWEEP_WORK)
                moved = moved or bool(piece_moved)
                yield
            if not moved:
                break
        return done

    def rounds(
        self,
        most: int,
        deadline: float | None,
        report: Callable[[float], None] | None = None,
    ) -> int:
        """Up to ``most`` rounds of kicks, until ``deadline`` (looked at between pieces of a
        round), once the set-up is complete (its pieces run first, to the same deadline); the
        rounds run. ``report`` hears of each better cost (internal, the problem's constant
        left out)."""
        if len(self.names) < 2 or not self.advance(deadline):
            return 0
        m, asg, soft = self.model, self.asg, self.soft
        assert soft is not None  # made by the set-up
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
                    soft, self.inc_off, self.inc_fun, self.nb_off, self.nb, asg,
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
    deadline: float | None = None,
) -> FirstAnswer | None:
    """A quick assignment of ``problem`` (see the module docstring): ICM sweeps from the greedy
    start, then ``rounds`` rounds of kicks (a count: no clock), all cut short at ``deadline`` (a
    ``time.monotonic`` instant; the set-up looks at it every few milliseconds), where the best
    assignment so far (at worst the greedy start) comes back with its cost and the tables'
    least costs. None where the tables' flat copies (two: the tables and their penalised twin)
    would exceed MEMORY_SHARE of ``max_bytes``, or MAX_ENTRIES (a large sparse table: the
    search's memory plan refuses it, or not, later).
    """
    entries = sum(t.entries for t in problem.tables)
    if entries > MAX_ENTRIES or 2 * 8 * entries > MEMORY_SHARE * max_bytes:
        return None
    search = LocalSearch(problem, seed, deadline)
    search.rounds(rounds, deadline)
    return search.answer()
