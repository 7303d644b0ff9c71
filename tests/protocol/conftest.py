"""Fixtures of the protocol tests: a ZeroMQ context and transports closed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import zmq


@pytest.fixture
def ctx() -> Iterator[zmq.Context[Any]]:
    c: zmq.Context[Any] = zmq.Context()
    yield c
    c.destroy(linger=0)


def _closing(linger_ms: int | None) -> Iterator[Callable[[Any], Any]]:
    opened: list[Any] = []

    def keep(t: Any) -> Any:
        opened.append(t)
        return t

    yield keep
    for t in opened:
        t.close() if linger_ms is None else t.close(linger_ms)


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """Register transports to close after the test (with their default linger)."""
    yield from _closing(None)


@pytest.fixture
def closing_now() -> Iterator[Callable[[Any], Any]]:
    """Register transports to close after the test, dropping what is still queued."""
    yield from _closing(0)
