"""Lost connections: a killed or frozen process on the other side of a real ZeroMQ link is reported
by ``lost_peers()`` (ZMTP heartbeats and socket monitors), without application heartbeats."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dcop.protocol import COORDINATOR_ID, InProcHub
from dcop.protocol.zmqlink import ZmqAgentTransport, ZmqCoordinatorTransport

ANY = "tcp://127.0.0.1:*"
# The other side, in its own process: "coordinator" (accepts agents 0 and 1), or "agent" 1
# (argv: the coordinator's endpoint, then its neighbour agent 0's), which says hello at once.
PEER = r"""
import sys
from dcop.protocol.zmqlink import ZmqAgentTransport, ZmqCoordinatorTransport
if sys.argv[1] == "coordinator":
    t = ZmqCoordinatorTransport("tcp://127.0.0.1:*", agents=[0, 1])
else:
    t = ZmqAgentTransport(1, "tcp://127.0.0.1:*", {0: sys.argv[3]}, sys.argv[2])
    t.open()
    t.send(-1, [b"hello"])
print(t.endpoint, flush=True)
while True:
    item = t.recv(1.0)
    if item is not None:
        print("got", item[0], flush=True)
"""
DUMMY = "tcp://127.0.0.1:1"


def _flat(item: tuple[int | None, list[bytes | memoryview]] | None) -> tuple[int | None, bytes]:
    """A received one-frame message as (sender, bytes)."""
    assert item is not None and len(item[1]) == 1
    return item[0], bytes(item[1][0])


def _line(proc: subprocess.Popen[str], limit_s: float = 20.0) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], limit_s)
    assert ready, "the peer process said nothing"
    return proc.stdout.readline().strip()


Spawn = Callable[..., tuple[subprocess.Popen[str], str]]


@pytest.fixture
def spawn() -> Iterator[Spawn]:
    """Start the other side; return it and the endpoint it listens on."""
    procs: list[subprocess.Popen[str]] = []

    def start(*argv: str) -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", PEER, *argv], stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        return proc, _line(proc)

    yield start
    for proc in procs:
        proc.kill()  # SIGKILL works on a stopped process too
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def _lost(t: Any, peer: int, limit_s: float = 20.0) -> bool:
    """Whether ``t`` reports ``peer`` lost within ``limit_s`` (a deadline, not a timing claim)."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        t.recv(0.1)
        if any(loss.peer == peer for loss in t.lost_peers()):
            return True
    return False


def test_an_agent_hears_of_a_killed_neighbour_and_coordinator(spawn: Spawn) -> None:
    coord, coord_endpoint = spawn("coordinator")
    a = ZmqAgentTransport(0, ANY, {}, coord_endpoint)
    try:
        a.open()
        neighbour, endpoint = spawn("agent", DUMMY, a.endpoint)
        a.connect_peer(1, endpoint)
        a.send(COORDINATOR_ID, [b"hello"])
        a.send(1, [b"hello"])
        assert _line(coord) == "got 0" and _line(neighbour) == "got 0"  # both links are up
        assert a.lost_peers() == []
        neighbour.kill()
        assert _lost(a, 1)
        coord.kill()
        assert _lost(a, COORDINATOR_ID)
    finally:
        a.close()


@contextlib.contextmanager
def _heard(spawn: Spawn) -> Iterator[tuple[subprocess.Popen[str], ZmqAgentTransport]]:
    """A coordinator process and an agent's transport whose hello it heard; closed after."""
    coord, coord_endpoint = spawn("coordinator")
    a = ZmqAgentTransport(0, ANY, {}, coord_endpoint)
    try:
        a.open()
        a.send(COORDINATOR_ID, [b"hello"])
        assert _line(coord) == "got 0"
        yield coord, a
    finally:
        a.close()


