"""The msgpack codec: one envelope per message, validated completely on decode.

A message is a list of frames: first the msgpack header ``{"v": PROTOCOL_VERSION, "t": type,
"s": sender, "r": receiver, "n": problem, "p": payload}``, then one frame per table buffer. In the
header a table's data is a msgpack extension (code :data:`FRAME_EXT`) holding the index of its
frame, so a table is never copied into or out of the header: it goes from the array to the socket
and from the received frame to the array as it is (pyzmq's ``send_array`` pattern).

``n`` names the problem a message belongs to (0 outside any problem), so that a serving agent
never mixes a late message of one problem into the next.

:func:`decode` returns an :class:`Envelope` or raises :class:`ProtocolError` whose message says
why (oversized, malformed, wrong version, unknown type, unknown sender, bad field, a frame that
is missing or left over). It never raises anything else, whatever the bytes: the agents rely on
that to log, drop and carry on.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from dcop.errors import ProtocolError
from dcop.protocol.constants import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_AGENT_ID,
    MAX_TABLES,
    PROTOCOL_VERSION,
)
from dcop.protocol.messages import MESSAGE_CLASSES, Buffer, Frame, FrameRef, Message

#: The msgpack extension type that stands for "the table data is frame k".
FRAME_EXT = 1
#: Frames one message may have: the header and one per table.
MAX_FRAMES = 1 + 2 * MAX_TABLES
MAX_PROBLEM = (1 << 63) - 1
_HEADER_KEYS = frozenset({"v", "t", "s", "r", "n", "p"})


@dataclass(frozen=True, eq=False)
class Envelope:
    """A message with its sender, receiver (``COORDINATOR_ID`` for the coordinator) and the
    problem it belongs to (0: none)."""

    sender: int
    receiver: int
    body: Message
    problem: int = 0

    @property
    def type(self) -> str:
        return str(self.body.TYPE)


def encode(sender: int, receiver: int, body: Message, problem: int = 0) -> list[Buffer]:
    """Serialise one message: the header, then the table buffers (never pickled, never copied)."""
    frames: list[Buffer] = [b""]

    def frame_ref(obj: Any) -> Any:
        if isinstance(obj, FrameRef):
            frames.append(obj.buffer)
            return msgpack.ExtType(FRAME_EXT, (len(frames) - 1).to_bytes(4, "little"))
        raise TypeError(f"cannot encode {type(obj).__name__}")

    frames[0] = msgpack.packb(
        {
            "v": PROTOCOL_VERSION,
            "t": body.TYPE,
            "s": sender,
            "r": receiver,
            "n": problem,
            "p": body.to_wire(),
        },
        use_bin_type=True,
        default=frame_ref,
    )
    return frames


def message_bytes(frames: Sequence[Buffer]) -> int:
    """The size of a message on the wire: all its frames."""
    return sum(len(memoryview(f)) for f in frames)


def _check_id(value: Any, what: str) -> int:
    if type(value) is not int or not (value == COORDINATOR_ID or 0 <= value <= MAX_AGENT_ID):
        raise ProtocolError(f"{what} id must be an agent id or {COORDINATOR_ID}")
    return value


def decode(
    frames: Sequence[Buffer] | Buffer,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    known_senders: Container[int] | None = None,
    receiver: int | None = None,
) -> Envelope:
    """Validate and decode one message (its frames; a single buffer is a message of one frame).

    ``known_senders`` (when given) is the set of ids this endpoint accepts messages from;
    ``receiver`` (when given) must be the envelope's receiver.
    """
    if isinstance(frames, bytes | bytearray | memoryview):
        frames = [frames]
    if not isinstance(frames, list | tuple) or not frames:
        raise ProtocolError("a message must be a non-empty list of frames")
    if len(frames) > MAX_FRAMES:
        raise ProtocolError(f"a message of {len(frames)} frames, more than {MAX_FRAMES}")
    try:
        views = [memoryview(f).cast("B") for f in frames]
    except TypeError:
        raise ProtocolError("every frame must be bytes") from None
    total = sum(len(v) for v in views)
    if total > max_message_bytes:
        raise ProtocolError(f"oversized message: {total} bytes, the limit is {max_message_bytes}")
    used: set[int] = set()

    def frame_of(code: int, data: bytes) -> Any:
        if code != FRAME_EXT or len(data) != 4:
            raise ProtocolError(f"unknown msgpack extension {code}")
        k = int.from_bytes(data, "little")
        if not 1 <= k < len(views) or k in used:
            raise ProtocolError(f"a table names frame {k}, which is missing or already used")
        used.add(k)
        return Frame(views[k])

    header = views[0]
    try:
        raw = msgpack.unpackb(
            header,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_str_len=len(header),
            max_bin_len=len(header),
            max_array_len=1 << 20,
            max_map_len=1 << 20,
            max_ext_len=4,
            ext_hook=frame_of,
        )
    except ProtocolError:
        raise
    except Exception as exc:  # msgpack raises several unrelated types on bad bytes
        raise ProtocolError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    if not isinstance(raw, dict):
        raise ProtocolError(f"malformed frame: a map is expected, not {type(raw).__name__}")
    version = raw.get("v")
    if type(version) is not int:
        raise ProtocolError("malformed frame: no protocol version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"wrong protocol version {version} (this side speaks {PROTOCOL_VERSION}); every "
            "agent and the coordinator must run the same dcop release"
        )
    kind = raw.get("t")
    cls = MESSAGE_CLASSES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message type {str(kind)[:40]!r}")
    sender = _check_id(raw.get("s"), "sender")
    target = _check_id(raw.get("r"), "receiver")
    problem = raw.get("n")
    if type(problem) is not int or not 0 <= problem <= MAX_PROBLEM:
        raise ProtocolError("malformed frame: the problem number must be an integer >= 0")
    if known_senders is not None and sender not in known_senders:
        raise ProtocolError(f"unknown sender {sender}")
    if receiver is not None and target != receiver:
        raise ProtocolError(f"message for {target} delivered to {receiver}")
    extra = set(raw) - _HEADER_KEYS
    if extra:
        raise ProtocolError(f"malformed frame: unexpected keys {sorted(map(str, extra))[:5]}")
    payload = raw.get("p")
    if not isinstance(payload, dict):
        raise ProtocolError(f"malformed {kind} message: payload must be a map")
    try:
        body: Message = cls.from_wire(payload)
    except ProtocolError as exc:
        raise ProtocolError(f"bad {kind} message: {exc}") from None
    if len(used) != len(views) - 1:
        raise ProtocolError(f"a {kind} message with {len(views) - 1 - len(used)} stray frames")
    return Envelope(sender, target, body, problem)
