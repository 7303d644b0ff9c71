"""The whole protocol in one process (agent threads, in-process transport): DPOP equals BE and brute
force, ADPOP brackets the optimum, the DFS builds the centralized pseudo-tree, counts match theory."""

from __future__ import annotations

import math
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.agents import jobs
from dcop.backends.numpy import NumpyBackend
from dcop.generators import grid_network, random_network, scale_free_network
from dcop.inference import solve_be
from dcop.inference.elimination import eliminate
from dcop.protocol import RunSpec
from dcop.trees.dfs import to_pseudo_tree
from dcop.trees.pseudotree import PseudoTree
from tests.conftest import brute_force, random_problem


def _same(a: float | None, b: float) -> bool:
    if a is None:
        return math.isinf(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6))
def test_dpop_equals_brute_force_on_random_mixed_arity(run_inproc, seed: int) -> None:
    """Mixed arities (0..3), +inf entries, constants, isolated variables (forests)."""
    problem = random_problem(seed, n=6, n_tables=7)
    result = run_inproc(problem)
    best = brute_force(problem)
    assert _same(result["cost"], best)
    assert result["status"] == ("ok" if math.isfinite(best) else "infeasible")
    if result["run"].feasible:
        assert result["run"].bound_matches_cost
    checks = result["metrics"]["checks"]
    assert checks["util_messages_match"] and checks["value_messages_match"]
    assert checks["token_messages_match"] and checks["util_entries_match"]


def _tree_of(result: dict) -> PseudoTree:  # type: ignore[type-arg]
    """The candidate tree the coordinator kept, as the agents built it."""
    choice = result["run"].tree
    names = {a.me: a.session.var for a in result["agent_objects"]}
    states = {a.me: a.session.trees[choice.tree] for a in result["agent_objects"]}
    roots = [i for i, st in states.items() if st.parent is None]
    return to_pseudo_tree(states, roots, names)


@pytest.mark.parametrize(
    "make",
    [
        lambda: random_network(16, 4, 0.25, 0.3, seed=3),
        lambda: scale_free_network(16, 3, 0.3, seed=4),
        lambda: grid_network(16, 3, 0.3, seed=5),
        lambda: random_network(30, 3, 0.1, 0.2, seed=6),
    ],
    ids=["random16", "scalefree16", "grid16", "random30"],
)
def test_dpop_equals_be_and_reports_the_tree_it_ran(run_inproc, make) -> None:
    """DPOP on the kept candidate tree equals BE; every agent reports that tree, the separator
    the DFS gave it and a UTIL of exactly the predicted size; counts match the theory."""
    problem = make()
    result = run_inproc(problem)
    be = solve_be(problem)
    assert _same(result["cost"], be.upper_bound)
    choice = result["run"].tree
    tree = _tree_of(result)
    assert sorted(result["roots"]) == sorted(tree.roots)
    seps = tree.separators()
    sizes = problem.domain_sizes()
    largest = 0
    for var, info in result["agents"].items():
        assert info["parent"] == tree.parent[var]
        assert info["children"] == tree.children[var]
        assert sorted(info["pseudo_parents"]) == sorted(tree.pseudo_parents[var])
        if tree.parent[var] is not None:
            assert sorted(info["separator"]) == sorted(seps[var])
            assert info["util_entries"] == math.prod(sizes[v] for v in seps[var])
            largest = max(largest, info["util_entries"])
    assert choice.predicted[None] == largest  # the sizing predicted what was sent
    assert choice.largest_entries[choice.tree] == min(choice.largest_entries)
    n = problem.n
    messages = result["metrics"]["messages"]
    assert messages["util"] == n - len(tree.roots) == messages["value"]
    assert all(result["metrics"]["checks"].values())


@pytest.mark.parametrize("z", [1, 2, 3])
def test_adpop_bounds_bracket_the_optimum(run_inproc, z: int) -> None:
    problem = random_network(14, 3, 0.35, 0.0, seed=11)  # no +inf: finite upper bounds
    opt = solve_be(problem).upper_bound
    result = run_inproc(problem, "adpop", z=z)
    assert result["lower_bound"] <= opt + 1e-9 <= result["upper_bound"] + 2e-9
    assert result["upper_bound"] == pytest.approx(problem.evaluate(result["run"].assignment))
    # ADPOP along the kept pseudo-tree is MBE along that tree's elimination order
    order = _tree_of(result).elimination_order()
    _, stats = eliminate(problem, order, NumpyBackend(), z=z)
    assert result["lower_bound"] == pytest.approx(stats.bound)
    sizes = problem.domain_sizes()
    for info in result["agents"].values():
        assert info["util_entries"] <= info["util_tables"] * max(sizes.values()) ** max(z, 1)


