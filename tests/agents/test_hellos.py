"""How often a one-shot agent says hello, on real sockets on 127.0.0.1 (issue 49): once where its
link to the coordinator joined cleanly, however long its setup takes; again where that link may
have lost it (a squatter's failed handshake took the queued hello, issue 33; a coordinator lost
and another bound on its port). Hellos are counted, not timed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq

from dcop.agents.agent import Agent, AgentConfig
from dcop.backends.numpy import NumpyBackend
from dcop.errors import RunError
from dcop.protocol import COORDINATOR_ID, Hello, Stop, decode, encode
from dcop.protocol.curve import CurveConfig
from dcop.protocol.zmqlink import ZmqAgentTransport, ZmqCoordinatorTransport
from tests.conftest import garbage_listener


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _Keys:
    """CURVE keys of the coordinator (-1) and agent 0, or None for open mode."""

    def __init__(self, secure: bool) -> None:
        k = {i: zmq.curve_keypair() for i in (-1, 0)} if secure else {}
        self.agent = CurveConfig(*k[0], {-1: k[-1][0]}, {}) if secure else None
        self.coordinator = CurveConfig(*k[-1], {}, {0: k[0][0]}) if secure else None


class _Running:
    """Agent 0 running its loop in a thread over a real transport to ``endpoint``."""

    def __init__(self, endpoint: str, curve: CurveConfig | None, heartbeat_s: float) -> None:
        self.transport = ZmqAgentTransport(0, "tcp://127.0.0.1:*", {}, endpoint, curve)
        self.transport.open()
        config = AgentConfig(0, timeout_s=30.0, heartbeat_s=heartbeat_s, peer_timeout_s=10.0)
        self.agent = Agent(config, self.transport, NumpyBackend())
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.code = self.agent.run()

    def close(self) -> None:
        self.agent.stop_reason = self.agent.stop_reason or "test over"
        self.transport.wake()
        self.thread.join(10)
        self.transport.close(0)


@pytest.fixture
def agents() -> Iterator[Callable[[str, CurveConfig | None, float], _Running]]:
    started: list[_Running] = []

    def start(endpoint: str, curve: CurveConfig | None, heartbeat_s: float) -> _Running:
        started.append(_Running(endpoint, curve, heartbeat_s))
        return started[-1]

    yield start
    for running in started:
        running.close()


def _hellos(coordinator: ZmqCoordinatorTransport, seconds: float) -> int:
    """The hellos agent 0 sends the coordinator within ``seconds``."""
    count = 0
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        item = coordinator.recv(left)
        if item is not None:
            env = decode(item[1], known_senders={0}, receiver=COORDINATOR_ID)
            count += isinstance(env.body, Hello)
    return count


def _first_hello(coordinator: ZmqCoordinatorTransport, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        item = coordinator.recv(left)
        if item is not None:
            env = decode(item[1], known_senders={0}, receiver=COORDINATOR_ID)
            if isinstance(env.body, Hello):
                return True
    return False


def _answered(running: _Running, coordinator: ZmqCoordinatorTransport) -> None:
    """The coordinator's first word reaches the agent (here a stop; a setup goes the same way)."""
    coordinator.send(0, encode(COORDINATOR_ID, 0, Stop("shutdown")))
    running.thread.join(10)
    assert not running.thread.is_alive() and running.agent.stop_reason == "shutdown"


def _coordinator(endpoint: str, curve: CurveConfig | None) -> ZmqCoordinatorTransport:
    """Bound on ``endpoint`` once a squatter's socket, closed in libzmq's own thread, let it go."""
    end = time.monotonic() + 5
    while True:
        try:
            return ZmqCoordinatorTransport(endpoint, curve, agents=[0])
        except RunError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize("secure", [False, True], ids=["open", "secure"])
def test_an_agent_whose_link_joined_cleanly_says_hello_once_however_long_its_setup_takes(
    agents: Callable[[str, CurveConfig | None, float], _Running], secure: bool
) -> None:
    """No setup for 10 heartbeats (its neighbours' hellos still to come): the hello its start
    queued left on the link's first join, and nothing else. The timer repeated it at 1, 3, 7
    ... heartbeats before (3.1 hellos per agent of a 1000-agent tree, 5.3 at 2000)."""
    keys = _Keys(secure)
    coordinator = ZmqCoordinatorTransport("tcp://127.0.0.1:*", keys.coordinator, agents=[0])
    try:
        running = agents(coordinator.endpoint, keys.agent, 0.25)
        assert _hellos(coordinator, 2.5) == 1  # (the timer's: at 0, 1, 3 and 7 heartbeats)
        _answered(running, coordinator)
    finally:
        coordinator.close(0)


def _keyless_router(ctx: zmq.Context[Any], endpoint: str) -> Callable[[], None]:
    squatter = ctx.socket(zmq.ROUTER)
    squatter.bind(endpoint)
    return lambda: squatter.close(linger=0)


def _garbage_listener(ctx: zmq.Context[Any], endpoint: str) -> Callable[[], None]:
    return garbage_listener(int(endpoint.rsplit(":", 1)[1]))


@pytest.mark.parametrize("secure", [False, True], ids=["open", "secure"])
@pytest.mark.parametrize(
    "squatter", [_keyless_router, _garbage_listener], ids=["keyless", "garbage"]
)
def test_an_agent_whose_first_handshakes_failed_says_hello_again_when_its_coordinator_joins(
    agents: Callable[[str, CurveConfig | None, float], _Running],
    secure: bool,
    squatter: Callable[[zmq.Context[Any], str], Callable[[], None]],
) -> None:
    """A squatter on the coordinator's port fails the agent's handshakes, and the hello queued
    at its start goes with them (issue 33): the link's first clean join says it again. The
    heartbeat is longer than the test, so no timer's repeat can stand in for that hello."""
    keys = _Keys(secure)
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        leave = squatter(ctx, endpoint)
        running = agents(endpoint, keys.agent, 60.0)
        time.sleep(0.5)  # the agent's handshakes with the squatter fail meanwhile
        leave()
        coordinator = _coordinator(endpoint, keys.coordinator)
        try:
            assert _first_hello(coordinator, 10.0), "no hello after the squatter left"
            _answered(running, coordinator)
        finally:
            coordinator.close(0)
    finally:
        ctx.destroy(linger=0)


def test_an_agent_whose_coordinator_was_lost_says_hello_to_the_next_one(
    agents: Callable[[str, CurveConfig | None, float], _Running],
) -> None:
    """A coordinator that heard the hello and left without an answer; the one bound on its port
    next hears the hello again (a rejoin), without any timer's repeat."""
    endpoint = f"tcp://127.0.0.1:{_free_port()}"
    first = ZmqCoordinatorTransport(endpoint, agents=[0])
    try:
        running = agents(endpoint, None, 60.0)
        assert _first_hello(first, 10.0)
    finally:
        first.close(0)
    second = _coordinator(endpoint, None)
    try:
        assert _first_hello(second, 10.0), "no hello to the coordinator bound next"
        _answered(running, second)
    finally:
        second.close(0)
