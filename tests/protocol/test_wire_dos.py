"""Denial of service on the wire (issue 33, items 1-3), on real sockets on 127.0.0.1: a keyless or
garbage-writing listener on the coordinator's port, a flood of early frames, strangers' big
frames and undecodable frames must not cut agents off, crowd neighbours out, or flood the log."""

from __future__ import annotations

import contextlib
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zmq

from dcop.agents.agent import Agent, AgentConfig
from dcop.backends.numpy import NumpyBackend
from dcop.errors import RunError
from dcop.protocol.curve import CurveConfig
from dcop.protocol.zmqlink import (
    EARLY_MAX_BYTES,
    EARLY_MAX_TOTAL_BYTES,
    EARLY_PER_SENDER,
    ZmqAgentTransport,
    ZmqCoordinatorTransport,
    claim,
)
from tests.conftest import garbage_listener

ZLOG = "dcop.protocol.zmq"
ANY = "tcp://127.0.0.1:*"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def keys(*ids: int) -> dict[int, tuple[bytes, bytes]]:
    return {i: zmq.curve_keypair() for i in ids}


def first(t: Any, seconds: float) -> tuple[int | None, bytes] | None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        item = t.recv(left)
        if item is not None:
            return item[0], b"".join(bytes(p) for p in item[1])
    return None


def _keyless_router(ctx: zmq.Context[Any], endpoint: str, agent: Any) -> None:
    squatter = ctx.socket(zmq.ROUTER)
    squatter.bind(endpoint)
    _pump(agent, 1.0)
    squatter.close(linger=0)


def _garbage_listener(ctx: zmq.Context[Any], endpoint: str, agent: Any) -> None:
    leave = garbage_listener(int(endpoint.rsplit(":", 1)[1]))
    _pump(agent, 1.0)
    leave()


