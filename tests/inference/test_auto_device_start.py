"""``auto`` on a device still starting: a problem the CPU ends sooner runs there at once, a larger
one waits for the device; both give BE's optimum."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dcop.backends import get_backend
from dcop.generators import random_network
from dcop.inference import anytime, solve
from dcop.starting import StartingBackend


@pytest.fixture
def held_start(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Every StartingBackend waits for the returned event, then starts as NumPy."""
    gate = threading.Event()

    def start(self: StartingBackend) -> None:
        gate.wait(30)
        self._future.set_result(get_backend("numpy"))

    monkeypatch.setattr(StartingBackend, "_start", start)
    return gate


def test_a_small_problem_runs_on_the_cpu_while_the_device_starts(
    held_start: threading.Event,
) -> None:
    problem = random_network(12, 4, 0.3, 0.0, seed=1)
    starting = StartingBackend("cupy")
    result = anytime.solve_auto(problem, backend=starting, timeout=30)
    assert not starting.ready  # nobody waited for it
    assert result.exact and result.backend == "numpy"
    assert result.choice is not None and result.choice.startswith("BE on the CPU")
    assert result.upper_bound == pytest.approx(solve(problem, "be").upper_bound)
    held_start.set()


@pytest.mark.parametrize("begun", [True, False], ids=["started", "deferred"])
def test_a_problem_too_large_for_the_cpu_waits_for_the_device(
    held_start: threading.Event, monkeypatch: pytest.MonkeyPatch, begun: bool
) -> None:
    # a start begun waits for its thread; a deferred one begins once the CPU is not sooner
    monkeypatch.setattr(anytime, "CPU_BEFORE_DEVICE_S", 0.0)  # the CPU is never sooner
    problem = random_network(12, 4, 0.3, 0.0, seed=1)
    starting = StartingBackend("cupy", begin=begun)
    threading.Timer(0.2, held_start.set).start()
    result = anytime.solve_auto(problem, backend=starting, timeout=30)
    assert starting.begun and starting.ready
    assert result.exact and not (result.choice or "").startswith("BE on the CPU")
    assert result.upper_bound == pytest.approx(solve(problem, "be").upper_bound)


def test_a_device_named_starts_on_a_thread(held_start: threading.Event) -> None:
    # (the start is held: no real device starts beside the other tests of this worker)
    started = anytime.device_start("cupy")
    assert isinstance(started, StartingBackend) and started.begun and not started.ready
    deferred = anytime.device_start("cupy", begin=False)
    assert isinstance(deferred, StartingBackend) and not deferred.begun
    held_start.set()
    assert deferred.result().name == "numpy" and deferred.begun
    assert started.result().name == "numpy"
    backend: Any = get_backend("numpy")
    assert anytime.device_start(backend) is backend
    assert anytime.device_start("numpy") == "numpy"


def test_a_small_problem_never_begins_a_deferred_start(held_start: threading.Event) -> None:
    problem = random_network(12, 4, 0.3, 0.0, seed=1)
    deferred = StartingBackend("cupy", begin=False)
    result = anytime.solve_auto(problem, backend=deferred, timeout=30)
    assert not deferred.begun  # the CPU ended it: the device's start never ran
    assert result.exact and result.backend == "numpy"
    assert result.upper_bound == pytest.approx(solve(problem, "be").upper_bound)
    held_start.set()


def test_a_search_loads_its_loops_while_the_device_starts(
    held_start: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BE does not fit: the search's compiled loops begin loading before the device is taken
    from dcop.search import preload

    problem = random_network(22, 10, 0.3, 0.0, seed=1)  # BE: a table of 1e11 entries
    starting = StartingBackend("cupy", begin=False)
    seen: list[bool] = []
    real = preload.start
    monkeypatch.setattr(preload, "start", lambda: (seen.append(starting.ready), real())[1])
    threading.Timer(0.2, held_start.set).start()
    result = anytime.solve_auto(problem, backend=starting, timeout=3)
    assert seen and seen[0] is False  # the first call came before the device was ready
    assert result.algo == "aobb" and starting.ready
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
