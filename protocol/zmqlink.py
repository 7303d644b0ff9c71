"""ZeroMQ transports: the only code that touches sockets.

Sockets
    Agent: one ROUTER bound at its own endpoint (neighbours' frames arrive there), one DEALER per
    neighbour, and one DEALER to the coordinator. Coordinator: one ROUTER; it answers each agent
    through the routing identity of that agent's DEALER. A DEALER's identity is ``<id>/<nonce>``,
    the nonce random per process: nobody can take an honest peer's identity by guessing it and
    connecting first (a ROUTER ignores a second connection with an identity already in use).

Who sent a frame (the id ``recv`` returns)
    * A frame on the agent's coordinator DEALER is the coordinator's: the agent opened that
      connection itself, to the coordinator's endpoint in peers.json; in secure mode CURVE also
      proved that the server holds the coordinator's key. A frame on an agent's ROUTER is never
      the coordinator's, whatever it claims: it is refused.
    * Secure mode (a :class:`~dcop.protocol.curve.CurveConfig`): every socket uses CurveZMQ. The
      ZAP handler accepts only the client keys listed (by id) and names each connection by its
      key's id; every frame carries that id as its ``User-Id``. A ROUTER takes the sender's id
      from there, and refuses a frame whose routing identity claims another id: a neighbour's
      valid key cannot speak for the coordinator or for another neighbour.
    * Open mode: every client claims its routing identity as its PLAIN user name (no password:
      nothing is proved), so the ZAP handler sees the claim at the handshake; a ROUTER takes the
      id that the routing identity claims, and refuses a frame whose routing identity is not the
      name its connection was admitted under. The first connection to speak as an id keeps it
      (until ``disconnect_peer``, or for the coordinator's run); later claims of it are refused,
      at the handshake or at their first frame (cut), so a stranger cannot hijack a running peer,
      only pre-empt one.

    At the handshake (:mod:`dcop.protocol.zap`, both modes), before libzmq reads a message, a
    listening socket refuses clients whose id it does not accept: for an agent, anyone but its
    neighbours and candidates (and anyone claiming to be the coordinator); for the coordinator,
    anyone but the agents of peers.json; in open mode also clients that do not speak PLAIN or
    claim no agent. Later, frames from ids a transport does not accept (a neighbour no longer),
    frames over the limit and malformed multi-part messages are refused before any byte is
    copied or decoded. Each refusal is a WARNING naming the peer's address, rate-limited per
    address and reason (:class:`~dcop.protocol.ratelog.RateLimitedLog`). libzmq itself cuts a
    connection whose frame exceeds the limit by more than 64 KiB (``MAXMSGSIZE``, the hard cap);
    that shows as a lost connection.

What open mode protects, and what it does not
    Open mode authenticates nobody; it keeps the roles apart. An agent takes coordinator
    messages only from the connection it opened itself to the coordinator's endpoint in
    peers.json, so no process can pose as the coordinator by sending to an agent's port. But any
    process that can reach an agent's port (another local user, or anyone on the network) can
    pose as one of its neighbours and send it protocol messages; any process that can reach the
    coordinator's port can pose as an agent that has not spoken yet; a process that binds the
    coordinator's port before the coordinator does (or after it exits) gets the agents'
    connections and is the coordinator for them (its agents connect again to whoever listens
    next: a failed handshake is retried after ``HANDSHAKE_RETRY_S``); a process that claims an
    id the listener accepts (a neighbour's or candidate's: peers.json names them) can make it
    hold about one message of the size limit per connection it opens at once (a stranger's
    connection, an id not accepted, is refused at the handshake: none of its messages is read);
    and nothing is encrypted. Open mode is for one trusted host or a private network; elsewhere
    use secure mode.

Liveness
    Every socket sends ZMTP heartbeats (``ZMTP_PINGS_PER_TIMEOUT`` per heartbeat timeout, at
    most one per ``ZMTP_HEARTBEAT_IVL_S``); a connection that hears
    nothing for the heartbeat timeout is closed. A socket monitor turns closed connections into
    :class:`~dcop.protocol.transport.PeerLoss` events (:meth:`lost_peers`): an agent hears of its
    neighbours' and the coordinator's links (its DEALERs), the coordinator of each agent's link
    (its ROUTER, by the connection's file descriptor, learnt from the agent's frames). A monitor
    also drops a TCP self-connection (see :mod:`dcop.protocol.endpoints`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import socket
import struct
import time
from collections import deque
from collections.abc import Collection, Hashable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, cast

import zmq

from dcop.errors import RunError
from dcop.protocol.codec import MAX_FRAMES
from dcop.protocol.constants import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_AGENT_ID,
    ZMTP_HEARTBEAT_IVL_S,
    ZMTP_PINGS_PER_TIMEOUT,
)
from dcop.protocol.curve import CurveConfig
from dcop.protocol.endpoints import (
    bind_endpoint,
    endpoint_port,
    ephemeral_range,
    in_ephemeral_range,
    same_endpoint,
    with_port,
)
from dcop.protocol.messages import Buffer
from dcop.protocol.ratelog import RateLimitedLog
from dcop.protocol.runspec import peer_timeout_for
from dcop.protocol.transport import PeerLoss, Received
from dcop.protocol.zap import ZapHandler

__all__ = [
    "ZmqAgentTransport",
    "ZmqCoordinatorTransport",
    "bind_endpoint",
    "claim",
    "identity",
    "parse_identity",
]

log = logging.getLogger("dcop.protocol.zmq")

#: Outgoing frames kept for a slow peer before sends to it are dropped (heartbeats only in practice).
SEND_HWM = 10_000
LINGER_MS = 2000
#: Messages a ROUTER queues per connection before it stops reading that connection.
ROUTER_RCVHWM = 64
#: libzmq's hard cap is this much above the frame limit: frames in between are refused (logged).
HARD_CAP_MARGIN = 1 << 16
#: A neighbour's ROUTER never sends on an agent's outgoing link; anything there is cut short.
BACKCHANNEL_MAX_BYTES = 1 << 16
#: Frames from a candidate (an agent that may become a neighbour) held until ``connect_peer``:
#: each message at most EARLY_MAX_BYTES, each sender at most EARLY_PER_SENDER messages and
#: EARLY_PER_SENDER_BYTES, all together at most EARLY_MAX_FRAMES messages and
#: EARLY_MAX_TOTAL_BYTES. An honest neighbour sends a few small DFS messages before this agent
#: has its setup, so a full budget makes room rather than refuse: a sender over its own quota
#: loses its oldest held frames, and when all of them together are over, the sender holding the
#: most gives way. Claimed ids that flood (open mode needs only peers.json) can then never crowd
#: out a neighbour that holds less than they do; ``settle`` drops what a problem's links cannot
#: deliver.
EARLY_MAX_FRAMES = 4096
EARLY_PER_SENDER = 64
EARLY_PER_SENDER_BYTES = 1 << 20
EARLY_MAX_BYTES = 1 << 16
EARLY_MAX_TOTAL_BYTES = 8 << 20
#: After a failed ZMTP handshake (whoever listened was no dcop process, or had no CURVE key, or
#: wrote garbage) libzmq may drop that connect for good (a protocol error ends its session; no
#: ZMQ_RECONNECT_STOP in a release build changes that): a DEALER with no connection refuses
#: every send ("send queue is full"). Unless libzmq shows it is still at work on the link (a
#: connect retried or made), the link connects again this long after the failure.
HANDSHAKE_RETRY_S = 0.25
#: Longest ZMQ_HEARTBEAT_TTL that works. It travels in deciseconds in 16 bits, but the receiver
#: multiplies it by 100 into a 16-bit millisecond count (libzmq issue #4226): 85.9 s, the TTL of
#: a 4095 MiB message limit, wrapped to 20.3 s, shorter than the 21.5 s between PINGs, and every
#: link quiet for 42 s closed (a GPU DPOP run whose buckets computed that long lost every agent).
MAX_TTL_MS = 65_500

#: How often an agent retries its link to a coordinator that is not (or no longer) there, in ms.
#: A serving agent's hello reaches a new coordinator up to that much after it binds: with
#: ZeroMQ's default of 100 ms a warm cluster's problem took 0.36-0.42 s, with 50 ms 0.27-0.28 s
#: (30 agents, n = 8-12, the 2-core VM), for 0.9% of a core more while 30 agents wait idle
#: (25 ms: 0.24-0.28 s for 3.8%).
COORDINATOR_RECONNECT_MS = 50
_DEALER_EVENTS = (
    zmq.EVENT_CONNECTED
    | zmq.EVENT_CONNECT_RETRIED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)
_ROUTER_EVENTS = (
    zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)
#: Candidate ids kept as given, not copied: read-only kinds (concrete types: an ABC's isinstance
#: costs a forked agent more)
_SETS: tuple[type, ...] = (frozenset, type({}.keys()))
# plain ints: the per-turn checks below would otherwise go through IntFlag's Python operators
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_HANDSHAKE_FAILED = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
)


def identity(agent_id: int, nonce: str = "") -> bytes:
    """A DEALER's routing identity: ``<id>/<nonce>`` (``<id>`` alone without a nonce)."""
    return f"{agent_id}/{nonce}".encode("ascii") if nonce else str(agent_id).encode("ascii")


