"""The search's ladder predicts its next pass from the passes run (round 4, "anytime that uses its
time"): :class:`dcop.search.ibound.PassClock`, and the ladder on a fake clock."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dcop.search.solver as solver
from dcop.generators import random_network
from dcop.plan.bucket_plan import MemoryPlan, plan_for
from dcop.search import preload
from dcop.search.ibound import PassClock


def test_before_any_pass_the_model_is_taken_as_it_is() -> None:
    assert PassClock().predict(0.7) == 0.7


def test_one_pass_teaches_the_fixed_part() -> None:
    clock = PassClock()
    clock.observe(0.001, 0.051)  # a small rung: almost all of it is the fixed part
    assert clock.predict(0.1) == pytest.approx(0.15)
    clock = PassClock()
    clock.observe(0.2, 0.1)  # faster than the model: no fixed part, and the model's own rate
    assert clock.predict(1.0) == pytest.approx(1.0)


@pytest.mark.parametrize("rate", [1.0, 1.5, 4.0])
def test_two_passes_teach_the_rate(rate: float) -> None:
    """Passes of 0.05 s + rate x the model: the third is predicted as it will run, on a machine
    as fast as the model (1) or slower (1.5, 4: a loaded one)."""
    clock = PassClock()
    for model_s in (0.001, 0.01):
        clock.observe(model_s, 0.05 + rate * model_s)
    assert clock.predict(0.1) == pytest.approx(0.05 + rate * 0.1)
    assert clock.predict(1.0) == pytest.approx(0.05 + rate * 1.0)


def test_a_prediction_is_never_below_the_model() -> None:
    """On a machine twice as fast as the model the rate is learned, but a pass is not stopped at
    the deadline: the prediction stays at the model's (0.55 s learned, 1 s predicted)."""
    clock = PassClock()
    for model_s in (0.001, 0.01):
        clock.observe(model_s, 0.05 + 0.5 * model_s)
    assert clock.predict(1.0) == 1.0


def test_a_larger_pass_that_ran_faster_is_scaled_in_proportion() -> None:
    clock = PassClock()
    clock.observe(0.01, 0.2)
    clock.observe(0.1, 0.1)  # noise: no rate to fit, in proportion (errs long)
    assert clock.predict(1.0) == pytest.approx(1.0)


class FakeTime:
    """The solver's clock: it moves only when a pass runs (by the pass's scripted seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def _ladder_on_a_fake_clock(
    monkeypatch: pytest.MonkeyPatch,
    fixed_s: float,
    rate: float,
    left_s: float,
    spike_s: float = 0.0,
) -> Any:
    """solve_aobb over three rungs (z = 2, 3, then the exact one), each below the last with a node
    budget of one, whose passes take ``fixed_s + rate * model`` on a fake clock (the last one
    ``spike_s`` more: a load spike), the model putting the rungs at 0.001, 0.01 and 0.1 s; the
    deadline ``left_s`` after the start. The clock moves as a pass starts, so that the pass's
    own look at it between buckets sees where it will end."""
    # the search's preload (a tiny solve on a thread, once per process) ends first: it would call
    # the functions replaced below, on the fake clock
    preload.start()
    preload.join()
    problem = random_network(12, 3, 0.3, 0.3, seed=4)
    clock = FakeTime()
    model_s: dict[int, float] = {}
    monkeypatch.setattr(solver, "time", clock)

    def ladder(
        problem: Any, order: Any, engine: Any, top: MemoryPlan, resident: Any, **kwargs: Any
    ) -> list:
        rungs = [plan_for(problem, order, z, np.float64, engine) for z in (2, 3)] + [top]
        model_s.update({int(r.z or 0): s for r, s in zip(rungs, (0.001, 0.01, 0.1), strict=True)})
        return rungs

    real_pass = solver.bucket_pass

    def timed_pass(problem: Any, order: Any, engine: Any, z: int, **kwargs: Any) -> Any:
        spike = spike_s if model_s[int(z or 0)] == 0.1 else 0.0
        clock.now += fixed_s + rate * model_s[int(z or 0)] + spike
        return real_pass(problem, order, engine, z, **kwargs)

    monkeypatch.setattr(solver, "ladder", ladder)
    monkeypatch.setattr(solver, "PORTFOLIO_MAX_VARIABLES", 0)  # one pass a rung: its clock
    monkeypatch.setattr(solver, "rung_seconds", lambda plan, engine: model_s[int(plan.z or 0)])
    monkeypatch.setattr(
        solver, "rung_budget", lambda following, engine, typical, passes=1, threads=1: 1
    )
    monkeypatch.setattr(solver, "bucket_pass", timed_pass)
    return solver.solve_aobb(problem, deadline=clock.now + left_s, pass_seconds=100.0)


def _rungs_run(result: Any) -> list[int]:
    return [step.z for step in result.search.steps if step.pass_s > 0]


def test_a_rung_with_time_to_run_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Passes of 0.05 s + the model: after z = 2 and 3 (0.051 and 0.06 s) the last is predicted
    at 0.15 s, within half the 0.39 s left, and runs. Scaled in proportion from z = 3's pass,
    as the ladder did, it was 0.6 s and the rung was skipped."""
    result = _ladder_on_a_fake_clock(monkeypatch, fixed_s=0.05, rate=1.0, left_s=0.5)
    assert len(_rungs_run(result)) == 3 and result.status == "ok"


def test_a_rung_without_time_to_run_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same ladder on a machine four times slower than the model: the last pass is
    predicted at 0.45 s, over half the 0.38 s left: the search goes on with z = 3's heuristic."""
    result = _ladder_on_a_fake_clock(monkeypatch, fixed_s=0.05, rate=4.0, left_s=0.5)
    assert len(_rungs_run(result)) == 2


def test_a_pass_past_the_deadline_is_cut_and_the_answer_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last pass is predicted within the time (0.15 s of 0.39 s left) and a load spike makes
    it take 5 s: it is cut at the deadline between two buckets, and the run ends at once with
    the assignment and bounds of the rungs before it (status timeout), where it used to finish
    the pass, 4.6 s past --timeout (and a batch row, killed at its timeout, lost its answer)."""
    result = _ladder_on_a_fake_clock(monkeypatch, fixed_s=0.05, rate=1.0, left_s=0.5, spike_s=5.0)
    assert result.status == "timeout" and result.assignment
    assert result.upper_bound == result.problem.evaluate(result.assignment)
    assert result.lower_bound <= result.upper_bound and result.search.ibound == 3
    assert "the pass of z = " in result.search.ibound_reason
    assert "cut at the deadline" in result.search.ibound_reason
