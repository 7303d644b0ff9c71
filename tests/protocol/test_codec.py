"""The codec: round trips of every message type, and every kind of bad frame -> ProtocolError."""

from __future__ import annotations

import contextlib
import math

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcop.errors import ProtocolError
from dcop.protocol import (
    COORDINATOR_ID,
    PROTOCOL_VERSION,
    AgentMetrics,
    Degree,
    Done,
    Down,
    Error,
    Go,
    Heartbeat,
    Hello,
    Neighbour,
    Result,
    Setup,
    Sizing,
    Start,
    Stop,
    Token,
    TreeReport,
    Util,
    Value,
    WireTable,
    decode,
    encode,
)
from dcop.protocol.codec import message_bytes
from dcop.protocol.messages import ROWS, More, Replay, Whole
from dcop.protocol.peers import parse_peers
from dcop.protocol.runspec import RunSpec
from dcop.sizes import SIZE_CAP

TABLE = WireTable.from_array(("x1", "x2"), np.array([[0.0, 1.5], [np.inf, 3.0], [4.0, 5.0]]))
MESSAGES = [
    Hello("x1", 1234, "host", "tcp://127.0.0.1:7001", True, 0.25, "H100"),
    Setup("x1", 3, (TABLE,), "0" * 64, (Neighbour(2, "x2", "tcp://h:7002", ""),)),
    # the start rides on the setup (wire version 8)
    Setup("x1", 3, (TABLE,), "0" * 64, (), (), Start(RunSpec("adpop", 3, trees=8), (0, 2))),
    Setup(
        "x1",
        3,
        (),
        "0" * 64,
        start=Start(RunSpec("dpop", max_message_bytes=2**30, peer_timeout_s=12.5, trees=1), ()),
    ),
    Setup("x1", 3, (), "0" * 64, start=Start(RunSpec("auto", trees=2), (1,))),
    Degree((1, 4, 9), 0.5),
    Token(1, "child", (1, 0), 0.25, path=(0, 3), domains=(2, 4)),
    Token(
        0,
        "back",
        (1, 2),
        0.0,
        links=((1, 2), (7, 0)),
        separator=(0,),
        width=1,
        sizings=(Sizing(((0,),), 4, 2, 6), Sizing((), 0, None, 0)),
    ),
    TreeReport(3, 2, (Sizing((), 9, 4, 12),)),
    Go(2, None),
    Go(0, 3),
    Util((TABLE, WireTable.from_array((), np.float64(7.0))), 1.0, ()),
    # MB-DPOP: a block of rows of a UTIL in parts, a chunk's, the pacing and the replay
    Util(
        (WireTable.from_array((ROWS, "b"), np.ones((2, 3))),),
        1.0,
        (),
        part=1,
        parts=3,
        whole=Whole(("a", "b"), (6, 3)),
    ),
    Util(
        (WireTable.from_array((ROWS, "b"), np.ones((4, 3))),),
        1.0,
        (),
        chunk=2,
        whole=Whole(("\x00ctx", "b"), (4, 3)),
    ),
    More(5, 0.5),
    Replay((("x1", 1),), 0.5),
    Value((("x1", 2), ("x2", 0)), 2.0),
    Down((TABLE,), 3.0),
    Result(None, -2.5, None, (2,), (), (), AgentMetrics(), (0.125, 0.875)),
    Result(
        1,
        12.0,
        None,
        (2, 3),
        (),
        (0,),
        AgentMetrics(
            {"util": 1}, {"util": 99}, {}, {}, 0.1, 0.2, 99, 6, 1, 0, 0.5, {"buckets_gpu": 2.0}
        ),
    ),
    Result(0, None, 4, (), (1,), (), AgentMetrics()),
    Error("boom", 3),
    Error("too big", None, "too_large"),
    Stop("done"),
    Done("aborted: x"),
    Heartbeat(),
    Heartbeat("util", 1234, True),
]