def test_a_lost_link_ends_a_long_wait(spawn: Spawn) -> None:
    """recv returns (None) as soon as a link is lost, not at the end of its wait: an idle agent
    waits seconds at a time, and a lost coordinator must end it at once (issue 49)."""
    with _heard(spawn) as (coord, a):
        assert a.lost_peers() == [] and a.joined_peers() == [COORDINATOR_ID]  # events so far
        coord.kill()
        began = time.monotonic()
        assert a.recv(300.0) is None
        # a deadline, not a timing claim: without the loss ending it, the wait lasts 300 s
        assert time.monotonic() - began < 150
        assert [loss.peer for loss in a.lost_peers()] == [COORDINATOR_ID]


def test_a_loss_after_a_turn_s_poll_is_reported_once_by_the_next_turn(spawn: Spawn) -> None:
    """An agent's loop asks lost_peers, then waits in recv: after a recv, lost_peers leaves the
    monitors to recv's next poll (which ends at once on the loss), and the loss is reported
    once, the turn after."""
    with _heard(spawn) as (coord, a):
        assert a.recv(0.1) is None  # a turn of the loop: its poll covered every monitor
        coord.kill()
        reported = [loss.peer for loss in a.lost_peers()]
        if not reported:
            began = time.monotonic()
            assert a.recv(300.0) is None
            assert time.monotonic() - began < 150  # a deadline: the loss ended the wait
            reported = [loss.peer for loss in a.lost_peers()]
        assert reported == [COORDINATOR_ID]
        assert a.recv(0.1) is None and a.lost_peers() == []


def test_a_caller_that_never_receives_still_hears_of_a_loss(spawn: Spawn) -> None:
    with _heard(spawn) as (coord, a):
        coord.kill()
        end = time.monotonic() + 20
        losses: list[int] = []
        while not losses and time.monotonic() < end:
            losses = [loss.peer for loss in a.lost_peers()]
            time.sleep(0.05)
        assert losses == [COORDINATOR_ID]


def test_the_coordinator_hears_of_a_killed_agent(spawn: Spawn) -> None:
    c = ZmqCoordinatorTransport(ANY, agents=[1])
    try:
        agent, _ = spawn("agent", c.endpoint, DUMMY)
        assert _flat(c.recv(20.0)) == (1, b"hello")
        assert c.lost_peers() == []
        agent.kill()
        assert _lost(c, 1)
    finally:
        c.close()


def test_the_coordinator_hears_of_a_frozen_agent_through_zmtp_heartbeats(spawn: Spawn) -> None:
    """A stopped process keeps its TCP connections open: only the heartbeats can tell."""
    c = ZmqCoordinatorTransport(ANY, agents=[1], heartbeat_timeout_s=1.0)
    try:
        agent, _ = spawn("agent", c.endpoint, DUMMY)
        assert _flat(c.recv(20.0)) == (1, b"hello")
        os.kill(agent.pid, signal.SIGSTOP)
        assert _lost(c, 1)
    finally:
        c.close()


def test_the_in_process_hub_reports_a_removed_peer_to_those_linked_with_it() -> None:
    hub = InProcHub()
    coord, a0, a1, a2 = (hub.transport(i) for i in (COORDINATOR_ID, 0, 1, 2))
    a0.send(COORDINATOR_ID, [b"hello"])
    a1.connect_peer(0, a0.endpoint)
    a2.send(COORDINATOR_ID, [b"hello"])
    a0.close()
    assert [loss.peer for loss in coord.lost_peers()] == [0]
    assert [loss.peer for loss in a1.lost_peers()] == [0]
    assert a2.lost_peers() == [] and coord.lost_peers() == []  # reported once, to the linked
    a1.disconnect_peer(0)
    a2.close()
    assert [loss.peer for loss in coord.lost_peers()] == [2]


def test_monitor_events_are_parsed_without_pyzmq_helpers() -> None:
    """A socket monitor's message is (6-byte event id + value, endpoint); anything else is
    skipped, not an error."""
    import struct

    import zmq

    from dcop.protocol.zmqlink import monitor_event

    frame = struct.pack("=Hi", zmq.EVENT_DISCONNECTED, 17)
    assert monitor_event([frame, b"tcp://127.0.0.1:5555"]) == (zmq.EVENT_DISCONNECTED, 17)
    handshake = struct.pack("=Hi", zmq.EVENT_HANDSHAKE_FAILED_AUTH, -1)
    assert monitor_event([handshake, b""]) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, -1)
    assert monitor_event([frame]) is None
    assert monitor_event([frame[:5], b""]) is None


