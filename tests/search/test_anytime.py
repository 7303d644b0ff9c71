"""The search's anytime improvement (dcop.search.improve, kernel.tighten, local.perturb_search):
proofs stay exact, the incumbent never gets worse, the same seed takes the same path."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest

from dcop.backends import resolve_backend
from dcop.generators import random_network
from dcop.inference import solve
from dcop.model import Problem
from dcop.orders.choose import choose_order
from dcop.plan.bucket_plan import plan_for
from dcop.search import improve, solve_aobb, solver
from dcop.search.compile import new_state
from dcop.search.improve import Improver
from dcop.search.local import (
    incidence,
    neighbours,
    penalised,
    perturb_search,
    total_cost,
)
from tests.conftest import brute_force, random_problem


@pytest.fixture
def often(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rounds of moves every few expansions, with tiny move budgets: the walk is paused and
    tightened many times on small problems."""
    monkeypatch.setattr(solver, "WALK_ALONE", 3)
    monkeypatch.setattr(solver, "IMPROVE_EVERY", 5)
    monkeypatch.setattr(solver, "MOVE_EXPANSIONS", 5)
    monkeypatch.setattr(improve, "MOVE_FLOOR", 4)
    monkeypatch.setattr(improve, "MOVE_STEPS_PER_NODE", 2)
    monkeypatch.setattr(improve, "KICKS", 3)


def compiled_of(problem: Problem, z: int) -> tuple[object, np.ndarray]:
    """The search's arrays of ``problem`` with MBE(z) along min-fill, and the pass's own
    assignment."""
    engine = resolve_backend("numpy")
    order = choose_order(problem, "minfill", None).order
    plan = plan_for(problem, order, z, np.float64, engine)
    compiled, _, first = solver._heuristic(problem, order, engine, plan, 1e9, True)
    assert first is not None
    return compiled, first


@pytest.mark.parametrize("seed", range(16))
def test_proofs_with_moves_and_tightening_equal_brute_force(often: None, seed: int) -> None:
    # hard constraints, unary and ternary tables: every pause may lower the walk's budget
    problem = random_problem(seed, n=8, n_tables=11, integer=seed % 2 == 0)
    best = brute_force(problem)
    for z in (1, 2, None):
        result = solve_aobb(problem, z=z, seed=seed)
        assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment), abs=1e-9)
        if math.isinf(best):
            assert result.status == "infeasible"
            continue
        assert result.exact and result.status == "ok"
        assert result.upper_bound == pytest.approx(best, rel=1e-9, abs=1e-9)
        assert result.lower_bound == result.upper_bound


@pytest.mark.parametrize("seed", range(3))
def test_trace_points_bracket_the_optimum_with_moves(often: None, seed: int) -> None:
    problem = random_network(16, 4, 0.4, 0.3, seed=seed)
    best = solve(problem, "be").upper_bound
    result = solve_aobb(problem, z=1, seed=seed)
    assert result.exact and result.upper_bound == pytest.approx(best)
    assert len(result.search.trace) >= 2
    for _, lower, upper in result.search.trace:
        assert lower <= best + 1e-9 <= upper + 2e-9


def test_moves_take_the_same_path_for_the_same_seed(often: None) -> None:
    problem = random_network(18, 5, 0.3, 0.2, seed=5)
    a = solve_aobb(problem, z=1, seed=3, ordering="minfill", threads=1)
    b = solve_aobb(problem, z=1, seed=3, ordering="minfill", threads=1)
    assert a.assignment == b.assignment
    assert a.search.trace and len(a.search.trace) == len(b.search.trace)
    assert [p[1:] for p in a.search.trace] == [p[1:] for p in b.search.trace]
    assert [s.expanded for s in a.search.steps] == [s.expanded for s in b.search.steps]


def test_a_deadline_with_moves_keeps_a_valid_answer(often: None) -> None:
    problem = random_network(24, 8, 0.3, 0.1, seed=2)
    result = solve_aobb(problem, z=2, deadline=time.monotonic() + 0.5)
    assert result.upper_bound == problem.evaluate(result.assignment)
    assert result.lower_bound <= result.upper_bound
    assert math.isfinite(result.upper_bound)


