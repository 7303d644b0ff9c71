"""MB-DPOP in process (agent threads, the real Coordinator): the same optimum as brute force and
BE at limits that force cuts, no message over the limit, the agents' cut equal to the
coordinator's simulation of the tree, a clear refusal where no cut is small enough, and auto's
choice between DPOP, MB-DPOP and ADPOP."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.backends import get_backend
from dcop.conditioned import CTX, Fold, chunk_util, chunk_util_loop, contexts
from dcop.errors import TableTooLarge
from dcop.generators import grid_network, random_network
from dcop.inference import solve_be
from dcop.protocol import RunSpec
from dcop.tables import Table
from dcop.trees import cutset
from dcop.trees.candidates import default_candidates
from dcop.trees.cutset import CutLimit, TreeShape, clusters_of
from dcop.trees.dfs import simulate
from tests.agents.conftest import run_in_process
from tests.conftest import brute_force, random_problem

#: 4 KiB of overhead plus room for this many float64 entries: tiny message limits
TINY = {n: 4096 + 8 * n for n in (1, 9, 27)}
#: A small memory limit: beside its base, an agent holds a UTIL of 128 float64 entries (a
#: quarter of the rest), which forces cuts on separators of 5 ternary variables
SMALL_MEMORY = cutset.AGENT_BASE_BYTES + 4096


def _same(cost: float | None, best: float) -> bool:
    if cost is None or not math.isfinite(best):
        return cost is None and not math.isfinite(best)
    return math.isclose(cost, best, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=12, deadline=None)
@given(
    st.integers(0, 10**6),
    st.sampled_from(
        [
            (TINY[1], None, None),
            (TINY[9], None, SMALL_MEMORY),
            (TINY[9], 1, None),
            (1 << 20, 2, None),
        ]
    ),
)
def test_mbdpop_equals_brute_force_at_limits_that_force_parts_and_cuts(seed: int, limits) -> None:  # type: ignore[no-untyped-def]
    max_bytes, width, memory = limits
    problem = random_problem(seed, n=7, n_tables=9)
    spec = RunSpec(
        "mbdpop", max_message_bytes=max_bytes, width=width, max_memory_bytes=memory, trees=1
    )
    doc = run_in_process(problem, spec=spec, timeout=30)
    assert _same(doc["cost"], brute_force(problem))
    if doc["algo"] == "mbdpop":
        assert doc["exact"] or doc["status"] == "infeasible"
        assert doc["metrics"]["largest_message_bytes"] <= max_bytes


@pytest.mark.parametrize(
    ("make", "max_bytes", "width", "memory", "join"),
    [
        (lambda: random_network(12, 3, 0.5, 0.2, seed=3), TINY[9], None, None, None),
        (lambda: random_network(12, 3, 0.5, 0.0, seed=4), 1 << 20, 1, None, None),
        (lambda: grid_network(25, 3, 0.2, seed=5), TINY[27], None, SMALL_MEMORY, None),
        (lambda: grid_network(25, 3, 0.2, seed=5), TINY[9], None, SMALL_MEMORY, 64),
        (lambda: random_network(12, 3, 0.5, 0.0, seed=4), 1 << 20, 1, None, 64),
    ],
    ids=["random-parts", "random-width1", "grid-memory", "grid-memory-chunks", "width1-chunks"],
)
def test_mbdpop_equals_be_with_parts_chunks_and_no_message_over_the_limit(  # type: ignore[no-untyped-def]
    make, max_bytes, width, memory, join, monkeypatch
) -> None:
    """A UTIL over the message limit goes up in parts (no cut where an agent may hold it); a
    separator over what an agent holds (``--max-memory``) or over ``--width`` is cut, and a
    chunk's UTIL goes up in parts too; a small join budget (an agent's memory for a chunk)
    makes chunks of few contexts, and a parent's ``more`` paces them."""
    if join is not None:
        monkeypatch.setattr(cutset, "CHUNK_JOIN_ENTRIES", join)
    problem = make()
    spec = RunSpec(
        "mbdpop", max_message_bytes=max_bytes, width=width, max_memory_bytes=memory, trees=1
    )
    doc = run_in_process(problem, spec=spec, timeout=60)
    assert doc["algo"] == "mbdpop"
    assert _same(doc["cost"], solve_be(problem).cost)
    cuts = doc["pseudo_tree"]["cuts"]
    messages = doc["metrics"]["messages"]
    assert 0 < doc["metrics"]["largest_message_bytes"] <= max_bytes
    if width is None and memory is None:  # parts alone: DPOP's messages, more of them
        assert not cuts and "no cut needed" in doc["pseudo_tree"]["why"]
        assert messages["util"] > len(problem.variables) - 1
        return
    assert cuts and all(c["cut"] for c in cuts)
    assert messages["replay"] >= 1
    if join is not None:
        assert any(c["contexts"] > c["chunk"] * 2 for c in cuts)  # more chunks than the window
        assert messages["more"] >= 1
    assert messages["chunk"] >= len(cuts)