def _pump(agent: Any, seconds: float) -> None:
    """The agent's loop for ``seconds``: a hello each turn, receive what comes."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        agent.send(-1, [b"hello"])
        agent.recv(0.05)


def _bind_when_free(make: Callable[[], Any]) -> Any:
    """The squatter's socket closes in libzmq's own thread: its port is free a moment later."""
    end = time.monotonic() + 5
    while True:
        try:
            return make()
        except RunError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("secure", [False, True], ids=["open", "secure"])
@pytest.mark.parametrize("attack", [_keyless_router, _garbage_listener], ids=["keyless", "garbage"])
def test_a_squatter_on_the_coordinators_port_does_not_cut_the_agent_off(
    ctx: zmq.Context[Any],
    closing_now: Callable[[Any], Any],
    secure: bool,
    attack: Callable[..., None],
) -> None:
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    k = keys(-1, 0)
    acurve = CurveConfig(*k[0], {-1: k[-1][0]}, {}) if secure else None
    ccurve = CurveConfig(*k[-1], {}, {0: k[0][0]}) if secure else None
    a = closing_now(ZmqAgentTransport(0, ANY, {}, endpoint, curve=acurve))
    a.open()
    attack(ctx, endpoint, a)
    coord = closing_now(
        _bind_when_free(lambda: ZmqCoordinatorTransport(endpoint, ccurve, agents=[0]))
    )
    got = None
    end = time.monotonic() + 10
    while got is None and time.monotonic() < end:
        _pump(a, 0.2)
        got = first(coord, 0.1)
    assert got == (0, b"hello"), "the agent never reached the coordinator after the squatter left"


@pytest.mark.parametrize("secure", [False, True], ids=["open", "secure"])
def test_a_flood_of_early_frames_from_one_candidate_does_not_crowd_out_a_neighbour(
    ctx: zmq.Context[Any],
    closing_now: Callable[[Any], Any],
    caplog: pytest.LogCaptureFixture,
    secure: bool,
) -> None:
    k = keys(-1, 0, 1, 2)
    pub = {i: v[0] for i, v in k.items()}
    curve = CurveConfig(*k[0], {-1: pub[-1], 1: pub[1], 2: pub[2]}, {1: pub[1], 2: pub[2]})
    a = closing_now(
        ZmqAgentTransport(
            0, ANY, {}, "tcp://127.0.0.1:1", curve if secure else None, candidates=[1, 2]
        )
    )
    a.open()

    def peer(ident: bytes, me: int) -> zmq.Socket[Any]:
        s = ctx.socket(zmq.DEALER)
        claim(s, ident, plain=not secure)
        s.setsockopt(zmq.LINGER, 0)
        if secure:
            s.curve_publickey, s.curve_secretkey = k[me]
            s.curve_serverkey = pub[0]
        s.connect(a.endpoint)
        return s

    flooder = peer(b"2/x", 2)  # agent 2's identity (and in secure mode its valid key)
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        for _ in range(300):
            flooder.send(b"early")
        assert first(a, 1.5) is None
        honest = peer(b"1/y", 1)
        honest.send(b"degree")
        assert first(a, 1.0) is None  # held until the link to 1 exists
        a.connect_peer(1, "tcp://127.0.0.1:2")
        assert first(a, 5.0) == (1, b"degree")  # (held, or still in its handshake on a load)
    assert "early frames over the budget (agent 2 sent 64 held frames" in caplog.text
    # one-shot: once the neighbours are known, the flooder is refused at once, its frames dropped
    a.settle([1])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        again = peer(b"2/z", 2)
        with contextlib.suppress(zmq.Again):  # refused at the handshake: it may have no link
            again.send(b"late", zmq.NOBLOCK)
        assert first(a, 1.0) is None
    # refused at the handshake (both modes): none of its frames is read
    assert "at the handshake, refused a connection: agent 2 is not a neighbour" in caplog.text
    assert a._held_count == 0


def test_a_neighbours_refused_early_frame_is_logged_apart_from_a_strangers_flood(
    ctx: zmq.Context[Any], closing_now: Callable[[Any], Any], caplog: pytest.LogCaptureFixture
) -> None:
    a = closing_now(ZmqAgentTransport(0, ANY, {}, "tcp://127.0.0.1:1", candidates=[1]))
    a.open()
    stranger = ctx.socket(zmq.DEALER)
    claim(stranger, b"5/x")
    stranger.setsockopt(zmq.LINGER, 0)
    stranger.connect(a.endpoint)
    neighbour = ctx.socket(zmq.DEALER)
    claim(neighbour, b"1/x")
    neighbour.setsockopt(zmq.LINGER, 0)
    neighbour.connect(a.endpoint)
    with caplog.at_level(logging.WARNING, logger=ZLOG):
        with contextlib.suppress(zmq.Again):  # refused at the handshake: it may have no link
            stranger.send(b"noise", zmq.NOBLOCK)
        first(a, 0.5)
        neighbour.send(b"x" * (1 << 17))  # over the size an early frame may have
        first(a, 0.5)
    assert "agent 5 is not a neighbour" in caplog.text
    assert "frame from agent 1 (which is not linked yet)" in caplog.text


def _held_until(a: ZmqAgentTransport, done: Callable[[], bool], seconds: float = 30.0) -> None:
    """Pump the agent's transport until ``done()`` (every frame sent has been read)."""
    end = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < end, "the frames sent never all reached the transport"
        assert first(a, 0.1) is None  # nothing is delivered before connect_peer


def _client(ctx: zmq.Context[Any], endpoint: str, ident: bytes) -> zmq.Socket[Any]:
    s = ctx.socket(zmq.DEALER)
    claim(s, ident)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(endpoint)
    return s


def test_claimed_idle_ids_filling_the_early_budget_do_not_crowd_out_a_neighbour(
    ctx: zmq.Context[Any], closing_now: Callable[[Any], Any]
) -> None:
    """Round 4, finding 1: nine claimed ids, 64 frames of 64 KiB each, more than the whole
    early budget. A real neighbour's early frame still gets in (before, two such ids filled the
    shared 8 MiB and every later early frame was refused: the next DFS stalled)."""
    a = closing_now(ZmqAgentTransport(0, ANY, {}, "tcp://127.0.0.1:1", candidates=range(1, 11)))
    a.open()
    flooders = [_client(ctx, a.endpoint, b"%d/x" % k) for k in range(2, 11)]
    big = b"\0" * EARLY_MAX_BYTES
    for s in flooders:
        for _ in range(64):
            s.send(big)
    _held_until(a, lambda: a._held_bytes > EARLY_MAX_TOTAL_BYTES - 2 * EARLY_MAX_BYTES)
    assert a._held_bytes <= EARLY_MAX_TOTAL_BYTES
    honest = _client(ctx, a.endpoint, b"1/y")
    honest.send(b"degree")
    _held_until(a, lambda: 1 in a._held)
    a.connect_peer(1, "tcp://127.0.0.1:2")
    assert first(a, 5.0) == (1, b"degree")


