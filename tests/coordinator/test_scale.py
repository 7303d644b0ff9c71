"""Hundreds of agent processes: a 200-agent run finishes (``slow``: CI's second step), 1000- and
2000-agent ones under the ``scale`` marker (``make test-scale``: not in CI, where they take
minutes of the 2 cores).

Each agent is its own OS process with its own sockets; the answer equals bucket elimination's.
No time is asserted (the shared test machines vary); the counts and the answer are.
"""

from __future__ import annotations

import math

import pytest

from dcop.coordinator import run_local
from dcop.coordinator.processes import templates_for
from dcop.generators import scale_free_network
from dcop.inference import solve_be
from dcop.protocol import RunSpec

#: Hundreds of processes at once: alone under xdist, so that no other test's processes starve.
pytestmark = pytest.mark.serial


def _run_tree(n: int) -> None:
    problem = scale_free_network(n, 3, 0.3, seed=1, m=1)  # a tree: `dcop generate --links 1`
    result = run_local(problem, RunSpec("dpop"), timeout=600)
    best = solve_be(problem).upper_bound
    assert math.isclose(result.cost, best) if math.isfinite(best) else math.isinf(result.cost)
    assert all(result.metrics["checks"].values()), result.metrics["checks"]
    assert result.processes is not None
    assert set(result.processes["exit_codes"].values()) == {0}
    assert result.processes["templates"] == templates_for(n)  # forked in parallel
    assert len({a["pid"] for a in result.agents.values()}) == n  # one process per variable
    messages = result.metrics["messages"]
    # a tree's elimination tree is as narrow as its one DFS candidate and replaces it: the
    # tokens are its sizing pass (one per agent but the root), not a walk of 2(n - 1) in turn
    assert messages["util"] == n - 1 == messages["value"] == messages["token"]
    assert result.tree is not None and list(result.tree.kinds) == ["elimination"]
    times = result.times
    assert 0 < times["launch"] < times["total"]
    hellos = result.processes["hello_s"]  # the launch, agent by agent
    assert 0 < hellos["first"] <= hellos["median"] <= hellos["last"] <= times["launch"]


@pytest.mark.slow
def test_a_200_agent_tree() -> None:
    _run_tree(200)


@pytest.mark.scale
def test_a_1000_agent_tree() -> None:
    _run_tree(1000)


@pytest.mark.scale
def test_a_2000_agent_tree() -> None:
    _run_tree(2000)
