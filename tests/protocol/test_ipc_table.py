"""The UTIL message with tables handed over by CUDA IPC: round trip and refusals (no GPU needed)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from dcop.errors import ProtocolError
from dcop.protocol import (
    COORDINATOR_ID,
    PROTOCOL_VERSION,
    Hello,
    IpcTable,
    Neighbour,
    Setup,
    Util,
    WireTable,
    decode,
    encode,
)
from dcop.protocol.messages import IPC_HANDLE_BYTES

HANDLE = bytes(range(IPC_HANDLE_BYTES))


def _util_frames(shared: list[dict[str, object]], version: int = PROTOCOL_VERSION) -> list[bytes]:
    header = {
        "v": version,
        "s": 1,
        "r": 0,
        "n": 7,
        "p": {"t": "util", "tables": [], "clock": 0.5, "shared": shared},
    }
    return [msgpack.packb(header, use_bin_type=True)]


def _shared(**changes: object) -> dict[str, object]:
    table: dict[str, object] = {
        "scope": ["a", "b"],
        "shape": [3, 4],
        "dtype": "<f4",
        "handle": HANDLE,
        "offset": 0,
    }
    table.update(changes)
    return table


def test_util_with_framed_and_shared_tables_round_trips() -> None:
    framed = WireTable.from_array(("a",), np.arange(3.0))
    scalar = WireTable.from_array((), 2.5)
    shared = IpcTable(("a", "b"), (3, 4), "<f4", HANDLE)
    frames = encode(1, 0, Util((framed, scalar), 0.25, (shared,)), problem=7)
    assert len(frames) == 3  # the header and the two framed tables: a shared one needs no frame
    env = decode([bytes(f) for f in frames])
    body = env.body
    assert isinstance(body, Util) and env.problem == 7
    (got,) = body.shared
    assert (got.scope, got.shape, got.dtype, got.handle) == (("a", "b"), (3, 4), "<f4", HANDLE)
    assert got.nbytes == 12 * 4
    assert body.entries == 3 + 12  # the scalar is no entry; the shared table's are
    np.testing.assert_array_equal(body.tables[0].to_array(), np.arange(3.0))


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"handle": HANDLE[:-1]}, "handle"),
        ({"handle": "x" * IPC_HANDLE_BYTES}, "handle"),
        ({"scope": [], "shape": []}, "needs a scope"),
        ({"shape": [3]}, "axes"),
        ({"shape": [3, 0]}, r"shape\[1\]"),
        ({"dtype": "<f2"}, "dtype"),
        ({"scope": ["a", "a"]}, "repeats"),
    ],
)
def test_bad_shared_tables_are_refused(changes: dict[str, object], says: str) -> None:
    with pytest.raises(ProtocolError, match=says):
        decode(_util_frames([_shared(**changes)]))


def test_a_util_without_the_shared_field_or_of_an_older_version_is_refused() -> None:
    header = msgpack.unpackb(_util_frames([])[0])
    del header["p"]["shared"]
    with pytest.raises(ProtocolError, match="shared"):
        decode([msgpack.packb(header, use_bin_type=True)])
    with pytest.raises(ProtocolError, match="wrong protocol version 3"):
        decode(_util_frames([_shared()], version=3))


def test_hello_and_setup_carry_the_ipc_domain() -> None:
    hello = decode(encode(4, COORDINATOR_ID, Hello("x", 12, ipc="cuda/boot/ns/gpu"))).body
    assert isinstance(hello, Hello) and hello.ipc == "cuda/boot/ns/gpu"
    setup = Setup("x", 2, (), "0" * 64, (Neighbour(5, "y", "tcp://h:1", "cuda/d"),))
    got = decode(encode(COORDINATOR_ID, 4, setup)).body
    assert isinstance(got, Setup) and got.neighbours[0].ipc == "cuda/d"
    # a neighbour of the old three-field form is refused, not read as "no domain"
    header = msgpack.unpackb(bytes(encode(COORDINATOR_ID, 4, setup)[0]))
    header["p"]["neighbours"][0] = header["p"]["neighbours"][0][:3]
    with pytest.raises(ProtocolError, match=r"length 4, got 3 - at `\$\.p\.neighbours\[0\]`"):
        decode([msgpack.packb(header, use_bin_type=True)])


def test_offer_and_offsets_round_trip_and_bad_ones_are_refused() -> None:
    from dcop.protocol import Offer

    got = decode(encode(3, 1, Offer(HANDLE, 4096, 0.125))).body
    assert isinstance(got, Offer) and (got.handle, got.nbytes, got.clock) == (HANDLE, 4096, 0.125)
    shared = IpcTable(("a",), (8,), "<f8", HANDLE, offset=256)
    body = decode(encode(1, 0, Util((), 0.0, (shared,)))).body
    assert isinstance(body, Util) and body.shared[0].offset == 256
    with pytest.raises(ProtocolError, match="offset"):
        decode(_util_frames([_shared(offset=-1)]))
    for bad in ({"nbytes": 0}, {"handle": b"short"}):
        header = msgpack.unpackb(bytes(encode(3, 1, Offer(HANDLE, 4096, 0.0))[0]))
        header["p"].update(bad)
        with pytest.raises(ProtocolError):
            decode([msgpack.packb(header, use_bin_type=True)])
