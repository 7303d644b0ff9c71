"""Distributed PR and MAR: log-sum-exp UTILs up the pseudo-tree, down messages for the marginals.

Each run is checked against brute force (every assignment enumerated) and against the
centralized solver, on random MARKOV and BAYES models with and without evidence, with zeros,
isolated variables, a constant factor, and log Z far from 0 in both directions.
"""

from __future__ import annotations

import json
import math

import msgspec
import numpy as np
import pytest

from dcop.errors import InputError, ModelError, TableTooLarge
from dcop.generators import ising_grid, random_bayes
from dcop.inference.partition import infer
from dcop.model import CostTable, Problem, Variable
from dcop.protocol import RunSpec
from tests.inference.test_sumproduct import brute_force, observe, random_markov


def _run(run_inproc, problem: Problem, task: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    doc = run_inproc(problem, spec=RunSpec(task=task))  # type: ignore[arg-type]
    json.dumps({k: v for k, v in doc.items() if k not in ("run", "agent_objects")}, allow_nan=False)
    return doc  # type: ignore[no-any-return]


def _assert_equals_brute_force(run_inproc, problem: Problem) -> None:  # type: ignore[no-untyped-def]
    ln_z, marginals = brute_force(problem)
    pr = _run(run_inproc, problem, "pr")
    mar = _run(run_inproc, problem, "mar")
    for doc in (pr, mar):
        assert doc["task"] in ("pr", "mar") and doc["algo"] == "dpop"
        assert doc["cost"] is None and doc["assignment"] is None
    if ln_z == -math.inf:
        assert pr["status"] == mar["status"] == "infeasible"
        assert pr["ln_partition"] == mar["ln_partition"] == "-inf"
        assert mar["marginals"] is None
        return
    assert pr["status"] == mar["status"] == "ok", (pr["message"], mar["message"])
    assert pr["exact"] and mar["exact"]
    assert pr["ln_partition"] == pytest.approx(ln_z, rel=1e-9, abs=1e-9)
    assert mar["ln_partition"] == pytest.approx(ln_z, rel=1e-9, abs=1e-9)
    assert pr["marginals"] is None
    for v, probs in marginals.items():
        np.testing.assert_allclose(mar["marginals"][v], probs, atol=1e-9)
    # the wire: PR sends no downward message, MAR one down message per tree edge
    edges = problem.n - pr["metrics"]["theory"]["trees"]
    assert pr["metrics"]["messages"].get("down", 0) == 0
    assert pr["metrics"]["messages"].get("value", 0) == 0
    assert mar["metrics"]["messages"].get("down", 0) == edges
    assert all(mar["metrics"]["checks"][k] for k in ("util_messages_match", "down_messages_match"))


@pytest.mark.parametrize("evidence", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_markov_equals_brute_force(run_inproc, seed: int, evidence: bool) -> None:
    problem = random_markov(seed)
    _assert_equals_brute_force(run_inproc, observe(problem, seed) if evidence else problem)


@pytest.mark.parametrize("evidence", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_bayes_equals_brute_force(run_inproc, seed: int, evidence: bool) -> None:
    problem = random_bayes(7, d=2, parents=3, seed=seed)
    _assert_equals_brute_force(run_inproc, observe(problem, seed) if evidence else problem)


def test_equals_the_centralized_solver_on_a_grid(run_inproc) -> None:
    problem = ising_grid(4, coupling=1.5, seed=3)
    central = infer(problem, "mar")
    mar = _run(run_inproc, problem, "mar")
    assert mar["ln_partition"] == pytest.approx(central.ln_partition, rel=1e-12)
    assert central.marginals is not None
    for v, probs in central.marginals.items():
        np.testing.assert_allclose(mar["marginals"][v], probs, atol=1e-12)


@pytest.mark.parametrize("shift", [-300.0, 300.0])
def test_log_z_far_from_zero(run_inproc, shift: float) -> None:
    problem = random_markov(3, zeros=0.0, shift=shift)
    ln_z, marginals = brute_force(problem)
    assert abs(ln_z) > 1000  # far beyond what exp() of a float64 holds
    mar = _run(run_inproc, problem, "mar")
    assert mar["ln_partition"] == pytest.approx(ln_z, rel=1e-12)
    for v, probs in marginals.items():
        np.testing.assert_allclose(mar["marginals"][v], probs, atol=1e-9)


def test_isolated_variables_and_a_constant_factor(run_inproc) -> None:
    variables = [Variable.with_size(f"x{i}", 3) for i in range(4)]
    pair = CostTable(("x0", "x1"), -np.log(np.arange(1.0, 10.0).reshape(3, 3)))
    unary = CostTable(("x2",), -np.log(np.array([1.0, 2.0, 5.0])))
    constant = CostTable((), np.asarray(-math.log(7.0)))  # a factor of 7 on every assignment
    problem = Problem.build(variables, [pair, unary, constant], cost_kind="neg_ln")
    # x3 is in no table: it multiplies Z by its 3 values and has a uniform marginal
    _assert_equals_brute_force(run_inproc, problem)
    doc = _run(run_inproc, problem, "pr")
    assert doc["ln_partition"] == pytest.approx(math.log(45 * 8 * 3 * 7), rel=1e-12)


def test_a_model_of_zeros_is_infeasible(run_inproc) -> None:
    variables = [Variable.with_size(f"x{i}", 2) for i in range(3)]
    tables = [
        CostTable(("x0", "x1"), np.full((2, 2), math.inf)),
        CostTable(("x1", "x2"), np.array([[0.0, 1.0], [2.0, 0.5]])),
    ]
    _assert_equals_brute_force(run_inproc, Problem.build(variables, tables, cost_kind="neg_ln"))


def test_sum_tasks_are_exact_dpop_only() -> None:
    for algo in ("adpop", "auto"):
        with pytest.raises(InputError, match="--algo dpop"):
            RunSpec(algo, 2, task="pr")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown task"):
        RunSpec(task="map")  # type: ignore[arg-type]
    spec = RunSpec(task="mar")
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(spec), type=RunSpec) == spec
    assert spec.cli_args()[-2:] == ["--task", "mar"]
    older = {k: v for k, v in RunSpec().to_dict().items() if k != "task"}
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(older), type=RunSpec).task == "min"


def test_a_wcsp_top_has_no_partition_function() -> None:
    """Refused by the coordinator as it is made, before any message."""
    from dcop.coordinator.driver import Coordinator
    from dcop.coordinator.topology import peers_for
    from dcop.protocol import COORDINATOR_ID, InProcHub

    variables = [Variable.with_size("a", 2), Variable.with_size("b", 2)]
    table = CostTable(("a", "b"), np.array([[0.0, 1.0], [1.0, 0.0]]))
    problem = Problem.build(variables, [table], upper_bound=5.0)
    peers = peers_for(problem, "tcp://127.0.0.1:1", lambda i, v: f"tcp://127.0.0.1:{2 + i}")
    transport = InProcHub().transport(COORDINATOR_ID)
    with pytest.raises(ModelError, match="global upper bound"):
        Coordinator(problem, peers, transport, RunSpec(task="pr"))
    Coordinator(problem, peers, transport, RunSpec())  # minimising it is fine
    from dcop.coordinator import run_local

    with pytest.raises(ModelError, match="global upper bound"):
        run_local(problem, RunSpec(task="mar"))  # before any agent process starts


def test_a_util_over_the_limit_is_refused_without_an_adpop_hint(run_inproc) -> None:
    from dcop.errors import TableTooLarge

    problem = ising_grid(5, seed=1)
    with pytest.raises(TableTooLarge, match="exact DPOP only") as caught:
        run_inproc(problem, spec=RunSpec(max_message_bytes=4096, task="pr"))
    assert "--algo adpop" not in str(caught.value)


@pytest.mark.parametrize("task", ["pr", "mar"])
def test_agents_buckets_by_the_contraction_engine_equal_centralized(
    run_inproc, monkeypatch: pytest.MonkeyPatch, task: str
) -> None:
    """Every agent's bucket through the contraction engine (its threshold set to 0): the run
    equals the centralized one."""
    from dcop.contraction import bucket

    calls: list[str] = []
    real = bucket.sum_bucket

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[2])
        return real(*args, **kwargs)

    monkeypatch.setattr(bucket, "MIN_ENTRIES", 0)
    monkeypatch.setattr(bucket, "sum_bucket", counted)
    problem = observe(ising_grid(4, 0.8, 0.3, seed=2), 1)
    central = infer(problem, task)
    doc = _run(run_inproc, problem, task)
    assert calls  # the engine ran buckets
    assert doc["ln_partition"] == pytest.approx(central.ln_partition, rel=1e-9)
    if task == "mar":
        assert central.marginals is not None
        for v, probs in central.file_marginals().items():  # type: ignore[union-attr]
            np.testing.assert_allclose(doc["marginals"][v], probs, atol=1e-9)


