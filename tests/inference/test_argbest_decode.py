"""BE's argbest decoding (messages freed once consumed, argbest tables in the smallest unsigned
dtype): its plan by hand, its answers against brute force and the kept-messages decode, the
choice between the two under a memory limit, and its traced peak against its plan."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.backends.numpy import NumpyBackend
from dcop.bucketpass import ArgbestTable, bucket_pass, decode, eliminate_keeping_argbest
from dcop.errors import TableTooLarge
from dcop.generators import random_network, spin_glass
from dcop.inference import solve
from dcop.inference.elimination import eliminate
from dcop.model import CostTable, Problem, Variable
from dcop.orders.greedy import elimination_order
from dcop.plan.bucket_plan import plan_for, plan_memory, refusal
from dcop.plan.memory import Limit, argbest_bytes, argbest_dtype
from dcop.tables import Op
from tests.conftest import brute_force, random_problem

SIZES = {"a": 2, "b": 3, "c": 4}
SCOPES = [("a", "b"), ("b", "c"), ("a", "c")]
CPU = NumpyBackend()


def test_argbest_dtype_is_the_smallest_unsigned_that_holds_the_domain() -> None:
    assert argbest_dtype(1) == np.uint8 and argbest_dtype(256) == np.uint8
    assert argbest_dtype(257) == np.uint16 and argbest_dtype(65536) == np.uint16
    assert argbest_dtype(65537) == np.uint32


def test_argbest_bytes_pack_a_binary_variable_to_bits() -> None:
    assert argbest_bytes(12, 2) == 2 and argbest_bytes(16, 2) == 2 and argbest_bytes(17, 2) == 3
    assert argbest_bytes(12, 3) == 12 and argbest_bytes(12, 300) == 24


def test_lean_plan_by_hand() -> None:
    # inputs 26 entries. Bucket a: (a,b),(a,c) -> (b,c), 12 entries: a running best, a slice,
    # a mask and the uint8 argbest table (12 * (8 + 8 + 1 + 1)); then the message and the
    # argbest table (a binary: 12 bits, 2 bytes) stay. Bucket b: (b,c) and the message -> (c),
    # 4 entries (4 bytes of argbest); the message of a is freed after it. Bucket c: the message
    # of b -> a scalar (one byte of argbest).
    plan = plan_memory(SCOPES, SIZES, ["a", "b", "c"], None, 8, resident=1000, decode="argbest")
    live = 1000 + 26 * 8
    assert [b.peak_bytes for b in plan.buckets] == [
        live + 12 * 18,
        live + 2 + 12 * 8 + 4 * 18,
        live + 2 + 4 + 4 * 8 + 2,
    ]
    assert plan.peak_bytes == live + 12 * 18 and plan.peak_var == "a"
    assert plan.argbest_bytes == 2 + 4 + 1 and plan.decode == "argbest"
    assert plan.message_bytes == (12 + 4) * 8


def test_a_table_sliced_off_its_leading_axis_is_counted_as_a_copy() -> None:
    # (b,a) in the bucket of a: slicing it at a's values copies 3 entries
    plan = plan_memory([("b", "a"), ("a", "c")], SIZES, ["a", "b", "c"], decode="argbest")
    assert plan.buckets[0].peak_bytes == (6 + 8) * 8 + 12 * 18 + 3 * 8


def test_lean_plan_is_only_for_be_in_one_place() -> None:
    with pytest.raises(ValueError):
        plan_memory(SCOPES, SIZES, ["a", "b", "c"], 2, 8, decode="argbest")
    with pytest.raises(ValueError):
        plan_memory(SCOPES, SIZES, ["a", "b", "c"], None, 8, decode="nope")
    problem = random_network(10, 3, 0.4, 0.0, seed=1)
    order = elimination_order("minfill", problem.neighbours())
    assert plan_for(problem, order, None, np.float64, CPU, resident=0).lean is not None
    assert plan_for(problem, order, 2, np.float64, CPU, resident=0).lean is None
    assert plan_for(problem, order, None, np.float64, CPU, task="pr", resident=0).lean is None


def wide_problem() -> tuple[Problem, list[str]]:
    """A random network whose BE keeps several MB of messages."""
    problem = random_network(24, 3, 0.35, 0.0, seed=3)
    return problem, elimination_order("minfill", problem.neighbours())


def test_within_keeps_messages_where_they_fit_and_argbest_tables_where_only_those_do() -> None:
    problem, order = wide_problem()
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None and plan.lean.peak_bytes < plan.peak_bytes
    assert plan.within(plan.peak_bytes) is plan
    between = (plan.lean.peak_bytes + plan.peak_bytes) / 2
    assert plan.within(between) is plan.lean and plan.fits(between)
    assert not plan.fits_alone(between)
    below = plan.lean.peak_bytes - 1
    assert plan.within(below) is plan and not plan.fits(below)
    text = refusal(plan, Limit(below, "the limit"), None)
    assert "argbest" in text


def test_solve_decodes_from_argbest_tables_when_the_messages_do_not_fit() -> None:
    problem, order = wide_problem()
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    kept = solve(problem, "be", ordering="minfill", dtype="float64", resident=0)
    between = (plan.lean.peak_bytes + plan.peak_bytes) / 2
    lean = solve(problem, "be", ordering="minfill", dtype="float64", resident=0, max_bytes=between)
    assert lean.memory_peak == plan.lean.peak_bytes
    assert kept.memory_peak == plan.peak_bytes
    assert lean.lower_bound == kept.lower_bound == lean.upper_bound == kept.upper_bound
    assert problem.evaluate(lean.assignment) == lean.upper_bound
    with pytest.raises(TableTooLarge, match="argbest"):
        solve(
            problem, "be", ordering="minfill", dtype="float64", resident=0,
            max_bytes=plan.lean.peak_bytes - 1,
        )  # fmt: skip


def test_the_lean_pass_frees_every_message_and_stays_within_its_plan() -> None:
    """tracemalloc sees NumPy's buffers: the lean pass peaks within its plan (plus the
    interpreter's few objects), below the pass that keeps its messages."""
    problem, order = wide_problem()
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    peaks = {}
    for chosen in (plan, plan.lean):
        tracemalloc.start()
        try:
            buckets = bucket_pass(problem, order, CPU, plan=chosen)
            peaks[chosen.decode] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        if chosen.decode == "argbest":
            assert buckets.argbest is not None
            assert not any(buckets.tables.values())  # nothing but argbest tables is kept
            kept = [t for t in buckets.argbest.values() if isinstance(t, ArgbestTable)]
            assert {t.data.dtype for t in kept} == {np.dtype(np.uint8)}
            assert not any(t.packed for t in kept)  # d = 3: a byte per entry
            assert sum(t.nbytes for t in kept) <= plan.lean.argbest_bytes
    assert peaks["argbest"] < peaks["messages"]
    assert peaks["argbest"] <= plan.lean.peak_bytes + 256 * 1024


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 10**6),
    st.sampled_from(["minfill", "mindegree", "pseudotree"]),
    st.booleans(),
)
def test_argbest_decoding_equals_brute_force(seed: int, ordering: str, integer: bool) -> None:
    """Hard constraints, unary to ternary tables, empty buckets, a constant."""
    problem = random_problem(seed, integer=integer)
    best = brute_force(problem)
    order = elimination_order(ordering, problem.neighbours())
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    assignment, stats = eliminate(problem, order, CPU, plan=plan.lean)
    kept, kept_stats = eliminate(problem, order, CPU, plan=plan)
    if math.isinf(best):
        assert math.isinf(stats.bound) and math.isinf(kept_stats.bound)
        return
    assert stats.bound == pytest.approx(best, rel=1e-9)
    assert problem.evaluate(assignment) == pytest.approx(best, rel=1e-9)
    assert problem.evaluate(kept) == pytest.approx(best, rel=1e-9)
    if integer:  # integer sums are exact whatever their order
        assert stats.bound == kept_stats.bound == best


