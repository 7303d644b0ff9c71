"""Who runs what: the layout of a problem on peers.json, pyDCOP's agents honoured."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcop.coordinator.plan import RunPlan
from dcop.coordinator.topology import layout_for, peers_for
from dcop.errors import InputError
from dcop.generators import random_network
from dcop.io import read_problem
from dcop.protocol.runspec import AUTO_TREES_MAX

YAML = """\
name: placed
objective: min
domains:
  d: {values: [0, 1, 2]}
variables:
  v1: {domain: d}
  v2: {domain: d}
  v3: {domain: d}
constraints:
  c12: {type: intention, function: "abs(v1 - v2)"}
  c23: {type: intention, function: "abs(v2 - v3) + v1 * 0"}
agents: [alpha, beta, gamma, delta]
distribution_hints:
  must_host:
    gamma: [v1]
    alpha: [v3]
"""


def test_serving_agents_take_the_variables_the_file_places_on_them(tmp_path: Path) -> None:
    path = tmp_path / "placed.yaml"
    path.write_text(YAML)
    problem = read_problem(path)
    specific = peers_for(
        problem, "tcp://127.0.0.1:7000", lambda i, v: f"tcp://127.0.0.1:{7001 + i}"
    )
    assert {a.variable: a.name for a in specific.agents} == {
        "v1": "gamma",
        "v3": "alpha",
        "v2": "beta",
    }
    # a problem-independent file for four serving agents, the agents listed in another order
    serving = peers_for(
        problem,
        "tcp://127.0.0.1:7000",
        lambda i, v: f"tcp://127.0.0.1:{7001 + i}",
        specific=False,
    )
    assert not serving.problem_specific
    layout = layout_for(problem, serving)
    by_name = {a.name: a.id for a in serving.agents}
    assert layout.variable[by_name["gamma"]] == "v1"
    assert layout.variable[by_name["alpha"]] == "v3"
    assert layout.variable[by_name["beta"]] == "v2"
    assert layout.neighbours[by_name["beta"]] == {by_name["gamma"], by_name["alpha"]}


def test_more_variables_than_agents_is_a_clear_error() -> None:
    small = random_network(3, 2, 0.9, 0.1, seed=1)
    big = random_network(5, 2, 0.9, 0.1, seed=1)
    serving = peers_for(small, "tcp://h:7000", lambda i, v: f"tcp://h:{7001 + i}", specific=False)
    with pytest.raises(InputError, match=r"5 variables but peers\.json lists 3 agents"):
        layout_for(big, serving)
    assert len(layout_for(small, serving).variable) == 3


def test_auto_tree_count_builds_more_candidates_only_for_large_utils() -> None:
    """One candidate where its UTILs are small (d = 3, n = 20: at most 3^9 entries), the full set
    where the first tree's largest UTIL exceeds 65536 entries (d = 10, separators of 5+)."""
    for d, expected in ((3, 1), (10, AUTO_TREES_MAX)):
        problem = random_network(20, d, 0.3, 0.5, seed=1)
        peers = peers_for(
            problem, "tcp://127.0.0.1:7000", lambda i, v: f"tcp://127.0.0.1:{7001 + i}"
        )
        assert RunPlan(problem, peers).tree_count == expected
