"""The coordinator's elimination pseudo-tree as a DPOP/ADPOP candidate: DPOP on it equals BE on
small random problems, grids and problems of several components; agents link to tree relatives
that are not neighbours; ``auto`` keeps the candidate with the smallest predicted UTILs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dcop.coordinator import peers_for, round_robin
from dcop.coordinator.elimination import elimination_tree
from dcop.coordinator.plan import RunPlan
from dcop.coordinator.topology import layout_for
from dcop.generators import grid_network, random_network, scale_free_network
from dcop.inference import solve
from dcop.io import write_problem
from dcop.model import CostTable, Problem, Variable
from dcop.protocol import RunSpec
from tests.agents.conftest import RunFn
from tests.conftest import random_problem


def components(seed: int) -> Problem:
    """Two random components and an isolated variable, domains of 2 to 4 values."""
    rng = np.random.default_rng(seed)
    names = [f"v{i}" for i in range(15)]
    variables = {v: Variable.with_size(v, int(rng.integers(2, 5))) for v in names}
    tables = []
    for part in (names[:8], names[8:14]):
        for i, a in enumerate(part):
            for b in part[i + 1 :]:
                if rng.random() < 0.4 or b == part[i + 1]:
                    shape = (variables[a].size, variables[b].size)
                    tables.append(CostTable((a, b), rng.integers(0, 9, shape).astype(float)))
    tables.append(CostTable(("v14",), rng.integers(0, 9, (variables["v14"].size,)).astype(float)))
    return Problem(variables, tables)


CASES = [
    *[(f"random{s}", random_problem(s, n=7)) for s in range(3)],
    ("grid16", grid_network(16, 3, 0.3, 0)),
    ("scalefree", scale_free_network(14, 3, 0.3, 2)),
    *[(f"components{s}", components(s)) for s in range(2)],
]


def optimum(problem: Problem) -> float:
    return solve(problem, "be", ordering="minfill").lower_bound


@pytest.mark.parametrize(("name", "problem"), CASES, ids=[n for n, _ in CASES])
def test_dpop_on_the_elimination_tree_equals_be(
    run_inproc: RunFn, name: str, problem: Problem
) -> None:
    doc = run_inproc(problem, "dpop", coordinator_kw={"tree": "elimination"})
    run = doc["run"]
    assert list(run.tree.kinds) == ["elimination"]  # no DFS tree is built beside it
    assert "no DFS tree built" in run.tree.why
    assert run.bound == pytest.approx(optimum(problem), abs=1e-6)
    assert run.cost == pytest.approx(run.bound, abs=1e-6)


def test_adpop_sizes_and_runs_the_elimination_tree(run_inproc: RunFn) -> None:
    problem = random_network(12, 3, 0.4, 0.3, 4)
    doc = run_inproc(problem, "adpop", z=2, coordinator_kw={"tree": "elimination"})
    run = doc["run"]
    assert run.tree.kinds[run.tree.tree] == "elimination" and run.ran.z == 2
    best = optimum(problem)
    assert run.bound <= best + 1e-6 <= run.cost + 2e-6


def test_pr_on_the_elimination_tree(run_inproc: RunFn) -> None:
    from dcop.inference.partition import infer
    from dcop.protocol import RunSpec

    problem = random_problem(7, n=7)
    doc = run_inproc(problem, spec=RunSpec(task="pr"), coordinator_kw={"tree": "elimination"})
    run = doc["run"]
    assert run.tree.kinds[run.tree.tree] == "elimination"
    assert run.partition.ln_partition == pytest.approx(infer(problem, "pr").ln_partition, abs=1e-9)


def layout_of(problem: Problem) -> Any:
    peers = peers_for(
        problem, *round_robin(["127.0.0.1"], 0, list(range(20000, 20001 + problem.n)))
    )
    return layout_for(problem, peers)


@pytest.mark.parametrize(("name", "problem"), CASES, ids=[n for n, _ in CASES])
def test_the_elimination_tree_in_agent_ids(name: str, problem: Problem) -> None:
    layout = layout_of(problem)
    tree = elimination_tree(problem, layout, 0.0)
    assert sorted(tree.given) == sorted(layout.variable)
    for a, given in tree.given.items():
        parent = given.path[-1] if given.path else None
        assert (parent is None) == (a in tree.roots)
        for c in given.children:
            assert tree.given[c].path == (*given.path, a)
        # every neighbour is an ancestor or a descendant
        for n in layout.neighbours[a]:
            assert n in given.path or a in tree.given[n].path
        # a link joins a tree parent or child that is not a neighbour, both ways
        for other in tree.links.get(a, ()):
            assert other not in layout.neighbours[a] and a in tree.links[other]
            assert other == parent or other in given.children
    assert tree.largest >= 1 or all(not g.path for g in tree.given.values())


def test_auto_keeps_the_narrower_tree(run_inproc: RunFn) -> None:
    # a scale-free network whose first DFS tree (4096 entries) is wider than its elimination
    # tree (1024)
    problem = scale_free_network(80, 2, 0.0, 1, m=2)
    run = run_inproc(problem, "dpop", timeout=60)["run"]
    choice = run.tree
    # one DFS candidate (its largest UTIL is small), and a narrower elimination tree: that one
    # runs alone, without the DFS walk
    assert list(choice.kinds) == ["elimination"] and "runs alone" in choice.why
    # with DFS candidates asked for, it is offered beside them, and kept
    spec = RunSpec("dpop", trees=2)
    choice = run_inproc(problem, "dpop", timeout=60, spec=spec)["run"].tree
    assert choice.kinds[-1] == "elimination" and "offered" in choice.why
    assert choice.largest_entries[choice.tree] == min(choice.largest_entries)
    assert choice.kinds[choice.tree] == "elimination"
    assert run.bound == pytest.approx(optimum(problem), abs=1e-6)
    assert run.cost == pytest.approx(run.bound, abs=1e-6)
    # --tree dfs: the agents' DFS trees only
    run = run_inproc(problem, "dpop", timeout=60, coordinator_kw={"tree": "dfs"})["run"]
    assert set(run.tree.kinds) == {"dfs"} and "--tree dfs" in run.tree.why
    assert run.bound == pytest.approx(optimum(problem), abs=1e-6)


def test_auto_does_not_offer_a_tree_no_narrower(run_inproc: RunFn) -> None:
    """Beside DFS candidates asked for, a tree only as narrow as theirs is not offered; where
    the autos leave one DFS candidate, it replaces that one (no walk of 2(n - 1) tokens)."""
    problem = random_problem(3, n=7)
    layout = layout_of(problem)
    first = RunPlan(problem).first_largest
    assert elimination_tree(problem, layout, 0.0).largest == first  # as narrow as the DFS
    run = run_inproc(problem, "dpop", spec=RunSpec("dpop", trees=1))["run"]
    assert set(run.tree.kinds) == {"dfs"} and "no smaller" in run.tree.why
    doc = run_inproc(problem, "dpop")
    assert set(doc["run"].tree.kinds) == {"elimination"} and "runs alone" in doc["run"].tree.why
    assert doc["run"].cost == pytest.approx(optimum(problem), abs=1e-6)
    plan = RunPlan(problem)
    assert plan.spec.trees == 0  # the agents start no DFS
    assert plan.reported_spec.trees == 1  # the document counts the candidate it replaced


@pytest.mark.parametrize("extra", [[], ["--secure"]])
def test_dcop_run_links_non_neighbours(tmp_path: Path, extra: list[str]) -> None:
    """Agent processes over ZeroMQ (and CurveZMQ) link to tree relatives that are not
    neighbours and solve exactly on the elimination tree."""
    problem = grid_network(25, 3, 0.0, 1)
    assert elimination_tree(problem, layout_of(problem), 0.0).links  # some parents are strangers
    path = tmp_path / "g.wcsp"
    write_problem(problem, path)
    out = tmp_path / "r.json"
    command = [sys.executable, "-m", "dcop", "run", str(path), "--tree", "elimination"]
    run = subprocess.run(
        [*command, *extra, "--json", str(out), "-q"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["pseudo_tree"]["kind"] == "elimination"
    assert doc["cost"] == pytest.approx(optimum(problem))
    # no DFS walk: the tokens are the given tree's sizing pass, one per agent but the root
    assert doc["metrics"]["messages"]["token"] == problem.n - 1


def test_setup_links_and_start_given_travel_and_are_checked() -> None:
    from dcop.errors import ProtocolError
    from dcop.protocol import RunSpec, Setup, Start, decode, encode
    from dcop.protocol.messages import GivenTree, Neighbour

    digest = "0" * 64
    links = (Neighbour(7, "x7", "tcp://127.0.0.1:5007", ""),)
    setup = Setup("x1", 2, (), digest, (Neighbour(2, "x2", "tcp://127.0.0.1:5002", ""),), links)
    back = decode(encode(0, 1, setup, 3)).body
    assert isinstance(back, Setup) and back.links == links

    def with_start(start: Start) -> Setup:  # a start travels in its setup
        return Setup("x1", 2, (), digest, start=start)

    start = Start(RunSpec(trees=2), (0,), GivenTree((4, 9), (2, 3), (5,)))
    back = decode(encode(0, 1, with_start(start), 3)).body
    assert isinstance(back, Setup) and back.start is not None and back.start.given == start.given
    alone = Start(RunSpec(trees=0), (), GivenTree((4, 9), (2, 3), (5,)))  # no DFS tree
    back = decode(encode(0, 1, with_start(alone), 3)).body
    assert isinstance(back, Setup) and back.start is not None
    assert back.start.given == alone.given and back.start.spec.trees == 0
    for bad in (
        with_start(Start(RunSpec(trees=0), ())),  # no tree at all
        with_start(Start(RunSpec(trees=0), (0,), GivenTree((4, 9), (2, 3), (5,)))),  # no DFS
        with_start(Start(RunSpec(trees=2), (), GivenTree((4, 9), (2,), ()))),  # a domain each
        with_start(Start(RunSpec(trees=2), (), GivenTree((4,), (2,), (4,)))),  # an agent twice
        Setup("x1", 2, (), digest, links, links),  # a link that is a neighbour
    ):
        with pytest.raises(ProtocolError):
            decode(encode(0, 1, bad, 3))


def test_predicted_sizes_beyond_the_wire_saturate(run_inproc: RunFn) -> None:
    """A clique of 12 variables of 60 values: every tree's UTIL has 60^11 > 2^64 entries; the
    sizes saturate on the wire and the run is refused as too large (no overflow)."""
    from dcop.errors import TableTooLarge

    names = [f"v{i}" for i in range(12)]
    variables = {v: Variable.with_size(v, 60) for v in names}
    rng = np.random.default_rng(0)
    tables = [
        CostTable((a, b), rng.integers(0, 9, (60, 60)).astype(float))
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    ]
    with pytest.raises(TableTooLarge, match="refused before any table"):
        run_inproc(Problem(variables, tables), "dpop", timeout=30)
