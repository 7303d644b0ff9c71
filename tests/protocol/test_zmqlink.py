"""The ZeroMQ transports on real sockets (127.0.0.1): who a frame is from, what is refused before
decoding, wildcard ports, late links, and that a socket never talks to itself."""

from __future__ import annotations

import contextlib
import logging
import re
import socket
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
import zmq

from dcop.errors import RunError
from dcop.protocol import COORDINATOR_ID, Heartbeat, Stop, encode
from dcop.protocol.curve import CurveConfig
from dcop.protocol.zmqlink import ZmqAgentTransport, ZmqCoordinatorTransport, claim

ZLOG = "dcop.protocol.zmq"
ANY = "tcp://127.0.0.1:*"


def frames(t: Any, seconds: float) -> list[tuple[int | None, bytes]]:
    """Everything ``t`` delivers within ``seconds`` (one-frame messages, as bytes)."""
    out = []
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        item = t.recv(left)
        if item is not None:
            sender, parts = item
            out.append((sender, b"".join(bytes(p) for p in parts)))
    return out


def frames_until(
    t: Any, want: list[tuple[int | None, bytes]], limit_s: float = 20.0, settle_s: float = 0.3
) -> list[tuple[int | None, bytes]]:
    """What ``t`` delivers until every frame of ``want`` is in (at most ``limit_s``), and for
    ``settle_s`` more: an agent answers a new connection's handshake from its own poll, which
    on a loaded machine may come late."""
    got: list[tuple[int | None, bytes]] = []
    end = time.monotonic() + limit_s
    while time.monotonic() < end and not all(w in got for w in want):
        got += frames(t, 0.1)
    return got + frames(t, settle_s)


def until(check: Callable[[], bool], limit_s: float = 20.0) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return False


def dealer(ctx: zmq.Context[Any], ident: bytes, endpoint: str, **curve: bytes) -> zmq.Socket[Any]:
    """A client speaking as ``ident`` (in open mode also its PLAIN user name, as agents do)."""
    s = ctx.socket(zmq.DEALER)
    claim(s, ident, plain=not curve)
    s.setsockopt(zmq.LINGER, 0)
    for name, value in curve.items():
        setattr(s, name, value)
    s.connect(endpoint)
    return s


