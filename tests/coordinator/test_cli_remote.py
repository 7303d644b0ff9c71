"""The multi-host workflow on one machine: ``dcop peers`` (with CURVE keys), agents started by hand
with ``dcop-agent --problem --secure``, and ``dcop coordinator`` driving them."""

from __future__ import annotations

import json
import random
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from dcop.coordinator import AgentProcesses
from dcop.coordinator.keys import generate_keys
from dcop.generators import grid_network
from dcop.inference import solve_be
from dcop.io import write_problem


def _free_run(count: int) -> int:
    """A base port with ``count`` consecutive free ports after it."""
    for _ in range(50):
        base = random.randint(20000, 32000 - count)  # below the ephemeral range
        socks = []
        try:
            for p in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def test_peers_agents_by_hand_and_coordinator_cli(tmp_path: Path) -> None:
    problem = grid_network(9, 3, 0.2, seed=2)
    problem_file = tmp_path / "grid.wcsp"
    write_problem(problem, str(problem_file))
    keys = tmp_path / "keys"
    generate_keys(keys, range(problem.n))
    peers_file = tmp_path / "peers.json"
    base = _free_run(problem.n + 1)
    cli = [sys.executable, "-m", "dcop"]
    made = subprocess.run(
        [
            *cli,
            "peers",
            str(problem_file),
            "--hosts",
            "127.0.0.1",
            "-o",
            str(peers_file),
            "--base-port",
            str(base),
            "--keys",
            str(keys),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    peers = json.loads(peers_file.read_text())
    assert peers["coordinator"] == f"tcp://127.0.0.1:{base}"
    assert all(a["public_key"] for a in peers["agents"]) and peers["coordinator_public_key"]
    procs = AgentProcesses()
    try:
        for a in peers["agents"]:
            procs.start(
                a["id"],
                [
                    sys.executable,
                    "-m",
                    "dcop.agents",
                    "--id",
                    str(a["id"]),
                    "--peers",
                    str(peers_file),
                    "--problem",
                    str(problem_file),
                    "--secure",
                    "--keys",
                    str(keys),
                    "--timeout",
                    "60",
                    "--peer-timeout",
                    "2",
                ],
                tmp_path / f"agent-{a['id']}.log",
            )
        # hosts first, coordinator later: longer than the agents' peer timeout (a regression:
        # agents with --problem used to count the coordinator's silence from their own start)
        time.sleep(4)
        out = tmp_path / "result.json"
        run = subprocess.run(
            [
                *cli,
                "coordinator",
                "--peers",
                str(peers_file),
                "--problem",
                str(problem_file),
                "--secure",
                "--keys",
                str(keys),
                "--timeout",
                "60",
                "--json",
                str(out),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        result = json.loads(out.read_text())
        expected = solve_be(problem).upper_bound
        assert result["cost"] == expected
        # off a terminal the coordinator writes `dcop run`'s plain summary: no box drawing
        assert run.stdout.startswith("DPOP on grid.wcsp: 9 agents")
        assert "messages on the wire:" in run.stdout
        assert not re.search(r"[\u2500-\u257f]", run.stdout), run.stdout
        procs.stop()
        assert all(p.poll() == 0 for p in procs.procs.values())
    finally:
        procs.stop()
