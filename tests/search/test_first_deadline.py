"""The first answer under a deadline on large domains (issue 45: "--timeout returns the best
assignment", "never ends without an answer"): its set-up (the tables' flat copy, the ICM sweeps)
runs in pieces and stops at the deadline with the best complete assignment so far, its true
cost and a proved bound. Where the deadline falls is set by a clock that jumps past it after a
counted number of pieces: no timing asserts."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dcop.inference import solve
from dcop.inference.anytime import solve_auto
from dcop.io import write_problem
from dcop.model import CostTable, Problem, Variable
from dcop.search import first
from dcop.search.first import LocalSearch, first_answer, greedy_start, least_cost
from tests.cli.conftest import assert_timeout_answer
from tests.conftest import brute_force


def large_domain(
    d: int, k: int = 3, e: int = 3, chain: int = 0, seed: int = 0, hard: bool = False
) -> Problem:
    """One variable ``x`` of ``d`` values, a unary table on it, ``k`` tables x-y_i (y_i of ``e``
    values; sparse: a default and d listed tuples), and a chain of ``chain`` binary variables
    hung on y_0. ``hard``: some listed tuples cost inf."""
    rng = np.random.default_rng(seed)
    vs = [Variable.with_size("x", d)] + [Variable.with_size(f"y{i}", e) for i in range(k)]
    ts = [CostTable(("x",), rng.integers(0, 50, size=d).astype(float))]
    for i in range(k):
        rows = np.stack([np.arange(d), rng.integers(0, e, size=d)], axis=1)
        values = rng.integers(0, 30, size=d).astype(float)
        if hard:
            values[rng.random(d) < 0.2] = math.inf
        ts.append(CostTable.sparse(("x", f"y{i}"), (d, e), 20.0, rows, values))
    prev, size = "y0", e
    for j in range(chain):
        vs.append(Variable.with_size(f"z{j}", 2))
        ts.append(CostTable((prev, f"z{j}"), rng.integers(0, 9, size=(size, 2)).astype(float)))
        prev, size = f"z{j}", 2
    return Problem.build(vs, ts, name="large_domain")


class JumpingClock:
    """``time.monotonic`` plus an hour once :meth:`jump` is called: a deadline that falls
    after a counted piece of work."""

    def __init__(self) -> None:
        self.offset = 0.0

    def jump(self) -> None:
        self.offset = 3600.0

    def monotonic(self) -> float:
        return time.perf_counter() + self.offset


def jump_after_copy_pieces(monkeypatch: pytest.MonkeyPatch, clock: JumpingClock, k: int) -> None:
    """The clock jumps after the flat copy's ``k``-th piece."""
    real = first.TableCopy.pieces

    def pieces(self: first.TableCopy) -> Iterator[None]:
        for i, _ in enumerate(real(self)):
            if i + 1 == k:
                clock.jump()
            yield

    monkeypatch.setattr(first.TableCopy, "pieces", pieces)


def check_answer(problem: Problem, answer: first.FirstAnswer, optimum: float) -> None:
    """A full, valid assignment, its cost recomputed, and lower <= optimum <= cost."""
    assert set(answer.assignment) == set(problem.variables)
    for v, x in answer.assignment.items():
        assert 0 <= x < problem.variables[v].size
    assert answer.cost == problem.evaluate(answer.assignment)
    assert answer.lower <= optimum <= answer.cost


@pytest.mark.parametrize("hard", [False, True])
def test_a_passed_deadline_returns_the_greedy_start_with_its_cost_and_bound(hard: bool) -> None:
    """No piece of the set-up runs: the answer is each variable's best value by its unary
    tables, the bound every table's least cost."""
    problem = large_domain(300, hard=hard, seed=2)
    answer = first_answer(problem, seed=0, deadline=time.monotonic() - 1.0)
    assert answer is not None
    assert answer.search.pieces == 0 and not answer.search.complete and answer.rounds == 0
    names = list(problem.variables)
    start = greedy_start(problem, names)
    assert answer.assignment == {v: int(start[i]) for i, v in enumerate(names)}
    assert answer.lower == pytest.approx(min(least_cost(problem), answer.cost))
    check_answer(problem, answer, brute_force(problem))
    with pytest.raises(RuntimeError):
        _ = answer.search.model


