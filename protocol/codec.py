"""The msgpack codec: one envelope per frame, validated completely on decode.

Frame = msgpack map ``{"v": PROTOCOL_VERSION, "t": type, "s": sender, "r": receiver, "p": payload}``.
:func:`decode` returns an :class:`Envelope` or raises :class:`ProtocolError` whose message says
why (oversized, malformed, wrong version, unknown type, unknown sender, bad field). It never
raises anything else, whatever the bytes: the agents rely on that to log, drop and carry on.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any

import msgpack

from dcop.errors import ProtocolError
from dcop.protocol.constants import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_AGENT_ID,
    PROTOCOL_VERSION,
)
from dcop.protocol.messages import MESSAGE_CLASSES, Message


@dataclass(frozen=True, eq=False)
class Envelope:
    """A message with its sender and receiver ids (``COORDINATOR_ID`` for the coordinator)."""

    sender: int
    receiver: int
    body: Message

    @property
    def type(self) -> str:
        return str(self.body.TYPE)


def encode(sender: int, receiver: int, body: Message) -> bytes:
    """Serialise one message (tables' bytes travel as msgpack ``bin``, never pickled)."""
    frame: bytes = msgpack.packb(
        {"v": PROTOCOL_VERSION, "t": body.TYPE, "s": sender, "r": receiver, "p": body.to_wire()},
        use_bin_type=True,
    )
    return frame


def _check_id(value: Any, what: str) -> int:
    if type(value) is not int or not (value == COORDINATOR_ID or 0 <= value <= MAX_AGENT_ID):
        raise ProtocolError(f"{what} id must be an agent id or {COORDINATOR_ID}")
    return value


def decode(
    frame: bytes,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    known_senders: Container[int] | None = None,
    receiver: int | None = None,
) -> Envelope:
    """Validate and decode one frame.

    ``known_senders`` (when given) is the set of ids this endpoint accepts messages from;
    ``receiver`` (when given) must be the envelope's receiver.
    """
    if not isinstance(frame, bytes | bytearray | memoryview):
        raise ProtocolError(f"frame must be bytes, not {type(frame).__name__}")
    if len(frame) > max_message_bytes:
        raise ProtocolError(
            f"oversized frame: {len(frame)} bytes, the limit is {max_message_bytes}"
        )
    try:
        raw = msgpack.unpackb(
            frame,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=max_message_bytes,
            max_bin_len=max_message_bytes,
            max_array_len=1 << 20,
            max_map_len=1 << 20,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises several unrelated types on bad bytes
        raise ProtocolError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"malformed frame: a map is expected, not {type(raw).__name__}")
    version = raw.get("v")
    if type(version) is not int:
        raise ProtocolError("malformed frame: no protocol version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"wrong protocol version {version} (this side speaks {PROTOCOL_VERSION})"
        )
    kind = raw.get("t")
    cls = MESSAGE_CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message type {str(kind)[:40]!r}")
    sender = _check_id(raw.get("s"), "sender")
    target = _check_id(raw.get("r"), "receiver")
    if known_senders is not None and sender not in known_senders:
        raise ProtocolError(f"unknown sender {sender}")
    if receiver is not None and target != receiver:
        raise ProtocolError(f"message for {target} delivered to {receiver}")
    payload = raw.get("p")
    if not isinstance(payload, dict):
        raise ProtocolError(f"malformed {kind} message: payload must be a map")
    try:
        body: Message = cls.from_wire(payload)
    except ProtocolError as exc:
        raise ProtocolError(f"bad {kind} message: {exc}") from None
    extra = set(raw) - {"v", "t", "s", "r", "p"}
    if extra:
        raise ProtocolError(f"malformed frame: unexpected keys {sorted(map(str, extra))[:5]}")
    return Envelope(sender, target, body)
