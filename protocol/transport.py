"""The transport interface the agents and the coordinator talk through, and an in-process one.

A transport moves messages - each a list of opaque frames (bytes or views of buffers: a header
and one frame per table) - between ids: agents ``0..n-1`` and the coordinator
(``COORDINATOR_ID``). It knows nothing of what they say; the codec does. ``recv`` returns the id the
transport itself established for the frame - never an id the frame or the peer merely claims:
the ZeroMQ transports take it from the connection the frame arrived on (an agent's link to the
coordinator) or from the CURVE key that authenticated the peer (secure mode). The receiver still
rejects an envelope that names another sender. A transport also refuses, before anything decodes
them, frames from ids it does not accept and frames over its limit.

Connection liveness is the transport's job too: :meth:`Transport.lost_peers` lists the peers whose
connection went away (a process that died, a host that stopped answering the transport's own
heartbeats). A live process that stopped working is invisible there; application messages see it.

:class:`InProcHub` runs a whole protocol inside one process (threads), for tests: no sockets, the
same frames, the same codec, the same state machines.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

#: One message on its way: its frames (bytes, or views of arrays and of received buffers).
Frames = Sequence[bytes | memoryview]
#: What ``recv`` returns: the sender's id (None where the transport cannot tell) and the frames.
Received = tuple[int | None, list[bytes | memoryview]]


@dataclass(frozen=True)
class PeerLoss:
    """A lost connection: ``peer`` is the id, ``at`` the ``time.monotonic()`` it was noticed."""

    peer: int
    at: float
    reason: str = "connection closed"


class Transport(Protocol):
    """What an agent or the coordinator needs from the network."""

    def send(self, peer: int, frames: Frames) -> None:
        """Queue one message for ``peer``; never blocks for long, drops only when the peer is
        gone."""

    def recv(self, timeout_s: float) -> Received | None:
        """The next ``(sender id, frames)``, or None after ``timeout_s``. The id is the one the
        transport established (None only where it cannot: the receiver must then drop it)."""

    def lost_peers(self) -> list[PeerLoss]:
        """Peers whose connection was lost since the last call (each loss is reported once)."""

    def close(self) -> None:
        """Release sockets (pending frames get a short linger)."""


class AgentTransport(Transport, Protocol):
    """An agent's transport: it also learns neighbours' endpoints while it runs."""

    @property
    def endpoint(self) -> str:
        """Where this agent listens (after a wildcard bind, with the port actually bound)."""

    def connect_peer(self, peer: int, endpoint: str) -> None:
        """Open a link to ``peer`` at ``endpoint`` and accept frames from it from now on."""

    def disconnect_peer(self, peer: int) -> None:
        """Close the link to ``peer`` and refuse its frames (no loss is reported for it)."""

    def settle(self, links: Collection[int], *, for_good: bool = True) -> None:
        """A problem's links are known: frames held from any other agent are dropped, and
        ``for_good`` (a one-shot agent) refuses the others' frames from now on."""

    def wake(self) -> None:
        """Make a :meth:`recv` that is waiting (or the next one) return None now; safe from any
        thread (a worker thread whose computation has finished calls it)."""

    def joined_peers(self) -> list[int]:
        """Peers whose link to this agent (re)connected since the last call: a coordinator that
        has just bound its port, for a serving agent waiting for a problem."""

    def dropped_before_join(self, peer: int) -> bool:
        """Whether what was sent to ``peer`` before its link's latest join may have gone
        nowhere: a connection of that link failed its handshake or closed since the join before
        (or since the link opened), and the messages queued on it went with it. False while the
        link has only connected cleanly: a message sent before it joined left on that join."""


class InProcHub:
    """Mailboxes for a set of ids inside one process.

    Removing an id (``close()`` of its transport, or :meth:`remove`: a process that vanished)
    reports the loss to every id that has exchanged frames with it or linked to it.
    """

    def __init__(self) -> None:
        self._boxes: dict[int, queue.Queue[Received]] = {}
        self._losses: dict[int, list[PeerLoss]] = {}
        self._links: dict[int, set[int]] = {}
        self._lock = threading.Lock()

    def transport(self, me: int) -> InProcTransport:
        with self._lock:
            self._boxes[me] = queue.Queue()
            self._losses[me] = []
            self._links[me] = set()
        return InProcTransport(self, me)

    def link(self, a: int, b: int) -> None:
        """Remember that ``a`` and ``b`` talk: each hears of the other's removal."""
        with self._lock:
            for x, y in ((a, b), (b, a)):
                if x in self._links:
                    self._links[x].add(y)

    def unlink(self, a: int, b: int) -> None:
        with self._lock:
            self._links.get(a, set()).discard(b)
            self._links.get(b, set()).discard(a)

    def deliver(self, sender: int | None, peer: int, frames: Frames) -> None:
        """Put a copy of one message into ``peer``'s box (as a socket would copy it)."""
        box = self._boxes.get(peer)
        if box is None:  # like a vanished process: messages to it are lost
            return
        if sender is not None and peer not in self._links.get(sender, ()):
            self.link(sender, peer)
        box.put((sender, [bytes(f) for f in frames]))

    def remove(self, me: int) -> None:
        now = time.monotonic()
        with self._lock:
            self._boxes.pop(me, None)
            self._losses.pop(me, None)
            for other in self._links.pop(me, set()):
                if other in self._losses:
                    self._links[other].discard(me)
                    self._losses[other].append(PeerLoss(me, now, "removed from the hub"))

    def box(self, me: int) -> queue.Queue[Received]:
        return self._boxes[me]

    def take_losses(self, me: int) -> list[PeerLoss]:
        with self._lock:
            losses = self._losses.get(me, [])
            if losses:
                self._losses[me] = []
            return losses


#: What :meth:`InProcTransport.wake` puts in its own box (never a message).
_WAKE: Received = (None, [])


class InProcTransport:
    """One id's end of an :class:`InProcHub` (it accepts frames from every id of the hub)."""

    def __init__(self, hub: InProcHub, me: int) -> None:
        self.hub = hub
        self.me = me
        self._box = hub.box(me)

    @property
    def endpoint(self) -> str:
        return f"inproc://dcop-{self.me}"

    def send(self, peer: int, frames: Frames) -> None:
        self.hub.deliver(self.me, peer, frames)

    def recv(self, timeout_s: float) -> Received | None:
        try:
            item = self._box.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None
        return None if item is _WAKE else item

    def wake(self) -> None:
        self._box.put(_WAKE)

    def lost_peers(self) -> list[PeerLoss]:
        return self.hub.take_losses(self.me)

    def joined_peers(self) -> list[int]:
        return []  # in-process links exist from the start: nobody joins later

    def dropped_before_join(self, peer: int) -> bool:
        return False  # the hub delivers every message at once: none waits to be dropped

    def connect_peer(self, peer: int, endpoint: str) -> None:
        self.hub.link(self.me, peer)

    def disconnect_peer(self, peer: int) -> None:
        self.hub.unlink(self.me, peer)

    def settle(self, links: Collection[int], *, for_good: bool = True) -> None:
        pass  # the hub delivers every message at once: nothing is ever held

    def close(self) -> None:
        self.hub.remove(self.me)
