"""Who may speak to ``dcop coordinator`` in open mode (security round 4, finding 5): only the
agents of peers.json (a stranger once pushed it to 848 MiB)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import zmq

from dcop.generators import random_network
from dcop.io import write_problem
from dcop.protocol.zmqlink import claim
from tests.coordinator.test_cli_remote import _free_run


def test_the_coordinator_command_refuses_ids_outside_peers_json(tmp_path: Path) -> None:
    problem_file = tmp_path / "r3.wcsp"
    write_problem(random_network(3, 2, 1.0, 0.2, seed=1), problem_file)
    peers_file = tmp_path / "p.json"
    base = _free_run(4)
    cli = [sys.executable, "-m", "dcop"]
    made = subprocess.run(
        [*cli, "peers", "--agents", "3", "--base-port", str(base), "-o", str(peers_file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    endpoint = json.loads(peers_file.read_text())["coordinator"]
    coordinator = subprocess.Popen(
        [
            *cli,
            "coordinator",
            "--peers",
            str(peers_file),
            "--problem",
            str(problem_file),
            "--hello-timeout",
            "8",
            "-q",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        stranger = ctx.socket(zmq.DEALER)
        claim(stranger, b"999/big")
        stranger.setsockopt(zmq.LINGER, 0)
        stranger.connect(endpoint)
        while coordinator.poll() is None:  # until the hello timeout ends it (no agent runs)
            with contextlib.suppress(zmq.Again):
                stranger.send(b"\x81" * 1024, zmq.NOBLOCK)
            time.sleep(0.2)
        _, err = coordinator.communicate(timeout=120)
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
        ctx.destroy(linger=0)
    assert "refused a connection: agent 999 is not in peers.json" in err, err