def test_the_agents_cut_is_the_coordinators_simulation() -> None:
    """The clusters the agents found on their back tokens are those the pure code finds on the
    coordinator's own simulation of the same DFS."""
    problem = random_network(14, 3, 0.45, 0.0, seed=8)
    spec = RunSpec("mbdpop", width=2, trees=1)
    doc = run_in_process(problem, spec=spec, timeout=60)
    ran = doc["run"].tree.clusters
    names = list(problem.variables)
    neighbours = problem.neighbours()
    ids = {v: i for i, v in enumerate(names)}
    adjacency = {ids[v]: {ids[u] for u in neighbours[v]} for v in names}
    sizes = problem.domain_sizes()
    domains = {i: sizes[v] for i, v in enumerate(names)}
    run = simulate(adjacency, dict(enumerate(names)), domains, default_candidates(1)[0])
    shape = TreeShape(
        {a: s.parent for a, s in run.states.items()},
        {a: tuple(s.separator) for a, s in run.states.items()},
        domains,
    )
    simulated = clusters_of(shape, CutLimit.from_bytes(spec.max_message_bytes, 2))
    assert ran
    key = sorted((c.root, sorted(c.members), c.cut, c.chunk) for c in ran)
    assert key == sorted((c.root, sorted(c.members), c.cut, c.chunk) for c in simulated)


def test_a_limit_too_small_for_any_cut_refuses_in_one_line() -> None:
    problem = random_network(40, 10, 0.5, 0.0, seed=2)
    spec = RunSpec("mbdpop", width=1, trees=1)
    with pytest.raises(TableTooLarge) as info:
        run_in_process(problem, spec=spec, timeout=60)
    text = str(info.value)
    assert "\n" not in text and "contexts" in text and "adpop" in text


def test_auto_runs_dpop_where_it_fits_and_mbdpop_where_it_does_not() -> None:
    problem = random_network(12, 3, 0.5, 0.2, seed=3)
    fits = run_in_process(problem, spec=RunSpec("auto", trees=1), timeout=60)
    assert fits["algo"] == "dpop" and not fits["pseudo_tree"]["cuts"]
    cut = run_in_process(problem, spec=RunSpec("auto", width=1, trees=1), timeout=60)
    assert cut["algo"] == "mbdpop" and cut["exact"]
    assert "MB-DPOP" in cut["pseudo_tree"]["why"]
    from dcop.cli.report import summarize

    tail = summarize(cut["run"]).tail
    assert any(
        line.startswith("cluster at ") and " contexts in chunks of " in line for line in tail
    )
    assert _same(cut["cost"], solve_be(problem).cost)


def test_auto_falls_back_to_adpop_when_the_cut_would_take_too_long() -> None:
    problem = random_network(40, 10, 0.5, 0.0, seed=2)
    doc = run_in_process(
        problem, spec=RunSpec("auto", max_message_bytes=1 << 20, trees=1), timeout=60
    )
    assert doc["algo"] == "adpop"


# ---- the batched computation --------------------------------------------------------------------
def _tables(seed: int) -> tuple[list[Table], dict[str, int]]:
    rng = np.random.default_rng(seed)
    sizes = {"x": 3, "a": 2, "b": 3, "c": 2, "e": 2}
    scopes = [("x", "a", "b"), ("x", "c"), ("x", "e", "a"), ("b", "c"), ("a", "c")]
    return [
        Table(s, rng.integers(0, 9, size=tuple(sizes[v] for v in s)).astype(float)) for s in scopes
    ], sizes