def test_a_flood_claiming_a_neighbours_own_id_does_not_shut_that_neighbour_out(
    ctx: zmq.Context[Any], closing_now: Callable[[Any], Any]
) -> None:
    """Round 4, finding 1 (the round-3 repro claiming a real neighbour): 300 tiny frames
    under agent 1's id fill its quota; agent 1's own frame, sent later, is still delivered."""
    a = closing_now(ZmqAgentTransport(0, ANY, {}, "tcp://127.0.0.1:1", candidates=[1, 2]))
    a.open()
    flooder = _client(ctx, a.endpoint, b"1/x")
    for _ in range(300):
        flooder.send(b"early")
    flooder.send(b"last")  # in order on its connection: once held, the whole flood was read
    _held_until(a, lambda: a._held_count == EARLY_PER_SENDER and a._held[1][-1] == [b"last"])
    honest = _client(ctx, a.endpoint, b"1/y")
    honest.send(b"degree")
    _held_until(a, lambda: [b"degree"] in a._held.get(1, ()))
    a.connect_peer(1, "tcp://127.0.0.1:2")
    got = [first(a, 5.0) for _ in range(EARLY_PER_SENDER)]
    assert (1, b"degree") in got


def test_a_serving_agents_setup_drops_frames_its_links_cannot_deliver(
    ctx: zmq.Context[Any], closing_now: Callable[[Any], Any]
) -> None:
    """Round 4, finding 1: frames held from an agent that is no link of the problem are dropped
    at its setup (before, a serving agent held them forever); the agent stays a candidate for
    the next problem."""
    a = closing_now(ZmqAgentTransport(0, ANY, {}, "tcp://127.0.0.1:1", candidates=[1, 2]))
    a.open()
    flooder = _client(ctx, a.endpoint, b"2/x")
    for _ in range(10):
        flooder.send(b"x" * 1000)
    _held_until(a, lambda: a._held_count == 10)
    a.settle([1], for_good=False)
    assert (a._held_count, a._held_bytes) == (0, 0)
    flooder.send(b"next problem")
    _held_until(a, lambda: a._held_count == 1)
    a.connect_peer(2, "tcp://127.0.0.1:3")
    assert first(a, 5.0) == (2, b"next problem")


def test_an_id_taken_first_is_named_as_taken(
    ctx: zmq.Context[Any], closing_now: Callable[[Any], Any]
) -> None:
    """Round 4, finding 5: in open mode a connection that claims agent 3 first keeps the id;
    the coordinator reports agent 3 lost, saying why (it blamed an innocent agent before)."""
    coord = closing_now(ZmqCoordinatorTransport("tcp://127.0.0.1:*", agents=[2, 3]))
    impostor = ctx.socket(zmq.DEALER)
    claim(impostor, b"3/evil")
    impostor.setsockopt(zmq.LINGER, 0)
    impostor.connect(coord.endpoint)
    impostor.send(b"first")
    end = time.monotonic() + 30
    got = None
    while got is None:
        assert time.monotonic() < end, "the first claim of id 3 never arrived"
        got = coord.recv(0.1)
    assert got[0] == 3
    honest = ctx.socket(zmq.DEALER)
    claim(honest, b"3/honest")
    honest.setsockopt(zmq.LINGER, 0)
    honest.connect(coord.endpoint)
    losses: list[Any] = []
    while not losses:
        assert time.monotonic() < end, "the refused second claim of id 3 was never reported"
        with contextlib.suppress(zmq.Again):  # refused at the handshake: no link to send on
            honest.send(b"hello", zmq.NOBLOCK)
        coord.recv(0.1)
        losses = [x for x in coord.lost_peers() if x.peer == 3]
    assert "a second connection claimed agent 3's id" in losses[0].reason
    assert "--secure" in losses[0].reason


