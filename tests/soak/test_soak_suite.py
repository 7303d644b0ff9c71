"""The soak as a test suite (``pytest -m soak``, or ``make soak``; not run by default).

* ``tests/soak/soak.py``: many distributed runs with kills, SIGTERM, forged frames and
  self-connect attempts, checked against BE (its verdict: 0 wrong answers, 0 hangs, 0 leaks);
* the wire attacks of issue 33 (items 1-3) against serving agents, in open and secure mode, and
  against one-shot agents: a keyless process or a garbage writer squatting the coordinator's
  port, a burst of early frames from a non-neighbour identity, ten big frames from strangers;
  after each, the next run must be ok and right;
* the expansion files against ``--max-memory`` (peak RSS at most 1.1x the limit, or refused).

Sizes: ``SOAK_RUNS`` (default 40 runs of tests/soak/soak.py) and ``SOAK_ARITY`` (default 24).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from benchmarks.expansion import CAP_FACTOR, commands, limit_for, measure, write_files
from dcop.coordinator import AgentProcesses, free_ports
from dcop.generators import random_network
from dcop.inference import solve_be
from dcop.io import write_problem
from dcop.protocol.constants import COORDINATOR_ID
from dcop.protocol.curve import generate_keys, load_keypair
from dcop.protocol.peers import AgentEntry, Peers
from dcop.protocol.zmqlink import claim

pytestmark = [pytest.mark.soak, pytest.mark.timeout(3600)]

ROOT = Path(__file__).resolve().parents[2]
AGENTS = 6
PROBLEM = random_network(AGENTS, 3, 0.5, 0.2, seed=7)


def test_the_soak_runs_with_no_wrong_answer_hang_or_leak(tmp_path: Path) -> None:
    runs = os.environ.get("SOAK_RUNS", "40")
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "soak" / "soak.py"), "--runs", runs, "--max-n", "10",
         "--out", str(tmp_path / "soak")],
        capture_output=True,
        text=True,
        timeout=3500,
    )  # fmt: skip
    summary = json.loads((tmp_path / "soak.json").read_text())["summary"]
    assert done.returncode == 0 and summary["failed_runs"] == 0, done.stdout[-3000:]


# ---- wire attacks -----------------------------------------------------------------------------
class Cluster:
    """Serving (or one-shot) agents started by hand on fixed ports, and a coordinator per run."""

    def __init__(self, folder: Path, secure: bool, serve: bool = True) -> None:
        self.folder = folder
        self.secure = secure
        self.serve = serve
        ports = free_ports(AGENTS + 1)
        self.keys = folder / "keys" if secure else None
        publics = generate_keys(self.keys, range(AGENTS)) if self.keys is not None else {}
        self.coordinator = f"tcp://127.0.0.1:{ports[0]}"
        self.endpoints = {i: f"tcp://127.0.0.1:{ports[i + 1]}" for i in range(AGENTS)}
        self.peers_file = folder / "peers.json"
        self.problem_file = folder / "p.wcsp"
        write_problem(PROBLEM, self.problem_file)
        peers = Peers(
            "",
            self.coordinator,
            tuple(
                AgentEntry(i, None, self.endpoints[i], (), publics.get(i)) for i in range(AGENTS)
            ),
            publics.get(COORDINATOR_ID),
        )
        peers.write(self.peers_file)
        self.procs = AgentProcesses()

    def start_agents(self) -> None:
        for i in range(AGENTS):
            argv = [sys.executable, "-m", "dcop.agents", "--id", str(i), "--peers",
                    str(self.peers_file), "--timeout", "120", "--log-level", "info"]  # fmt: skip
            if self.serve:
                argv.append("--serve")
            if self.keys is not None:
                argv += ["--secure", "--keys", str(self.keys)]
            self.procs.start(i, argv, self.folder / f"agent-{i}-{time.monotonic_ns()}.log")

    def solve(self, limit_s: float = 60) -> dict[str, Any]:
        out = self.folder / "r.json"
        out.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "dcop", "coordinator", "--peers", str(self.peers_file),
                "--problem", str(self.problem_file), "--json", str(out), "-q",
                "--hello-timeout", "30", "--timeout", "60"]  # fmt: skip
        if self.keys is not None:
            argv += ["--secure", "--keys", str(self.keys)]
        t0 = time.monotonic()
        subprocess.run(argv, capture_output=True, text=True, timeout=limit_s + 30)
        doc: dict[str, Any] = json.loads(out.read_text())
        doc["_wall_s"] = time.monotonic() - t0
        return doc

    def close(self) -> None:
        if self.serve:
            argv = [sys.executable, "-m", "dcop", "coordinator", "--peers", str(self.peers_file),
                    "--shutdown", "--hello-timeout", "5"]  # fmt: skip
            if self.keys is not None:
                argv += ["--secure", "--keys", str(self.keys)]
            subprocess.run(argv, capture_output=True, timeout=60)
        self.procs.stop()


def squat_keyless(cluster: Cluster) -> None:
    ctx: zmq.Context[Any] = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(cluster.coordinator)
    time.sleep(1.0)
    ctx.destroy(linger=0)


def squat_garbage(cluster: Cluster) -> None:
    port = int(cluster.coordinator.rsplit(":", 1)[1])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    listener.settimeout(0.05)
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        with conn:
            conn.sendall(b"\xffgarbage" * 64)
    listener.close()


def early_burst(cluster: Cluster) -> None:
    """300 tiny frames to every agent from agent k's identity (with its key in secure mode),
    k not a neighbour of the receiver in PROBLEM."""
    ctx: zmq.Context[Any] = zmq.Context()
    socks = []
    neighbours = PROBLEM.neighbours()
    names = list(PROBLEM.variables)
    for target in range(AGENTS):
        strangers = [
            k for k in range(AGENTS) if k != target and names[k] not in neighbours[names[target]]
        ]
        k = strangers[0] if strangers else (target + 1) % AGENTS
        sock = ctx.socket(zmq.DEALER)
        socks.append(sock)  # kept: a collected socket closes its connection
        claim(sock, f"{k}/x".encode(), plain=cluster.keys is None)
        sock.setsockopt(zmq.LINGER, 1000)
        if cluster.keys is not None:
            public, secret = load_keypair(cluster.keys, k)
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_serverkey = load_keypair(cluster.keys, target)[0]
        sock.connect(cluster.endpoints[target])
        for _ in range(300):
            _send(sock, b"x")
    time.sleep(1.0)
    ctx.destroy(linger=1000)


def big_frames(cluster: Cluster) -> None:
    """Ten 50 MB frames from ten strangers to agent 0, each claiming an id outside peers.json
    (refused at the handshake: by the ZAP handler in open mode, by CURVE in secure mode)."""
    ctx: zmq.Context[Any] = zmq.Context()
    big = b"\x81" * (50 << 20)
    socks = []  # kept: a collected socket closes its connection
    for s in range(10):
        sock = ctx.socket(zmq.DEALER)
        socks.append(sock)
        claim(sock, f"{1000 + s}/x".encode(), plain=cluster.keys is None)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(cluster.endpoints[0])
        _send(sock, big)
    time.sleep(2.0)
    ctx.destroy(linger=0)


def _send(sock: zmq.Socket[Any], frame: bytes) -> None:
    """Without blocking: a client refused at the handshake has no link to send on."""
    with contextlib.suppress(zmq.Again):
        sock.send(frame, zmq.NOBLOCK, copy=False)


ATTACKS: dict[str, Callable[[Cluster], None]] = {
    "keyless": squat_keyless,
    "garbage": squat_garbage,
    "early-burst": early_burst,
    "big-frames": big_frames,
}


@pytest.fixture
def serving(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, secure=request.param)
    cluster.start_agents()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.mark.parametrize("serving", [False, True], ids=["open", "secure"], indirect=True)
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_serving_agents_survive_a_wire_attack(serving: Cluster, attack: str) -> None:
    best = solve_be(PROBLEM).upper_bound
    first = serving.solve()
    assert first["status"] == "ok" and first["cost"] == best, first
    ATTACKS[attack](serving)
    again = serving.solve()
    assert again["status"] == "ok" and again["cost"] == best, again
    assert serving.procs.dead() == []  # every serving agent is still up
    rss = [p.memory_info().rss for p in _agent_processes(serving)]
    assert max(rss) < 400 << 20, rss


def _agent_processes(cluster: Cluster) -> list[Any]:
    import psutil

    return [psutil.Process(p.pid) for p in cluster.procs.procs.values()]


@pytest.mark.parametrize("secure", [False, True], ids=["open", "secure"])
@pytest.mark.parametrize("attack", ["keyless", "garbage", "early-burst"])
def test_one_shot_agents_survive_a_wire_attack(tmp_path: Path, secure: bool, attack: str) -> None:
    cluster = Cluster(tmp_path, secure=secure, serve=False)
    cluster.start_agents()
    try:
        time.sleep(1.0)  # the agents link to the coordinator's port: the squatter gets them
        ATTACKS[attack](cluster)
        doc = cluster.solve()
        assert doc["status"] == "ok" and doc["cost"] == solve_be(PROBLEM).upper_bound, doc
        end = time.monotonic() + 30
        while time.monotonic() < end and len(cluster.procs.dead()) < AGENTS:
            time.sleep(0.1)
        assert sorted(cluster.procs.exit_codes().values()) == [0] * AGENTS
    finally:
        cluster.close()


# ---- expansion files --------------------------------------------------------------------------
def test_expansion_files_hold_the_memory_cap(tmp_path: Path) -> None:
    arity = int(os.environ.get("SOAK_ARITY", "24"))
    files = write_files(tmp_path, arity)
    limit = limit_for(arity)
    broken = []
    for label, args in commands(files, limit, tmp_path):
        got = measure(args, tmp_path / "doc.json")
        if got["status"] not in ("ok", "too_large") or got["peak"] > CAP_FACTOR * limit:
            broken.append((label, got["status"], got["peak"] >> 20))
    assert broken == [], f"limit {limit >> 20} MiB: {broken}"
