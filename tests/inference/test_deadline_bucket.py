"""A deadline inside one large bucket (issue 45): the pass's progress hook is heard between the
pieces of a bucket's fused join+eliminate (:mod:`dcop.backends.between`), so a hook that raises
stops the pass there, and a search whose deadline falls inside a large bucket returns its first
answer with valid bounds instead of finishing the bucket (a 60 s run held to 86 s)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from dcop import bucketpass
from dcop.backends.between import check_between, checked_between
from dcop.backends.numpy import NumpyBackend, in_threads
from dcop.bucketpass import bucket_pass
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder
from dcop.plan.bucket_plan import plan_for
from dcop.search import solve_aobb
from tests.conftest import hub, hub_optimum


class Stop(Exception):
    """The hook's own exception: the pass must let it through."""


def calls_inside(problem: Problem, order: ChosenOrder, backend: NumpyBackend, stop_at: int) -> int:
    """Run the pass with a hook that raises at its ``stop_at``-th call inside the hub's bucket
    (0: never); the calls it heard there."""
    inside = [0]

    def hook(done: int, total: int, var: str) -> None:
        if var != "h":
            return
        inside[0] += 1
        if inside[0] == stop_at:
            raise Stop

    if stop_at:
        with pytest.raises(Stop):
            bucket_pass(problem, order.order, backend, None, progress=hook)
    else:
        bucket_pass(problem, order.order, backend, None, progress=hook)
    return inside[0]


def test_a_hook_that_raises_inside_a_bucket_stops_its_join(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bucketpass, "PROGRESS_WITHIN_S", 0.0)  # every piece asks
    problem, order = hub(20, leaves=4)
    backend = NumpyBackend(block_entries=100, threads=1)  # 100 blocks of 100 entries
    # the call before the bucket, then one per block and value of the hub
    assert calls_inside(problem, order, backend, 0) == 1 + 100 * 20
    assert calls_inside(problem, order, backend, 5) == 5  # stopped: not another piece
    assert check_between() is None  # the pass's check ends with it


def test_a_raise_in_the_caller_s_thread_stops_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With three threads the caller's runs the check, between its own pieces or, once the
    others have taken every piece left (a loaded machine), while it waits for them."""
    monkeypatch.setattr(bucketpass, "PROGRESS_WITHIN_S", 0.0)
    problem, order = hub(200, leaves=5)  # 1000 blocks of 100 entries, 200 values each
    backend = NumpyBackend(block_entries=100, threads=3)
    assert calls_inside(problem, order, backend, 2) == 2
    assert check_between() is None


def test_the_caller_checks_while_it_waits_for_the_other_threads() -> None:
    started, stop = threading.Event(), threading.Event()
    polls: list[int] = []

    def work(share: int) -> None:
        if share:  # another thread's share: long, until the caller's check stops it
            started.set()
            stop.wait(60)

    def waiting() -> None:
        polls.append(1)
        if len(polls) == 3:
            stop.set()
            raise Stop

    with pytest.raises(Stop):
        in_threads(work, [0, 1], waiting)
    assert started.is_set() and len(polls) == 3


def test_a_raise_inside_a_bucket_of_argbest_decoding_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bucketpass, "PROGRESS_WITHIN_S", 0.0)
    problem, order = hub(20, leaves=4)
    plan = plan_for(problem, order.order, None, np.float64, "numpy", resident=0)
    assert plan.lean is not None
    backend = NumpyBackend(block_entries=100, threads=1)
    heard: list[str] = []

    def hook(done: int, total: int, var: str) -> None:
        heard.append(var)
        if heard.count("h") == 3:
            raise Stop

    with pytest.raises(Stop):
        bucket_pass(problem, order.order, backend, None, progress=hook, plan=plan.lean)
    assert heard == ["h"] * 3


def test_the_check_is_called_only_inside_its_block() -> None:
    problem, _ = hub(20, leaves=4)
    backend = NumpyBackend(block_entries=100, threads=1)
    tables = [backend.table(t.scope, t.dense(), np.float64) for t in problem.tables]
    calls: list[int] = []
    with checked_between(lambda: calls.append(1)):
        inside = backend.join_eliminate(tables, "h")
    assert len(calls) == 100 * 20  # a block's slice at each value: the pieces
    assert check_between() is None
    outside = backend.join_eliminate(tables, "h")
    assert len(calls) == 100 * 20
    np.testing.assert_array_equal(inside.data, outside.data)


def test_a_deadline_inside_a_large_bucket_keeps_the_first_answer() -> None:
    """The hub's bucket joins 2e11 entries (minutes on one core); the search has its first answer
    by then and returns it at the deadline, its bounds around the optimum. The bound on the
    return is generous (a loaded 2-core machine): a pass that finished the bucket would take
    minutes, and the test's own timeout would fail it."""
    problem, order = hub(20_000, leaves=7)
    optimum = hub_optimum(problem)
    deadline = time.monotonic() + 1.0
    result = solve_aobb(
        problem, z=7, ordering=order, backend=NumpyBackend(threads=1), deadline=deadline,
        reduced=False, threads=1,
    )  # fmt: skip
    assert time.monotonic() - deadline < 30.0
    assert result.status == "timeout" and not result.exact
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
    assert result.lower_bound <= optimum + 1e-9 <= result.upper_bound + 2e-9


@pytest.mark.parametrize("op", ["min", "max", "sum"])
def test_a_large_domain_into_a_small_output_is_folded_in_batches_of_values(op: str) -> None:
    # x of 1003 values eliminated into an output over y (2 entries): blocks of 100 entries take
    # 50 values at a time, 21 pieces (a piece per value, 1003, was a Python step each: a hub of
    # 200,000 values over six vectors took 13 s)
    rng = np.random.default_rng(3)
    backend = NumpyBackend(block_entries=100, threads=1)
    xy = rng.integers(0, 50, (1003, 2)).astype(np.float64)
    x = rng.integers(0, 50, 1003).astype(np.float64)
    tables = [backend.table(("x", "y"), xy), backend.table(("x",), x)]
    calls: list[int] = []
    with checked_between(lambda: calls.append(1)):
        out = backend.join_eliminate(tables, "x", op)  # type: ignore[arg-type]
    assert len(calls) == 21
    joined = xy + x[:, None]
    expected = {"min": joined.min(axis=0), "max": joined.max(axis=0), "sum": joined.sum(axis=0)}
    assert out.scope == ("y",)
    np.testing.assert_allclose(out.data, expected[op], rtol=1e-12)