def _joined(t: ZmqAgentTransport, peer: int, limit_s: float = 20.0) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        t.recv(0.5)  # a join ends the wait at once (None)
        if peer in t.joined_peers():
            return True
    return False


def test_an_agent_hears_when_a_coordinator_binds_its_port_again() -> None:
    """A DEALER's link that completes a handshake is reported once by joined_peers: when the
    coordinator first binds, and again when a new coordinator binds the same port later."""
    from dcop.coordinator import free_ports

    port = free_ports(1)[0]
    a = ZmqAgentTransport(0, ANY, {}, f"tcp://127.0.0.1:{port}")
    try:
        a.open()
        a.recv(0.2)
        assert a.joined_peers() == []  # nobody listens there yet
        for _ in range(2):
            c = ZmqCoordinatorTransport(f"tcp://127.0.0.1:{port}", agents=[0])
            try:
                assert _joined(a, COORDINATOR_ID)
                assert a.joined_peers() == []  # reported once
            finally:
                c.close(0)
            assert _lost(a, COORDINATOR_ID)
    finally:
        a.close()


def test_the_in_process_transport_has_no_late_joins() -> None:
    assert InProcHub().transport(0).joined_peers() == []


def test_an_agent_retries_its_coordinator_link_sooner_than_its_neighbours() -> None:
    """The coordinator link reconnects every COORDINATOR_RECONNECT_MS (a new coordinator hears
    serving agents sooner); neighbour links keep ZeroMQ's default."""
    import zmq

    from dcop.protocol.zmqlink import COORDINATOR_RECONNECT_MS

    a = ZmqAgentTransport(0, ANY, {1: "tcp://127.0.0.1:1"}, "tcp://127.0.0.1:2")
    try:
        a.open()  # binds, then links to the neighbours
        assert a.coord.getsockopt(zmq.RECONNECT_IVL) == COORDINATOR_RECONNECT_MS < 100
        assert a.dealers[1].getsockopt(zmq.RECONNECT_IVL) == 100
    finally:
        a.close(0)


@pytest.mark.parametrize("mib", [1, 1024, 4095])
def test_the_heartbeat_ttl_never_reaches_libzmq_s_16_bit_wrap(mib: int) -> None:
    """A peer multiplies the TTL's deciseconds by 100 in 16 bits (libzmq issue #4226): at a
    4095 MiB limit the 85.9 s TTL arrived as 20.3 s, under the 21.5 s between PINGs, and every
    quiet link closed after 42 s. Every socket's TTL stays at most MAX_TTL_MS, and above its
    PING interval (a quiet link lives on its PINGs)."""
    import zmq

    from dcop.protocol import peer_timeout_for
    from dcop.protocol.zmqlink import MAX_TTL_MS

    limit = mib * 2**20
    a = ZmqAgentTransport(
        0, ANY, {1: "tcp://127.0.0.1:1"}, "tcp://127.0.0.1:2", max_message_bytes=limit
    )
    c = ZmqCoordinatorTransport(ANY, max_message_bytes=limit)
    try:
        a.open()
        sockets = [a.coord, a.dealers[1], c.router]
        for sock in sockets:
            ttl = sock.getsockopt(zmq.HEARTBEAT_TTL)
            assert ttl <= MAX_TTL_MS < 65_600  # 656 deciseconds x 100 passes 2^16 ms
            assert ttl > sock.getsockopt(zmq.HEARTBEAT_IVL)
            assert ttl == min(MAX_TTL_MS, int(peer_timeout_for(limit) * 1000) // 100 * 100)
    finally:
        a.close(0)
        c.close(0)
