"""``--algo planar`` with a deadline (issue 45: every exit keeps the best answer): the solver looks
at it between its steps and in its own loops, does not begin a step it cannot stop where that is
predicted past it, and answers what it has (status timeout): a spanning tree's assignment, its
cost, and a lower bound below the optimum."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dcop import generators
from dcop.cli.solvers import CENTRAL, Request
from dcop.inference.anytime import solve_auto
from dcop.io import write_problem
from dcop.model import Problem
from dcop.planar import embed, solve_planar, tjoin
from dcop.planar.auto import planar_first
from dcop.planar.dual import dual_from_successors
from dcop.planar.embed import planar_successors
from dcop.planar.ising import ising_form
from dcop.planar.solver import least_join
from tests.cli.conftest import assert_valid, assert_valid_batch, run_dcop
from tests.planar.test_grid import grid_problem, wheel


def check_stopped(problem: Problem, stopped: object, optimum: float) -> None:
    """A stopped answer: status timeout, a full assignment and its cost, bounds around the
    optimum."""
    from dcop.results.solve import SolveResult

    assert isinstance(stopped, SolveResult)
    assert stopped.status == "timeout" and not stopped.exact
    assert stopped.stopped is not None and stopped.stopped.startswith("planar: ")
    assert set(stopped.assignment) == set(problem.variables)
    assert stopped.upper_bound == pytest.approx(problem.evaluate(stopped.assignment))
    assert stopped.lower_bound <= optimum + 1e-9 <= stopped.upper_bound + 2e-9
    assert stopped.planar is None  # no join: no faces and join to report


@pytest.mark.parametrize("seed", range(3))
def test_a_past_deadline_answers_a_spanning_tree_with_bounds(seed: int) -> None:
    problem = generators.spin_glass(10, seed)
    optimum = solve_planar(problem).upper_bound
    check_stopped(problem, solve_planar(problem, deadline=time.monotonic()), optimum)


def test_networkx_s_test_is_not_begun_where_it_would_end_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = grid_problem(6, 6, missing=2, seed=3)  # not a full grid: networkx's test
    optimum = solve_planar(problem).upper_bound
    monkeypatch.setattr(embed, "PLANARITY_S_PER_EDGE", 1e3)  # predicted far past an hour
    t0 = time.monotonic()
    stopped = solve_planar(problem, deadline=t0 + 3600)
    check_stopped(problem, stopped, optimum)
    assert "planarity test" in (stopped.stopped or "")
    assert solve_planar(problem).exact  # without a deadline it runs as before


def test_the_fallback_s_matching_is_not_begun_where_it_would_end_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = generators.spin_glass(8, 1)
    optimum = solve_planar(problem).upper_bound
    monkeypatch.setattr(tjoin, "MATCHING_S_PER_ODD3", 1e3)
    stopped = solve_planar(problem, use_pymatching=False, deadline=time.monotonic() + 3600)
    check_stopped(problem, stopped, optimum)
    assert "T-join" in (stopped.stopped or "")
    # the faces were known: the lower bound counts the frustrated faces' lightest edges
    model = ising_form(problem)
    floor = model.constant + float(model.coupling[model.coupling < 0].sum())
    assert stopped.lower_bound > floor


@pytest.mark.skipif(not tjoin.pymatching_available(), reason="PyMatching missing")
def test_pymatching_s_decode_is_not_begun_where_it_would_end_late(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = generators.spin_glass(8, 2)
    optimum = solve_planar(problem).upper_bound
    monkeypatch.setattr(tjoin, "PYMATCHING_S_PER_ODD2", 1e3)
    stopped = solve_planar(problem, use_pymatching=True, deadline=time.monotonic() + 3600)
    check_stopped(problem, stopped, optimum)
    assert "matching (predicted" in (stopped.stopped or "")
    assert solve_planar(problem, use_pymatching=True).exact  # no deadline: as before


@pytest.mark.parametrize("seed", range(6))
def test_the_least_join_is_below_the_minimum_join(seed: int) -> None:
    for problem in (generators.spin_glass(9, seed), wheel(7 + seed)):
        model = ising_form(problem)
        successor, _ = planar_successors(model)
        dual = dual_from_successors(model, successor)
        weights = abs(model.coupling)
        joined = tjoin.min_tjoin(dual, weights, use_pymatching=False)
        assert least_join(dual, weights) <= float(weights[joined.chosen].sum()) + 1e-9


def test_auto_goes_on_where_planar_would_not_end_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = grid_problem(5, 5, missing=1, seed=4)
    monkeypatch.setattr(embed, "PLANARITY_S_PER_EDGE", 1e3)
    assert planar_first(problem, deadline=time.monotonic() + 60) is None  # time is left
    result = solve_auto(problem, timeout=60)
    assert result.algo != "planar" and result.exact
    assert result.upper_bound == pytest.approx(solve_planar(problem).upper_bound, abs=1e-9)


def test_auto_keeps_planar_s_answer_at_the_deadline() -> None:
    problem = generators.spin_glass(10, 2)
    optimum = solve_planar(problem).upper_bound
    result = planar_first(problem, deadline=time.monotonic())
    assert result is not None
    check_stopped(problem, result, optimum)
    assert result.choice is not None and result.choice.startswith("planar: ")


def test_the_command_s_planar_solver_takes_the_deadline() -> None:
    problem = generators.spin_glass(10, 1)
    optimum = solve_planar(problem).upper_bound
    solver = CENTRAL["planar"]
    assert solver.anytime  # a batch row hands it the row's deadline, less its margin
    check_stopped(problem, solver.run(problem, Request(deadline=time.monotonic())), optimum)
    assert solver.run(problem, Request(deadline=time.monotonic() + 60)).exact


def test_a_timeout_on_the_command_line_is_a_valid_document(tmp_path: Path) -> None:
    path = tmp_path / "sg.uai"
    write_problem(generators.spin_glass(10, 1), path)
    out = tmp_path / "p.json"
    proc = run_dcop("solve", str(path), "--algo", "planar", "--timeout", "60", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["algo"] == "planar" and doc["status"] == "ok" and doc["exact"]


def test_batch_planar_rows_keep_an_answer_at_their_timeout(tmp_path: Path) -> None:
    path = tmp_path / "sg.uai"
    write_problem(generators.spin_glass(8, 1), path)
    out = tmp_path / "b.json"
    run_dcop("batch", str(path), "--algo", "planar", "--timeout", "30", "--json", str(out))
    doc = json.loads(out.read_text())
    assert_valid_batch(doc)
    (row,) = doc["rows"]
    assert row["algo"] == "planar" and row["status"] == "ok" and row["exact"]


def test_auto_s_timeout_counts_from_the_call_planar_s_try_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``solve_auto(timeout=...)``: the limit and the trace count from the call, so the time
    planar's try took is the run's too (they counted from after it: a 5 s limit ended at 5.3 s
    after a 0.3 s try). Planar is given the run's own deadline."""
    import dcop.planar.auto

    given: list[float | None] = []

    def slow_refusal(problem: Problem, deadline: float | None = None) -> None:
        given.append(deadline)
        time.sleep(0.6)

    monkeypatch.setattr(dcop.planar.auto, "planar_first", slow_refusal)
    problem = generators.grid_network(1024, 3, 0.0, 1)  # a first answer early (n >= 1000)
    seen: list[tuple[float, float]] = []
    began = time.monotonic()
    result = solve_auto(
        problem, timeout=5.0, on_bounds=lambda s, lo, up: seen.append((s, time.monotonic() - began))
    )
    assert given and given[0] is not None and began < given[0] <= began + 5.0 + 0.05
    # each point's seconds are the call's (without planar's 0.6 s they fall 0.6 s short)
    assert seen and all(s >= since - 0.3 for s, since in seen)
    assert result.upper_bound is not None