def knock(s: zmq.Socket[Any], *parts: bytes) -> None:
    """Send without blocking: a client refused at the handshake has no connection, and a
    blocking send would wait for one for ever (libzmq does not retry a refused handshake)."""
    with contextlib.suppress(zmq.Again):
        s.send_multipart(list(parts), zmq.NOBLOCK, copy=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def agent(me: int, coordinator: str, neighbours: dict[int, str] | None = None, **kw: Any) -> Any:
    t = ZmqAgentTransport(me, ANY, neighbours or {}, coordinator, **kw)
    t.open()
    return t


# ---- open mode: roles ---------------------------------------------------------------------------
def test_a_forged_coordinator_frame_on_the_router_is_refused_and_logged(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    coord = closing(ZmqCoordinatorTransport(ANY, agents=[0]))
    a = closing(agent(0, coord.endpoint))
    forger = dealer(ctx, b"-1", a.endpoint)
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        knock(forger, *encode(COORDINATOR_ID, 0, Stop("forged")))
        assert frames(a, 1.0) == []
        assert until(lambda: a.refused_connections >= 1, 5)
    assert "claims to be the coordinator" in caplog.text
    assert "at the handshake, refused a connection" in caplog.text
    assert "(from 127.0.0.1)" in caplog.text
    assert a.dropped == 0  # refused at the handshake: none of its frames was read
    # the coordinator itself still gets through, on the link the agent opened
    a.send(COORDINATOR_ID, [b"hello"])
    assert frames(coord, 1.0) == [(0, b"hello")]
    coord.send(0, [b"stop"])
    assert frames(a, 1.0) == [(COORDINATOR_ID, b"stop")]


def test_open_mode_the_first_connection_keeps_an_id(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    coord = closing(ZmqCoordinatorTransport(ANY, agents=[0, 1]))
    a0 = closing(agent(0, coord.endpoint))
    a0.send(COORDINATOR_ID, [b"real"])
    assert frames(coord, 1.0) == [(0, b"real")]
    impostor = dealer(ctx, b"0/other", coord.endpoint)
    stranger = dealer(ctx, b"5", coord.endpoint)
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        knock(impostor, b"fake")
        knock(stranger, b"who")
        assert frames(coord, 1.0) == []
        assert until(lambda: coord.refused_connections >= 2, 5)
    assert coord.dropped == 0  # both refused at the handshake
    assert "already speaks on another connection" in caplog.text
    assert "agent 5 is not in peers.json" in caplog.text
    coord.send(0, [b"answer"])  # still reaches the real agent 0, not the impostor
    assert frames(a0, 1.0) == [(COORDINATOR_ID, b"answer")]
    assert impostor.poll(200) == 0


# ---- secure mode: the key decides ---------------------------------------------------------------
def _keys(*ids: int) -> dict[int, tuple[bytes, bytes]]:
    return {i: zmq.curve_keypair() for i in ids}


def test_secure_a_neighbours_key_cannot_speak_for_the_coordinator_or_another_neighbour(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    keys = _keys(COORDINATOR_ID, 0, 1, 2)
    pub = {i: k[0] for i, k in keys.items()}
    coord_curve = CurveConfig(*keys[COORDINATOR_ID], {}, {i: pub[i] for i in (0, 1, 2)})
    coord = closing(ZmqCoordinatorTransport(ANY, coord_curve))
    servers = {COORDINATOR_ID: pub[COORDINATOR_ID], 1: pub[1], 2: pub[2]}
    curve0 = CurveConfig(*keys[0], servers, {1: pub[1], 2: pub[2]})
    a0 = closing(
        agent(0, coord.endpoint, {1: "tcp://127.0.0.1:1", 2: "tcp://127.0.0.1:2"}, curve=curve0)
    )
    as_one = {"curve_publickey": pub[1], "curve_secretkey": keys[1][1], "curve_serverkey": pub[0]}
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        forgers = [dealer(ctx, ident, a0.endpoint, **as_one) for ident in (b"-1", b"2/x", b"1/y")]
        forgers[0].send_multipart(encode(COORDINATOR_ID, 0, Stop("forged")))
        forgers[1].send_multipart(encode(2, 0, Heartbeat()))
        forgers[2].send(b"from one")
        assert frames_until(a0, [(1, b"from one")], settle_s=1.0) == [(1, b"from one")]
    # whichever forger's frame arrives first is logged; the other's line is held back (same
    # address, same reason), but both frames are dropped
    assert re.search(
        r"the CURVE key of agent 1 claims to be (the coordinator|agent 2)", caplog.text
    )
    assert a0.dropped == 2
    # the same towards the coordinator: agent 1's key speaking for agent 2
    to_coord = {**as_one, "curve_serverkey": pub[COORDINATOR_ID]}
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        two, one = (dealer(ctx, ident, coord.endpoint, **to_coord) for ident in (b"2", b"1"))
        two.send(b"I am two")
        one.send(b"I am one")
        assert frames(coord, 1.5) == [(1, b"I am one")]
    assert "the CURVE key of agent 1 claims to be agent 2" in caplog.text


def test_secure_an_unlisted_key_is_refused_with_its_address(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    keys = _keys(COORDINATOR_ID, 0)
    coord = closing(
        ZmqCoordinatorTransport(ANY, CurveConfig(*keys[COORDINATOR_ID], {}, {0: keys[0][0]}))
    )
    pub, sec = zmq.curve_keypair()
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        rogue = dealer(
            ctx,
            b"0",
            coord.endpoint,
            curve_publickey=pub,
            curve_secretkey=sec,
            curve_serverkey=keys[COORDINATOR_ID][0],
        )
        knock(rogue, b"let me in")
        assert frames(coord, 1.0) == []
        assert until(lambda: "refused a CURVE client" in caplog.text, 5)
    assert "(from 127.0.0.1)" in caplog.text


# ---- refused before decoding --------------------------------------------------------------------
def test_an_unknown_senders_large_frame_is_dropped_without_a_copy(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    a = closing(agent(0, "tcp://127.0.0.1:1", {1: "tcp://127.0.0.1:2"}))
    big = b"\x81" * (50 << 20)
    stranger = dealer(ctx, b"7", a.endpoint)
    knock(stranger, big)
    del big
    tracemalloc.start()
    try:
        with caplog.at_level(logging.WARNING, logger=ZLOG):
            assert frames(a, 2.0) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert a.dropped == 0 and a.refused_connections >= 1  # refused at the handshake
    assert "agent 7 is not a neighbour" in caplog.text
    assert peak < (4 << 20), f"{peak} bytes allocated to refuse the frame"


def test_an_oversized_frame_is_refused_and_logged(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    a = closing(agent(0, "tcp://127.0.0.1:1", {1: "tcp://127.0.0.1:2"}, max_message_bytes=65536))
    neighbour = dealer(ctx, b"1", a.endpoint)
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        neighbour.send(b"x" * 100_000)
        neighbour.send_multipart([b"x"] * 9000)  # more parts than any message has
        neighbour.send(b"fits")
        assert frames_until(a, [(1, b"fits")]) == [(1, b"fits")]
    assert "oversized message of 100000 bytes" in caplog.text
    assert "a message of 9000 frames" in caplog.text
    assert "from 127.0.0.1" in caplog.text


def test_refusals_are_rate_limited_per_peer_and_reason(
    ctx: zmq.Context[Any], closing: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    a = closing(agent(0, "tcp://127.0.0.1:1", {1: "tcp://127.0.0.1:2"}, max_message_bytes=1000))
    neighbour = dealer(ctx, b"1/x", a.endpoint)
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        for _ in range(50):
            neighbour.send(b"x" * 2000)
        assert until(lambda: frames(a, 0.1) == [] and a.dropped == 50, 10)
    lines = [r for r in caplog.records if "refused a frame" in r.getMessage()]
    assert len(lines) == 1


# ---- endpoints ----------------------------------------------------------------------------------
def test_wildcard_bind_reports_the_port_and_late_links_work(
    closing: Callable[[Any], Any],
) -> None:
    coord = closing(ZmqCoordinatorTransport(ANY))
    a = closing(ZmqAgentTransport(0, "tcp://localhost:*", {}, coord.endpoint, candidates={1}))
    b = closing(ZmqAgentTransport(1, ANY, {}, coord.endpoint))
    a.open()
    b.open()
    host, port = a.endpoint.rsplit(":", 1)
    assert host == "tcp://localhost" and port.isdigit() and int(port) > 0
    b.connect_peer(0, a.endpoint)
    b.send(0, [b"early"])  # a does not know b yet: held, not delivered, not refused
    assert frames(a, 0.5) == []
    assert a.dropped == 0
    a.connect_peer(1, b.endpoint)
    b.send(0, [b"later"])
    a.send(1, [b"back"])
    assert frames(a, 1.0) == [(1, b"early"), (1, b"later")]
    assert frames(b, 1.0) == [(0, b"back")]
    a.disconnect_peer(1)
    b.send(0, [b"gone"])  # a candidate still: held, not delivered, until it is linked again
    assert frames(a, 1.0) == []
    assert a.dropped == 0
    a.connect_peer(1, b.endpoint)
    assert frames(a, 1.0) == [(1, b"gone")]


def test_listening_in_the_ephemeral_range_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()  # the kernel picks it from the ephemeral range
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        ZmqCoordinatorTransport(f"tcp://127.0.0.1:{port}").close()
    assert f"listening on port {port}, inside the kernel's ephemeral port range" in caplog.text


def test_a_socket_never_connects_to_its_own_endpoint() -> None:
    port = free_port()
    own = f"tcp://127.0.0.1:{port}"
    with pytest.raises(RunError, match="own endpoint"):
        ZmqAgentTransport(0, own, {}, f"tcp://localhost:{port}")
    with pytest.raises(RunError, match="own endpoint"):
        ZmqAgentTransport(0, own, {1: f"tcp://127.0.0.1:{port}"}, "tcp://127.0.0.1:1")
    t = ZmqAgentTransport(0, ANY, {}, "tcp://127.0.0.1:1")
    try:
        t.open()
        with pytest.raises(RunError, match="own endpoint"):
            t.connect_peer(1, t.endpoint)
    finally:
        t.close()


def test_a_tcp_self_connection_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    """ZeroMQ's source-address syntax forces what the kernel does by chance in the ephemeral
    range: the coordinator link connects to its own local port. The transport drops it; its own
    frames never come back as the coordinator's."""
    port = free_port()
    looped = f"tcp://127.0.0.1:{port};127.0.0.1:{port}"
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        t = ZmqAgentTransport(0, ANY, {}, looped)
        try:
            t.open()
            got = []
            end = time.monotonic() + 2.0
            while time.monotonic() < end:
                t.send(COORDINATOR_ID, [b"my own frame"])
                got += frames(t, 0.05)
        finally:
            t.close()
    assert got == []
    # Named as a self-connection when its monitor event is read while the connection lives;
    # a PLAIN client facing itself also fails the handshake within milliseconds, and on a
    # loaded machine libzmq has closed the descriptor before the event is read: then that
    # failure is the line (the link is dropped and retried either way).
    assert "TCP self-connection" in caplog.text or "not a dcop process" in caplog.text


# ---- wake ---------------------------------------------------------------------------------------
def test_wake_from_another_thread_ends_a_waiting_recv_and_frames_still_arrive(
    closing: Callable[[Any], Any],
) -> None:
    import threading

    coord = closing(ZmqCoordinatorTransport("tcp://127.0.0.1:*", agents=[0]))
    a = closing(agent(0, coord.endpoint))
    a.wake()  # before the wait: the next recv returns at once, with nothing
    assert a.recv(120.0) is None
    worker = threading.Thread(target=lambda: (time.sleep(0.2), a.wake()))
    worker.start()
    assert a.recv(120.0) is None  # woken by the worker (a hang here is a missed wake-up)
    worker.join()
    a.send(COORDINATOR_ID, encode(0, COORDINATOR_ID, Heartbeat()))
    assert until(lambda: coord.recv(0.1) is not None)
    coord.send(0, encode(COORDINATOR_ID, 0, Stop("done")))
    assert until(lambda: (item := a.recv(0.1)) is not None and item[0] == COORDINATOR_ID)
    a.close()
    a.wake()  # after close: nothing happens (its pipe is gone)


def test_an_agents_handshakes_are_answered_by_its_own_poll_the_coordinators_by_a_thread() -> None:
    """An agent's ZAP handler has no thread (each forked agent would pay for one): a neighbour's
    connection is admitted while the agent polls, and its frames arrive; the coordinator's
    handler keeps a thread, which answers its agents while it still plans."""
    import threading

    coord = ZmqCoordinatorTransport(ANY, agents=[1, 2])
    a1 = ZmqAgentTransport(1, ANY, {}, coord.endpoint, candidates=[2])
    a2 = ZmqAgentTransport(2, ANY, {}, coord.endpoint, candidates=[1])
    try:
        a1.open()
        a2.open()
        zap_threads = [t.name for t in threading.enumerate() if t.name.startswith("zap ")]
        assert zap_threads == ["zap coordinator"]
        assert a1.auth.socket is not None and coord.auth.socket is None
        a1.connect_peer(2, a2.endpoint)
        a2.connect_peer(1, a1.endpoint)
        a2.send(1, [b"hi"])
        a1.send(2, [b"ho"])
        # each admitted at the other's handshake by that agent's own poll
        assert frames_until(a1, [(2, b"hi")]) == [(2, b"hi")]
        assert frames_until(a2, [(1, b"ho")]) == [(1, b"ho")]
        a2.send(COORDINATOR_ID, [b"up"])
        assert frames(coord, 1.0) == [(2, b"up")]
    finally:
        for t in (a1, a2, coord):
            t.close(0)