def _frame(t: str = "hello", p: object = None, **over: object) -> bytes:
    """A header frame of type ``t`` (the payload's tag) with payload ``p`` and header fields
    replaced by ``over``."""
    payload = {"variable": "x1", "pid": 2} if p is None else p
    raw = {
        "v": PROTOCOL_VERSION,
        "s": 1,
        "r": COORDINATOR_ID,
        "n": 0,
        "p": {"t": t, **payload} if isinstance(payload, dict) else payload,
    }
    raw.update(over)
    return msgpack.packb(raw, use_bin_type=True)


def _table(**fields: object) -> list[bytes]:
    """A UTIL whose one table (8 bytes of data, in a frame of its own) has ``fields``."""
    table = {"scope": ["a"], "shape": [1], "dtype": "<f8"} | fields
    table.setdefault("data", msgpack.ExtType(1, (1).to_bytes(4, "little")))
    return [_frame("util", {"tables": [table], "clock": 0.0, "shared": []}), b"\0" * 8]


def _result(**over: object) -> bytes:
    """A result frame (from agent 1) with some payload fields replaced."""
    frames = encode(1, COORDINATOR_ID, Result(None, 0.0, None, (), (), (), AgentMetrics()))
    raw = msgpack.unpackb(frames[0], raw=False)
    raw["p"].update(over)  # (the payload carries its type, "t")
    return msgpack.packb(raw, use_bin_type=True)


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(message: object) -> None:
    env = decode(encode(3, COORDINATOR_ID, message))  # type: ignore[arg-type]
    assert env.sender == 3 and env.receiver == COORDINATOR_ID
    assert type(env.body) is type(message)
    if isinstance(message, Setup | Util | Down):
        for a, b in zip(message.tables, env.body.tables, strict=True):  # type: ignore[union-attr]
            assert a.scope == b.scope and a.shape == b.shape
            np.testing.assert_array_equal(a.to_array(), b.to_array())
    else:
        assert env.body == message


def test_sizes_above_2_to_the_64_round_trip() -> None:
    """A UTIL prediction of 3^200 entries (or an int beyond float64) travels as a capped float
    in tokens and tree reports: no ``cannot encode int``, no range check that drops the token."""
    huge = 3**200
    sizing = Sizing(((0, 1),), huge, 4, 10**400)
    token = Token(0, "back", (1, 2), 0.0, sizings=(sizing,))
    for message in (token, TreeReport(1, 50, (sizing,))):
        body = decode(encode(3, COORDINATOR_ID, message)).body
        got = body.sizings[0]  # type: ignore[union-attr]
        assert got.largest == pytest.approx(float(huge)) and got.largest > 2.0**64
        assert got.total == SIZE_CAP
    # exact below 2^53: the predictions the solve compares with what it sent
    exact = decode(
        encode(3, 4, Token(0, "back", (1,), 0.0, sizings=(Sizing((), 2**52 + 1, 1, 3),)))
    )
    got = exact.body.sizings[0]  # type: ignore[union-attr]
    assert got.largest == 2**52 + 1 and type(got.largest) is float and type(got.total) is float


def test_exact_sizes_travel_as_small_integers() -> None:
    """A size made here that a float64 holds exactly goes out as a msgpack int (1-5 bytes, not
    a float's 9): a 1000-agent tree's DFS tokens carried more bytes than its UTILs."""
    frames = encode(3, 4, Token(0, "back", (1,), 0.0, sizings=(Sizing(((0,),), 10.0, 3, 40.0),)))
    raw = msgpack.unpackb(frames[0], raw=False)["p"]["z"][0]
    assert raw[1] == 10 and type(raw[1]) is int and raw[3] == 40 and type(raw[3]) is int
    above = encode(3, 4, Token(0, "back", (1,), 0.0, sizings=(Sizing((), 2.0**60, 3, 0.5),)))
    raw = msgpack.unpackb(above[0], raw=False)["p"]["z"][0]
    assert type(raw[1]) is float and type(raw[3]) is float