@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("seed", range(6))
def test_one_bucket_against_join_then_argbest(op: Op, seed: int) -> None:
    """The message and argbest table equal the materialised join's eliminate and argbest
    (NumPy's argmin/argmax: the first best value on ties, which integer costs make common)."""
    rng = np.random.default_rng(seed)
    names = ["x", "p", "q", "r"]
    sizes = dict(zip(names, rng.integers(2, 5, size=4).tolist(), strict=True))
    variables = [Variable.with_size(v, sizes[v]) for v in names]
    scopes = [("x", "p"), ("x", "q", "r"), ("r", "x"), ("x",)]
    tables = [
        CPU.table(s, rng.integers(0, 4, size=[sizes[v] for v in s]).astype(float)) for s in scopes
    ]
    position = {v: i for i, v in enumerate(names)}
    output, best = eliminate_keeping_argbest(CPU, tables, "x", op=op, order=position)
    joined = CPU.join(tables, ("p", "q", "r", "x"))
    assert isinstance(best, ArgbestTable) and best.scope == ("p", "q", "r")
    assert best.data.dtype == np.uint8 and best.packed == (sizes["x"] == 2)
    values = np.unpackbits(best.data)[: math.prod(best.shape)] if best.packed else best.data
    want = CPU.argbest(joined, "x", op).data
    np.testing.assert_array_equal(values.reshape(best.shape), want)
    for index in np.ndindex(*best.shape):  # what the value phase reads
        assert best.value(CPU, dict(zip(best.scope, index, strict=True))) == want[index]
    (message,) = output.tables
    np.testing.assert_array_equal(message.data, CPU.eliminate(joined, "x", op).data)
    # a bucket over its variable alone: the value itself and the scalar
    alone = Problem.build(variables, [CostTable(("x",), np.arange(sizes["x"], 0, -1.0))])
    output, value = eliminate_keeping_argbest(
        CPU, [CPU.table(("x",), alone.tables[0].dense())], "x", op=op
    )
    assert value == (sizes["x"] - 1 if op == "min" else 0)
    assert output.scalar == (1.0 if op == "min" else sizes["x"])


