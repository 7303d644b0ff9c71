"""The transport interface the agents and the coordinator talk through, and an in-process one.

A transport moves opaque frames (bytes) between ids: agents ``0..n-1`` and the coordinator
(``COORDINATOR_ID``). It knows nothing of messages; the codec does. ``recv`` returns the id the
transport itself saw the frame come from (the ZMQ routing identity, or the in-process sender), so
that the receiver can reject an envelope that claims another sender.

:class:`InProcHub` runs a whole protocol inside one process (threads), for tests: no sockets, the
same frames, the same codec, the same state machines.
"""

from __future__ import annotations

import queue
import threading
from typing import Protocol


class Transport(Protocol):
    """What an agent or the coordinator needs from the network."""

    def send(self, peer: int, frame: bytes) -> None:
        """Queue ``frame`` for ``peer``; never blocks for long, drops only when the peer is gone."""

    def recv(self, timeout_s: float) -> tuple[int | None, bytes] | None:
        """The next ``(sender id or None if unknown, frame)``, or None after ``timeout_s``."""

    def close(self) -> None:
        """Release sockets (pending frames get a short linger)."""


class InProcHub:
    """Mailboxes for a set of ids inside one process."""

    def __init__(self) -> None:
        self._boxes: dict[int, queue.Queue[tuple[int | None, bytes]]] = {}
        self._lock = threading.Lock()

    def transport(self, me: int) -> InProcTransport:
        with self._lock:
            self._boxes[me] = queue.Queue()
        return InProcTransport(self, me)

    def deliver(self, sender: int | None, peer: int, frame: bytes) -> None:
        box = self._boxes.get(peer)
        if box is not None:  # like a vanished process: frames to it are lost
            box.put((sender, bytes(frame)))

    def remove(self, me: int) -> None:
        with self._lock:
            self._boxes.pop(me, None)

    def box(self, me: int) -> queue.Queue[tuple[int | None, bytes]]:
        return self._boxes[me]


class InProcTransport:
    """One id's end of an :class:`InProcHub`."""

    def __init__(self, hub: InProcHub, me: int) -> None:
        self.hub = hub
        self.me = me
        self._box = hub.box(me)

    def send(self, peer: int, frame: bytes) -> None:
        self.hub.deliver(self.me, peer, frame)

    def recv(self, timeout_s: float) -> tuple[int | None, bytes] | None:
        try:
            return self._box.get(timeout=max(0.0, timeout_s))
        except queue.Empty:
            return None

    def close(self) -> None:
        self.hub.remove(self.me)
