"""Serving agents (``dcop-agent --serve``): problem after problem, shutdown, and a lost agent."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from dcop.coordinator import AgentProcesses, free_ports
from dcop.generators import grid_network, random_network
from dcop.inference import solve_be
from dcop.io import write_problem
from dcop.model import Problem
from dcop.protocol.peers import AgentEntry, Peers

AGENTS = 10


def _peers(tmp_path: Path, count: int = AGENTS) -> Path:
    """A problem-independent peers.json: the agents bind ports the system picks."""
    port = free_ports(1)[0]
    peers = Peers(
        "",
        f"tcp://127.0.0.1:{port}",
        tuple(AgentEntry(i, None, "tcp://127.0.0.1:*") for i in range(count)),
    )
    path = tmp_path / "peers.json"
    peers.write(path)
    return path


def _agent(i: int, peers_file: Path) -> list[str]:
    return [
        sys.executable, "-m", "dcop.agents", "--id", str(i), "--peers", str(peers_file),
        "--serve", "--timeout", "60", "--log-level", "info",
    ]  # fmt: skip


def _coordinator(peers_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcop", "coordinator", "--peers", str(peers_file), "-q", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _solve(peers_file: Path, problem: Problem, path: Path, *args: str) -> dict[str, object]:
    write_problem(problem, path)
    out = path.with_suffix(".json")
    run = _coordinator(
        peers_file, "--problem", str(path), "--json", str(out), "--hello-timeout", "20", *args
    )
    assert out.exists(), run.stderr
    doc: dict[str, object] = json.loads(out.read_text())
    doc["_returncode"] = run.returncode
    doc["_stderr"] = run.stderr
    return doc


def test_serving_agents_solve_problem_after_problem_and_shut_down(tmp_path: Path) -> None:
    peers_file = _peers(tmp_path)
    procs = AgentProcesses()
    try:
        for i in range(AGENTS):
            procs.start(i, _agent(i, peers_file), tmp_path / f"agent-{i}.log")
        first = random_network(AGENTS, 3, 0.3, 0.2, seed=1)
        second = grid_network(9, 3, 0.3, seed=2)  # fewer variables: one agent idles
        for k, problem in enumerate((first, second, first)):
            doc = _solve(peers_file, problem, tmp_path / f"p{k}.wcsp")
            assert doc["_returncode"] == 0, doc["_stderr"]
            assert doc["status"] == "ok" and doc["exact"]
            assert doc["cost"] == solve_be(problem).upper_bound
        assert procs.dead() == []  # still up after three problems
        # a coordinator that leaves after its problem is done is no news (issue 33, item 12:
        # every agent of a successful docker-compose run logged a WARNING here)
        logs = "".join((tmp_path / f"agent-{i}.log").read_text() for i in range(AGENTS))
        assert "went away" not in logs and "WARNING" not in logs, logs[-2000:]
        too_big = _solve(
            peers_file, random_network(AGENTS + 2, 3, 0.3, 0.2, 3), tmp_path / "b.wcsp"
        )
        assert too_big["_returncode"] == 2 and too_big["status"] == "error"
        assert f"{AGENTS + 2} variables but peers.json lists {AGENTS} agents" in str(
            too_big["message"]
        )
        assert procs.dead() == []  # a refused problem leaves serving agents up
        stop = _coordinator(peers_file, "--shutdown", "--hello-timeout", "20")
        assert stop.returncode == 0, stop.stderr
        assert f"stopped {AGENTS} of {AGENTS} agents" in stop.stderr
        end = time.monotonic() + 20
        while time.monotonic() < end and len(procs.dead()) < AGENTS:
            time.sleep(0.1)
        assert sorted(procs.exit_codes().values()) == [0] * AGENTS
    finally:
        procs.stop()


def test_a_killed_serving_agent_is_named_and_a_restarted_one_rejoins(tmp_path: Path) -> None:
    peers_file = _peers(tmp_path)
    procs = AgentProcesses()
    problem = random_network(AGENTS, 3, 0.3, 0.2, seed=4)
    try:
        for i in range(AGENTS):
            procs.start(i, _agent(i, peers_file), tmp_path / f"agent-{i}.log")
        assert _solve(peers_file, problem, tmp_path / "a.wcsp")["status"] == "ok"
        procs.procs[3].send_signal(signal.SIGKILL)
        failed = _solve(peers_file, problem, tmp_path / "b.wcsp", "--hello-timeout", "4")
        assert failed["_returncode"] == 4 and failed["status"] == "timeout"
        assert "agent 3 (x3)" in str(failed["message"]) and "hello" in str(failed["message"])
        procs.start(3, _agent(3, peers_file), tmp_path / "agent-3-again.log")
        again = _solve(peers_file, problem, tmp_path / "c.wcsp")
        assert again["_returncode"] == 0, again["_stderr"]
        assert again["cost"] == solve_be(problem).upper_bound
    finally:
        _coordinator(peers_file, "--shutdown", "--hello-timeout", "5")
        procs.stop()


def test_a_waiting_serving_agent_greets_a_new_coordinator_at_once() -> None:
    """An idle serving agent repeats its hello only at its heartbeat; when a coordinator binds
    its port it says hello then, not at the next beat (here 10 minutes away)."""
    import threading

    from dcop.agents.agent import Agent, AgentConfig
    from dcop.backends import get_backend
    from dcop.protocol import COORDINATOR_ID, Hello, Stop, decode, encode
    from dcop.protocol.zmqlink import ZmqAgentTransport, ZmqCoordinatorTransport

    endpoint = f"tcp://127.0.0.1:{free_ports(1)[0]}"
    transport = ZmqAgentTransport(0, "tcp://127.0.0.1:*", {}, endpoint)
    transport.open()
    agent = Agent(AgentConfig(0, serving=True, heartbeat_s=600.0), transport, get_backend("numpy"))
    codes: list[int] = []
    failures: list[BaseException] = []

    def serve() -> None:
        try:
            codes.append(agent.run())
        except BaseException as exc:  # shown by the assertion below, not lost in a thread
            failures.append(exc)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def next_hello(coordinator: ZmqCoordinatorTransport) -> Hello | None:
        end = time.monotonic() + 30.0
        while time.monotonic() < end:
            item = coordinator.recv(1.0)
            if item is not None and isinstance(body := decode(item[1]).body, Hello):
                return body
        return None

    try:
        first = ZmqCoordinatorTransport(endpoint, agents=[0])
        try:
            assert next_hello(first) is not None  # the hello it queued at start
        finally:
            first.close(0)
        second = ZmqCoordinatorTransport(endpoint, agents=[0])
        try:
            hello = next_hello(second)
            assert hello is not None and hello.serving
            # A stop can be lost on a connection libzmq replaces just then; the agent then says
            # hello again on the new one, and gets the stop again (as `--shutdown` does).
            end = time.monotonic() + 30.0
            while thread.is_alive() and time.monotonic() < end:
                second.send(0, encode(COORDINATOR_ID, 0, Stop("shutdown")))
                resend_at = time.monotonic() + 2.0
                while thread.is_alive() and time.monotonic() < resend_at:
                    thread.join(0.05)
        finally:
            second.close()
        assert not failures and codes == [0], failures
    finally:
        if not thread.is_alive():  # else closing its sockets under it would crash it
            transport.close(0)


def test_serving_in_open_mode_off_loopback_is_refused_unless_insecure(tmp_path: Path) -> None:
    """Anyone who reaches a serving agent in open mode can submit problems or shut it down:
    outside loopback that takes an explicit --insecure (issue 33, item 4)."""
    port = free_ports(1)[0]
    for where in ("tcp://0.0.0.0:*", "tcp://*:*"):
        peers = Peers("", f"tcp://127.0.0.1:{port}", (AgentEntry(0, None, where),))
        peers.write(tmp_path / "peers.json")
        refused = subprocess.run(
            [*_agent(0, tmp_path / "peers.json"), "--timeout", "2"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode == 2, refused.stderr
        assert "--insecure" in refused.stderr and "Traceback" not in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    allowed = subprocess.Popen(
        [*_agent(0, tmp_path / "peers.json"), "--insecure"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            allowed.wait(3)
        assert allowed.poll() is None, "an --insecure serving agent was refused"
    finally:
        allowed.send_signal(signal.SIGTERM)
        allowed.communicate(timeout=30)