def test_a_binary_problem_keeps_a_bit_per_entry() -> None:
    """A spin glass: every argbest table packed, eight entries to a byte, as planned."""
    problem = spin_glass(7, seed=2)
    order = elimination_order("minfill", problem.neighbours())
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    buckets = bucket_pass(problem, order, CPU, plan=plan.lean)
    assert buckets.argbest is not None
    kept = [t for t in buckets.argbest.values() if isinstance(t, ArgbestTable)]
    assert kept and all(t.packed and t.nbytes == -(-math.prod(t.shape) // 8) for t in kept)
    assert plan.lean.argbest_bytes == sum(t.nbytes for t in kept) + (
        len(buckets.argbest) - len(kept)
    )  # a scalar bucket's value is planned as one byte
    kept_messages = eliminate(problem, order, CPU, plan=plan)[1].bound
    assignment = decode(problem, buckets, CPU)
    assert buckets.stats.bound == kept_messages == problem.evaluate(assignment)


def test_decode_reads_the_argbest_tables() -> None:
    problem, order = wide_problem()
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    buckets = bucket_pass(problem, order, CPU, plan=plan.lean)
    assignment = decode(problem, buckets, CPU)
    assert problem.evaluate(assignment) == buckets.stats.bound


def test_auto_runs_be_that_fits_only_with_argbest_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's exact rung keeps every message, so it cannot end as such a BE would: auto
    runs BE itself (not only when it is quick) and says how it decodes."""
    from dcop.inference import anytime

    problem, order = wide_problem()
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    between = (plan.lean.peak_bytes + plan.peak_bytes) / 2
    monkeypatch.setattr(anytime, "BE_FIRST_S", -1.0)  # never quick enough for BE-first
    result = anytime.solve_auto(
        problem, timeout=120, ordering="minfill", dtype="float64", max_bytes=between, resident=0
    )
    assert result.algo == "be" and result.exact
    assert "argbest" in (result.choice or "")
    assert result.upper_bound == solve(problem, "be", ordering="minfill").upper_bound


def test_every_message_dies_with_the_bucket_that_consumes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No reference outlives a consumed message (a loop variable once kept one 8 MiB message
    of a 20x20 spin glass one bucket too long: the peak over its plan)."""
    import weakref

    import dcop.bucketpass as bucketpass

    problem = spin_glass(8, seed=1)
    order = elimination_order("minfill", problem.neighbours())
    position = {v: i for i, v in enumerate(order)}
    plan = plan_for(problem, order, None, np.float64, CPU, resident=0)
    assert plan.lean is not None
    made: list[tuple[str, weakref.ref[np.ndarray]]] = []
    eliminate_one = bucketpass.eliminate_keeping_argbest

    def recording(*args: object, **kwargs: object) -> object:
        output, best = eliminate_one(*args, **kwargs)  # type: ignore[arg-type]
        for message in output.tables:
            consumer = min(message.scope, key=position.__getitem__)
            made.append((consumer, weakref.ref(message.data)))
        return output, best

    checked = []

    def progress(done: int, total: int, var: str) -> None:
        at = position[var] if var else len(order)
        for consumer, ref in made:
            if position[consumer] < at:
                assert ref() is None, f"the message consumed by {consumer!r} is alive at {var!r}"
                checked.append(consumer)

    monkeypatch.setattr(bucketpass, "eliminate_keeping_argbest", recording)
    bucket_pass(problem, order, CPU, plan=plan.lean, progress=progress)
    assert len(set(checked)) > 10


def test_integral_minus_log_costs_run_in_float32_and_stay_exact() -> None:
    """A ±J spin glass's -ln potentials are exactly ±1: min-sum in float32 is exact (half the
    bytes of every table); an Ising grid's real couplings keep float64."""
    from dcop.generators import ising_grid
    from dcop.tables import choose_dtype

    glass = spin_glass(9, seed=4)
    assert glass.cost_kind == "neg_ln" and choose_dtype(glass) == np.float32
    assert choose_dtype(ising_grid(5, seed=1)) == np.float64
    single = solve(glass, "be", ordering="minfill")
    double = solve(glass, "be", ordering="minfill", dtype="float64")
    assert single.dtype == "float32" and double.dtype == "float64"
    assert single.lower_bound == double.lower_bound == single.upper_bound == double.upper_bound
    assert glass.evaluate(single.assignment) == single.upper_bound
