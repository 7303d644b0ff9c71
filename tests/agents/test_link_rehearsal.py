"""A template rehearses its agents' links once: sockets made, used and all closed again."""

from __future__ import annotations

import os
import threading

import pytest

from dcop.agents import link_rehearsal
from dcop.errors import RunError


def _tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def test_the_rehearsal_goes_through_and_leaves_no_thread_or_descriptor() -> None:
    link_rehearsal.rehearse_links()  # a first time: whatever libraries open for good
    tasks, threads, fds = _tasks(), threading.active_count(), len(os.listdir("/proc/self/fd"))
    assert link_rehearsal.rehearse_links()
    # ZeroMQ's I/O and reaper threads (not Python's) are gone too: a template forks next
    assert (_tasks(), threading.active_count()) == (tasks, threads)
    assert len(os.listdir("/proc/self/fd")) == fds


def test_a_loopback_that_refuses_it_leaves_the_agents_to_warm_up_themselves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise RunError("coordinator: cannot bind tcp://127.0.0.1:*: permission denied")

    monkeypatch.setattr(link_rehearsal, "ZmqCoordinatorTransport", refuse)
    assert not link_rehearsal.rehearse_links()


def test_a_frame_that_never_comes_ends_the_rehearsal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_rehearsal, "WAIT_S", 0.05)
    monkeypatch.setattr(link_rehearsal.ZmqAgentTransport, "send", lambda *_a: None)
    tasks = _tasks()
    assert not link_rehearsal.rehearse_links()
    assert _tasks() == tasks
