"""The ZAP handler (ZeroMQ RFC 27): who may connect to a listening socket, decided at the
handshake, before libzmq reads any message of the connection.

Each transport runs one on its own context: an agent's from its own poll, the coordinator's in a
thread (libzmq asks it from its I/O thread and holds the handshake until the answer; see
:class:`ZapHandler`). Two mechanisms, one per mode:

* CURVE (secure mode): the client proved a key; the key must be listed in peers.json, and it
  names the connection by that key's id.
* PLAIN (open mode): the client claims its routing identity (``<id>/<nonce>``) as its user name,
  with no password; nothing is proved, but a stranger - an id the transport does not accept - is
  refused before it can make the process read, and hold, a message of the size limit.

Either way the transport's ``admits(id, claim)`` has the last word (``claim``: the routing
identity claimed under PLAIN, None under CURVE): it returns None to accept, or the reason for
refusing. An accepted connection is named by its ZAP User-Id, which libzmq attaches to every one
of its frames: the id's digits (CURVE) or the claimed routing identity (PLAIN).

A hand-written loop rather than pyzmq's ``zmq.auth.thread.ThreadAuthenticator``: that one loads
asyncio (50 ms of every agent's start on the 2-core VM, now that open mode authenticates too)
and hides the client's address from its credential hooks.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

import zmq
from zmq.utils import z85

from dcop.protocol.ratelog import RateLimitedLog

__all__ = ["ZAP_ENDPOINT", "Admits", "ParseClaim", "ZapHandler"]

_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
#: Where libzmq sends its ZAP requests (fixed by RFC 27), one per context.
ZAP_ENDPOINT = "inproc://zeromq.zap.01"
#: (id, the routing identity claimed under PLAIN or None) -> None to accept, else why not.
Admits = Callable[[int, bytes | None], str | None]
#: A claimed routing identity names an id this way (see zmqlink.parse_identity): injected, to
#: keep this module free of the transport's identity rules.
ParseClaim = Callable[[bytes], int | None]


class ZapHandler:
    """Answers ZAP requests on ``ctx`` from the transport's own loop (see the module docstring).

    ``keys`` (Z85 public key -> id) selects CURVE; None selects PLAIN, whose user names
    ``parse`` turns into ids. Refusals are logged with the client's address, rate-limited by
    ``out``, and counted in :attr:`refused`.

    An agent's handler has no thread of its own (:meth:`start` without ``thread``): it binds
    the handler's socket, which the transport polls beside its others, and :meth:`serve` answers
    what is pending whenever that socket is ready (libzmq holds a handshake until its answer
    comes; it never blocks its I/O thread on it). A thread per agent cost every forked agent
    0.3 MB of private pages, about 1.3 ms of CPU to start, and a hand-over of the interpreter's
    lock at each handshake (2-core VM). The coordinator's handler keeps a thread (``thread``):
    it answers its agents' handshakes while the coordinator still plans, before its loop runs.
    """

    def __init__(
        self,
        ctx: zmq.Context[Any],
        owner: str,
        out: RateLimitedLog,
        admits: Admits,
        parse: ParseClaim,
        keys: Mapping[bytes, int] | None = None,
    ) -> None:
        self.ctx = ctx
        self.owner = owner
        self.out = out
        self.admits = admits
        self.parse = parse
        self.keys = None if keys is None else dict(keys)
        #: Connections refused at the handshake.
        self.refused = 0
        #: The socket the owner polls (None before :meth:`start`, after :meth:`stop`, and
        #: for a handler with its own thread).
        self.socket: zmq.Socket[Any] | None = None
        self._thread: threading.Thread | None = None
        self._stop_pipe = (-1, -1)

    def start(self, thread: bool = False) -> None:
        """Bind the handler (before any socket of the context listens); raises zmq.ZMQError
        where it cannot (another handler holds the context's ZAP endpoint). With ``thread``, a
        thread of its own serves it until :meth:`stop`; else the owner polls :attr:`socket` and
        calls :meth:`serve`."""
        sock: zmq.Socket[Any] = self.ctx.socket(zmq.REP)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.bind(ZAP_ENDPOINT)
        except zmq.ZMQError:
            sock.close()
            raise
        if not thread:
            self.socket = sock
            return
        self._stop_pipe = os.pipe()
        self._thread = threading.Thread(
            target=self._serve_thread, args=(sock,), name=f"zap {self.owner}", daemon=True
        )
        self._thread.start()

    def serve(self) -> int:
        """Answer every request waiting now (never blocks); how many were answered."""
        sock = self.socket
        answered = 0
        while sock is not None:
            try:
                # asked before reading: an agent serves at every turn of its loop, and an empty
                # read raises (zmq.Again: several times the cost of the question)
                if not int(sock.getsockopt(_EVENTS)) & _POLLIN:
                    break
                request = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError:  # the context is being torn down
                break
            sock.send_multipart(self.answer(request))
            answered += 1
        return answered

    def _serve_thread(self, sock: zmq.Socket[Any]) -> None:
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(self._stop_pipe[0], zmq.POLLIN)
        try:
            while True:
                ready = dict(poller.poll())
                if self._stop_pipe[0] in ready:
                    return
                if sock in ready:
                    sock.send_multipart(self.answer(sock.recv_multipart()))
        finally:
            sock.close()

    def stop(self) -> None:
        """Close the handler's socket (end its thread): before the context is destroyed."""
        if self.socket is not None:
            self.socket.close(linger=0)
            self.socket = None
        if self._thread is None:
            return
        thread, self._thread = self._thread, None
        if thread.is_alive():
            os.write(self._stop_pipe[1], b"s")
            thread.join()
        for fd in self._stop_pipe:
            with contextlib.suppress(OSError):
                os.close(fd)

    def answer(self, request: list[bytes]) -> list[bytes]:
        """The reply to one ZAP request: version, request id, status code and text, User-Id,
        metadata (RFC 27)."""
        if len(request) < 6 or request[0] != b"1.0":
            return [
                b"1.0",
                request[1] if len(request) > 1 else b"",
                b"400",
                b"bad request",
                b"",
                b"",
            ]
        request_id, address = request[1], request[3].decode("utf-8", "replace")
        mechanism, credentials = request[5], request[6:]
        user, why, kind = self._decide(mechanism, credentials)
        if why is None:
            return [b"1.0", request_id, b"200", b"OK", user, b""]
        self.refused += 1
        self.out.warning(
            (address, "handshake", kind),  # a stable key: claims that vary still share a line
            "%s: at the handshake, %s (from %s)",
            self.owner,
            why,
            address,
        )
        return [b"1.0", request_id, b"400", why.encode("utf-8", "replace")[:255], b"", b""]

    def _decide(self, mechanism: bytes, credentials: list[bytes]) -> tuple[bytes, str | None, str]:
        """(the User-Id to give, None, "") to accept, else (b"", the refusal to log, its kind)."""
        name = mechanism.decode("ascii", "replace")[:20]
        if self.keys is not None:
            if mechanism != b"CURVE" or len(credentials) != 1 or len(credentials[0]) != 32:
                return b"", f"refused a {name} client, not CURVE", "mechanism"
            ident = self.keys.get(z85.encode(credentials[0]))
            if ident is None:
                return b"", "refused a CURVE client whose key is not in peers.json", "key"
            user, claim = str(ident).encode("ascii"), None
        else:
            if mechanism != b"PLAIN" or len(credentials) != 2:
                return b"", f"refused a {name} client, not PLAIN", "mechanism"
            user = claim = credentials[0]
            parsed = self.parse(claim)
            if parsed is None:
                why = f"refused a connection: user name {claim[:40]!r} names no agent"
                return b"", why, "name"
            ident = parsed
        reason = self.admits(ident, claim)
        if reason is None:
            return user, None, ""
        # keyed by the reason without its ids: a few kinds, whatever the claims
        return b"", f"refused a connection: {reason}", re.sub(r"\d+", "#", reason)
