"""An anytime run's first answer (dcop.search.first) and its exits: every exit of a run with a
deadline has a valid assignment and its cost, whatever phase the deadline falls in (issue 45's
product rule); the same seed gives the same answer."""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path

import pytest

from dcop.generators import grid_network, random_network, spin_glass
from dcop.inference import solve
from dcop.inference.anytime import solve_auto
from dcop.io import write_problem
from dcop.model import Problem
from dcop.results.solve import SolveResult
from dcop.search import solve_aobb, solver
from dcop.search.first import LocalSearch, first_answer, least_cost
from tests.cli.conftest import assert_timeout_answer, run_dcop
from tests.conftest import brute_force, random_problem


def check_valid(problem: Problem, result: SolveResult) -> None:
    """A full assignment of valid values, its cost recomputed, and ordered bounds."""
    assert set(result.assignment) == set(problem.variables)
    for v, x in result.assignment.items():
        assert 0 <= x < problem.variables[v].size
    assert result.upper_bound == problem.evaluate(result.assignment)
    assert result.lower_bound <= result.upper_bound


def test_the_first_answer_is_valid_and_its_bound_holds() -> None:
    for seed in range(6):
        problem = random_problem(seed, n=6, p_inf=0.2)
        first = first_answer(problem, seed=seed)
        assert first is not None
        optimum = brute_force(problem)
        assert first.cost == problem.evaluate(first.assignment)
        assert first.lower <= optimum <= first.cost
        assert least_cost(problem) <= optimum


def test_the_same_seed_gives_the_same_first_answer() -> None:
    problem = grid_network(400, 3, 0.2, seed=2)
    a, b = first_answer(problem, seed=5), first_answer(problem, seed=5)
    assert a is not None and b is not None
    assert a.assignment == b.assignment and a.cost == b.cost and a.rounds == b.rounds
    # more rounds from where it stopped, counted the same way: the same again
    a.search.rounds(4, None)
    b.search.rounds(4, None)
    assert a.search.answer().assignment == b.search.answer().assignment


def test_rounds_never_make_the_answer_worse() -> None:
    problem = spin_glass(20, seed=3)
    search = LocalSearch(problem, seed=1)
    costs = [search.answer().cost]
    seen: list[float] = []
    for _ in range(5):
        search.rounds(1, None, report=seen.append)
        costs.append(search.answer().cost)
    assert all(b <= a for a, b in itertools.pairwise(costs))
    assert len(seen) == sum(1 for a, b in itertools.pairwise(costs) if b < a)


def test_a_tiny_limit_on_a_large_grid_returns_a_valid_answer() -> None:
    """A 50x50 grid (2500 variables, soft tables) with 0.05 s: the deadline falls in the first
    answer or in the set-up; the answer is the first one found, status timeout."""
    problem = grid_network(2500, 4, 0.0, seed=7)
    result = solve_auto(problem, timeout=0.05)
    assert result.status == "timeout" and result.stopped
    check_valid(problem, result)
    assert math.isfinite(result.upper_bound)
    doc = result.to_json()
    assert doc["assignment"] and doc["cost"] is not None


def test_a_deadline_in_the_set_up_keeps_the_first_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the set-up is predicted to fit but the deadline comes during it (here: while the
    order is chosen, on the solver's clock), the run stops there with the first answer."""
    problem = grid_network(400, 3, 0.3, seed=1)
    first = first_answer(problem, seed=0)
    assert first is not None
    monkeypatch.setattr(solver, "SETUP_RATIO", 0.0)  # the set-up is predicted to fit
    skipped = [0.0]

    class Clock:
        """The solver's clock, an hour on once the order is chosen."""

        @staticmethod
        def monotonic() -> float:
            return time.monotonic() + skipped[0]

    from dcop.orders.choose import choose_order as real_order

    def choose_order(*args: object, **kwargs: object) -> object:
        skipped[0] = 3600.0
        return real_order(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(solver, "time", Clock)
    monkeypatch.setattr(solver, "choose_order", choose_order)
    result = solve_aobb(problem, deadline=time.monotonic() + 60.0, start=first)
    assert result.stopped == solver.SETUP_LATE and result.status == "timeout"
    check_valid(problem, result)
    assert result.assignment == first.assignment
    assert result.ordering != "none"  # the order was chosen, then the deadline came


def test_the_local_search_alone_where_the_set_up_does_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = grid_network(900, 3, 0.3, seed=4)
    monkeypatch.setattr(solver, "SETUP_RATIO", 1e12)  # the set-up never fits
    monkeypatch.setattr(solver, "SETUP_MIN_VARIABLES", 0)
    result = solve_aobb(problem, deadline=time.monotonic() + 0.3)
    assert result.stopped == solver.LOCAL_ONLY and result.status == "timeout"
    check_valid(problem, result)
    trace = result.search.trace
    assert all(b[2] <= a[2] for a, b in itertools.pairwise(trace))


def test_hard_constraints_under_a_tiny_limit_still_give_an_assignment() -> None:
    """Tables with forbidden tuples: the answer may break some (cost inf) but is a full, valid
    assignment with its cost."""
    problem = grid_network(1600, 4, 0.4, seed=3)
    result = solve_auto(problem, timeout=0.05)
    assert result.status in ("timeout", "infeasible", "ok")
    check_valid(problem, result)


@pytest.mark.parametrize("ratio", [45.0, 1e12])
def test_a_run_with_time_still_proves_small_problems(
    monkeypatch: pytest.MonkeyPatch, ratio: float
) -> None:
    """The first answer does not get in the way of a proof, nor does the set-up's prediction on
    a small problem, however slow the machine seems (``ratio``)."""
    monkeypatch.setattr(solver, "SETUP_RATIO", ratio)
    problem = random_network(12, 3, 0.4, 0.2, seed=3)
    best = solve(problem, "be").upper_bound
    result = solve_aobb(problem, deadline=time.monotonic() + 60.0)
    assert result.stopped is None and math.isclose(result.upper_bound, best)
    assert result.lower_bound == result.upper_bound


def test_the_cli_answers_a_large_grid_within_a_tiny_limit(tmp_path: Path) -> None:
    """``dcop solve --algo auto --timeout`` on a 50x50 grid, a limit too short for the search to
    prove it: a valid answer, status timeout (exit code 4), its cost recomputed from the file.
    (A limit shorter than the reading ends with no problem, so with no answer: the reader's
    own refusal.)"""
    path = tmp_path / "grid.wcsp"
    write_problem(grid_network(2500, 3, 0.0, seed=9), path)
    out = tmp_path / "g.json"
    proc = run_dcop(
        "solve", str(path), "--algo", "auto", "--timeout", "10", "--json", str(out), "-q"
    )  # 10 s: beside a full suite on 2 cores (load 17), reading the file alone took over 4 s
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(out.read_text())
    assert_timeout_answer(doc, path)
