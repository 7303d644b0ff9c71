"""The rungs' order portfolio: candidate orders, the best bound searched, the proof unchanged."""

from __future__ import annotations

import numpy as np
import pytest

import dcop.search.solver as solver
from dcop.backends import resolve_backend
from dcop.bucketpass import bucket_pass
from dcop.generators import random_network
from dcop.inference import solve
from dcop.orders.greedy import induced_width, min_fill_order
from dcop.search import solve_aobb
from dcop.search.portfolio import CANDIDATES, WIDTH_SLACK, candidate_orders


def test_the_candidates_start_with_the_chosen_order_and_are_distinct_and_narrow() -> None:
    problem = random_network(20, 4, 0.3, 0.0, seed=3)
    chosen = min_fill_order(problem.neighbours())
    orders = candidate_orders(problem, chosen, seed=5)
    assert orders[0] == chosen and 1 < len(orders) <= CANDIDATES
    assert len({tuple(o) for o in orders}) == len(orders)
    width = induced_width(problem.neighbours(), chosen)
    for order in orders:
        assert sorted(order) == sorted(problem.variables)
        assert induced_width(problem.neighbours(), order) <= width + WIDTH_SLACK
    assert candidate_orders(problem, chosen, seed=5) == orders  # seeded: the same again


@pytest.mark.parametrize("seed", range(4))
def test_a_rung_searches_the_best_bound_of_its_orders_and_proves_the_optimum(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    problem = random_network(14, 4, 0.4, 0.2 if seed % 2 else 0.0, seed=seed)
    best = solve(problem, "be").upper_bound
    compiled_orders: list[list[str]] = []
    real = solver.compile_search

    def spy(problem_: object, order: list[str], *args: object, **kwargs: object) -> object:
        compiled_orders.append(list(order))
        return real(problem_, order, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(solver, "compile_search", spy)
    result = solve_aobb(problem, z=3, ordering="auto", deadline=None)
    assert result.exact and result.upper_bound == pytest.approx(best)
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
    # the order searched is the one whose pass at z = 3 bounds highest (the chosen one on a tie)
    engine = resolve_backend("numpy")
    chosen = solver.choose_order(problem, "auto").order
    bounds = [
        bucket_pass(problem, o, engine, 3, dtype=np.float64, match=solver.MATCH).stats.bound
        for o in candidate_orders(problem, chosen, 0)
    ]
    searched = compiled_orders[-1]
    at = [tuple(o) for o in candidate_orders(problem, chosen, 0)].index(tuple(searched))
    assert bounds[at] == max(bounds) and (at == 0 or bounds[0] < max(bounds))


def test_an_order_the_caller_names_is_searched_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = random_network(14, 4, 0.4, 0.0, seed=1)
    called: list[object] = []
    monkeypatch.setattr(solver, "candidate_orders", lambda *a, **k: called.append(a) or [])
    result = solve_aobb(problem, z=3, ordering="minfill")
    assert result.exact and not called