@pytest.mark.parametrize("var", ["x", "a"], ids=["eliminated", "a-cut-variable"])
def test_the_batched_chunk_equals_the_per_context_loop(var: str) -> None:
    backend = get_backend("numpy")
    tables, _ = _tables(0)
    ctx = contexts((2, 2), 1, 4)
    batched = chunk_util(backend, tables, var, ["a", "c"], ctx)
    loop = chunk_util_loop(backend, tables, var, ["a", "c"], ctx)
    assert batched.scope[0] == CTX and set(batched.scope) == set(loop.scope)
    assert np.allclose(backend.transpose(batched, loop.scope).data, loop.data)


def test_the_fold_keeps_the_best_context_per_separator_value() -> None:
    rng = np.random.default_rng(1)
    values = rng.integers(0, 20, size=(12, 3)).astype(float)  # cut (a: 2, c: 2, g: 3), rest e
    fold = Fold(["a", "e"], {"a": 2, "e": 3}, ["a", "c", "g"], [2, 2, 3])
    for start in range(0, 12, 5):  # chunks that cut across the runs
        fold.add(start, values[start : start + 5])
    scope, best = fold.table()
    assert scope == ("a", "e")
    for a in range(2):
        for e in range(3):
            rows = values[a * 6 : a * 6 + 6, e]
            assert best[a, e] == rows.min()
            k = fold.best_context({"a": a, "e": e})
            assert values[k, e] == rows.min() and k // 6 == a


def test_a_chunk_starts_in_simulated_time_when_its_own_inputs_are_in() -> None:
    """A pipeline's later chunk or grant may arrive while a member still computes: the chunk
    it computes starts at its own parts' and grant's clocks, not at theirs."""
    from dcop.agents.cluster import WINDOW, ClusterRole
    from dcop.protocol.messages import ROWS, ClusterCut, Whole, WireTable

    cut = ClusterCut(0, (1, 2), (5,), (4,), 1, 1.0, ("c",))
    role = ClusterRole(cut, root=False, members=frozenset({2}))
    whole = Whole((CTX, "b"), (1, 2))
    block = WireTable.from_array((ROWS, "b"), np.zeros((1, 2)))
    role.take(2, 0, 0, 1, whole, block, clock=1.0)
    role.take(2, 1, 0, 1, whole, block, clock=5.0)
    role.take(2, 2, 0, 1, whole, block, clock=2.0)
    role.grant(WINDOW + 1, 4.0)
    role.grant(WINDOW, 9.0)  # no new room: ignored
    assert role.inputs_at(0) == 1.0
    assert role.inputs_at(1) == 5.0
    assert role.inputs_at(2) == 4.0  # its parts came at 2.0, its room at 4.0


def test_a_cut_past_every_limit_stops_within_a_token_and_is_refused_in_one_line() -> None:
    """A grid cut to width 1 would cut most of its variables (more than a token's 64): the cut
    stops once it passes MAX_CONTEXTS, its cluster still rides the back tokens, and the run is
    refused in one line instead of stalling on a dropped token."""
    problem = grid_network(100, 3, 0.0, seed=1)
    spec = RunSpec("mbdpop", width=1, trees=1)
    names = list(problem.variables)
    neighbours = problem.neighbours()
    ids = {v: i for i, v in enumerate(names)}
    adjacency = {ids[v]: {ids[u] for u in neighbours[v]} for v in names}
    domains = {i: 3 for i in range(len(names))}
    run = simulate(adjacency, dict(enumerate(names)), domains, default_candidates(1)[0])
    shape = TreeShape(
        {a: s.parent for a, s in run.states.items()},
        {a: tuple(s.separator) for a, s in run.states.items()},
        domains,
    )
    (cluster, *_) = clusters_of(shape, CutLimit.from_bytes(spec.max_message_bytes, 1))
    assert cluster.contexts > cutset.MAX_CONTEXTS and len(cluster.cut) <= 64
    with pytest.raises(TableTooLarge) as info:
        run_in_process(problem, spec=spec, timeout=120)
    text = str(info.value)
    assert "\n" not in text and "at least" in text and "contexts" in text
