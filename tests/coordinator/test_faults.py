"""Faults end the run within its timeout with an error naming the agent; every process exits."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from dcop.coordinator import (
    AgentProcesses,
    Coordinator,
    check_peers,
    free_ports,
    peers_for,
    round_robin,
    run_local,
)
from dcop.errors import InputError, RunError, RunTimeout
from dcop.generators import random_network
from dcop.inference import solve_be
from dcop.protocol import COORDINATOR_ID, Heartbeat, RunSpec, encode
from dcop.protocol.peers import AgentEntry, Peers, load_peers
from dcop.protocol.zmqlink import claim

PROBLEM = random_network(8, 3, 0.4, 0.2, seed=9)


def local_peers(ports: list[int] | None = None) -> Peers:
    """peers.json for PROBLEM on 127.0.0.1 (free ports unless given)."""
    chosen = ports if ports is not None else free_ports(PROBLEM.n + 1)
    return peers_for(PROBLEM, *round_robin(["127.0.0.1"], 0, chosen))


def _run_expecting(match: str, limit_s: float, **kw) -> AgentProcesses:
    seen: list[AgentProcesses] = []
    user_hook = kw.pop("before_start", None)

    def hook(procs: AgentProcesses) -> None:
        seen.append(procs)
        if user_hook is not None:
            user_hook(procs)

    t0 = time.monotonic()
    spec = RunSpec(peer_timeout_s=kw.pop("peer_timeout", None))
    with pytest.raises(RunError, match=match):
        run_local(PROBLEM, spec, before_start=hook, **kw)
    assert time.monotonic() - t0 < limit_s
    for procs in seen:
        assert all(p.poll() is not None for p in procs.procs.values())  # no orphans
    return seen[0] if seen else AgentProcesses()


def test_agent_killed_before_dfs() -> None:
    def kill(procs: AgentProcesses) -> None:
        procs.procs[3].send_signal(signal.SIGKILL)

    procs = _run_expecting(r"agent 3 \(x3\) exited with code -9", 30, timeout=20, before_start=kill)
    # the others leave on the stop by themselves (3: stopped before finishing), none by the
    # SIGTERM that follows the grace: frames queued for the killed agent do not hold their exit
    codes = procs.exit_codes()
    assert codes.pop(3) == -9
    assert set(codes.values()) == {3}, codes


def test_agent_killed_during_util() -> None:
    def argv(i: int, cmd: list[str]) -> list[str]:
        return [*cmd, "--fault", "crash-at-util"] if i == 5 else cmd

    _run_expecting(r"agent 5 \(x5\) exited with code -9", 30, timeout=20, agent_argv=argv)


def test_agent_never_starts() -> None:
    def argv(i: int, cmd: list[str]) -> list[str] | None:
        return None if i == 2 else cmd

    _run_expecting(
        r"timed out after 12 s: .*agent 2 \(x2\).* did not say hello",
        40,
        timeout=30,
        hello_timeout=12,
        agent_argv=argv,
    )


def test_agent_stops_answering() -> None:
    def argv(i: int, cmd: list[str]) -> list[str]:
        return [*cmd, "--fault", "hang-at-util"] if i == 4 else cmd

    _run_expecting(r"agent 4 \(x4\)", 40, timeout=30, peer_timeout=4, agent_argv=argv)


def test_port_already_in_use(tmp_path: Path) -> None:
    """An agent whose fixed port (from a hand-written peers.json) is taken ends the run with an
    error naming it and the port (``dcop run`` itself binds ports the system picks)."""
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    peers = local_peers()
    peers_file = tmp_path / "peers.json"
    peers.write(peers_file)
    port = int(peers.agent(1).endpoint.rsplit(":", 1)[1])
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    held.bind(("127.0.0.1", port))
    held.listen()
    transport = ZmqCoordinatorTransport(peers.coordinator)
    procs = AgentProcesses()
    try:
        for a in peers.agents:
            procs.start(a.id, agent_command_for(a.id, peers_file), tmp_path / f"a{a.id}.log")
        t0 = time.monotonic()
        with pytest.raises(RunError, match=r"agent 1 \(x1\).*cannot bind .*in use"):
            Coordinator(PROBLEM, peers, transport, timeout=20, monitor=procs.dead).run()
        assert time.monotonic() - t0 < 30
    finally:
        procs.stop()
        transport.close()
        held.close()
    assert all(p.poll() is not None for p in procs.procs.values())  # no orphans


def test_own_endpoint_as_the_coordinators_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """A peers.json that gives an agent the coordinator's endpoint under another name
    (localhost for 127.0.0.1) would have it connect to itself: the agent refuses with one line
    and exit code 2 (bad input), as for any other peers.json mistake (it used to die with a
    traceback and exit 1; found by the soak's self-connect runs)."""
    port = free_ports(1)[0]
    peers = local_peers()
    own = AgentEntry(0, "x0", f"tcp://localhost:{port}", peers.agents[0].neighbours)
    bad = Peers(peers.problem, f"tcp://127.0.0.1:{port}", (own, *peers.agents[1:]))
    peers_file = tmp_path / "peers.json"
    bad.write(peers_file)
    proc = subprocess.run(
        agent_command_for(0, peers_file), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"dcop-agent: error: agent 0: the coordinator's endpoint tcp://127.0.0.1:{port} is this "
        f"agent's own (tcp://localhost:{port}); a socket never connects to its own endpoint"
    ]


def test_peers_not_matching_the_problem(tmp_path: Path) -> None:
    peers = local_peers()
    a, b = peers.agents[0], peers.agents[peers.agents[0].neighbours[0]]
    cut = []
    for e in peers.agents:
        if e.id in (a.id, b.id):
            other = b.id if e.id == a.id else a.id
            e = AgentEntry(
                e.id, e.variable, e.endpoint, tuple(n for n in e.neighbours if n != other)
            )
        cut.append(e)
    bad = Peers(peers.problem, peers.coordinator, tuple(cut))
    with pytest.raises(InputError, match=rf"agent {a.id} \({a.variable}\) neighbours differ"):
        check_peers(PROBLEM, bad)
    renamed = Peers(
        peers.problem,
        peers.coordinator,
        (AgentEntry(0, "nope", a.endpoint, a.neighbours), *peers.agents[1:]),
    )
    with pytest.raises(InputError, match="agent 0 has variable 'nope'"):
        check_peers(PROBLEM, renamed)
    # the same through the CLI: exit 2, one line naming the agent, nothing started
    from dcop.io import write_problem

    problem_file = tmp_path / "p.wcsp"
    write_problem(PROBLEM, str(problem_file))
    peers_file = tmp_path / "peers.json"
    bad.write(peers_file)
    # agents started by hand on that peers.json are told to stop, not left waiting
    procs = AgentProcesses()
    try:
        for agent in bad.agents:
            procs.start(
                agent.id, agent_command_for(agent.id, peers_file), tmp_path / f"{agent.id}.log"
            )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "dcop",
                "coordinator",
                "--peers",
                str(peers_file),
                "--problem",
                str(problem_file),
                "--timeout",
                "10",
                "--hello-timeout",
                "10",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 2
        assert f"agent {a.id} ({a.variable}) neighbours differ" in proc.stderr
        end = time.monotonic() + 10
        while time.monotonic() < end and len(procs.dead()) < len(bad.agents):
            time.sleep(0.1)
        assert len(procs.dead()) == len(bad.agents), procs.exit_codes()
        assert "stop (aborted: " in procs.log_tail(0, 5) or all(
            code == 3 for code in procs.exit_codes().values()
        )
    finally:
        procs.stop()


REFUSALS = ("names no agent", "is not a neighbour")


def test_garbage_and_impostors_are_refused_at_the_handshake(tmp_path: Path) -> None:
    """A running agent is reached by clients that name no agent (garbage behind one, a claim to
    be agent 2 in the other's message) and by one that claims a stranger's id: each is refused
    and logged at the handshake, before any of its frames is read (the oversized and many-part
    frames of an admitted peer, and a second claim of a neighbour's id, are tests/protocol's),
    and the run still finishes with the optimum."""

    def attack(procs: AgentProcesses) -> None:
        peers = load_peers(tmp_path / "peers.json")
        target = peers.agent(0)
        ctx = zmq.Context()
        socks = []  # kept open until the refusals are logged: a collected socket closes
        try:
            for ident, frames in [
                (b"r1", [b"\x00garbage\xff"]),
                (b"r3", encode(2, 0, Heartbeat())),  # an unidentified socket claims agent 2
                (b"999", encode(999, 0, Heartbeat())),  # not a neighbour
            ]:
                s = ctx.socket(zmq.DEALER)
                socks.append(s)
                claim(s, ident)
                s.setsockopt(zmq.LINGER, 0)  # refused: a linger could hang the context's term
                s.connect(target.endpoint)
                with contextlib.suppress(zmq.Again):  # refused at the handshake: no link
                    s.send_multipart(frames, zmq.NOBLOCK)
            for reason in REFUSALS:
                _wait_for_log(tmp_path / "agent-0.log", reason, 1)
        finally:
            ctx.destroy(linger=0)

    result = run_local(PROBLEM, RunSpec(), timeout=30, before_start=attack, workdir=tmp_path)
    assert result.internal_cost == solve_be(PROBLEM).upper_bound
    log = (tmp_path / "agent-0.log").read_text()
    assert all(reason in log for reason in REFUSALS)
    # the two that name no agent share a line (same address, same reason), then rate-limited
    assert log.count("at the handshake, refused a connection") == len(REFUSALS)
    assert "refused a frame" not in log  # nothing of theirs was read
    assert result.agents["x0"]["dropped_frames"] == 0
    assert result.processes is not None
    assert set(result.processes["exit_codes"].values()) == {0}


def _wait_for_log(path: Path, text: str, count: int, limit_s: float = 20.0) -> None:
    """Until the agent has logged ``text`` ``count`` times (it works on its own schedule)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if path.exists() and path.read_text(errors="replace").count(text) >= count:
            return
        time.sleep(0.1)


def test_coordinator_port_in_use() -> None:
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        with pytest.raises(RunError, match="coordinator: cannot bind"):
            ZmqCoordinatorTransport(f"tcp://127.0.0.1:{s.getsockname()[1]}")
    finally:
        s.close()


def test_in_process_coordinator_times_out_without_agents() -> None:
    from dcop.protocol import InProcHub

    peers = local_peers(list(range(30000, 30000 + PROBLEM.n + 1)))
    hub = InProcHub()
    t = hub.transport(COORDINATOR_ID)
    with pytest.raises(RunTimeout, match=r"timed out after 0.5 s: agent 0 \(x0\)"):
        Coordinator(PROBLEM, peers, t, timeout=0.5).run()


def test_agents_exit_when_the_coordinator_dies(tmp_path: Path) -> None:
    """No orphans without anyone to stop them: a vanished coordinator is noticed by its silence."""
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    peers = local_peers()
    peers_file = tmp_path / "peers.json"
    peers.write(peers_file)
    transport = ZmqCoordinatorTransport(peers.coordinator)
    procs = AgentProcesses()

    class Died(Exception):
        pass

    def die() -> None:
        transport.close()  # no stop message can go out any more
        raise Died

    try:
        for a in peers.agents:
            procs.start(a.id, agent_command_for(a.id, peers_file), tmp_path / f"a{a.id}.log")
        with pytest.raises(Died):
            Coordinator(PROBLEM, peers, transport, timeout=30, before_start=die).run()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15 and any(p.poll() is None for p in procs.procs.values()):
            time.sleep(0.2)
        assert all(p.poll() is not None for p in procs.procs.values())
        assert time.monotonic() - t0 < 15
    finally:
        procs.stop()


def agent_command_for(agent_id: int, peers_file: Path) -> list[str]:
    from dcop.coordinator import agent_command

    return agent_command(agent_id, peers_file, timeout=60, spec=RunSpec(peer_timeout_s=2))


def test_an_agent_stopped_before_hello_does_not_delay_the_timeout() -> None:
    """A stopped (SIGSTOP) agent cannot act on SIGTERM: the run still ends at its timeout, not
    seconds later (regression: it overshot by about 6 s)."""

    def argv(i: int, cmd: list[str]) -> list[str]:
        if i != 2:
            return cmd
        return ["sh", "-c", 'kill -STOP $$; exec "$@"', "agent", *cmd]  # stops before hello

    t0 = time.monotonic()
    with pytest.raises(RunTimeout, match=r"agent 2 \(x2\).* did not say hello"):
        run_local(PROBLEM, RunSpec(), timeout=5, agent_argv=argv)
    assert time.monotonic() - t0 < 5 + 2


def test_hand_started_agents_leave_when_the_coordinator_says_the_run_is_over(
    tmp_path: Path,
) -> None:
    """Agent 1's port is taken: ``dcop coordinator`` fails at once. Agents started after that
    (slow hosts) still get a stop, instead of waiting for their own --timeout with their ports
    held, so that a retry does not find "Address already in use" (issue 33, item 10)."""
    from dcop.io import write_problem

    peers = local_peers()
    peers_file = tmp_path / "peers.json"
    peers.write(peers_file)
    problem_file = tmp_path / "p.wcsp"
    write_problem(PROBLEM, str(problem_file))
    port = int(peers.agent(1).endpoint.rsplit(":", 1)[1])
    held = socket.socket()
    held.bind(("127.0.0.1", port))
    held.listen()
    procs = AgentProcesses()
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "dcop", "coordinator", "--peers", str(peers_file), "--problem",
         str(problem_file), "--timeout", "30", "--hello-timeout", "30", "-q"],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        procs.start(1, agent_command_for(1, peers_file), tmp_path / "a1.log")
        end = time.monotonic() + 30
        while time.monotonic() < end and not procs.dead():
            time.sleep(0.05)  # agent 1 gave up on its port and told the coordinator
        late = (0, 2)  # two, not seven: their start must fit the coordinator's stop window
        for ident in late:
            procs.start(ident, agent_command_for(ident, peers_file), tmp_path / f"a{ident}.log")
        _, err = coordinator.communicate(timeout=60)
        assert coordinator.returncode != 0 and "in use" in err, err
        end = time.monotonic() + 20
        while time.monotonic() < end and len(procs.dead()) < 1 + len(late):
            time.sleep(0.1)
        # each left on its own, long before its --timeout of 60 s
        assert len(procs.dead()) == 1 + len(late), procs.exit_codes()
    finally:
        coordinator.kill()
        procs.stop()
        held.close()


def test_a_stopped_coordinator_is_named_as_such_not_agent_0(tmp_path: Path) -> None:
    """``dcop run`` stopped (SIGSTOP) past the peer timeout: its agents take it for dead. It
    used to resume and report "agent 0 stopped answering"; it names itself (issue 33, item 12)."""
    import json
    import os

    from dcop.io import write_problem

    problem_file = tmp_path / "p.wcsp"
    write_problem(random_network(10, 6, 0.5, 0.1, seed=2), str(problem_file))
    out = tmp_path / "r.json"
    run = subprocess.Popen(
        [sys.executable, "-m", "dcop", "run", str(problem_file), "--json", str(out), "-q",
         "--peer-timeout", "2", "--timeout", "60", "--workdir", str(tmp_path / "w")],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and len(list((tmp_path / "w").glob("agent-*.log"))) < 10:
            time.sleep(0.02)
        time.sleep(0.05)
        os.kill(run.pid, signal.SIGSTOP)
        time.sleep(4.0)
        os.kill(run.pid, signal.SIGCONT)
        run.communicate(timeout=60)
    finally:
        run.kill()
    doc = json.loads(out.read_text())
    if doc["status"] == "ok":
        pytest.skip("the run finished before the stop came (a fast machine)")
    assert "the coordinator itself stood still" in doc["message"], doc["message"]
    assert "agent 0" not in doc["message"]


def test_agent_killed_during_mbdpop_chunks_is_named() -> None:
    """A cluster member killed as its first chunk of contexts starts is named, as in DPOP."""
    from dcop.trees.candidates import default_candidates
    from dcop.trees.cutset import CutLimit, TreeShape, clusters_of
    from dcop.trees.dfs import simulate

    problem = random_network(10, 3, 0.6, 0.0, seed=1)
    spec = RunSpec("mbdpop", width=2, trees=1)
    names = dict(enumerate(problem.variables))
    ids = {v: i for i, v in names.items()}
    neighbours = problem.neighbours()
    domains = {i: problem.variables[v].size for i, v in names.items()}
    run = simulate(
        {ids[v]: {ids[u] for u in neighbours[v]} for v in names.values()},
        names,
        domains,
        default_candidates(1)[0],
    )
    shape = TreeShape(
        {a: s.parent for a, s in run.states.items()},
        {a: tuple(s.separator) for a, s in run.states.items()},
        domains,
    )
    (cluster, *_) = clusters_of(shape, CutLimit.from_bytes(spec.max_message_bytes, 2))
    victim = cluster.members[-1]

    def argv(i: int, cmd: list[str]) -> list[str]:
        return [*cmd, "--fault", "crash-at-util"] if i == victim else cmd

    seen: list[AgentProcesses] = []
    with pytest.raises(RunError, match=rf"agent {victim} \(x{victim}\) exited with code -9"):
        run_local(problem, spec, before_start=seen.append, timeout=30, agent_argv=argv)
    for procs in seen:
        assert all(p.poll() is not None for p in procs.procs.values())  # no orphans