def claim(sock: zmq.Socket[Any], routing: bytes, *, plain: bool = True) -> None:
    """Make the client ``sock`` speak as ``routing`` (``<id>/<nonce>``): its routing identity,
    and in open mode (``plain``) its PLAIN user name too, which the ZAP handler of the socket it
    connects to checks at the handshake. Call before ``connect``; a CURVE client sets its keys
    after this (the last mechanism set wins)."""
    sock.setsockopt(zmq.IDENTITY, routing)
    if plain:
        sock.plain_username = routing


def parse_identity(raw: bytes) -> int | None:
    """The id a routing identity claims (``<id>`` or ``<id>/<nonce>``), or None for anything
    else (a stranger's socket)."""
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    text = text.partition("/")[0]
    if not text.lstrip("-").isdigit() or len(text) > 11:
        return None
    value = int(text)
    return value if value == COORDINATOR_ID or 0 <= value <= MAX_AGENT_ID else None


def _meta(frame: zmq.Frame, name: str) -> str | None:
    try:
        value = frame.get(name)
    except zmq.ZMQError:  # no such property on this connection (User-Id in open mode)
        return None
    return value if isinstance(value, str) else None


def _peer_address(frame: zmq.Frame) -> str:
    return _meta(frame, "Peer-Address") or "an unknown address"


def _user_id(frame: zmq.Frame) -> int | None:
    """The key's id the ZAP handler gave the connection this frame came on (secure mode)."""
    user = _meta(frame, "User-Id")
    if user is None or not user.lstrip("-").isdigit() or len(user) > 11:
        return None
    return int(user)


def _source_fd(frame: zmq.Frame) -> int | None:
    try:
        fd = frame.get(zmq.SRCFD)  # deprecated in libzmq, still there; loss reports need it
    except (zmq.ZMQError, AttributeError, TypeError):
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def monitor_event(frames: Sequence[bytes]) -> tuple[int, int] | None:
    """A socket monitor's message as (event, value), None if malformed: a 6-byte frame holding
    the 16-bit event id and the 32-bit value, then the endpoint (zmq_socket_monitor). Parsed
    here because pyzmq's ``zmq.utils.monitor`` imports asyncio: 15 ms of every process's start."""
    if len(frames) != 2 or len(frames[0]) != 6:
        return None
    event, value = struct.unpack("=Hi", frames[0])
    return int(event), int(value)


def _cut(frame: zmq.Frame) -> None:
    """Close the TCP connection ``frame`` came on (a stranger's): libzmq reads every message a
    connection sends, whole, before anyone can refuse it, so a stranger that keeps its
    connection can make a process hold frame after frame of the size limit. libzmq still owns
    the descriptor and cleans up after the shutdown; an honest peer cut by mistake reconnects."""
    fd = _source_fd(frame)
    if fd is None:
        return
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        if sock.family in (socket.AF_INET, socket.AF_INET6):  # never an ipc or other descriptor
            sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


