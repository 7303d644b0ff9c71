"""pyDCOP's agents, distribution, must_host and hosting_costs decide which agent runs each
variable, one agent per variable; what cannot be honoured is a warning, never silence."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from dcop.io import read_problem
from dcop.io.placement import agent_placement
from tests.conftest import INSTANCES
from tests.io.helpers import write

PYDCOP = sorted((INSTANCES / "pydcop").glob("*.yaml")) if INSTANCES.exists() else []

HEAD = """name: t
domains: {d: {values: [0, 1]}}
variables: {x: {domain: d}, y: {domain: d}, z: {domain: d}}
constraints:
  c: {type: intention, function: x + y + z}
"""


def place(tmp_path: Path, tail: str) -> tuple[dict[str, str], list[str]]:
    problem = read_problem(write(tmp_path, "p.yaml", HEAD + tail))
    placement, warnings = agent_placement(problem)
    # the reader applied the same placement and kept the same warnings
    assert {v: var.agent for v, var in problem.variables.items()} == placement
    assert problem.meta["placement_warnings"] == warnings
    assert len(set(placement.values())) == len(placement)  # one variable per agent
    return placement, warnings


@pytest.mark.parametrize("path", PYDCOP, ids=[p.name for p in PYDCOP])
def test_shared_pydcop_instances_place_one_variable_per_agent(path: Path) -> None:
    problem = read_problem(path)
    placement, warnings = agent_placement(problem)
    agents = problem.meta["agents"]
    assert isinstance(agents, list) and len(agents) == problem.n
    assert list(placement.values()) == agents  # no hints: file order
    assert warnings == []


def test_agent_properties_are_recorded(tmp_path: Path) -> None:
    problem = read_problem(
        write(
            tmp_path, "p.yaml", HEAD + "agents:\n  a1: {capacity: 100, foo: bar}\n  a2: {}\n  a3:\n"
        )
    )
    assert problem.meta["agents"] == ["a1", "a2", "a3"]
    assert problem.meta["agent_properties"] == {"a1": {"capacity": 100, "foo": "bar"}}


def test_must_host_is_honoured_and_the_rest_follows_file_order(tmp_path: Path) -> None:
    placement, warnings = place(
        tmp_path, "agents: [a1, a2, a3]\ndistribution_hints:\n  must_host: {a3: [x], a1: [z]}\n"
    )
    assert placement == {"x": "a3", "y": "a2", "z": "a1"}
    assert warnings == []


def test_two_variables_on_one_agent_is_a_warning(tmp_path: Path) -> None:
    placement, warnings = place(
        tmp_path, "agents: [a1, a2, a3]\ndistribution_hints:\n  must_host: {a1: [x, y]}\n"
    )
    assert placement == {"x": "a1", "y": "a2", "z": "a3"}
    assert warnings == [
        "must_host: agent 'a1' would host 'x' and 'y', but an agent runs one variable; "
        "placed elsewhere: 'y'"
    ]


def test_unknown_names_and_constraints_are_warnings(tmp_path: Path) -> None:
    placement, warnings = place(
        tmp_path,
        "agents: [a1, a2, a3]\ndistribution_hints:\n"
        "  must_host: {a1: [c, y], ghost: [x], a2: [w]}\n",
    )
    assert placement == {"x": "a2", "y": "a1", "z": "a3"}
    assert warnings == [
        "must_host names agents that the agents section does not declare: 'ghost': ignored",
        "must_host names constraints 'c': constraints run with their variables here, ignored",
        "must_host names 'w', neither variables nor constraints: ignored",
    ]


def test_idle_agents_and_missing_agents_are_warnings(tmp_path: Path) -> None:
    _, warnings = place(tmp_path, "agents: [a1, a2, a3, a4, a5]\n")
    assert warnings == ["agents that host no variable: 'a4', 'a5' (5 agents for 3 variables)"]
    placement, warnings = place(tmp_path, "agents: {a_z: {}, b: {}}\n")
    assert placement == {"x": "a_z", "y": "b", "z": "a_z_"}  # a name no agent has
    assert warnings == ["2 agents for 3 variables: agents named after them (a_<variable>) run 'z'"]


def test_without_agents_the_hints_name_them(tmp_path: Path) -> None:
    placement, warnings = place(tmp_path, "distribution_hints:\n  must_host: {h1: [y]}\n")
    assert placement == {"x": "a_x", "y": "h1", "z": "a_z"}
    assert warnings == []


def test_distribution_comes_first_then_must_host(tmp_path: Path) -> None:
    placement, warnings = place(
        tmp_path,
        "agents: [a1, a2, a3]\ndistribution: {a2: [x], a1: []}\n"
        "distribution_hints:\n  must_host: {a3: [x, z]}\n",
    )
    assert placement == {"x": "a2", "y": "a1", "z": "a3"}
    assert warnings == [
        "must_host: variable 'x' is wished on agents 'a3' too, but it runs on agent 'a2'"
    ]


def test_hosting_costs_pick_the_cheapest_free_agent(tmp_path: Path) -> None:
    placement, warnings = place(
        tmp_path,
        "agents: [a1, a2, a3]\n"
        "hosting_costs:\n  default: 100\n"
        "  a1: {default: 50, computations: {z: 0}}\n"
        "  a2: {computations: {x: 10, y: 5}}\n"
        "  a3: {default: 1}\n",
    )
    # cheapest pairs first: (a1, z) 0, (a3, *) 1 -> x (file order), (a2, y) 5
    assert placement == {"x": "a3", "y": "a2", "z": "a1"}
    assert warnings == []


def test_host_with_several_variables_is_a_warning(tmp_path: Path) -> None:
    _, warnings = place(
        tmp_path, "agents: [a1, a2, a3]\ndistribution_hints:\n  host_with: {x: [y, c]}\n"
    )
    assert warnings == [
        "host_with asks for variables 'x', 'y' on one agent, but an agent runs one variable: "
        "ignored"
    ]


def test_warnings_are_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, "p.yaml", HEAD + "agents: [a1, a2, a3, a4]\n")
    with caplog.at_level(logging.WARNING, logger="dcop.io.pydcop_yaml"):
        read_problem(path)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: agents that host no variable: 'a4' (4 agents for 3 variables)"
    ]


def test_frodo_owners_are_checked_too(tmp_path: Path) -> None:
    """FRODO names each variable's agent; two variables of one agent cannot both run on it."""
    text = """<instance><presentation name="t" maximize="false"/>
<agents nbAgents="2"><agent name="A"/><agent name="B"/></agents>
<domains nbDomains="1"><domain name="D" nbValues="2">0..1</domain></domains>
<variables nbVariables="3"><variable name="x" domain="D" agent="A"/>
<variable name="y" domain="D" agent="A"/><variable name="z" domain="D" agent="B"/></variables>
<relations nbRelations="0"/><constraints nbConstraints="0"/></instance>"""
    problem = read_problem(write(tmp_path, "p.xml", text))
    placement, warnings = agent_placement(problem)
    assert placement == {"x": "A", "y": "a_y", "z": "B"}
    assert warnings == [
        "agent: agent 'A' would host 'x' and 'y', but an agent runs one variable; "
        "placed elsewhere: 'y'",
        "2 agents for 3 variables: agents named after them (a_<variable>) run 'y'",
    ]
    shared = INSTANCES / "frodo" / "graph_coloring_14.xml"
    if shared.exists():
        frodo = read_problem(shared)
        placement, warnings = agent_placement(frodo)
        assert warnings == []
        assert placement == {v: var.agent for v, var in frodo.variables.items()}