def _clique(n: int) -> Problem:
    rng = np.random.default_rng(3)
    variables = [Variable.with_size(f"x{i}", 2) for i in range(n)]
    tables = [
        CostTable((f"x{a}", f"x{b}"), -np.log(rng.uniform(0.5, 1.5, (2, 2))), f"f{a}_{b}")
        for a in range(n)
        for b in range(a + 1, n)
    ]
    return Problem.build(variables, tables, cost_kind="neg_ln")


@pytest.mark.parametrize("room", [False, True], ids=["over-the-limit", "fits"])
def test_the_contraction_engine_runs_only_where_it_fits_the_memory_limit(
    run_inproc, monkeypatch: pytest.MonkeyPatch, room: bool
) -> None:
    """Security round 4, finding 4: the engine's bucket takes several times its largest table;
    an agent whose --max-memory has no room for that runs the log-space join+eliminate (PR
    agents peaked at 1.7-2.3x the limit). The answer is the same either way."""
    from dcop.agents import session
    from dcop.contraction import bucket

    calls: list[str] = []
    real = bucket.sum_bucket

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[2])
        return real(*args, **kwargs)

    limit = 1 << 30
    monkeypatch.setattr(bucket, "MIN_ENTRIES", 0)
    monkeypatch.setattr(bucket, "sum_bucket", counted)
    monkeypatch.setattr(session, "resident_bytes", lambda: 0 if room else limit)
    problem = _clique(8)
    doc = run_inproc(problem, spec=RunSpec(task="pr", max_memory_bytes=limit))
    assert bool(calls) == room
    assert doc["ln_partition"] == pytest.approx(infer(problem, "pr").ln_partition, rel=1e-9)


def test_mar_plans_its_down_pass_in_the_memory_limit(run_inproc) -> None:
    """Security round 4, finding 4: MAR agents hold the down pass beside the up pass; a limit
    that the up pass alone fits is refused for MAR before any table is built."""
    from dcop.coordinator.choice import AGENT_BASE_BYTES

    problem = _clique(15)
    free = run_inproc(problem, spec=RunSpec(task="pr"))
    largest = free["metrics"]["largest_util_bytes"]
    limit = AGENT_BASE_BYTES + 4 * largest
    pr = run_inproc(problem, spec=RunSpec(task="pr", max_memory_bytes=limit))
    assert pr["status"] == "ok", pr["message"]
    # the refusal names the agent's planned peak, not the UTIL alone (which fits the limit)
    peak = (
        r"planned peak \(its tables, that UTIL, its children's and its down pass\) of [0-9.]+ MiB"
    )
    with pytest.raises(TableTooLarge, match=peak + " > the memory limit"):
        run_inproc(problem, spec=RunSpec(task="mar", max_memory_bytes=limit))