@pytest.mark.parametrize("seed", range(6))
def test_subtree_moves_never_make_the_incumbent_worse(seed: int) -> None:
    problem = random_problem(seed, n=9, n_tables=12, integer=True)
    compiled, first = compiled_of(problem, 1)
    model = compiled.model
    state = new_state(model, compiled.width, compiled.cache_entries)
    mover = Improver(compiled, state.cache, seed)
    incumbent = first.copy()
    cost = total_cost(model, incumbent)
    for _ in range(6):
        mover.run(incumbent, 50, None, set())
        now = total_cost(model, incumbent)
        assert now <= cost or (math.isinf(now) and math.isinf(cost))
        cost = now
    best = brute_force(problem)
    if math.isinf(best):  # nothing feasible (perhaps an infinite constant): nothing to reach
        return
    optimum = best - solver._constant(problem)
    assert cost >= optimum - 1e-9
    # a move over a whole part, with room enough, proves that part: moves from every root
    # together reach the optimum (a lone variable's part is exact in the pass's assignment)
    for r in compiled.roots:
        if r in mover.subtree:
            mover.queue = [r]
            mover.run(incumbent, 1, None, set())
    assert total_cost(model, incumbent) == pytest.approx(optimum, abs=1e-9)


@pytest.mark.parametrize("p_inf", [0.0, 0.3])
def test_penalised_copies_the_tables_only_where_a_cost_is_infinite(p_inf: float) -> None:
    """Without an infinite cost the local search's tables are the problem's own (no copy: 0.5-2 s
    of a first answer on 10M entries); with one, a copy where each is a finite penalty above
    every assignment's finite cost."""
    problem = random_problem(3, n=8, n_tables=10, p_inf=p_inf)
    model = compiled_of(problem, 1)[0].model
    labels = np.concatenate(
        [model.tables[model.f_off[f] : model.f_off[f] + size] for f, size in _label_sizes(model)]
    )
    soft = penalised(model)
    if np.isfinite(labels).all():
        assert p_inf == 0.0 and soft is model
    else:
        assert soft is not model and np.isfinite(soft.tables).all()
        assert soft.tables.max() > np.abs(labels[np.isfinite(labels)]).sum()
        asg = np.zeros(model.dom.shape[0], dtype=np.int32)
        hard, softened = total_cost(model, asg), total_cost(soft, asg)
        assert softened == hard if math.isfinite(hard) else math.isfinite(softened)


def _label_sizes(model: Any) -> list[tuple[int, int]]:
    """Each problem table of ``model`` and its number of entries."""
    out = []
    for f in np.unique(model.lab_fun):
        size = 1
        for s in range(model.f_sc[f], model.f_sc[f + 1]):
            size *= int(model.dom[model.sc_var[s]])
        out.append((int(f), size))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_perturbation_never_makes_the_penalised_cost_worse(seed: int) -> None:
    problem = random_problem(seed, n=10, n_tables=14, integer=seed % 2 == 0)
    compiled, first = compiled_of(problem, 1)
    model = compiled.model
    inc_off, inc_fun = incidence(model)
    nb_off, nb = neighbours(model, inc_off, inc_fun)
    soft = penalised(model)
    assert np.isfinite(soft.tables).all()
    asg = first.copy()
    before = total_cost(soft, asg)
    delta = perturb_search(soft, inc_off, inc_fun, nb_off, nb, asg, 200, 3, seed)
    after = total_cost(soft, asg)
    assert delta <= 0.0 and after <= before + 1e-9
    assert after == pytest.approx(before + delta, rel=1e-9, abs=1e-6)
    # the same seed, the same walk
    again = first.copy()
    perturb_search(soft, inc_off, inc_fun, nb_off, nb, again, 200, 3, seed)
    assert (again == asg).all()
    # a feasible answer wherever the problem has one: penalties rank before costs
    if math.isfinite(brute_force(problem)) and math.isfinite(total_cost(model, first)):
        assert math.isfinite(total_cost(model, asg))
