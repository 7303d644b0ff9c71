"""Roles on the wire: a secure run equals an open one; a client without a listed key delivers
nothing; nobody - a stranger in open mode, a neighbour's valid key in secure mode - can send an
agent the coordinator's messages."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np
import zmq

from dcop.coordinator import AgentProcesses, run_local
from dcop.coordinator.keys import generate_keypair, generate_keys, load_keypair, load_public_key
from dcop.generators import random_network
from dcop.inference import solve_be
from dcop.protocol import COORDINATOR_ID, Heartbeat, RunSpec, Setup, Stop, WireTable, encode
from dcop.protocol.digest import part_digest
from dcop.protocol.peers import load_peers
from dcop.protocol.zmqlink import claim

PROBLEM = random_network(8, 3, 0.4, 0.2, seed=4)


def test_keys_round_trip(tmp_path: Path) -> None:
    publics = generate_keys(tmp_path, [0, 1])
    assert set(publics) == {COORDINATOR_ID, 0, 1}
    public, secret = load_keypair(tmp_path, 1)
    assert public.decode() == publics[1] == load_public_key(tmp_path, 1) and len(secret) == 40
    assert (tmp_path / "agent-1.key_secret").stat().st_mode & 0o077 == 0
    assert len(generate_keypair()[0]) == 40


def _wait_for(path: Path, text: str, limit_s: float = 20.0) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end and text not in path.read_text(errors="replace"):
        time.sleep(0.1)


def _forged(agent_id: int, variable: str) -> list[list[bytes | memoryview]]:
    """What the coordinator could say to break a run: a zeroed setup, then stop."""
    zeroed = tuple(
        WireTable.from_array(t.scope, np.zeros(t.costs.shape))
        for t in PROBLEM.tables
        if variable in t.scope
    )
    size = PROBLEM.variables[variable].size
    digest = part_digest(variable, size, [(t.scope, t.to_array()) for t in zeroed])
    return [
        encode(COORDINATOR_ID, agent_id, Setup(variable, size, zeroed, digest)),
        encode(COORDINATOR_ID, agent_id, Stop("forged")),
    ]


def test_open_mode_nobody_else_speaks_for_the_coordinator(tmp_path: Path) -> None:
    """A stranger sends every agent a zeroed setup and a stop as the coordinator (routing
    identity -1) during the run: each agent refuses and logs them, the run ends with the optimum."""

    def forge(procs: AgentProcesses) -> None:
        peers = load_peers(tmp_path / "peers.json")
        ctx = zmq.Context()
        socks = []  # kept open until the refusals are logged: a collected socket closes
        try:
            for a in peers.agents:
                s = ctx.socket(zmq.DEALER)
                socks.append(s)
                claim(s, b"-1")  # its PLAIN user name too: refused at the handshake
                # linger 0, set here: each socket used to be collected when ``s`` was rebound,
                # closing with libzmq's default infinite linger, and a refused client's frames
                # never leave, so the context's term hung (CI: 300 s in ctx.term)
                s.setsockopt(zmq.LINGER, 0)
                s.connect(a.endpoint)
                for message in _forged(a.id, str(a.variable)):
                    with contextlib.suppress(zmq.Again):  # refused: it may have no link
                        s.send_multipart(message, zmq.NOBLOCK)
            for a in peers.agents:
                _wait_for(tmp_path / f"agent-{a.id}.log", "claims to be the coordinator")
        finally:
            ctx.destroy(linger=0)

    result = run_local(PROBLEM, RunSpec(), timeout=30, before_start=forge, workdir=tmp_path)
    assert result.internal_cost == solve_be(PROBLEM).upper_bound
    assert result.processes is not None
    assert set(result.processes["exit_codes"].values()) == {0}
    for a in load_peers(tmp_path / "peers.json").agents:
        assert "claims to be the coordinator" in (tmp_path / f"agent-{a.id}.log").read_text()


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
            s.send_multipart(encode(neighbour, 0, Heartbeat()))
            # and a plain-text client
            p = ctx.socket(zmq.DEALER)
            p.setsockopt(zmq.LINGER, 0)
            p.connect(target.endpoint)
            p.send(b"\x00plain garbage")
            # a neighbour's own valid key, speaking as the coordinator, then as another agent
            # (that second refusal shares the first one's log line: same address, same reason)
            public, secret = load_keypair(tmp_path / "keys", neighbour)
            forgers = []
            for ident in (b"-1", str(neighbour + 1).encode()):
                f = ctx.socket(zmq.DEALER)
                f.curve_publickey, f.curve_secretkey = public, secret
                f.curve_serverkey = str(target.public_key).encode()
                f.setsockopt(zmq.IDENTITY, ident)
                f.setsockopt(zmq.LINGER, 0)
                f.connect(target.endpoint)
                forgers.append(f)
            for message in _forged(0, str(target.variable)):
                forgers[0].send_multipart(message)
            log = tmp_path / "agent-0.log"
            for text in ("refused a CURVE client", "claims to be the coordinator"):
                _wait_for(log, text)
            forgers[1].send_multipart(encode(neighbour + 1, 0, Heartbeat()))
            time.sleep(0.5)
        finally:
            ctx.destroy(linger=0)

    secure = run_local(
        PROBLEM, RunSpec(), timeout=30, secure=True, before_start=rogue, workdir=tmp_path
    )
    assert secure.cost == open_run.cost
    assert secure.assignment == open_run.assignment
    assert secure.agents["x0"]["dropped_frames"] == 0  # nothing reached the agent's code
    log = (tmp_path / "agent-0.log").read_text()
    assert "refused a CURVE client" in log
    neighbour = load_peers(tmp_path / "peers.json").agent(0).neighbours[0]
    assert f"the CURVE key of agent {neighbour} claims to be the coordinator" in log
    assert secure.processes is not None
    assert set(secure.processes["exit_codes"].values()) == {0}
    peers = load_peers(tmp_path / "peers.json")
    assert peers.secure and all(a.public_key for a in peers.agents)
    assert secure.processes is not None and secure.processes["secure"] is True
