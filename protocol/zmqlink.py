"""ZeroMQ transports: the only code that touches sockets.

Agent: one ROUTER bound at its own endpoint (everything neighbours send arrives there, the DEALER
identity tells who sent it), one DEALER per neighbour (identity = own id) and one DEALER to the
coordinator. Coordinator: one ROUTER; it answers agents through their DEALER identities.

With a :class:`~dcop.protocol.curve.CurveConfig` every socket uses CURVE and a ZAP handler
(``zmq.auth.thread.ThreadAuthenticator``) refuses client keys that peers.json does not list; the
refusal is logged and the client's frames never reach the application.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import zmq
import zmq.auth.thread

from dcop.errors import RunError
from dcop.protocol.constants import COORDINATOR_ID
from dcop.protocol.constants import DEFAULT_MAX_MESSAGE_BYTES as MAX_FRAME_BYTES
from dcop.protocol.curve import CurveConfig

log = logging.getLogger("dcop.protocol.zmq")

#: Outgoing frames kept for a slow peer before sends to it are dropped (heartbeats only in practice).
SEND_HWM = 10_000
LINGER_MS = 2000


def bind_endpoint(endpoint: str) -> str:
    """The address to bind for an endpoint: its own IP when it names one, else all interfaces
    (a host or service name such as ``agent3`` cannot be bound, only connected to)."""
    if not endpoint.startswith("tcp://"):
        return endpoint
    host, _, port = endpoint[len("tcp://") :].rpartition(":")
    host = host.strip("[]")
    if host == "*":
        return endpoint
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"tcp://*:{port}"
    return endpoint


def identity(agent_id: int) -> bytes:
    return str(agent_id).encode("ascii")


def parse_identity(raw: bytes) -> int | None:
    """The id behind a routing identity, or None for anything else (a stranger's socket)."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    if text.lstrip("-").isdigit() and len(text) <= 11:
        return int(text)
    return None


class _KeyFilter:
    """ZAP credentials provider: accept exactly the listed CURVE client keys, log the rest."""

    def __init__(self, allowed: frozenset[bytes], owner: str) -> None:
        self.allowed = allowed
        self.owner = owner

    def callback(self, domain: str, key: bytes) -> bool:
        ok = key in self.allowed
        if not ok:
            log.warning("%s: refused a CURVE client whose key is not in peers.json", self.owner)
        return ok


class _ZmqBase:
    def __init__(self, owner: str, curve: CurveConfig | None, max_frame_bytes: int) -> None:
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.curve = curve
        self.max_frame_bytes = max_frame_bytes
        self.auth: zmq.auth.thread.ThreadAuthenticator | None = None
        if curve is not None:
            self.auth = zmq.auth.thread.ThreadAuthenticator(self.ctx, log=log)
            self.auth.start()
            self.auth.configure_curve_callback("*", _KeyFilter(curve.allowed_clients, owner))
        self.poller = zmq.Poller()
        self._closed = False

    def _router(self, endpoint: str, what: str) -> zmq.Socket[Any]:
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        # libzmq itself refuses frames far above the limit (the peer is disconnected); frames
        # just above it reach the codec, which logs and drops them.
        sock.setsockopt(zmq.MAXMSGSIZE, self.max_frame_bytes + (1 << 16))
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        if self.curve is not None:
            sock.curve_secretkey = self.curve.secret
            sock.curve_publickey = self.curve.public
            sock.curve_server = True
        try:
            sock.bind(bind_endpoint(endpoint))
        except zmq.ZMQError as exc:
            sock.close(linger=0)
            raise RunError(f"{what}: cannot bind {endpoint}: {exc}") from None
        self.poller.register(sock, zmq.POLLIN)
        return sock

    def _dealer(self, me: int, peer: int, endpoint: str) -> zmq.Socket[Any]:
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, identity(me))
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
        if self.curve is not None:
            server = self.curve.server_keys.get(peer)
            if server is None:
                raise RunError(f"no CURVE public key for peer {peer} in peers.json")
            sock.curve_secretkey = self.curve.secret
            sock.curve_publickey = self.curve.public
            sock.curve_serverkey = server
        sock.connect(endpoint)
        return sock

    def _poll(self, timeout_s: float) -> list[zmq.Socket[Any]]:
        events = dict(self.poller.poll(max(0, int(timeout_s * 1000))))
        return [s for s in events if isinstance(s, zmq.Socket)]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.auth is not None:
            self.auth.stop()
        self.ctx.destroy(linger=LINGER_MS)


class ZmqAgentTransport(_ZmqBase):
    """An agent's sockets (see the module docstring)."""

    def __init__(
        self,
        me: int,
        endpoint: str,
        neighbours: dict[int, str],
        coordinator: str,
        curve: CurveConfig | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        super().__init__(f"agent {me}", curve, max_frame_bytes)
        self.me = me
        # The coordinator link first: a failure to bind is still reported through it.
        self.coord = self._dealer(me, COORDINATOR_ID, coordinator)
        self.poller.register(self.coord, zmq.POLLIN)
        self.router: zmq.Socket[Any] | None = None
        self.endpoint = endpoint
        self.neighbour_endpoints = neighbours
        self.dealers: dict[int, zmq.Socket[Any]] = {}

    def open(self) -> None:
        """Bind the ROUTER and connect to the neighbours (raises RunError if the port is taken)."""
        self.router = self._router(self.endpoint, f"agent {self.me}")
        for peer, endpoint in self.neighbour_endpoints.items():
            self.dealers[peer] = self._dealer(self.me, peer, endpoint)

    def send(self, peer: int, frame: bytes) -> None:
        sock = self.coord if peer == COORDINATOR_ID else self.dealers.get(peer)
        if sock is None:
            log.error("agent %d: no link to %d; frame dropped", self.me, peer)
            return
        try:
            sock.send(frame, zmq.NOBLOCK, copy=len(frame) < 65536)
        except zmq.Again:
            log.warning("agent %d: send queue to %d is full; frame dropped", self.me, peer)

    def recv(self, timeout_s: float) -> tuple[int | None, bytes] | None:
        for sock in self._poll(timeout_s):
            if sock is self.coord:
                return COORDINATOR_ID, self.coord.recv(zmq.NOBLOCK)
            parts = sock.recv_multipart(zmq.NOBLOCK)
            if len(parts) != 2:  # a stranger's multi-part message: let the codec reject it
                return None, b""
            return parse_identity(parts[0]), parts[1]
        return None


class ZmqCoordinatorTransport(_ZmqBase):
    """The coordinator's ROUTER."""

    def __init__(
        self,
        endpoint: str,
        curve: CurveConfig | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        super().__init__("coordinator", curve, max_frame_bytes)
        try:
            self.router = self._router(endpoint, "coordinator")
        except RunError:
            self.close()
            raise

    def send(self, peer: int, frame: bytes) -> None:
        try:
            self.router.send_multipart([identity(peer), frame], zmq.NOBLOCK)
        except zmq.ZMQError as exc:  # EHOSTUNREACH: that agent is not connected (yet, or anymore)
            log.debug("coordinator: cannot send to agent %d: %s", peer, exc)

    def recv(self, timeout_s: float) -> tuple[int | None, bytes] | None:
        for _ in self._poll(timeout_s):
            parts = self.router.recv_multipart(zmq.NOBLOCK)
            if len(parts) != 2:
                return None, b""
            return parse_identity(parts[0]), parts[1]
        return None