def test_adpop_with_large_z_is_exact(run_inproc) -> None:
    problem = scale_free_network(12, 3, 0.2, seed=2)
    result = run_inproc(problem, "adpop", z=20)
    assert _same(result["lower_bound"], solve_be(problem).upper_bound)
    assert _same(result["cost"], solve_be(problem).upper_bound)


def test_logical_clocks_and_compute_are_recorded(run_inproc) -> None:
    result = run_inproc(random_network(10, 3, 0.3, 0.2, seed=1))
    m = result["metrics"]
    assert m["simulated_runtime_s"] > 0
    assert m["simulated_runtime_s"] <= m["compute_s_total"] + 1e-9
    itemsize = 4 if result["dtype"] == "float32" else 8  # integer costs: float32 on the wire
    assert result["dtype"] == "float32"
    assert m["largest_util_bytes"] > itemsize * m["largest_util_entries"] - 1


class _SlowBackend(NumpyBackend):
    """NumPy, but eliminating ``x1`` takes longer than the peers' timeout."""

    def join_eliminate(self, tables, var, *args, **kwargs):  # type: ignore[no-untyped-def]
        if var == "x1":
            time.sleep(3.0)
        return super().join_eliminate(tables, var, *args, **kwargs)


def test_long_util_computation_keeps_the_agent_alive(run_inproc, monkeypatch) -> None:
    """Long joins run beside the event loop: heartbeats continue, nobody is declared dead.
    (Tiny buckets run on the loop's thread; this slow one is declared long by the threshold.)"""
    monkeypatch.setattr(jobs, "INLINE_MAX_ENTRIES", {"cpu": 0, "gpu": 0})
    problem = random_network(5, 2, 0.6, 0.0, seed=1)
    result = run_inproc(
        problem,
        backend=_SlowBackend(),
        heartbeat_s=0.1,
        peer_timeout_s=1.5,
        spec=RunSpec(peer_timeout_s=1.5),
        coordinator_kw={"heartbeat_s": 0.1},
    )
    assert _same(result["cost"], solve_be(problem).upper_bound)
    assert result["agents"]["x1"]["compute_s"] >= 3.0