def test_tokens_carry_only_their_kinds_fields() -> None:
    child = encode(3, 4, Token(0, "child", (1, 0), 0.0, path=(0, 3), domains=(2, 4)))
    payload = msgpack.unpackb(child[0], raw=False)["p"]
    # tree kind open path domains; the clock is 0 until the UTILs (compute) begin
    assert set(payload) == {"t", "k", "d", "o", "p", "D"}
    sizing = Sizing(((0,),), 2, 1, 2)
    back = encode(3, 4, Token(0, "back", (1,), 0.0, separator=(0,), width=1, sizings=(sizing,)))
    # the subtree's largest and total UTIL travel once: in the DPOP sizing; "back" is the default
    assert set(msgpack.unpackb(back[0], raw=False)["p"]) == {"t", "k", "o", "s", "w", "z"}
    late = decode(encode(3, 4, Token(0, "back", (1,), 2.5, sizings=(sizing,)))).body
    assert late.clock == 2.5 and late.kind == "back"  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [-1.0, -1, math.inf, math.nan, 2.0**1001])
def test_a_size_off_the_scale_is_refused(bad: float) -> None:
    sizing = Sizing(((0,),), 2, 1, 3)
    frames = encode(3, 4, Token(0, "back", (1,), 0.0, sizings=(sizing,)))
    raw = msgpack.unpackb(frames[0], raw=False)
    raw["p"]["z"][0][1] = bad  # largest
    with pytest.raises(ProtocolError, match=r"\$\.p\.z\[0\]\[1\]"):
        decode([msgpack.packb(raw, use_bin_type=True)])


def test_table_bytes_are_raw_and_float32_kept() -> None:
    t = WireTable.from_array(("a",), np.arange(4, dtype=np.float32))
    assert t.dtype == "<f4" and len(t.data) == 16
    back = decode(encode(0, 1, Util((t,), 0.0, ()))).body
    assert back.tables[0].to_array().dtype == np.float32  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (b"\xc1garbage", "malformed"),
        (msgpack.packb([1, 2, 3]), "a map is expected"),
        (_frame(v=99), "wrong protocol version"),
        # a peer of the last release: its ready is refused for its version, not its type
        (_frame("ready", {"degree": 2}, v=7), "wrong protocol version 7 .this side speaks 8"),
        # a start travels only inside a setup
        (_frame("start", {"spec": {"algo": "dpop"}, "roots": [0]}), "unknown message type 'start'"),
        (_frame("ready", {"degree": 2}), "unknown message type 'ready'"),
        (_frame(v="1"), "no protocol version"),
        (_frame(t="nope"), "unknown message type 'nope'"),
        (_frame(s=True), r"got `bool` - at `\$\.s`"),
        (_frame(s=-7), r">= -1 - at `\$\.s`"),
        (_frame(p={"variable": "x1", "pid": -1}), r">= 0 - at `\$\.p\.pid`"),
        (_frame(p={"variable": "x1", "pid": 1.5}), r"Expected `int`, got `float`"),
        (_frame(p={"variable": "x1"}), "missing required field `pid`"),
        (_frame(p=[1]), r"got `array` - at `\$\.p`"),
        (_frame(extra=1), "unknown field `extra`"),
        (
            _frame("token", {"k": 0, "d": "sideways", "o": [], "c": 0.0}),  # kind = d
            "'sideways'",
        ),
        (_frame("degree", {"neighbours": [1], "clock": math.nan}), r"\$\.p\.clock"),
        (_frame(n=-1), r"\$\.n`"),
        (_frame("down", {"tables": [], "clock": 0.0}), r"length >= 1 - at `\$\.p\.tables`"),
        (_result(marginal=[0.5, 0.6]), "sums to"),
        (_result(marginal=[1.5, -0.5]), r"<= 1\.0 - at `\$\.p\.marginal\[0\]`"),
        (_result(marginal=[]), r"length >= 1 - at `\$\.p\.marginal`"),
        (_result(marginal="0.5"), "got `str`"),
        (_table(data=b"\0" * 8), "frame of its own"),
        (_table(scope=["a", "a"], shape=[1, 1]), "repeats"),
        (_table(dtype="|O"), "'\\|O'"),
        (_table(shape=[10**9]), r"\$\.p\.tables\[0\]\.shape\[0\]"),
        (_frame("value", {"values": [["x", -1]], "clock": 0.0}), r"\$\.p\.values\[0\]\[1\]"),
        (_table(data=msgpack.ExtType(1, b"a")), "extension"),
    ],
)
def test_rejected_with_reason(frame: bytes | list[bytes], reason: str) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode(frame)


