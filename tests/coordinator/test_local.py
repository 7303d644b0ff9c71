"""Real processes: one ``dcop-agent`` per variable over ZeroMQ on 127.0.0.1."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dcop.coordinator import run_local
from dcop.errors import TableTooLarge
from dcop.generators import grid_network, random_network, scale_free_network
from dcop.inference import solve_be
from dcop.io import read_problem
from dcop.protocol import RunSpec
from tests.conftest import INSTANCES


def _same(a: float | None, b: float) -> bool:
    return math.isinf(b) if a is None else math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        lambda: random_network(10, 3, 0.3, 0.3, seed=1),
        lambda: scale_free_network(10, 3, 0.3, seed=2),
        lambda: grid_network(9, 3, 0.3, seed=3),
    ],
    ids=["random10", "scalefree10", "grid9"],
)
def test_dpop_processes_equal_be(make) -> None:
    problem = make()
    result = run_local(problem, RunSpec("dpop"), timeout=60)
    assert _same(result.to_json()["cost"], solve_be(problem).upper_bound)
    checks = result.metrics["checks"]
    assert all(checks.values()), checks
    assert result.processes is not None
    assert set(result.processes["exit_codes"].values()) == {0}
    agents = {str(i) for i in range(problem.n)}  # what each forked agent used, from the kernel
    assert set(result.processes["agent_cpu_s"]) == agents
    assert all(s > 0 for s in result.processes["agent_cpu_s"].values())
    assert set(result.processes["agent_page_faults"]) == agents
    # every agent's threads wake at least for its hello, setup, UTIL/VALUE and stop
    assert set(result.processes["agent_context_switches"]) == agents
    assert all(s > 0 for s in result.processes["agent_context_switches"].values())
    preempted = result.processes["agent_preemptions"]
    assert set(preempted) == agents
    assert all(0 <= preempted[i] <= result.processes["agent_context_switches"][i] for i in agents)
    assert result.processes["template_cpu_s"] > 0 and result.processes["coordinator_cpu_s"] > 0
    pids = {a["pid"] for a in result.agents.values()}
    assert len(pids) == problem.n and os.getpid() not in pids  # one process per variable


@pytest.mark.slow
def test_dpop_30_agents_and_adpop() -> None:
    problem = random_network(30, 3, 0.1, 0.0, seed=7)
    opt = solve_be(problem).upper_bound
    result = run_local(problem, RunSpec("dpop"), timeout=120)
    assert _same(result.internal_cost, opt)
    assert result.metrics["messages"]["util"] == 29 == result.metrics["messages"]["value"]
    approx = run_local(problem, RunSpec("adpop", 2), timeout=120).to_json()
    assert approx["lower_bound"] <= opt + 1e-9 <= approx["upper_bound"] + 1e-9


@pytest.mark.parametrize(
    "name",
    [
        "frodo/graph_coloring_14.xml",
        "frodo/max_discsp_12_5.xml",
        "pydcop/rb_n10_d5_p0.3_s1.yaml",
        "pydcop/ising_4x4.yaml",
        "base2.wcsp",
        "queens4.wcsp",
        "test_Z2.uai",
    ],
)
def test_reference_instances_agents_read_the_file(name: str) -> None:
    path = INSTANCES / name
    if not path.exists():
        pytest.skip(f"{path} not found")
    problem = read_problem(str(path))
    result = run_local(problem, RunSpec("dpop"), timeout=60, problem_file=path)
    assert _same(result.internal_cost, solve_be(problem).upper_bound)
    assert result.bound_matches_cost and result.status in ("ok", "infeasible")


def test_cli_run_writes_json(tmp_path: Path) -> None:
    problem_file = tmp_path / "p.wcsp"
    from dcop.io import write_problem

    problem = random_network(8, 3, 0.4, 0.2, seed=5)
    write_problem(problem, str(problem_file))
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dcop",
            "run",
            str(problem_file),
            "--algo",
            "adpop",
            "--z",
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    opt = solve_be(read_problem(str(problem_file))).upper_bound
    assert data["lower_bound"] <= opt + 1e-9
    assert "messages on the wire" in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "dcop", "run", str(problem_file), "--algo", "adpop"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--z" in bad.stderr


def test_cli_run_message_limit(tmp_path: Path) -> None:
    """``--max-message-mib`` reaches every agent: a UTIL above it fails the run with a one-line
    error that names the way out; a limit that fits solves; a limit out of range is refused."""
    from dcop.io import write_problem

    problem = random_network(10, 10, 0.4, 0.2, seed=1)  # separators of 4-5: 10^4-10^5 entries
    problem_file = tmp_path / "p.wcsp"
    write_problem(problem, str(problem_file))

    out = tmp_path / "r.json"

    def run(mib: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "dcop", "run", str(problem_file), "--json", str(out)]
        return subprocess.run(
            [*cmd, "--max-message-mib", mib], capture_output=True, text=True, timeout=120
        )

    fits = run("8")
    assert fits.returncode == 0, fits.stderr
    assert _same(json.loads(out.read_text())["cost"], solve_be(problem).upper_bound)
    tiny = run("0.5")
    assert (
        tiny.returncode == 2
        and "(--max-message-mib) must be between 1 MiB and 4095 MiB" in tiny.stderr
    )
    assert "Traceback" not in tiny.stderr


def test_run_local_frame_limit_is_enforced_over_zmq() -> None:
    problem = random_network(10, 10, 0.4, 0.2, seed=1)
    # the DFS trees only: the coordinator's elimination tree of this problem fits the limit
    with pytest.raises(TableTooLarge, match="refused before any table was built"):
        run_local(problem, RunSpec(max_message_bytes=20_000), timeout=60, tree="dfs")