def _child_script() -> str:
    """The agent process of ``benchmarks/wire_memory.py`` (one script for the bench and here)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "wire_memory.py"
    spec = importlib.util.spec_from_file_location("wire_memory_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module._CHILD)


_CHILD = _child_script()


def _attack(
    ctx: zmq.Context[Any], seconds: float, idents: list[bytes], frames: int, mib: int, plain: bool
) -> tuple[int, int, int]:
    """An agent (candidate: agent 1) in a child process; a client per identity, each sending
    ``frames`` frames of ``mib`` MiB. Returns the agent's peak RSS growth (KiB), its refused
    frames, and its connections refused at the handshake."""
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    endpoint = child.stdout.readline().strip()
    big = b"\x81" * (mib << 20)
    socks = []  # kept: a collected socket closes, and its connection with it
    for ident in idents:
        sock = ctx.socket(zmq.DEALER)
        socks.append(sock)
        claim(sock, ident, plain=plain)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(endpoint)
        for _ in range(frames):
            with contextlib.suppress(zmq.Again):  # refused at the handshake: no link to send on
                sock.send(big, zmq.NOBLOCK, copy=False)
    base_kib, peak_kib, dropped, refused = map(int, child.stdout.readline().split())
    child.wait(10)
    return peak_kib - base_kib, dropped, refused


@pytest.mark.parametrize("plain", [True, False], ids=["plain-claim", "null-client"])
def test_strangers_big_frames_are_refused_at_the_handshake(
    ctx: zmq.Context[Any], plain: bool
) -> None:
    """Ten strangers (ids the agent does not accept, or clients that claim nothing), each a
    40 MiB frame: refused at the handshake, so the agent never reads, or holds, one of them
    (it held one per connection before: 524 MB peak for ten 100 MB frames)."""
    grew, dropped, refused = _attack(ctx, 4, [b"%d/x" % (7 + k) for k in range(10)], 1, 40, plain)
    assert dropped == 0, "a stranger's frame reached the transport"
    if plain:
        assert refused >= 10
    assert grew < 20 << 10, f"peak grew by {grew} KiB"


def test_connections_sharing_an_identity_hold_at_most_one_frame_each(
    ctx: zmq.Context[Any],
) -> None:
    """Four connections claiming one accepted identity, five 20 MiB frames each: each new one
    takes the identity over (ROUTER_HANDOVER) and the old one's queue is dropped. Without that,
    libzmq parked each later connection unread with up to 64 frames queued (400 MiB here)."""
    grew, _, _ = _attack(ctx, 6, [b"1/x"] * 4, 5, 20, True)
    assert grew < 8 * (20 << 10), f"peak grew by {grew} KiB"


def test_undecodable_frames_are_logged_at_a_bounded_rate(caplog: pytest.LogCaptureFixture) -> None:
    class Quiet:
        endpoint = "inproc://x"

    agent = Agent(AgentConfig(0), Quiet(), NumpyBackend())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="dcop.agents"):
        for _ in range(1000):
            agent.on_frames(1, [b"\x00not msgpack"])
    lines = [r for r in caplog.records if "dropped a frame" in r.getMessage()]
    assert len(lines) == 1


def test_a_stale_frame_never_cuts_another_agents_connection(
    closing_now: Callable[[Any], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round 4, finding 5: a refused frame's descriptor may have gone to a new connection while
    the frame waited; when that descriptor is another agent's, its connection is left alone
    (cutting it blamed agent 2 for a lost link when agent 3's id was taken)."""
    from dcop.protocol import zmqlink

    coord = closing_now(ZmqCoordinatorTransport("tcp://127.0.0.1:*", agents=[2, 3]))
    cut: list[object] = []
    monkeypatch.setattr(zmqlink, "_source_fd", lambda frame: 17)
    monkeypatch.setattr(zmqlink, "_cut", cut.append)
    coord._fd_peers[17] = 2
    coord._cut(3, "frame")
    assert cut == []
    coord._cut(2, "frame")  # the connection of the agent the frame claims: cut
    assert cut == ["frame"]