@pytest.mark.parametrize(
    ("block", "whole", "reason"),
    [
        ((ROWS, "b"), ("a", "c"), "not a block of rows"),  # other last variables
        (("a", "b"), ("a", "b"), "not a block of rows"),  # no rows axis
        ((ROWS, "b"), None, "one block of a whole table"),  # a chunk without its whole
    ],
)
def test_a_part_that_is_not_a_block_of_its_whole_is_refused(
    block: tuple[str, ...], whole: tuple[str, ...] | None, reason: str
) -> None:
    table = WireTable.from_array(block, np.ones((2, 3)))
    util = Util((table,), 0.0, (), chunk=0, whole=Whole(whole, (2, 3)) if whole else None)
    with pytest.raises(ProtocolError, match=reason):
        decode(encode(1, 2, util))


def test_oversized_unknown_sender_and_receiver() -> None:
    frame = encode(1, COORDINATOR_ID, Heartbeat())
    with pytest.raises(ProtocolError, match="oversized"):
        decode(frame, max_message_bytes=message_bytes(frame) - 1)
    with pytest.raises(ProtocolError, match="unknown sender 1"):
        decode(frame, known_senders={2, 3})
    with pytest.raises(ProtocolError, match="delivered to 5"):
        decode(frame, receiver=5)
    nan_table = WireTable(("a",), (1,), "<f8", np.array([np.nan]).tobytes())
    with pytest.raises(ProtocolError, match="NaN"):
        decode(encode(1, 2, Util((nan_table,), 0.0, ())))


def test_table_frames_must_fit_and_be_used_once() -> None:
    """A table travels as its own frame: a wrong size, a missing or a stray frame is refused."""
    good = encode(1, 2, Util((WireTable.from_array(("a",), np.zeros(3)),), 0.0, ()))
    assert len(good) == 2 and decode(good).body.tables[0].shape == (3,)  # type: ignore[union-attr]
    with pytest.raises(ProtocolError, match="bytes, shape and dtype need"):
        decode([good[0], b"\0" * 8])
    with pytest.raises(ProtocolError, match="missing"):
        decode([good[0]])
    with pytest.raises(ProtocolError, match="stray"):
        decode([good[0], good[1], b"extra"])


@settings(max_examples=300, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512))
def test_fuzz_random_bytes(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode(data)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=16),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=500, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(MESSAGES), st.data())
def test_fuzz_mutated_frames(message: object, data: st.DataObject) -> None:
    """Valid frames with one field replaced by arbitrary msgpack, or bytes flipped/cut: the
    decoder returns a message or raises ProtocolError, nothing else."""
    frames = encode(1, 2, message)  # type: ignore[arg-type]
    frame = bytearray(frames[0])
    how = data.draw(st.sampled_from(["flip", "cut", "field"]))
    if how == "flip" and frame:
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(frame) - 1))
            frame[i] = data.draw(st.integers(0, 255))
    elif how == "cut":
        frame = frame[: data.draw(st.integers(0, len(frame)))]
    else:
        raw = msgpack.unpackb(bytes(frame), raw=False)
        payload = raw["p"]
        target = raw if not payload or data.draw(st.booleans()) else payload
        key = data.draw(st.sampled_from(sorted(target)))
        target[key] = data.draw(_json)
        frame = bytearray(msgpack.packb(raw, use_bin_type=True))
    try:
        env = decode([bytes(frame), *frames[1:]])
    except ProtocolError:
        return
    assert env.body.TYPE in {m.TYPE for m in MESSAGES}