def _self_connected(fd: int) -> bool:
    """Whether the TCP connection on ``fd`` (from a monitor event) is connected to itself."""
    try:
        sock = socket.socket(fileno=os.dup(fd))
    except OSError:
        return False
    try:
        return bool(sock.getsockname() == sock.getpeername())
    except OSError:
        return False
    finally:
        sock.close()


def _who(peer: int | None) -> str:
    if peer is None:
        return "nobody"
    return "the coordinator" if peer == COORDINATOR_ID else f"agent {peer}"


@dataclass(eq=False)  # hashed by identity (a set of links to retry)
class _Link:
    """A monitored socket: a DEALER to one peer, or a ROUTER (peer None)."""

    sock: zmq.Socket[Any]
    peer: int | None
    endpoint: str
    connected: bool = False
    # after dropping a self-connection, that connection's remaining events are ignored
    muted: bool = False
    # when to connect again after a failed handshake (libzmq gives such a link up for good)
    retry_at: float | None = None


class _ZmqBase:
    #: Whether the ZAP handler runs in a thread of its own (see :class:`ZapHandler`).
    ZAP_THREAD = False
    #: Whether the ROUTER has a monitor: its closed connections name lost peers (the
    #: coordinator's), and the descriptor each peer speaks on is kept for them (see _cut).
    WATCH_ROUTER = True

    def __init__(
        self,
        owner: str,
        curve: CurveConfig | None,
        max_message_bytes: int,
        heartbeat_timeout_s: float | None,
    ) -> None:
        self.owner = owner
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.curve = curve
        self.max_message_bytes = max_message_bytes
        self.heartbeat_timeout_s = (
            peer_timeout_for(max_message_bytes)
            if heartbeat_timeout_s is None
            else heartbeat_timeout_s
        )
        self.refusals = RateLimitedLog(log)
        #: Frames refused by the transport itself (never handed to the codec).
        self.dropped = 0
        self.poller = zmq.Poller()
        # wake(): a byte on this pipe ends the poll of recv (a worker thread's job is done)
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self.poller.register(self._wake_read, zmq.POLLIN)
        self._monitors: dict[zmq.Socket[Any], _Link] = {}
        self._losses: list[PeerLoss] = []
        self._joined: list[int] = []
        #: Peers whose link failed a handshake or closed since its last join (see
        #: dropped_before_join), and those whose latest join followed such a failure.
        self._unsure: set[int] = set()
        self._joined_unsure: set[int] = set()
        self._fd_peers: dict[int, int] = {}
        #: The connection (ROUTER routing id) each peer id speaks on (see _keeps_route).
        self._routes: dict[int, bytes] = {}
        #: DEALER links to connect again (see HANDSHAKE_RETRY_S).
        self._retries: set[_Link] = set()
        self._router_losses = False
        self._closed = False
        #: Whether :meth:`recv` has polled every monitor since the last :meth:`lost_peers`
        self._polled = False
        # Both modes: the handler decides at the handshake, before libzmq reads a message
        keys = curve.client_ids() if curve is not None else None
        self.auth = ZapHandler(self.ctx, owner, self.refusals, self._admits, parse_identity, keys)
        try:
            self.auth.start(thread=self.ZAP_THREAD)
        except zmq.ZMQError as exc:
            self.close(0)
            raise RunError(f"{owner}: cannot start the ZAP handler: {exc}") from None
        #: the handler's socket where this transport's poll serves it (recv answers handshakes
        #: as they come); None where it has a thread
        self._zap = self.auth.socket
        if self._zap is not None:
            self.poller.register(self._zap, zmq.POLLIN)

    # ---- sockets ------------------------------------------------------------------------------
    def _options(self, sock: zmq.Socket[Any], max_bytes: int) -> None:
        sock.setsockopt(zmq.LINGER, LINGER_MS)
        sock.setsockopt(zmq.MAXMSGSIZE, max_bytes + HARD_CAP_MARGIN)
        ivl_s = max(ZMTP_HEARTBEAT_IVL_S, self.heartbeat_timeout_s / ZMTP_PINGS_PER_TIMEOUT)
        ivl_ms = int(ivl_s * 1000)
        timeout_ms = max(ivl_ms, int(self.heartbeat_timeout_s * 1000))
        sock.setsockopt(zmq.HEARTBEAT_IVL, ivl_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, timeout_ms)
        sock.setsockopt(zmq.HEARTBEAT_TTL, min(timeout_ms, MAX_TTL_MS))

    def _router(self, endpoint: str) -> tuple[zmq.Socket[Any], str]:
        """Bind a ROUTER; return it and the endpoint actually bound (a ``*`` port filled in)."""
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.ROUTER)
        self._options(sock, self.max_message_bytes)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        # per connection: a peer that sends faster than this process reads is held back by
        # TCP, not queued here (each queued message may be as large as the limit)
        sock.setsockopt(zmq.RCVHWM, ROUTER_RCVHWM)
        # A second connection with a routing identity in use takes it over (the first is
        # dropped, with what it had queued): without this libzmq parks the second connection
        # unread, holding up to RCVHWM messages of the size limit that nobody ever refuses.
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)
        if self.curve is not None:
            sock.curve_secretkey = self.curve.secret
            sock.curve_publickey = self.curve.public
            sock.curve_server = True
        else:
            sock.plain_server = True  # the client's claimed identity reaches the ZAP handler
        try:
            sock.bind(bind_endpoint(endpoint))
        except zmq.ZMQError as exc:
            sock.close(linger=0)
            raise RunError(f"{self.owner}: cannot bind {endpoint}: {exc}") from None
        port = endpoint_port(endpoint)
        if in_ephemeral_range(port):
            low, high = ephemeral_range()
            log.warning(
                "%s: listening on port %s, inside the kernel's ephemeral port range %d-%d: an "
                "outgoing connection may take it while this process is not running; use ports "
                "below %d, or a wildcard port",
                self.owner,
                port,
                low,
                high,
                low,
            )
        actual = with_port(endpoint, sock.getsockopt_string(zmq.LAST_ENDPOINT))
        self.poller.register(sock, zmq.POLLIN)
        if self.WATCH_ROUTER:
            self._watch(sock, None, actual, _ROUTER_EVENTS)
        return sock, actual

    def _dealer(
        self, me: int, nonce: str, peer: int, endpoint: str, max_bytes: int
    ) -> zmq.Socket[Any]:
        if self.curve is not None and peer not in self.curve.server_keys:
            raise RunError(f"{self.owner}: no CURVE public key for {_who(peer)} in peers.json")
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.DEALER)
        claim(sock, identity(me, nonce), plain=self.curve is None)
        self._options(sock, max_bytes)
        sock.setsockopt(zmq.SNDHWM, SEND_HWM)
        if peer == COORDINATOR_ID:
            sock.setsockopt(zmq.RECONNECT_IVL, COORDINATOR_RECONNECT_MS)
        if self.curve is not None:
            sock.curve_secretkey = self.curve.secret
            sock.curve_publickey = self.curve.public
            sock.curve_serverkey = self.curve.server_keys[peer]
        self._watch(sock, peer, endpoint, _DEALER_EVENTS)
        sock.connect(endpoint)
        return sock

    def _watch(self, sock: zmq.Socket[Any], peer: int | None, endpoint: str, events: int) -> None:
        monitor = sock.get_monitor_socket(events)
        self._monitors[monitor] = _Link(sock, peer, endpoint)
        self.poller.register(monitor, zmq.POLLIN)

    def _unwatch(self, sock: zmq.Socket[Any]) -> None:
        for monitor, link in list(self._monitors.items()):
            if link.sock is sock:
                self.poller.unregister(monitor)
                sock.disable_monitor()
                monitor.close(linger=0)
                del self._monitors[monitor]

    # ---- monitor events -------------------------------------------------------------------------
    def _drain_monitors(self, ready: Collection[zmq.Socket[Any]] | None = None) -> None:
        """Answer the handshakes waiting on the ZAP handler, handle the pending events of the
        monitors in ``ready`` (default: of all), and
        connect again the links whose handshake failed a while ago (after the events: a link
        that has meanwhile connected by itself is left alone)."""
        if self._zap is not None and (ready is None or self._zap in ready):
            self.auth.serve()  # handshakes waiting for their answer (see protocol.zap)
        for monitor, link in list(self._monitors.items()):
            if ready is not None and monitor not in ready:
                continue
            while True:
                # Ask before reading: an agent drains every monitor at each turn of its loop,
                # and a read of an empty one raises zmq.Again (3.4 us against 1.4 us for the
                # question, on the 2-core VM)
                try:
                    if not int(monitor.getsockopt(_EVENTS)) & _POLLIN:
                        break
                    frames = monitor.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:  # the monitor went away with its socket
                    break
                event = monitor_event(frames)
                if event is not None:
                    self._on_event(link, *event)
        if self._retries:
            self._retry_links()

    def _retry_links(self) -> None:
        now = time.monotonic()
        for link in list(self._retries):
            if link.retry_at is not None and link.retry_at <= now:
                self._retries.discard(link)
                link.retry_at = None
                if link.connected:
                    continue
                with contextlib.suppress(zmq.ZMQError):  # libzmq may have dropped it already
                    link.sock.disconnect(link.endpoint)
                with contextlib.suppress(zmq.ZMQError):  # a socket closed meanwhile
                    link.sock.connect(link.endpoint)

    def _retry_later(self, link: _Link) -> None:
        if link.retry_at is None:
            link.retry_at = time.monotonic() + HANDSHAKE_RETRY_S
            self._retries.add(link)

    def _cancel_retry(self, link: _Link) -> None:
        link.retry_at = None
        self._retries.discard(link)

    def _next_retry(self) -> float:
        """When the earliest link retry is due (inf for none)."""
        return min((lk.retry_at or 0.0 for lk in self._retries), default=float("inf"))

    def _on_event(self, link: _Link, event: int, value: int) -> None:
        if link.peer is None:  # a ROUTER
            if event == zmq.EVENT_DISCONNECTED:
                peer = self._fd_peers.pop(value, None)
                if peer is not None and self._router_losses:
                    self._lose(peer, f"its connection to {link.endpoint} closed")
            elif event & _HANDSHAKE_FAILED:
                self.refusals.log(
                    logging.INFO,
                    ("handshake", link.endpoint),
                    "%s: a client failed the ZMTP handshake on %s",
                    self.owner,
                    link.endpoint,
                )
            return
        if event == zmq.EVENT_CONNECT_RETRIED or event == zmq.EVENT_CONNECTED:
            # libzmq still works on this link by itself: a retry of ours would race it (and
            # could cut the good connection it is making)
            self._cancel_retry(link)
            if event == zmq.EVENT_CONNECT_RETRIED:
                return
        if event == zmq.EVENT_CONNECTED:
            link.muted = _self_connected(value)
            if link.muted:
                # A TCP self-connection: reconnecting to a port nobody listens on, the kernel
                # gave the socket that very port. Drop it, or it holds the port and talks to itself.
                self.refusals.log(
                    logging.ERROR,
                    ("self", link.endpoint),
                    "%s: the connection to %s (%s) reached this socket itself (a TCP "
                    "self-connection: the port is in the ephemeral range and nobody listens "
                    "there); dropped, retrying",
                    self.owner,
                    link.endpoint,
                    _who(link.peer),
                )
                self._unsure.add(link.peer)  # the disconnect drops the link's queue
                with contextlib.suppress(zmq.ZMQError):  # already gone: connect anew anyway
                    link.sock.disconnect(link.endpoint)
                link.sock.connect(link.endpoint)
        elif link.muted:
            return
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self._cancel_retry(link)
            if not link.connected:
                self._joined.append(link.peer)
                if link.peer in self._unsure:
                    self._unsure.discard(link.peer)
                    self._joined_unsure.add(link.peer)
                else:
                    self._joined_unsure.discard(link.peer)
            link.connected = True
        elif event == zmq.EVENT_DISCONNECTED:
            # a closed connection takes what it had not sent; one closed before its handshake
            # is retried by a new connection (_retry_links), without the old one's queue
            self._unsure.add(link.peer)
            if link.connected:
                link.connected = False
                self._lose(link.peer, f"the connection to {link.endpoint} closed")
            else:
                # closed before its handshake: in secure mode libzmq reports no failure and
                # never connects again (whoever listened wrote something other than ZMTP)
                self._retry_later(link)
        elif event & _HANDSHAKE_FAILED:
            self._unsure.add(link.peer)  # libzmq drops the connection and its queue
            self._retry_later(link)
            self.refusals.warning(
                ("handshake", link.endpoint),
                "%s: the handshake with %s at %s failed: %s",
                self.owner,
                _who(link.peer),
                link.endpoint,
                "it refused this process's key"
                if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH
                else "whoever listens there is not a dcop process"
                + (" with that CURVE key" if self.curve is not None else ""),
            )

    def _lose(self, peer: int, reason: str) -> None:
        log.info("%s: lost %s: %s", self.owner, _who(peer), reason)
        self._losses.append(PeerLoss(peer, time.monotonic(), reason))

    def lost_peers(self) -> list[PeerLoss]:
        """Peers whose connection was lost since the last call (see the module docstring).

        Where :meth:`recv` has run since the last call, its poll covered every monitor and it
        read those that had events: what came later makes a monitor ready for the next poll,
        whose recv then returns at once, and this call reports the loss the turn after. Asking
        every monitor again here cost an agent's loop a system call per monitor and turn (the
        question reads the socket's command pipe): about 4 of its 10 calls to ZeroMQ a turn.
        A caller that never receives gets every monitor read here."""
        if not self._closed and not self._polled:
            self._drain_monitors()
        self._polled = False
        losses, self._losses = self._losses, []
        return losses

    def joined_peers(self) -> list[int]:
        """Peers whose link (a DEALER of ours) completed a ZMTP handshake since the last call:
        connected, or reconnected after it was lost. The handshakes are those :meth:`recv` and
        :meth:`lost_peers` have seen (the coordinator's join ends recv's wait): asking costs
        nothing more, and an agent asks at every turn of its loop."""
        joined, self._joined = self._joined, []
        return joined

    def dropped_before_join(self, peer: int) -> bool:
        """See :meth:`dcop.protocol.transport.AgentTransport.dropped_before_join`: the events
        :meth:`joined_peers` reports from, read as they are (a failure read after the latest
        join counts too: asked at a join, the answer errs towards a message sent again)."""
        return peer in self._joined_unsure or peer in self._unsure

    # ---- receiving ----------------------------------------------------------------------------
    def _admits(self, sender: int, claimed: bytes | None) -> str | None:
        """Whether a client that is (CURVE) or claims to be (PLAIN: ``claimed`` its routing
        identity) ``sender`` may connect: None, or why not. Asked by the ZAP handler's thread at
        each handshake; it only reads the transport's sets (each read is atomic)."""
        if sender == COORDINATOR_ID:
            return (
                "it claims to be the coordinator, whose frames never arrive on a listening socket"
            )
        known = self._routes.get(sender) if claimed is not None else None
        if known is not None and known != claimed:  # open mode: the first claim keeps the id
            return f"it claims to be agent {sender}, which already speaks on another connection"
        return None

    @property
    def refused_connections(self) -> int:
        """Connections refused at the handshake (see :mod:`dcop.protocol.zap`)."""
        return self.auth.refused

    def _refuse(self, address: str, reason: Hashable, msg: str, *args: object) -> None:
        self.dropped += 1
        self.refusals.warning(
            (address, reason), "%s: refused a frame from %s: " + msg, self.owner, address, *args
        )

    def _from_router(self, sock: zmq.Socket[Any]) -> tuple[int, list[zmq.Frame], bytes] | None:
        """The next message on a ROUTER (its frames) with the id it comes from, or None when
        refused. Nothing of the message is copied or decoded here."""
        try:
            parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None
        body = parts[1:]
        first = parts[-1]
        address = _peer_address(first)
        if not body or len(body) > MAX_FRAMES:
            self._refuse(address, "parts", "a message of %d frames", len(body))
            return None
        routing = parts[0].bytes
        size = sum(len(f) for f in body)
        if size > self.max_message_bytes:
            self._refuse(
                address,
                "oversized",
                "oversized message of %d bytes (routing identity %r), the limit is %d",
                size,
                routing[:40],
                self.max_message_bytes,
            )
            return None
        first = body[0]
        claimed = parse_identity(routing)
        if self.curve is not None:
            sender = _user_id(first)
            if sender is None:
                self._refuse(address, "unauthenticated", "its connection has no authenticated id")
                return None
            if claimed != sender:
                self._refuse(
                    address,
                    "impostor",
                    "the CURVE key of %s claims to be %s (routing identity %r)",
                    _who(sender),
                    _who(claimed),
                    routing[:40],
                )
                return None
        elif claimed is None or _meta(first, "User-Id") != routing.decode("ascii", "replace"):
            # the handshake admitted the PLAIN user name, not what the routing identity claims
            self._refuse(
                address,
                "identity",
                "routing identity %r is not the name its connection was admitted under",
                routing[:40],
            )
            _cut(first)
            return None
        else:
            sender = claimed
        if sender == COORDINATOR_ID:
            self._refuse(
                address,
                "coordinator",
                "it claims to be the coordinator, whose frames never arrive on a listening socket",
            )
            return None
        return sender, body, routing

    def _keeps_route(self, sender: int, routing: bytes, body: zmq.Frame) -> bool:
        """Whether a message from ``sender`` over ``routing`` may be taken. In open mode the
        first connection that speaks as an id keeps it and a second one is refused (logged);
        with CURVE the key proves the id, and the newest connection (a restarted peer) wins.
        ``self._routes`` holds the connection of each id."""
        known = self._routes.setdefault(sender, routing)
        if known == routing:
            return True
        if self.curve is None:
            address = _peer_address(body)
            self._refuse(
                address,
                "second",
                "it claims to be agent %d, which already speaks on another connection",
                sender,
            )
            self._second_claim(sender, f"from {address}")
            self._cut(sender, body)  # and its next frames: it stays refused (the ZAP handler
            return False  # sees the claim)
        self._routes[sender] = routing
        return True

    def _second_claim(self, sender: int, where: str) -> None:
        """A second connection claimed ``sender``'s id and was refused (open mode; ``where``:
        its address, or that it came at the handshake). May run on the ZAP handler's thread."""

    def _cut(self, sender: int | None, body: zmq.Frame) -> None:
        """:func:`_cut` the connection of a refused frame that claims ``sender``, unless its
        descriptor belongs to another peer now: the frame waited in the queue while its own
        connection closed and the number went to a new one (cutting that one blamed an
        innocent agent for a lost link)."""
        fd = _source_fd(body)
        owner = self._fd_peers.get(fd) if fd is not None else None
        if owner is not None and owner != sender:
            return
        _cut(body)

    def _note_source(self, sender: int, body: zmq.Frame) -> None:
        """Remember which connection ``sender`` speaks on, to name it when that one closes
        (``body`` is any frame of its message). Only where the ROUTER is watched: its
        closed connections' descriptors are forgotten there, never otherwise."""
        if not self.WATCH_ROUTER:
            return
        fd = _source_fd(body)
        if fd is not None:
            self._fd_peers[fd] = sender

    def _read(self, sock: zmq.Socket[Any]) -> Received | None:
        """The next accepted message on ``sock`` (each transport knows its own sockets)."""
        return None

    def _early(self) -> Received | None:
        return None

    def recv(self, timeout_s: float) -> Received | None:
        """The next accepted ``(sender id, frames)``, or None after ``timeout_s``. Refused frames
        and monitor events are handled on the way and do not end the wait, except the link to
        the coordinator connecting (see :meth:`joined_peers`) or any link lost
        (:meth:`lost_peers`): then None, at once. The frames are views of ZeroMQ's own buffers:
        a table goes to NumPy without a copy."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            item = self._early()
            if item is not None:
                return item
            ready, woken = self._poll(min(deadline, self._next_retry()) - time.monotonic())
            # Monitor events first: a self-connection is dropped before its frames are read (its
            # CONNECTED event precedes its first frame, so it is ready whenever that frame is).
            joined, lost = len(self._joined), len(self._losses)
            self._drain_monitors(ready)
            self._polled = True
            # a loss ends the wait too: an idle agent sleeps for seconds (AgentConfig.idle_wake_s);
            # so does the coordinator's link joining (a serving agent greets a new coordinator at
            # once), not a neighbour's: no one waits for that, and each such wake was a turn of
            # the loop of its own on every agent (two of its ~13, issue 49)
            woken = woken or COORDINATOR_ID in self._joined[joined:] or len(self._losses) > lost
            for sock in ready:
                if sock not in self._monitors and sock is not self._zap:
                    item = self._read(sock)
                    if item is not None:
                        return item
            if woken or time.monotonic() >= deadline:
                return None

    def _poll(self, timeout_s: float) -> tuple[list[zmq.Socket[Any]], bool]:
        """The sockets ready within ``timeout_s``, and whether :meth:`wake` ended the wait."""
        # rounded up: poll takes whole milliseconds, and a wait cut down to them ended just short
        # of its deadline, so recv polled again with 0 ms until the deadline passed: 50 empty
        # polls, each with its monitor drain, per agent of a 1000-agent run
        events = dict(self.poller.poll(max(0, math.ceil(timeout_s * 1000))))
        woken = self._wake_read in events
        if woken:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_read, 4096)
        return [s for s in events if isinstance(s, zmq.Socket)], woken

    def wake(self) -> None:
        """End the wait of :meth:`recv` now (from any thread: it writes one byte to a pipe)."""
        if self._closed:  # the pipe is closed, and its descriptor number may name another file
            return
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_write, b"w")

    def close(self, linger_ms: int = LINGER_MS) -> None:
        """Close every socket; messages not yet sent get ``linger_ms`` to leave (0: none is
        pending, do not wait)."""
        if self._closed:
            return
        self._closed = True
        self.auth.stop()
        self.ctx.destroy(linger=linger_ms)
        for fd in (self._wake_read, self._wake_write):
            with contextlib.suppress(OSError):
                os.close(fd)


class ZmqAgentTransport(_ZmqBase):
    """An agent's sockets (see the module docstring).

    ``endpoint`` may name a wildcard port (``tcp://host:*``): after :meth:`open` the attribute
    holds the endpoint actually bound, to report to the coordinator. Neighbours come from the
    constructor (connected by :meth:`open`) or later from :meth:`connect_peer`. ``candidates``
    are agents that may become neighbours later: their frames that arrive before
    ``connect_peer`` are held (a few small ones) instead of refused. A set (a dict's keys) is
    kept as given, not copied: a forked agent shares its template's, and copying every id cost
    each agent of a 1000-agent run pages of its own.

    Its ROUTER has no monitor (``WATCH_ROUTER``): an agent learns of lost links from its DEALERs,
    and the ROUTER's events only logged a stranger's failed handshake at INFO. Each monitor is
    two more sockets and an inproc pipe, drained at every turn of the loop: about 60 kB and 16
    page faults per forked agent (``benchmarks/agent_dirty.py``). A refused frame's connection
    is then cut without asking whose descriptor it is now (that check names lost peers right,
    which only the coordinator does from its ROUTER).
    """

    WATCH_ROUTER = False

    def __init__(
        self,
        me: int,
        endpoint: str,
        neighbours: Mapping[int, str],
        coordinator: str,
        curve: CurveConfig | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        *,
        candidates: Collection[int] = (),
        heartbeat_timeout_s: float | None = None,
    ) -> None:
        super().__init__(f"agent {me}", curve, max_message_bytes, heartbeat_timeout_s)
        self.me = me
        self.nonce = secrets.token_hex(4)
        self.endpoint = endpoint
        self.coordinator_endpoint = coordinator
        self.neighbour_endpoints: dict[int, str] = {}
        self.dealers: dict[int, zmq.Socket[Any]] = {}
        self.router: zmq.Socket[Any] | None = None
        self.candidates: AbstractSet[int] = (
            cast(AbstractSet[int], candidates)
            if isinstance(candidates, _SETS)
            else frozenset(candidates)
        )
        # per sender: its held messages (oldest first) and their bytes
        self._held: dict[int, deque[list[bytes]]] = {}
        self._held_sizes: dict[int, int] = {}
        self._held_count = 0
        self._held_bytes = 0
        self._released: deque[Received] = deque()
        try:
            for peer, where in neighbours.items():
                self._check_target(peer, where)
                self.neighbour_endpoints[peer] = where
            self._check_target(COORDINATOR_ID, coordinator)
            # The coordinator link first: a failure to bind is still reported through it.
            self.coord = self._dealer(
                me, self.nonce, COORDINATOR_ID, coordinator, max_message_bytes
            )
        except BaseException:
            self.close()
            raise
        self.poller.register(self.coord, zmq.POLLIN)

    def _check_target(self, peer: int, endpoint: str) -> None:
        if peer == self.me:
            raise RunError(f"agent {self.me}: will not link to itself")
        if same_endpoint(endpoint, self.endpoint):
            raise RunError(
                f"agent {self.me}: {_who(peer)}'s endpoint {endpoint} is this agent's own "
                f"({self.endpoint}); a socket never connects to its own endpoint"
            )

    @property
    def accepted(self) -> frozenset[int]:
        """The ids whose frames this agent accepts now (the coordinator and its neighbours)."""
        return frozenset({COORDINATOR_ID, *self.neighbour_endpoints})

    def open(self) -> None:
        """Bind the ROUTER and connect to the neighbours (raises RunError if the port is taken).
        Afterwards ``endpoint`` holds the endpoint actually bound."""
        self.router, self.endpoint = self._router(self.endpoint)
        for peer, where in self.neighbour_endpoints.items():
            self._check_target(peer, where)  # against the bound port, for a wildcard
            self.dealers[peer] = self._dealer(
                self.me, self.nonce, peer, where, BACKCHANNEL_MAX_BYTES
            )

    def connect_peer(self, peer: int, endpoint: str) -> None:
        """Link to neighbour ``peer`` at ``endpoint`` and accept its frames from now on (frames
        it sent earlier and that were held are delivered first). Idempotent for the same
        endpoint; another endpoint replaces the link."""
        if peer == COORDINATOR_ID:
            raise RunError(f"agent {self.me}: the coordinator is not a neighbour")
        self._check_target(peer, endpoint)
        if self.neighbour_endpoints.get(peer) == endpoint and (
            peer in self.dealers or self.router is None
        ):
            return
        held = self._drop_held(peer)
        if peer in self.neighbour_endpoints:
            self.disconnect_peer(peer)
        self.neighbour_endpoints[peer] = endpoint
        if self.router is not None:
            self.dealers[peer] = self._dealer(
                self.me, self.nonce, peer, endpoint, BACKCHANNEL_MAX_BYTES
            )
        self._released.extend((peer, list(frames)) for frames in held)

    def disconnect_peer(self, peer: int) -> None:
        """Close the link to ``peer``: its frames are no longer delivered (no loss is reported).
        A candidate stays one (a serving agent's neighbour of one problem may be one again in
        the next): its next few frames are held until it is linked again."""
        self._drop_held(peer)
        self.neighbour_endpoints.pop(peer, None)
        self._routes.pop(peer, None)
        sock = self.dealers.pop(peer, None)
        if sock is not None:
            self._unwatch(sock)
            sock.close(linger=LINGER_MS)

    def send(self, peer: int, frames: Sequence[Buffer]) -> None:
        """Queue one message (its frames; large ones go without a copy) for ``peer``."""
        sock = self.coord if peer == COORDINATOR_ID else self.dealers.get(peer)
        if sock is None:
            log.error("agent %d: no link to %d; message dropped", self.me, peer)
            return
        try:
            sock.send_multipart(frames, zmq.NOBLOCK, copy=False)
        except zmq.Again:
            self.refusals.warning(
                ("queue", peer),
                "agent %d: no connection to %s takes messages now (or its queue is full); "
                "message dropped",
                self.me,
                _who(peer),
            )

    def close(self, linger_ms: int = LINGER_MS) -> None:
        """Close every socket. Only the coordinator link keeps ``linger_ms`` for what is still
        queued (an agent's failure report): frames queued for a neighbour that is gone (a killed
        agent) would hold the exit for the whole linger, until SIGTERM came."""
        if not self._closed:
            for sock in self.dealers.values():
                sock.close(linger=0)
        super().close(linger_ms)

    def _early(self) -> Received | None:
        return self._released.popleft() if self._released else None

    def _read(self, sock: zmq.Socket[Any]) -> Received | None:
        if sock is self.coord:
            return self._from_coordinator()
        got = self._from_router(sock)
        if got is None:
            return None
        sender, body, routing = got
        if sender in self.neighbour_endpoints:
            if not self._keeps_route(sender, routing, body[0]):
                return None
            self._note_source(sender, body[0])
            return sender, [f.buffer for f in body]
        address = _peer_address(body[0])
        if sender not in self.candidates or sender == self.me:
            self._refuse(address, "stranger", "%s is not a neighbour of this agent", _who(sender))
            self._cut(sender, body[0])
            return None
        size = sum(len(f) for f in body)
        if size > EARLY_MAX_BYTES:
            # a possible neighbour's frame: logged under a key of its own, never hidden behind
            # a stranger's flood from the same address
            self._refuse(
                address,
                ("early", sender),
                "a %d-byte frame from %s (which is not linked yet); an honest neighbour sends "
                "a few small ones",
                size,
                _who(sender),
            )
            return None
        dropped = self._make_room(sender, size)
        self._held.setdefault(sender, deque()).append([f.bytes for f in body])
        self._held_sizes[sender] = self._held_sizes.get(sender, 0) + size
        self._held_count += 1
        self._held_bytes += size
        if dropped:
            self._refuse(
                address,
                ("early", sender),
                "early frames over the budget (%s sent %d held frames, %d in all): the oldest "
                "of the sender holding the most were dropped; an honest neighbour sends a few",
                _who(sender),
                len(self._held[sender]),
                self._held_count,
            )
        return None

    def _make_room(self, sender: int, size: int) -> bool:
        """Drop held frames until one more of ``size`` bytes from ``sender`` fits: first the
        sender's own oldest (over its quota), then the oldest of whoever holds the most (over
        the shared budget). Whether anything was dropped."""
        dropped = False
        own = self._held.get(sender)
        while own and (
            len(own) >= EARLY_PER_SENDER or self._held_sizes[sender] + size > EARLY_PER_SENDER_BYTES
        ):
            self._drop_oldest(sender)
            dropped = True
        while self._held_count >= EARLY_MAX_FRAMES:
            self._drop_oldest(max(self._held, key=lambda p: len(self._held[p])))
            dropped = True
        while self._held_bytes + size > EARLY_MAX_TOTAL_BYTES:
            self._drop_oldest(max(self._held_sizes, key=self._held_sizes.__getitem__))
            dropped = True
        return dropped

    def _drop_oldest(self, peer: int) -> None:
        held = self._held[peer]
        size = sum(len(f) for f in held.popleft())
        self._held_count -= 1
        self._held_bytes -= size
        self._held_sizes[peer] -= size
        if not held:
            del self._held[peer], self._held_sizes[peer]

    def _admits(self, sender: int, claimed: bytes | None) -> str | None:
        """The coordinator's id never connects here; neighbours and candidates may."""
        why = super()._admits(sender, claimed)
        if why is None and (
            sender == self.me  # the candidates may be every agent of peers.json
            or (sender not in self.neighbour_endpoints and sender not in self.candidates)
        ):
            why = f"{_who(sender)} is not a neighbour of this agent"
        return why

    def settle(self, links: Collection[int], *, for_good: bool = True) -> None:
        """This problem's links are known (``links``: its neighbours and tree links). Frames held
        from anyone else can never be delivered in it: they are dropped (a later problem's
        neighbours start sending only once this one has ended). ``for_good`` (a one-shot
        agent): no other agent becomes a neighbour, so frames from the others are refused at
        once from now on; a serving agent keeps its candidates for its next problems."""
        keep = set(links)
        if for_good:
            self.candidates = {p for p in keep if p in self.candidates}
        for peer in list(self._held):
            if peer not in keep:
                self._drop_held(peer)

    def _drop_held(self, peer: int) -> list[list[bytes]]:
        held = self._held.pop(peer, deque())
        self._held_count -= len(held)
        self._held_bytes -= self._held_sizes.pop(peer, 0)
        return list(held)

    def _from_coordinator(self) -> Received | None:
        try:
            parts = self.coord.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None
        address = _peer_address(parts[-1])
        if len(parts) > MAX_FRAMES:
            self._refuse(address, "parts", "%d message parts from the coordinator", len(parts))
            return None
        size = sum(len(f) for f in parts)
        if size > self.max_message_bytes:
            self._refuse(
                address,
                "oversized",
                "oversized message of %d bytes from the coordinator, the limit is %d",
                size,
                self.max_message_bytes,
            )
            return None
        return COORDINATOR_ID, [f.buffer for f in parts]


class ZmqCoordinatorTransport(_ZmqBase):
    """The coordinator's ROUTER.

    It accepts frames from the agents in ``agents`` (secure mode: default, the ids of the client
    keys; open mode: default, any agent id) and answers each through the routing identity of its
    first accepted frame. :meth:`lost_peers` reports agents whose connection closed.
    """

    #: its agents' handshakes are answered while the coordinator still plans (before its loop)
    ZAP_THREAD = True

    def __init__(
        self,
        endpoint: str,
        curve: CurveConfig | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        *,
        agents: Collection[int] | None = None,
        heartbeat_timeout_s: float | None = None,
    ) -> None:
        super().__init__("coordinator", curve, max_message_bytes, heartbeat_timeout_s)
        if agents is None and curve is not None:
            agents = list(curve.client_keys)
        self.agents: frozenset[int] | None = None if agents is None else frozenset(agents)
        self._router_losses = True
        self._preempted: list[tuple[int, str]] = []
        self._told_preempted: set[int] = set()
        try:
            self.router, self.endpoint = self._router(endpoint)
        except RunError:
            self.close()
            raise

    def _admits(self, sender: int, claimed: bytes | None) -> str | None:
        why = super()._admits(sender, claimed)
        if why is not None and sender in self._routes:
            self._second_claim(sender, "at the handshake")
        if why is None and self.agents is not None and sender not in self.agents:
            why = f"{_who(sender)} is not in peers.json"
        return why

    def _second_claim(self, sender: int, where: str) -> None:
        # list.append is atomic: the ZAP handler's thread may call this
        self._preempted.append((sender, where))

    def lost_peers(self) -> list[PeerLoss]:
        """Lost links, and agents whose id another connection had claimed first: in open mode
        the coordinator cannot tell the impostor from the agent, but the run cannot go on with
        that agent, and the error names it and why (it blamed whichever agent's link was cut)."""
        while self._preempted:
            sender, where = self._preempted.pop(0)
            if sender in self._told_preempted:
                continue
            self._told_preempted.add(sender)
            self._lose(
                sender,
                f"a second connection claimed agent {sender}'s id ({where}) and was refused: in "
                "open mode a process that speaks first can take an agent's id; use --secure",
            )
        return super().lost_peers()

    def send(self, peer: int, frames: Sequence[Buffer]) -> None:
        """Queue one message (its frames) for agent ``peer`` on the connection it spoke on."""
        route = self._routes.get(peer)
        if route is None:  # it has not spoken yet (or never will): nowhere to send
            log.debug("coordinator: no connection from agent %d yet; message dropped", peer)
            return
        try:
            self.router.send_multipart([route, *frames], zmq.NOBLOCK, copy=False)
        except zmq.ZMQError as exc:  # EHOSTUNREACH: that agent is not connected (anymore)
            log.debug("coordinator: cannot send to agent %d: %s", peer, exc)

    def _read(self, sock: zmq.Socket[Any]) -> Received | None:
        got = self._from_router(sock)
        if got is None:
            return None
        sender, body, routing = got
        if self.agents is not None and sender not in self.agents:
            self._refuse(
                _peer_address(body[0]), "stranger", "%s is not in peers.json", _who(sender)
            )
            self._cut(sender, body[0])
            return None
        if not self._keeps_route(sender, routing, body[0]):
            return None
        self._note_source(sender, body[0])
        return sender, [f.buffer for f in body]
