"""The coordinator's decision and session without a socket: choice.py's pure functions on
hand-made sizings, and the sans-IO session driven message by message."""

from __future__ import annotations

import numpy as np
import pytest

from dcop.coordinator.choice import Limits, choose, choose_algorithm, combine_sizings
from dcop.coordinator.plan import RunPlan, local_layout
from dcop.coordinator.session import CoordinatorSession
from dcop.coordinator.topology import layout_for, peers_for
from dcop.errors import TableTooLarge
from dcop.model import CostTable, Problem, Variable
from dcop.protocol import Go, Heartbeat, Hello, RunSpec, Setup, Sizing, Start, Stop
from dcop.protocol.constants import LINKING_PHASE

#: x0 - x1 - x2 - x3: agent i runs xi
CHAIN = Problem.build(
    [Variable(f"x{i}", (0, 1)) for i in range(4)],
    [CostTable((f"x{i}", f"x{i + 1}"), np.eye(2)) for i in range(3)],
)
MIB = 1 << 20


def limits(message_mib: float, itemsize: int = 8) -> Limits:
    return Limits(int(message_mib * MIB), None, itemsize, False, {0: 64})


def sizings(*largest: float) -> list[Sizing]:
    """DPOP's sizing, then z = 1, 2, ...: each a largest UTIL from agent 1."""
    return [Sizing((), n, 1, n) for n in largest]


def name(agent: int) -> str:
    return f"agent {agent}"


def test_auto_runs_dpop_where_it_fits_else_the_largest_z_that_does() -> None:
    zs = (None, 1, 2, 3)
    fits = choose_algorithm(RunSpec("auto"), zs, sizings(1e3, 10, 100, 1e3), limits(1), name)
    assert (fits.algo, fits.z) == ("dpop", None)
    big = sizings(1e9, 10, 1e4, 1e8)  # 1 MiB holds 131072 float64 entries
    picked = choose_algorithm(RunSpec("auto"), zs, big, limits(1), name)
    assert (picked.algo, picked.z) == ("adpop", 2) and "largest ADPOP z" in picked.reason


def test_a_run_that_cannot_fit_is_refused_naming_the_z_that_would() -> None:
    zs = (None, 1, 2, 3)
    big = sizings(1e9, 10, 1e4, 1e8)
    with pytest.raises(TableTooLarge, match=r"agent 1.*--algo adpop --z 2"):
        choose_algorithm(RunSpec("dpop"), zs, big, limits(1), name)
    with pytest.raises(TableTooLarge, match=r"ADPOP\(z=3\).*--z 2"):
        choose_algorithm(RunSpec("adpop", 3), zs, big, limits(1), name)
    ran = choose_algorithm(RunSpec("adpop", 2), zs, big, limits(1), name)
    assert (ran.algo, ran.z) == ("adpop", 2)


def test_the_tree_with_the_smallest_largest_util_is_kept() -> None:
    spec = RunSpec("dpop", trees=2)
    reports = [[(3, (Sizing((), 800, 2, 900),))], [(2, (Sizing((), 80, 1, 90),))]]
    choice, decision = choose(spec, reports, ["dfs", "dfs"], "auto", "not offered", limits(1), name)
    assert choice.tree == 1 and choice.widths == [3, 2] and decision.z is None
    assert choice.largest_entries == [800, 80] and "DFS candidate 1" in choice.why


def test_a_forest_sizes_as_its_largest_component() -> None:
    forest = combine_sizings([(Sizing((), 5, 3, 6),), (Sizing((), 9, 4, 9),)], 1)
    assert forest == [Sizing((), 9, 4, 15)]


def test_the_local_layout_is_the_one_of_dcop_runs_peers() -> None:
    peers = peers_for(CHAIN, "tcp://127.0.0.1:*", lambda i, v: "tcp://127.0.0.1:*")
    assert local_layout(CHAIN) == layout_for(CHAIN, peers)


def test_the_session_answers_messages_with_messages() -> None:
    plan = RunPlan(CHAIN, None, RunSpec(trees=1), tree="dfs")
    session = CoordinatorSession(plan)

    def hello(agent: int) -> list[tuple[int, object]]:
        return list(session.on(agent, Hello(f"x{agent}", 1, endpoint=f"tcp://h:{agent}"), 0.1))

    assert hello(0) == [] and hello(2) == []  # x1 has not said hello: nobody's Setup yet
    out = hello(1)  # x0 and x1 have every neighbour's endpoint now, x2 still waits for x3
    assert sorted(a for a, m in out if isinstance(m, Setup)) == [0, 1]
    out += hello(3)
    assert sorted(a for a, _ in out) == [0, 1, 2, 3] and session.all_said_hello()
    # each Setup carries its agent's Start (wire version 8): no message of its own, no barrier
    starts = {a: m.start for a, m in out if isinstance(m, Setup)}
    assert all(isinstance(s, Start) for s in starts.values())
    assert [a for a, s in starts.items() if s is not None and s.root] == session.roots[0]
    assert not session.trees_reported()
    assert session.late("dfs") == (
        session.roots[0],
        "did not report its candidate trees (the DFS did not finish)",
    )
    # agents send no ready: one whose heartbeat says it still links up is named instead
    session.on(2, Heartbeat(LINKING_PHASE), 0.5)
    assert session.late("dfs")[0] == [2] and "did not get ready" in session.late("dfs")[1]
    assert [(a, type(m)) for a, m in session.end("done")] == [(a, Stop) for a in range(4)]
    assert Go not in {type(m) for _, m in out}