def test_peers_validation_names_the_agent() -> None:
    good = {
        "version": 1,
        "problem": "p",
        "coordinator": "tcp://127.0.0.1:5000",
        "agents": [
            {"id": 0, "variable": "a", "endpoint": "tcp://127.0.0.1:5001", "neighbours": [1]},
            {"id": 1, "variable": "b", "endpoint": "tcp://127.0.0.1:5002", "neighbours": [0]},
        ],
    }
    peers = parse_peers(good)
    assert peers.by_id()[1].variable == "b"
    bad = {**good, "agents": [good["agents"][0], {**good["agents"][1], "neighbours": []}]}  # type: ignore[dict-item]
    with pytest.raises(Exception, match="agent 0 lists 1 as neighbour but not the reverse"):
        parse_peers(bad)
    bad2 = {**good, "agents": [{**good["agents"][0], "endpoint": "http://x"}]}  # type: ignore[dict-item]
    with pytest.raises(Exception, match="agent 0: endpoint"):
        parse_peers(bad2)


def test_peer_timeout_grows_with_the_frame_limit() -> None:
    """Heartbeats queue behind a large frame: the silence allowed covers one largest frame."""
    from dcop.protocol import DEFAULT_MAX_MESSAGE_BYTES, PEER_TIMEOUT_S, peer_timeout_for

    assert peer_timeout_for(DEFAULT_MAX_MESSAGE_BYTES) == PEER_TIMEOUT_S
    assert RunSpec().peer_timeout == PEER_TIMEOUT_S
    assert RunSpec(max_message_bytes=4095 * 2**20).peer_timeout == peer_timeout_for(4095 * 2**20)
    big = peer_timeout_for(4095 * 2**20)
    assert big > 60 and big > peer_timeout_for(1024 * 2**20) > PEER_TIMEOUT_S


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**20, "trees": 1}, None),
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**20, "trees": 0}, "at least 1"),
        ({"algo": "adpop", "z": 0, "max_message_bytes": 2**20}, "mini-bucket size"),
        ({"algo": "adpop", "z": None, "max_message_bytes": 2**20}, "mini-bucket size"),
        ({"algo": "bogus", "z": None, "max_message_bytes": 2**20}, "'bogus'"),
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**40}, "message limit"),
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**20, "extra": 1}, "unknown field"),
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**20, "peer_timeout_s": -1}, "peer"),
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**20, "peer_timeout_s": "x"}, "peer"),
        ({"algo": "dpop", "z": None, "max_message_bytes": 2**20, "task": "map"}, "'map'"),
        ({"algo": "adpop", "z": 2, "max_message_bytes": 2**20, "task": "pr"}, "--algo dpop"),
    ],
)
def test_run_spec_on_the_wire_is_validated(spec: dict[str, object], reason: str | None) -> None:
    """A Start's run spec (in a setup) is checked as thoroughly as the spec made at the command
    line."""
    start = {"t": "start", "spec": spec, "roots": [0]}
    setup = {"t": "setup", "variable": "x1", "domain": 2, "tables": [], "digest": "0" * 64}
    frame = msgpack.packb(
        {"v": PROTOCOL_VERSION, "s": COORDINATOR_ID, "r": 1, "n": 5, "p": setup | {"start": start}},
        use_bin_type=True,
    )
    if reason is None:
        body = decode(frame).body
        assert isinstance(body, Setup) and body.start is not None
        assert body.start.spec == RunSpec("dpop", None, 2**20, trees=1)
    else:
        with pytest.raises(ProtocolError, match=reason):
            decode(frame)


def test_run_spec_round_trips_through_its_cli_args() -> None:
    """Deployments turn a spec into flags; the CLI edge turns the flags into the same spec."""
    for spec in (RunSpec(), RunSpec("adpop", 4, 2**30, 30.0)):
        args = spec.cli_args()
        values = dict(zip(args[::2], args[1::2], strict=True))
        again = RunSpec.from_options(
            values["--algo"],
            int(values["--z"]) if "--z" in values else None,
            float(values["--max-message-mib"]),
            float(values["--peer-timeout"]) if "--peer-timeout" in values else None,
        )
        assert again == spec
