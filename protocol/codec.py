"""The msgpack codec: one envelope per message, validated completely by one decoder.

A message is a list of frames: first the msgpack header ``{"v": PROTOCOL_VERSION, "s": sender,
"r": receiver, "n": problem, "p": payload}`` (the payload tagged with its type, ``"t"``), then one
frame per table buffer. In the header a table's data is a msgpack extension (code
:data:`FRAME_EXT`) holding the index of its frame, so a table is never copied into or out of the
header: it goes from the array to the socket and from the received frame to the array as it is
(pyzmq's ``send_array`` pattern). msgspec's ``enc_hook`` and ``ext_hook`` make that swap.

``n`` names the problem a message belongs to (0 outside any problem), so that a serving agent
never mixes a late message of one problem into the next.

:func:`decode` returns an :class:`Envelope` or raises :class:`ProtocolError` whose message says
why (oversized, malformed, wrong version, unknown type, unknown sender, bad field with its path,
a frame that is missing or left over). It never raises anything else, whatever the bytes: the
agents rely on that to log, drop and carry on.
"""

from __future__ import annotations

import threading
from collections.abc import Container, Sequence
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from dcop.errors import DcopError, ProtocolError
from dcop.protocol.constants import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_AGENT_ID,
    MAX_TABLES,
    PROTOCOL_VERSION,
)
from dcop.protocol.messages import DECODING, MESSAGE_CLASSES, Buffer, FrameRef, Message

#: The msgpack extension type that stands for "the table data is frame k".
FRAME_EXT = 1
#: Frames one message may have: the header and one per table.
MAX_FRAMES = 1 + 2 * MAX_TABLES
MAX_PROBLEM = (1 << 63) - 1
PeerId = Annotated[int, Meta(ge=COORDINATOR_ID, le=MAX_AGENT_ID)]


class _Header(Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    v: int
    s: PeerId
    r: PeerId
    n: Annotated[int, Meta(ge=0, le=MAX_PROBLEM)]
    p: Message


class Envelope(Struct, frozen=True, eq=False, gc=False):
    """A message with its sender, receiver (``COORDINATOR_ID`` for the coordinator) and the
    problem it belongs to (0: none)."""

    sender: int
    receiver: int
    body: Message
    problem: int = 0

    @property
    def type(self) -> str:
        return str(self.body.TYPE)


# The frames of the message being encoded or decoded in this thread: the hooks below are fixed
# when the encoder and decoder are made, so they find them here.
_here = threading.local()


def _frame_ref(obj: Any) -> Any:
    if isinstance(obj, FrameRef):
        frames: list[Buffer] = _here.frames
        frames.append(obj.buffer)
        return msgspec.msgpack.Ext(FRAME_EXT, (len(frames) - 1).to_bytes(4, "little"))
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


class _BadFrame(Exception):
    """An extension that is no frame reference, or names a frame it may not (raised out of the
    decoder by its hook)."""


def _frame_of(code: int, data: memoryview) -> FrameRef:
    if code != FRAME_EXT or len(data) != 4:
        raise _BadFrame(f"unknown msgpack extension {code}")
    views: list[memoryview] = _here.views
    used: set[int] = _here.used
    k = int.from_bytes(data, "little")
    if not 1 <= k < len(views) or k in used:
        raise _BadFrame(f"a table names frame {k}, which is missing or already used")
    used.add(k)
    return FrameRef(views[k], received=True)


def _is_frame(kind: type, obj: Any) -> Any:
    if kind is FrameRef and isinstance(obj, FrameRef):
        return obj
    raise TypeError("table data must travel as a frame of its own")


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_frame_ref)
_DECODER = msgspec.msgpack.Decoder(_Header, ext_hook=_frame_of, dec_hook=_is_frame)
_LOOSE = msgspec.msgpack.Decoder()


def encode(sender: int, receiver: int, body: Message, problem: int = 0) -> list[Buffer]:
    """Serialise one message: the header, then the table buffers (never pickled, never copied)."""
    frames: list[Buffer] = [b""]
    _here.frames = frames
    try:
        frames[0] = _ENCODER.encode(_Header(PROTOCOL_VERSION, sender, receiver, problem, body))
    finally:
        _here.frames = None
    return frames


def message_bytes(frames: Sequence[Buffer]) -> int:
    """The size of a message on the wire: all its frames."""
    return sum(len(memoryview(f)) for f in frames)


def _why(header: memoryview, exc: Exception) -> str:
    """What is wrong with a header the decoder refused: its version first (a peer of another
    release is told so, whatever else differs), then the decoder's own reason and path."""
    try:
        raw = _LOOSE.decode(header)
    except Exception as loose:  # msgspec raises DecodeError; an odd extension anything
        return f"malformed frame: {loose}"
    if not isinstance(raw, dict):
        return f"malformed frame: a map is expected, not {type(raw).__name__}"
    version = raw.get("v")
    if type(version) is not int:
        return "malformed frame: no protocol version"
    if version != PROTOCOL_VERSION:
        return (
            f"wrong protocol version {version} (this side speaks {PROTOCOL_VERSION}); every "
            "agent and the coordinator must run the same dcop release"
        )
    payload = raw.get("p")
    kind = payload.get("t") if isinstance(payload, dict) else None
    if isinstance(kind, str) and kind not in MESSAGE_CLASSES:
        return f"unknown message type {kind[:40]!r}"
    what = f"bad {kind} message" if isinstance(kind, str) else "malformed frame"
    return f"{what}: {exc}"


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
    _here.views, _here.used = views, used
    DECODING.active = True
    try:
        header = _DECODER.decode(views[0])
    except _BadFrame as exc:
        raise ProtocolError(str(exc)) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ProtocolError(_why(views[0], exc)) from None
    except DcopError as exc:  # the run spec's own checks (the same as at the command line)
        raise ProtocolError(f"bad start message: bad run spec: {exc}") from None
    except Exception as exc:  # anything else on bad bytes is still the sender's fault
        raise ProtocolError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    finally:
        _here.views = _here.used = None
        DECODING.active = False
    if header.v != PROTOCOL_VERSION:
        raise ProtocolError(_why(views[0], ValueError("version")))
    body = header.p
    if known_senders is not None and header.s not in known_senders:
        raise ProtocolError(f"unknown sender {header.s}")
    if receiver is not None and header.r != receiver:
        raise ProtocolError(f"message for {header.r} delivered to {receiver}")
    if len(used) != len(views) - 1:
        raise ProtocolError(f"a {body.TYPE} message with {len(views) - 1 - len(used)} stray frames")
    return Envelope(header.s, header.r, body, header.n)
