"""CurveZMQ: a secure run equals an open one; a client without a listed key delivers nothing."""

from __future__ import annotations

import time
from pathlib import Path

import zmq

from dcop.coordinator import AgentProcesses, run_local
from dcop.coordinator.keys import generate_keypair, generate_keys, load_keypair, load_public_key
from dcop.generators import random_network
from dcop.protocol import COORDINATOR_ID, Ready, RunSpec, encode
from dcop.protocol.peers import load_peers

PROBLEM = random_network(8, 3, 0.4, 0.2, seed=4)


def test_keys_round_trip(tmp_path: Path) -> None:
    publics = generate_keys(tmp_path, [0, 1])
    assert set(publics) == {COORDINATOR_ID, 0, 1}
    public, secret = load_keypair(tmp_path, 1)
    assert public.decode() == publics[1] == load_public_key(tmp_path, 1) and len(secret) == 40
    assert (tmp_path / "agent-1.key_secret").stat().st_mode & 0o077 == 0
    assert len(generate_keypair()[0]) == 40


def test_secure_run_equals_open_run_and_refuses_rogues(tmp_path: Path) -> None:
    open_run = run_local(PROBLEM, RunSpec(), timeout=30)

    def rogue(procs: AgentProcesses) -> None:
        peers = load_peers(tmp_path / "peers.json")
        target = peers.agent(0)
        neighbour = target.neighbours[0]
        ctx = zmq.Context()
        try:
            # a CURVE client with a key of its own (not in peers.json), claiming a neighbour's id
            s = ctx.socket(zmq.DEALER)
            pub, sec = zmq.curve_keypair()
            s.curve_publickey, s.curve_secretkey = pub, sec
            s.curve_serverkey = str(target.public_key).encode()
            s.setsockopt(zmq.IDENTITY, b"rogue")
            s.setsockopt(zmq.LINGER, 0)
            s.connect(target.endpoint)
            s.send(encode(neighbour, 0, Ready(1)))
            # and a plain-text client
            p = ctx.socket(zmq.DEALER)
            p.setsockopt(zmq.LINGER, 0)
            p.connect(target.endpoint)
            p.send(b"\x00plain garbage")
            end = time.monotonic() + 20
            log = tmp_path / "agent-0.log"
            while time.monotonic() < end and "refused a CURVE client" not in log.read_text():
                time.sleep(0.1)
        finally:
            ctx.destroy(linger=0)

    secure = run_local(
        PROBLEM, RunSpec(), timeout=30, secure=True, before_start=rogue, workdir=tmp_path
    )
    assert secure.cost == open_run.cost
    assert secure.assignment == open_run.assignment
    assert secure.agents["x0"]["dropped_frames"] == 0  # nothing reached the agent's code
    assert "refused a CURVE client" in (tmp_path / "agent-0.log").read_text()
    peers = load_peers(tmp_path / "peers.json")
    assert peers.secure and all(a.public_key for a in peers.agents)
    assert secure.processes is not None and secure.processes["secure"] is True
