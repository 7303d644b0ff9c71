"""Endpoints and ports, rate-limited refusal lines, and the peers.json checks that go with them."""

from __future__ import annotations

import logging

import pytest

from dcop.errors import InputError
from dcop.protocol.constants import DEFAULT_AGENT_BASE_PORT, DEFAULT_COORDINATOR_PORT
from dcop.protocol.curve import CurveConfig
from dcop.protocol.endpoints import (
    bind_endpoint,
    endpoint_port,
    ephemeral_range,
    in_ephemeral_range,
    require_outside_ephemeral,
    same_endpoint,
    split_endpoint,
    with_port,
)
from dcop.protocol.peers import ephemeral_endpoints, parse_peers
from dcop.protocol.ratelog import RateLimitedLog


def test_default_ports_lie_below_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    assert 1024 <= low <= high <= 65535
    for port in (DEFAULT_COORDINATOR_PORT, DEFAULT_AGENT_BASE_PORT, DEFAULT_AGENT_BASE_PORT + 999):
        assert not in_ephemeral_range(port)
    assert in_ephemeral_range(low) and in_ephemeral_range(high)
    require_outside_ephemeral(DEFAULT_COORDINATOR_PORT, "port")
    with pytest.raises(InputError, match="ephemeral port range"):
        require_outside_ephemeral(low, "base port")


def test_endpoint_parsing() -> None:
    assert split_endpoint("tcp://[::1]:7000") == ("::1", "7000")
    assert split_endpoint("tcp://10.0.0.1:7000;10.0.0.2:7001") == ("10.0.0.2", "7001")
    assert split_endpoint("ipc:///tmp/x") is None
    assert endpoint_port("tcp://h:*") is None and endpoint_port("tcp://h:7001") == 7001
    assert bind_endpoint("tcp://agent3:7001") == "tcp://*:7001"
    assert bind_endpoint("tcp://10.1.2.3:*") == "tcp://10.1.2.3:*"
    assert with_port("tcp://agent3:*", "tcp://0.0.0.0:41234") == "tcp://agent3:41234"
    assert with_port("tcp://[::1]:*", "tcp://[::1]:5000") == "tcp://[::1]:5000"


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("tcp://127.0.0.1:7001", "tcp://127.0.0.1:7001", True),
        ("tcp://127.0.0.1:7001", "tcp://localhost:7001", True),
        ("tcp://*:7001", "tcp://127.0.0.1:7001", True),
        ("tcp://127.0.0.1:7001", "tcp://127.0.0.1:7002", False),
        ("tcp://10.0.0.1:7001", "tcp://10.0.0.2:7001", False),
        ("tcp://127.0.0.1:*", "tcp://127.0.0.1:7001", False),
    ],
)
def test_same_endpoint(a: str, b: str, same: bool) -> None:
    assert same_endpoint(a, b) is same and same_endpoint(b, a) is same


def test_refusal_lines_are_rate_limited_per_key_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    out = RateLimitedLog(logging.getLogger("dcop.test"), interval_s=5.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="dcop.test"):
        assert out.warning(("10.0.0.1", "stranger"), "refused %s", "a")
        assert not any(out.warning(("10.0.0.1", "stranger"), "refused %s", "b") for _ in range(7))
        assert out.warning(("10.0.0.2", "stranger"), "refused %s", "c")  # another peer
        now[0] = 6.0
        assert out.warning(("10.0.0.1", "stranger"), "refused %s", "d")
    assert [r.getMessage() for r in caplog.records] == [
        "refused a",
        "refused c",
        "refused d (and 7 more like it in the last 6 s)",
    ]


def test_the_log_keeps_a_bounded_number_of_keys() -> None:
    out = RateLimitedLog(logging.getLogger("dcop.test"), max_keys=4)
    for k in range(100):
        out.warning(k, "x")
    assert len(out._seen) == 4


def _peers(coord_port: int, keys: tuple[str | None, str | None] = (None, None)) -> dict:
    return {
        "version": 1,
        "coordinator": f"tcp://127.0.0.1:{coord_port}",
        **({"coordinator_public_key": "C" * 40} if keys[0] else {}),
        "agents": [
            {"id": 0, "variable": "x0", "endpoint": "tcp://127.0.0.1:7001", "neighbours": [1]}
            | ({"public_key": keys[0]} if keys[0] else {}),
            {"id": 1, "variable": "x1", "endpoint": "tcp://127.0.0.1:7002", "neighbours": [0]}
            | ({"public_key": keys[1]} if keys[1] else {}),
        ],
    }


def test_peers_ephemeral_endpoints_and_shared_keys() -> None:
    low, _ = ephemeral_range()
    assert ephemeral_endpoints(parse_peers(_peers(7000))) == []
    assert ephemeral_endpoints(parse_peers(_peers(low))) == [
        ("coordinator", f"tcp://127.0.0.1:{low}")
    ]
    parse_peers(_peers(7000, ("A" * 40, "B" * 40)))
    with pytest.raises(InputError, match="share a public key"):
        parse_peers(_peers(7000, ("A" * 40, "A" * 40)))
    with pytest.raises(InputError, match="share a CURVE public key"):
        CurveConfig(b"p", b"s", {}, {0: b"K" * 40, 1: b"K" * 40})