class _ThreadRecordingBackend(NumpyBackend):
    """NumPy, recording the thread of every join+eliminate."""

    def __init__(self) -> None:
        super().__init__()
        self.ran_on: list[str] = []

    def join_eliminate(self, tables, var, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.ran_on.append(threading.current_thread().name)
        return super().join_eliminate(tables, var, *args, **kwargs)


@pytest.mark.parametrize("inline", [True, False])
def test_short_buckets_run_on_the_loop_thread(run_inproc, monkeypatch, inline: bool) -> None:
    """A bucket under the inline threshold runs on the agent's loop thread (hot caches, no
    hand-over); above it, on the agent's worker. Same answer either way."""
    if not inline:
        monkeypatch.setattr(jobs, "INLINE_MAX_ENTRIES", {"cpu": 0, "gpu": 0})
    problem = random_network(6, 3, 0.5, 0.0, seed=4)
    backend = _ThreadRecordingBackend()
    result = run_inproc(problem, backend=backend)
    assert _same(result["cost"], solve_be(problem).upper_bound)
    assert backend.ran_on
    on_worker = [name == "dcop-jobs" for name in backend.ran_on]
    assert not any(on_worker) if inline else all(on_worker)


def test_a_mini_bucket_run_is_as_short_as_its_mini_buckets(run_inproc, monkeypatch) -> None:
    """Whether a bucket runs inline counts the entries its mini-buckets join, not the whole
    bucket's: a bucket too large for the threshold in DPOP is a few short joins in ADPOP(1)."""
    monkeypatch.setattr(jobs, "INLINE_MAX_ENTRIES", {"cpu": 60, "gpu": 60})
    problem = random_network(10, 3, 0.8, 0.0, seed=2)  # dense: buckets of several variables
    ran_on = {}
    for algo, z in (("dpop", None), ("adpop", 1)):
        backend = _ThreadRecordingBackend()
        run_inproc(problem, algo, z=z, backend=backend)
        ran_on[algo] = [name == "dcop-jobs" for name in backend.ran_on]
    assert any(ran_on["dpop"])  # the threshold bites on whole buckets...
    assert ran_on["adpop"] and not any(ran_on["adpop"])  # ...and on none of ADPOP(1)'s


def test_util_larger_than_the_frame_limit_fails_fast() -> None:
    """A UTIL table that the parent would refuse ends the run with a clear error, not a hang."""
    import pytest as _pytest

    from dcop.errors import TableTooLarge
    from tests.agents.conftest import run_in_process

    problem = random_network(8, 4, 0.8, 0.0, seed=3)  # dense: separators of several variables
    with _pytest.raises(TableTooLarge, match="refused before any table was built"):
        run_in_process(problem, timeout=10, spec=RunSpec(max_message_bytes=4096))


@pytest.mark.parametrize("z", [1, 2, 3])
def test_adpop_sizing_predicts_what_is_sent(run_inproc, z: int) -> None:
    """The sizing carried by the DFS predicts every ADPOP UTIL message the agents then send."""
    problem = random_network(14, 3, 0.35, 0.0, seed=12)
    result = run_inproc(problem, "adpop", z=z)
    sent = max(info["util_entries"] for info in result["agents"].values())
    assert result["run"].tree.predicted[z] == sent


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_auto_runs_dpop_when_it_fits_and_is_exact(run_inproc, seed: int) -> None:
    problem = random_network(12, 3, 0.3, 0.2, seed=seed)
    result = run_inproc(problem, spec=RunSpec("auto"))
    assert result["algo"] == "dpop" and result["z"] is None and result["exact"]
    assert _same(result["cost"], solve_be(problem).upper_bound)


@pytest.mark.parametrize("seed", [4, 5])
def test_auto_falls_back_to_the_largest_adpop_z_that_fits(
    run_inproc, seed: int, monkeypatch
) -> None:
    """With a message limit DPOP's largest UTIL does not fit, and MB-DPOP's predicted work (cuts to
    the width) not the time, auto runs ADPOP with the largest z whose UTILs fit; its bounds
    enclose the optimum. (A message limit alone costs MB-DPOP no cut: its UTILs go in parts.)"""
    from dcop.trees import cutset

    monkeypatch.setattr(cutset, "CUT_ENTRIES_PER_S", 1e-6)  # every cut predicted far too long
    problem = random_network(12, 4, 0.6, 0.0, seed=seed)  # dense: wide separators
    opt = solve_be(problem).upper_bound
    exact = run_inproc(problem)
    dpop_bytes = int(exact["run"].tree.predicted[None]) * 4  # sizes are floats (dcop.sizes)
    spec = RunSpec("auto", max_message_bytes=max(4096, dpop_bytes // 4 + 4096), width=1)
    result = run_inproc(problem, spec=spec)
    z = result["z"]
    assert result["algo"] == "adpop" and z is not None and not result["exact"]
    assert result["lower_bound"] <= opt + 1e-9 <= result["upper_bound"] + 1e-9
    predicted = result["run"].tree.predicted
    assert predicted[z] * 4 + 4096 <= spec.max_message_bytes
    assert z + 1 not in predicted or predicted[z + 1] * 4 + 4096 > spec.max_message_bytes


def test_a_refused_run_builds_no_table(run_inproc) -> None:
    """DPOP whose largest UTIL cannot fit is refused after the DFS: no agent starts a UTIL."""
    from dcop.errors import TableTooLarge
    from tests.agents.conftest import run_in_process

    problem = random_network(12, 4, 0.6, 0.0, seed=4)
    agents: list[object] = []
    with pytest.raises(TableTooLarge, match=r"largest ADPOP z that fits is \d+"):
        run_in_process(problem, spec=RunSpec(max_message_bytes=8192), keep=agents)
    assert agents and all(a.session.job is None and not a.session.bucket for a in agents)  # type: ignore[attr-defined]
