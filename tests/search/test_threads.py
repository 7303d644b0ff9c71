"""The search on several threads (dcop.search.parallel): the same optimum as one thread, valid
bounds at every point, and every exit keeps a valid answer."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dcop.errors import ModelError
from dcop.generators import random_network
from dcop.inference import solve
from dcop.io import write_problem
from dcop.model import Problem
from dcop.search import cores, parallel, solve_aobb, solver
from dcop.search.compile import new_state
from tests.cli.conftest import assert_valid, run_dcop
from tests.conftest import (
    brute_force,
    check_exact_answer,
    random_problem,
    small_bayes_net_with_evidence,
)


@pytest.fixture
def splits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every part split at once (not after PARALLEL_AFTER expansions); yields the list of the
    threads each parallel walk ran on, so that a test sees the split happen."""
    runs: list[int] = []
    monkeypatch.setattr(parallel, "PARALLEL_AFTER", 0)
    run = parallel.ParallelPart.run

    def counted(self: parallel.ParallelPart, *args: object, **kwargs: object) -> object:
        runs.append(len(self.states))
        return run(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(parallel.ParallelPart, "run", counted)
    yield runs


def check(problem: Problem, threads: int, best: float, z: int | None = None) -> None:
    result = solve_aobb(problem, z=z, threads=threads)
    check_exact_answer(problem, result, best)
    assert result.search is not None and result.search.threads == threads


@pytest.mark.parametrize("seed", range(10))
def test_threads_equal_brute_force(splits: list[int], seed: int) -> None:
    # hard constraints (+inf entries), unary and ternary tables, domains 1-4
    problem = random_problem(seed, n=8, max_domain=4, n_tables=18, integer=seed % 2 == 0)
    best = brute_force(problem)
    one = solve_aobb(problem, z=2, threads=1)
    check_exact_answer(problem, one, best)
    for threads in (2, 3, 4):
        check(problem, threads, best, z=2)


@pytest.mark.parametrize("seed", range(4))
def test_moves_on_every_thread_keep_the_optimum(
    splits: list[int], monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Rounds of moves every few expansions on each thread (its own moves, sharing its cache):
    the walks are tightened many times while the others run."""
    from dcop.search import improve

    for module, name, value in (
        (solver, "WALK_ALONE", 3),
        (solver, "IMPROVE_EVERY", 5),
        (solver, "MOVE_EXPANSIONS", 5),
        (improve, "MOVE_FLOOR", 4),
        (improve, "MOVE_STEPS_PER_NODE", 2),
        (improve, "KICKS", 3),
    ):
        monkeypatch.setattr(module, name, value)
    problem = random_network(14, 4, 0.4, 0.2, seed=seed)
    best = solve(problem, "be").upper_bound
    result = solve_aobb(problem, z=1, threads=3, ordering="minfill")
    check_exact_answer(problem, result, best)
    assert splits
    for _, lower, upper in result.search.trace:
        assert lower <= best + 1e-9 <= upper + 2e-9


def test_the_walk_is_split_on_small_problems(splits: list[int]) -> None:
    problem = random_network(12, 4, 0.4, 0.0, seed=2)
    check(problem, 3, brute_force(problem), z=1)
    assert splits and max(splits) > 1


def test_mpe_with_evidence_on_threads(splits: list[int], tmp_path: Path) -> None:
    problem = small_bayes_net_with_evidence(tmp_path)
    check(problem, 2, brute_force(problem), z=1)


@pytest.mark.parametrize("seed", range(2))
def test_every_trace_point_brackets_the_optimum_on_threads(splits: list[int], seed: int) -> None:
    problem = random_network(15, 5, 0.4, 0.1, seed=seed)
    best = solve(problem, "be").upper_bound
    result = solve_aobb(problem, z=2, threads=3, ordering="minfill")
    assert result.exact and result.upper_bound == pytest.approx(best)
    assert result.search.trace and splits
    for _, lower, upper in result.search.trace:
        assert lower <= best + 1e-9 <= upper + 2e-9


def test_a_deadline_on_threads_keeps_a_valid_answer() -> None:
    problem = random_network(22, 10, 0.3, 0.0, seed=1)
    result = solve_aobb(problem, z=3, deadline=time.monotonic() + 0.6, threads=2)
    assert result.status == "timeout" and not result.exact
    assert result.upper_bound == problem.evaluate(result.assignment)
    assert math.isfinite(result.upper_bound) and result.lower_bound <= result.upper_bound


def walk_of(problem: Problem, threads: int, z: int = 2) -> solver._Walk:
    """A walk of ``problem``'s search with MBE(z), from the pass's own assignment."""
    from dcop.backends import resolve_backend
    from dcop.plan.bucket_plan import plan_for

    engine = resolve_backend("numpy")
    order = list(problem.variables)
    plan = plan_for(problem, order, z, np.float64, engine)
    compiled, _, first = solver._heuristic(problem, order, engine, plan, 1e9, True)
    assert first is not None
    state = new_state(compiled.model, compiled.width, compiled.cache_entries)
    return solver._Walk(
        compiled, state, first, 0.0, solver.SearchStats(), time.monotonic(), None,
        threads=threads,
    )  # fmt: skip


def test_a_node_budget_stops_every_thread(splits: list[int]) -> None:
    problem = random_network(20, 6, 0.35, 0.0, seed=3)
    best = solve(problem, "be").upper_bound
    walk = walk_of(problem, 2, z=1)
    assert walk.run(None, 3000) == solver.OUT_OF_NODES
    assert splits and walk.expanded() >= 3000
    assert walk.lower <= best + 1e-9 <= walk.upper + 1e-9
    names = walk.c.names
    cost = problem.evaluate({v: int(walk.incumbent[i]) for i, v in enumerate(names)})
    assert cost == pytest.approx(walk.upper)


def test_an_interrupt_between_slices_keeps_the_answer(
    splits: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    problem = random_network(22, 10, 0.3, 0.0, seed=1)
    calls = [0]

    def interrupt(seconds: float, lower: float, upper: float) -> None:
        if splits:  # a report of the parallel walk's coordinating thread
            calls[0] += 1
            if calls[0] >= 2:
                raise KeyboardInterrupt

    result = solve_aobb(problem, z=3, threads=2, on_bounds=interrupt)
    assert splits and result.stopped is not None and "interrupted" in result.stopped
    assert result.upper_bound == problem.evaluate(result.assignment)
    assert math.isfinite(result.upper_bound) and result.lower_bound <= result.upper_bound


def test_one_thread_never_splits(splits: list[int]) -> None:
    problem = random_network(14, 4, 0.4, 0.2, seed=1)
    result = solve_aobb(problem, z=2, threads=1)
    assert result.exact and not splits


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_a_bad_thread_count_is_refused(bad: object) -> None:
    with pytest.raises(ModelError, match="threads"):
        solve_aobb(random_network(6, 2, 0.5, 0.0, seed=0), threads=bad)  # type: ignore[arg-type]


def test_the_default_is_the_usable_cores_at_most_eight() -> None:
    assert 1 <= cores.resolve_threads(None) <= cores.MAX_DEFAULT_THREADS
    assert cores.resolve_threads(3) == 3
    assert cores.usable_threads(shared_by=10**6) == 1


def test_the_document_says_how_many_threads_ran(tmp_path: Path) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(12, 4, 0.4, 0.2, seed=5), path)
    run = run_dcop("solve", str(path), "--algo", "aobb", "--threads", "2", "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert_valid(doc)
    assert doc["exact"] and doc["search"]["threads"] == 2


def test_batch_rows_search_on_the_threads_asked(tmp_path: Path) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(12, 4, 0.4, 0.2, seed=5), path)
    out = tmp_path / "rows.jsonl"
    args = ("--algo", "aobb,auto", "--threads", "2", "--timeout", "60", "--jsonl", str(out))
    run = run_dcop("batch", str(path), *args)
    assert run.returncode == 0, run.stderr
    docs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [d["status"] for d in docs] == ["ok", "ok"]
    searched = [d for d in docs if d.get("search")]
    assert searched and all(d["search"]["threads"] == 2 for d in searched)


@pytest.mark.parametrize("command", ["solve", "batch"])
def test_threads_for_an_algorithm_that_takes_none_is_a_warning(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(6, 2, 0.5, 0.0, seed=0), path)
    run = run_dcop(command, str(path), "--algo", "be", "--threads", "2", "-q")
    assert run.returncode == 0, run.stderr
    assert "warning: --threads 2 is ignored by --algo be" in run.stderr


@pytest.mark.parametrize("command", ["solve", "batch"])
@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_threads_option_is_a_usage_error(tmp_path: Path, command: str, value: str) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(6, 2, 0.5, 0.0, seed=0), path)
    run = run_dcop(command, str(path), "--algo", "aobb", "--threads", value)
    assert run.returncode == 2
    assert "--threads" in run.stderr and "Traceback" not in run.stderr