@pytest.mark.parametrize("k", [1, 3])
def test_a_deadline_inside_the_copy_stops_it_and_the_answer_holds(
    monkeypatch: pytest.MonkeyPatch, k: int
) -> None:
    problem = large_domain(20_000, k=4, seed=1)
    monkeypatch.setattr(first, "COPY_ENTRIES", 4096)  # 60,000 entries: 15 pieces
    clock = JumpingClock()
    monkeypatch.setattr(first, "time", clock)
    jump_after_copy_pieces(monkeypatch, clock, k)
    answer = first_answer(problem, seed=0, deadline=clock.monotonic() + 60.0)
    assert answer is not None
    search = answer.search
    assert search.pieces == k and not search.complete
    copied, entries = search.copied
    assert 0 < copied < entries
    optimum = solve(problem, "be").upper_bound
    check_answer(problem, answer, optimum)
    assert answer.lower == pytest.approx(min(least_cost(problem), answer.cost))
    # the predicted copy's seconds count the whole copy, not the pieces run
    assert search.build_s >= 3600.0


def test_a_deadline_inside_the_sweeps_keeps_the_best_so_far_and_resumes_to_the_same_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ICM stops after a counted piece (one node of x reads 4 x 5,000 entries: one piece
    each with SWEEP_WORK 1); the answer is no worse than the greedy start; more time later
    (``rounds``) finishes the set-up where it stopped: the same answer as a run never cut."""
    problem = large_domain(5_000, k=4, chain=40, seed=3)
    monkeypatch.setattr(first, "SWEEP_WORK", 1)  # one node a piece
    clock = JumpingClock()
    monkeypatch.setattr(first, "time", clock)
    real = first.sweep_piece
    calls = [0]

    def sweep_piece(*args: object) -> tuple[int, bool]:
        calls[0] += 1
        if calls[0] == 20:
            clock.jump()
        return real(*args)  # type: ignore[no-any-return]

    monkeypatch.setattr(first, "sweep_piece", sweep_piece)
    search = LocalSearch(problem, seed=4, deadline=clock.monotonic() + 60.0)
    assert calls[0] == 20 and not search.complete
    names = list(problem.variables)
    start = greedy_start(problem, names)
    greedy = problem.evaluate({v: int(start[i]) for i, v in enumerate(names)})
    cut = search.answer()
    optimum = solve(problem, "be").upper_bound
    check_answer(problem, cut, optimum)
    assert cut.cost <= greedy
    clock.offset = 0.0
    assert search.rounds(1, None) == 1 and search.complete
    whole = LocalSearch(problem, seed=4)
    whole.rounds(1, None)
    assert search.answer().assignment == whole.answer().assignment
    check_answer(problem, search.answer(), optimum)


def test_penalised_tables_are_made_in_pieces_and_match_the_whole() -> None:
    """Hard tables: the penalised copy in pieces of a few entries is the one made at once."""
    from dcop.search.local import penalised, penalised_pieces

    problem = large_domain(200, hard=True, seed=5)
    model = first.problem_model(problem, list(problem.variables))
    whole = penalised(model)
    pieces = penalised_pieces(model, chunk=7)
    count = 0
    while True:
        try:
            next(pieces)
            count += 1
        except StopIteration as done:
            piecewise = done.value
            break
    assert count > 3 * len(problem.tables)
    assert np.isfinite(piecewise.tables).all()
    np.testing.assert_array_equal(piecewise.tables, whole.tables)
    np.testing.assert_array_equal(piecewise.f_off, whole.f_off)


def test_solve_auto_with_the_deadline_in_the_first_answer_ends_with_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``solve_auto`` on a large-domain model of 1000+ variables (its first answer comes before
    any planning), the clock past the deadline after the copy's second piece: status timeout,
    the first answer's assignment with its cost, and bounds around BE's optimum."""
    problem = large_domain(20_000, k=4, chain=1000, seed=6)
    monkeypatch.setattr(first, "COPY_ENTRIES", 4096)
    clock = JumpingClock()
    monkeypatch.setattr(time, "monotonic", clock.monotonic)  # every module's clock
    jump_after_copy_pieces(monkeypatch, clock, 2)
    seen: list[LocalSearch] = []
    real = first.LocalSearch.__init__

    def init(self: LocalSearch, *args: object, **kwargs: object) -> None:
        real(self, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(self)

    monkeypatch.setattr(first.LocalSearch, "__init__", init)
    result = solve_auto(problem, timeout=600.0)
    monkeypatch.undo()
    assert result.status == "timeout" and result.stopped
    assert len(seen) >= 1 and seen[0].pieces == 2 and not seen[0].complete
    # no later local search copies a piece past the deadline (the guided incumbent's had copied
    # every table of the reduced problem: 545 pieces)
    assert [s.pieces for s in seen[1:]] == [0] * (len(seen) - 1)
    assert set(result.assignment) == set(problem.variables)
    assert result.upper_bound == problem.evaluate(result.assignment)
    optimum = solve(problem, "be").upper_bound
    assert result.lower_bound <= optimum <= result.upper_bound


DRIVER = """
import sys, time
from dcop.search import first
clock = [0.0]
real_monotonic = time.monotonic
time.monotonic = lambda: real_monotonic() + clock[0]
first.COPY_ENTRIES = 4096
real_pieces = first.TableCopy.pieces
counts = []  # each copy's pieces, in the order made
def pieces(self):
    counts.append(0)
    mine = len(counts) - 1
    for _ in real_pieces(self):
        counts[mine] += 1
        if mine == 0 and counts[0] == 2:
            clock[0] = 3600.0
        yield
first.TableCopy.pieces = pieces
import atexit
report = sys.argv[1]
atexit.register(lambda: open(report, "w").write(str(counts[0])))
from dcop.cli.entry import main
sys.argv = ["dcop", *sys.argv[2:]]
main()
"""


def test_the_cli_with_the_deadline_in_the_first_answer_answers(tmp_path: Path) -> None:
    """``dcop solve --algo auto --timeout`` on a large-domain model, the process's clock past
    the deadline after the first answer's second piece (the reading done): a valid assignment
    with its cost, status timeout (exit code 4), and the first answer stopped there."""
    path = tmp_path / "large.wcsp"
    write_problem(large_domain(20_000, k=4, chain=1000, seed=7), path)
    out, pieces = tmp_path / "r.json", tmp_path / "pieces"
    args = ["solve", str(path), "--algo", "auto", "--timeout", "600", "--json", str(out), "-q"]
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(pieces), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 4, proc.stderr
    assert pieces.read_text() == "2"  # the first answer's copy: no piece after the deadline
    doc = json.loads(out.read_text())
    assert_timeout_answer(doc, path)


def test_the_flat_copy_lays_each_table_widest_last_and_prices_as_the_problem() -> None:
    """Each table of the copy has its widest variable last (stride 1: pricing a 200,000-value
    node reads adjacent entries), dense or sparse, and the copy prices every assignment as the
    problem does."""
    from dcop.search.local import total_cost

    rng = np.random.default_rng(8)
    vs = [Variable.with_size(f"v{i}", size) for i, size in enumerate((3, 40, 2, 5, 7))]
    ts = [
        CostTable(("v1", "v0"), rng.random((40, 3))),
        CostTable(("v0", "v1", "v2"), rng.random((3, 40, 2))),
        CostTable(("v3", "v4", "v2"), rng.random((5, 7, 2))),
        CostTable(("v1",), rng.random(40)),
        CostTable.sparse(("v1", "v3"), (40, 5), 0.5, [[0, 1], [39, 4], [7, 2]], [3.0, 1.0, 2.0]),
        CostTable.sparse(("v4", "v0", "v1"), (7, 3, 40), 0.25, [[6, 2, 39]], [9.0]),
    ]
    problem = Problem.build(vs, ts, constant=1.5)
    names = list(problem.variables)
    model = first.problem_model(problem, names)
    for f, t in enumerate(ts):
        widest = names.index(t.scope[int(np.argmax(t.shape))])
        scope = model.sc_var[model.f_sc[f] : model.f_sc[f + 1]]
        strides = model.sc_stride[model.f_sc[f] : model.f_sc[f + 1]]
        assert scope[-1] == widest and strides[-1] == 1
    for _ in range(40):
        asg = np.array([rng.integers(0, v.size) for v in vs], dtype=np.int32)
        cost = problem.evaluate({v: int(asg[i]) for i, v in enumerate(names)})
        assert float(total_cost(model, asg)) + 1.5 == pytest.approx(cost)
