"""The reduced problem's incumbent (dcop.search.guided): dives along the shifted costs and
neighbourhoods solved exactly never claim less than the optimum and report their own cost; a
neighbourhood that covers the whole problem finds the optimum; ``--algo auto`` reduces once,
orders once (the reduced problem), and ends exact on the original."""

from __future__ import annotations

import math
import threading
import time

import pytest

from dcop.inference import anytime
from dcop.model import Problem
from dcop.search import guided, reduce, reparam, solver
from tests.conftest import brute_force, random_problem


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_shifted_answer_is_an_honest_assignment(seed: int) -> None:
    """Hard zeros and one-value domains: the answer (where a dive found one) is a full
    assignment whose reported cost is its cost, at least the optimum; the neighbourhoods after
    it (a deadline) never make it worse."""
    problem = random_problem(seed, n=7, n_tables=10, p_inf=0.1 * (seed % 4), integer=False)
    optimum = brute_force(problem)
    shifted, bound = reparam.diffuse(problem, sweeps=50)
    answer = guided.shifted_answer(shifted, problem, bound)
    if answer is None:
        return
    assert set(answer.assignment) == set(problem.variables)
    assert _close(answer.cost, problem.evaluate(answer.assignment))
    assert answer.cost >= optimum - 1e-9
    assert answer.lower <= optimum + 1e-9
    assert answer.search.answer().lower <= optimum + 1e-9  # the rounds' answers keep a bound
    later = guided.shifted_answer(shifted, problem, bound, time.monotonic() + 0.05)
    assert later is not None
    assert later.cost <= answer.cost + 1e-9
    assert _close(later.cost, problem.evaluate(later.assignment))


@pytest.mark.parametrize("seed", range(30))
def test_a_neighbourhood_over_everything_is_the_optimum(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ball as large as the problem is solved exactly by the reduction: from any feasible
    assignment, the neighbourhoods reach the optimum (brute force)."""
    monkeypatch.setattr(guided, "BALL", 100)
    problem = random_problem(seed, n=7, n_tables=10, p_inf=0.1 * (seed % 4))
    optimum = brute_force(problem)
    if math.isinf(optimum):
        return
    shifted, bound = reparam.diffuse(problem, sweeps=50)
    start = guided.shifted_answer(shifted, problem, bound)
    if start is None:
        return
    found = guided.neighbourhoods(problem, start.assignment, time.monotonic() + 0.2, seed)
    assert _close(problem.evaluate(found), optimum)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each choose_order call of auto and the search that orders (not one handed an order made
    already): the size of the problem ordered."""
    seen: list[int] = []
    for module in (anytime, solver):
        original = module.choose_order

        def counted(
            problem: Problem, ordering: object, *args: object, _original=original, **kw: object
        ) -> object:
            # (the preload's warm-up solves a tiny problem of its own in a thread)
            if isinstance(ordering, str) and threading.current_thread() is threading.main_thread():
                seen.append(problem.n)
            return _original(problem, ordering, *args, **kw)

        monkeypatch.setattr(module, "choose_order", counted)
    return seen


@pytest.mark.parametrize("be", [True, False])
#: seeds whose random problem the lowered thresholds reduce (to some variables), feasible
@pytest.mark.parametrize("seed", [101, 105, 107, 112])
def test_auto_reduces_and_orders_once(seed: int, be: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto reduces first (the size thresholds lowered), orders the reduced problem once and
    runs BE or the search on it (``be``); the answer, expanded, is brute force's optimum, exact."""
    monkeypatch.setattr(reduce, "MIN_VARIABLES", 1)
    monkeypatch.setattr(reduce, "MIN_SHARE", 0.0)
    monkeypatch.setattr(reduce, "MAX_DEGREE", 1)  # the leaves go, the core stays
    if not be:
        monkeypatch.setattr(anytime, "BE_FIRST_S", -1.0)
    problem = random_problem(seed, n=9, n_tables=14, p_inf=0.1, integer=False)
    reduction = reduce.for_search(problem)
    assert reduction is not None and reduction.problem.n > 0
    seen = _counting(monkeypatch)
    result = anytime.solve_auto(problem, timeout=60)
    optimum = brute_force(problem)
    assert seen == [reduction.problem.n]
    assert result.exact
    assert set(result.assignment) == set(problem.variables)
    assert _close(problem.evaluate(result.assignment), optimum)
    assert _close(result.upper_bound, optimum)
    assert result.choice is not None
    assert ("BE" in result.choice.split(":")[0]) == be
