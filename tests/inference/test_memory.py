"""The memory plan (dcop.plan.memory): hand-computed cases, the checks of solve() built on it
(refused before any table exists, with the right z or "nothing fits"), failed allocations as
TableTooLarge, and the progress bar's work taken from the same plan."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from dcop.backends.numpy import NumpyBackend
from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.inference import solve
from dcop.inference.elimination import eliminate
from dcop.model import CostTable, Problem, Variable
from dcop.orders.greedy import elimination_order
from dcop.plan.bucket_plan import largest_fitting_z, plan_memory, refusal
from dcop.plan.memory import Limit, WorkModel, work_model_of

SIZES = {"a": 2, "b": 3, "c": 4}
SCOPES = [("a", "b"), ("b", "c"), ("a", "c")]


def test_plan_by_hand() -> None:
    # inputs 6 + 12 + 8 = 26 entries; bucket a: (a,b),(a,c) -> (b,c) 12 entries, joined 24;
    # bucket b: (b,c) and the message -> (c) 4 entries, joined 12; bucket c: -> scalar, joined 4
    plan = plan_memory(SCOPES, SIZES, ["a", "b", "c"], None, 8, resident=1000)
    assert plan.input_bytes == 26 * 8
    assert plan.message_bytes == (12 + 4) * 8
    assert [b.work for b in plan.buckets] == [24, 12, 4] and plan.total_work == 40
    assert [b.peak_bytes for b in plan.buckets] == [
        1000 + 26 * 8 + 12 * 8,
        1000 + 26 * 8 + 12 * 8 + 4 * 8,
        1000 + 26 * 8 + 12 * 8 + 4 * 8,
    ]
    assert plan.peak_bytes == 1000 + (26 + 16) * 8
    assert plan.peak_var == "b" and plan.peak_scope == ("c",) and plan.peak_out_bytes == 32
    assert plan.largest_output == 12 and plan.largest_joined == 24 and plan.width == 2


def test_plan_counts_working_blocks_and_small_copies() -> None:
    # 2 threads of blocks of at most 5 entries, copies of members of at most 8 entries
    work = WorkModel(block_entries=5, threads=2, copy_below=8)
    plan = plan_memory(SCOPES, SIZES, ["a", "b", "c"], None, 4, work=work)
    # bucket a: output 12, block min(5, 12) * 2 = 10, members 6 and 8 entries: both copied
    assert plan.buckets[0].peak_bytes == (26 + 12 + 10 + 6 + 8) * 4
    # bucket b: output 4, one block of 4 (one thread), members of 12 entries: not copied
    assert plan.buckets[1].peak_bytes == (26 + 12 + 4 + 4) * 4
    # bucket c: a scalar output, one block of 1; its member of 4 entries is copied
    assert plan.buckets[2].peak_bytes == (26 + 16 + 1 + 4) * 4
    assert plan.peak_bytes == (26 + 12 + 10 + 6 + 8) * 4 and plan.peak_var == "a"


def test_mini_buckets_by_hand() -> None:
    # z=1: every binary table is its own mini-bucket with a one-variable output
    plan = plan_memory(SCOPES, SIZES, ["a", "b", "c"], 1, 8)
    first = plan.buckets[0]
    assert sorted(m.out_scope for m in first.minibuckets) == [("b",), ("c",)]
    assert first.work == 6 + 8
    # messages (b), (c) from a; (c) from b over (b,c); the rest are scalars
    assert plan.message_bytes == (3 + 4 + 4) * 8


def test_largest_fitting_z_and_nothing_fits() -> None:
    problem = random_network(14, 6, 0.6, 0.5, seed=3)
    order = elimination_order("minfill", problem.neighbours())
    base = plan_memory([t.scope for t in problem.tables], problem.domain_sizes(), order, None, 4)
    peaks = {z: base.with_z(z).peak_bytes for z in range(1, base.width + 1)}
    assert peaks[1] < peaks[base.width] < base.peak_bytes
    limit = (peaks[3] + peaks[4]) / 2 if peaks[3] < peaks[4] else peaks[3]
    fitting = largest_fitting_z(base, limit, base.width + 1)
    assert fitting is not None and fitting.z == 3 and fitting.fits(limit)
    assert largest_fitting_z(base, peaks[1] - 1, base.width + 1) is None
    text = refusal(base, Limit(peaks[1] - 1, "the limit"), None)
    assert "nothing fits, not even MBE with z=1" in text and repr(base.peak_var) in text


class CountingBackend(NumpyBackend):
    """Counts the tables and outputs it builds."""

    def __init__(self) -> None:
        super().__init__()
        self.built = 0

    def table(self, *args: Any, **kwargs: Any) -> Any:
        self.built += 1
        return super().table(*args, **kwargs)

    def join_eliminate(self, *args: Any, **kwargs: Any) -> Any:
        self.built += 1
        return super().join_eliminate(*args, **kwargs)


def test_solve_refuses_before_building_any_table_and_names_z() -> None:
    problem = random_network(14, 6, 0.6, 0.5, seed=3)
    order = elimination_order("minfill", problem.neighbours())
    work = work_model_of(NumpyBackend())
    base = plan_memory(
        [t.scope for t in problem.tables], problem.domain_sizes(), order, None, 4, work=work
    )
    limit = base.with_z(base.width - 1).peak_bytes
    backend = CountingBackend()
    with pytest.raises(TableTooLarge) as refused:
        solve(problem, backend=backend, max_bytes=limit, resident=0)
    assert backend.built == 0
    message = str(refused.value)
    assert f"bucket of {base.peak_var!r}" in message
    assert f"--algo mbe --z {base.width - 1} " in message
    # the suggestion fits: MBE with it runs under the same limit
    result = solve(problem, "mbe", z=base.width - 1, max_bytes=limit, resident=0)
    assert result.memory_peak is not None and result.memory_peak <= limit
    # an MBE run too large is told a smaller z
    with pytest.raises(TableTooLarge, match=f"--z {base.width - 2} "):
        solve(problem, "mbe", z=base.width - 1, max_bytes=limit - 1, resident=0)


def test_nothing_fits() -> None:
    problem = random_network(8, 4, 0.5, 0.3, seed=2)
    backend = CountingBackend()
    with pytest.raises(TableTooLarge, match="nothing fits, not even MBE with z=1"):
        solve(problem, backend=backend, max_bytes=1, resident=0)
    assert backend.built == 0


def test_memory_limit_counts_what_the_process_holds() -> None:
    problem = random_network(8, 4, 0.5, 0.3, seed=2)
    assert solve(problem, max_bytes=2**30, resident=0).status in ("ok", "infeasible")
    with pytest.raises(TableTooLarge, match="held by the process"):
        solve(problem, max_bytes=2**30, resident=2**30)


class FailingBackend(NumpyBackend):
    def join_eliminate(self, *args: Any, **kwargs: Any) -> Any:
        raise MemoryError("Unable to allocate 12.0 GiB for an array")


def test_failed_allocation_is_table_too_large() -> None:
    problem = random_network(8, 4, 0.5, 0.3, seed=2)
    with pytest.raises(TableTooLarge, match="numpy: out of memory"):
        solve(problem, backend=FailingBackend())


def test_per_bucket_check_counts_tables_held() -> None:
    """The second line of defence (no plan check before it): refuses the output that would take
    the tables held above the limit, naming its bucket."""
    problem = random_network(12, 5, 0.6, 0.5, seed=1)
    order = elimination_order("minfill", problem.neighbours())
    plan = plan_memory([t.scope for t in problem.tables], problem.domain_sizes(), order, None, 8)
    limit = plan.peak_bytes - 1
    with pytest.raises(
        TableTooLarge, match=r"bucket of '.*': its output .* would bring the tables held"
    ):
        eliminate(problem, order, NumpyBackend(), max_bytes=limit)
    assignment, stats = eliminate(problem, order, NumpyBackend(), max_bytes=plan.peak_bytes)
    assert stats.largest_output == plan.largest_output
    assert stats.largest_joined == plan.largest_joined
    assert len(assignment) == problem.n


def test_progress_counts_the_plans_work() -> None:
    problem = random_network(12, 5, 0.6, 0.5, seed=1)
    order = elimination_order("minfill", problem.neighbours())
    plan = plan_memory([t.scope for t in problem.tables], problem.domain_sizes(), order, None, 4)
    calls: list[tuple[int, int, str]] = []
    solve(problem, progress=lambda done, total, var: calls.append((done, total, var)))
    assert calls[0] == (0, plan.total_work, plan.buckets[0].var)  # the right total from the start
    assert calls[-1] == (plan.total_work, plan.total_work, "")
    assert {total for _, total, _ in calls} == {plan.total_work}
    steps = [b - a for (a, _, _), (b, _, _) in itertools.pairwise(calls)]
    assert steps == [b.work for b in plan.buckets]


def test_float64_inputs_and_constants() -> None:
    variables = [Variable.with_size("x", 3), Variable.with_size("y", 2)]
    tables = [
        CostTable((), np.array(2.5)),
        CostTable(("x",), np.array([0.5, 1.0, 2.0])),
        CostTable(("x", "y"), np.zeros((3, 2))),
    ]
    problem = Problem.build(variables, tables)
    work = work_model_of(NumpyBackend())
    plan = plan_memory(
        [t.scope for t in problem.tables], problem.domain_sizes(), ["x", "y"], work=work
    )
    assert plan.input_bytes == (3 + 6) * 8  # the constant takes no table
    result = solve(problem, max_bytes=2**30, resident=0)
    assert result.dtype == "float64" and result.memory_peak == plan.peak_bytes
    assert result.lower_bound == 3.0
