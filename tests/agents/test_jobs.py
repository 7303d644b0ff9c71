"""A worker job wakes its agent's loop when it is done (the loop does not wait for its next poll)."""

from __future__ import annotations

import threading

import pytest

from dcop.agents.jobs import INLINE_MAX_ENTRIES, Worker, runs_inline
from dcop.protocol import InProcHub


def test_a_job_wakes_the_transport_it_was_given_when_done() -> None:
    hub = InProcHub()
    transport = hub.transport(0)
    release = threading.Event()
    job = Worker().submit(lambda: release.wait(60) and 42, wake=transport.wake)
    assert not job.done()
    release.set()
    assert transport.recv(120.0) is None  # the wake-up (a hang here: the job never woke it)
    assert job.done() and job.result() == 42


def test_in_process_wake_then_frames() -> None:
    hub = InProcHub()
    transport = hub.transport(0)
    transport.wake()
    assert transport.recv(120.0) is None
    hub.transport(1).send(0, [b"x"])
    assert transport.recv(1.0) == (1, [b"x"])


def test_a_failed_job_still_wakes() -> None:
    woken = threading.Event()

    def fail() -> int:
        raise ValueError("boom")

    job = Worker().submit(fail, wake=woken.set)
    assert woken.wait(60)
    assert job.done()


def test_a_worker_runs_every_job_on_its_one_thread_in_order() -> None:
    woken: list[int] = []
    worker = Worker("test-worker")
    release = threading.Event()
    first = worker.submit(
        lambda: (release.wait(60), threading.get_ident())[1], lambda: woken.append(1)
    )
    second = worker.submit(threading.get_ident, lambda: woken.append(2))
    assert not first.done() and not second.done()  # queued behind the first
    release.set()
    assert first.result() == second.result() != threading.get_ident()
    assert worker.call(lambda: 7) == 7
    assert worker.call(lambda: woken) == [1, 2]  # each job woke its waiter (this one runs after)


def test_a_failed_job_leaves_its_worker_serving() -> None:
    worker = Worker()

    def fail() -> int:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        worker.call(fail)
    assert worker.call(lambda: 5) == 5


def test_an_inline_job_runs_at_once_on_the_callers_thread() -> None:
    woken = threading.Event()
    job = Worker().submit(threading.get_ident, wake=woken.set, inline=True)
    assert job.done() and woken.is_set()
    assert job.result() == threading.get_ident()


def test_a_worker_starts_its_thread_with_its_first_job_that_does_not_run_inline() -> None:
    before = threading.active_count()
    worker = Worker("dcop-test-lazy")
    assert worker.submit(lambda: 1, inline=True).result() == 1
    assert threading.active_count() == before  # an agent whose buckets are all small has none
    assert worker.submit(threading.current_thread).result().name == "dcop-test-lazy"
    assert threading.active_count() == before + 1


def test_which_buckets_run_inline() -> None:
    assert runs_inline(INLINE_MAX_ENTRIES["cpu"], "cpu")
    assert not runs_inline(INLINE_MAX_ENTRIES["cpu"] + 1, "cpu")
    assert runs_inline(INLINE_MAX_ENTRIES["cpu"] + 1, "gpu")  # the device is faster per entry
    assert not runs_inline(INLINE_MAX_ENTRIES["gpu"] + 1, "gpu")
    assert not runs_inline(1, "elsewhere")
