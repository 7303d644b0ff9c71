"""The set-up rehearsal of an agent's solving path: it runs the real functions and leaves no
trace in the figures an agent reports."""

from __future__ import annotations

from typing import Any

import numpy as np

from dcop.agents.rehearsal import rehearse, rehearse_unless_inherited
from dcop.backends.numpy import NumpyBackend
from dcop.backends.placed import PlacedBackend
from dcop.tables import Table


class CountingBackend(NumpyBackend):
    """NumPy, counting the calls the rehearsal makes."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1

    def join_eliminate(self, *args: Any, **kwargs: Any) -> Table:
        self._count("join_eliminate")
        return super().join_eliminate(*args, **kwargs)

    def best_value(self, *args: Any, **kwargs: Any) -> tuple[int, float]:
        self._count("best_value")
        return super().best_value(*args, **kwargs)

    def table(self, *args: Any, **kwargs: Any) -> Table:
        self._count("table")
        return super().table(*args, **kwargs)


def test_rehearsal_runs_the_util_and_value_path() -> None:
    backend = CountingBackend()
    assert rehearse(backend) > 0.0
    # one bucket eliminated, its UTIL taken from the decoded message, one value chosen
    assert backend.calls == {"join_eliminate": 1, "table": 1, "best_value": 1}


def test_rehearsal_leaves_a_placed_backend_without_placements() -> None:
    class NoDevice:  # any other device call would fail: the tiny bucket stays on the host
        out_of_memory_errors = ()  # the table surface's one attribute a placed backend reads

        def offer_ipc(self, nbytes: int) -> None:
            return None  # as a GPU answers for 0 bytes

    backend = PlacedBackend(NumpyBackend(), NoDevice(), 1 << 20)
    rehearse(backend)
    assert backend.placements == []
    assert backend.placement_metrics()["buckets_cpu"] == 0
    # and the backend still places and counts the real buckets after it
    a = Table(("a", "b"), np.arange(4, dtype=np.float32).reshape(2, 2))
    assert backend.join_eliminate([a], "a").data.tolist() == [0.0, 1.0]
    assert backend.placement_metrics()["buckets_cpu"] == 1


def test_a_process_that_rehearsed_numpy_skips_a_second_rehearsal() -> None:
    """A forked agent inherits its template's rehearsal of NumPy's path (rehearsal's
    docstring): its own would only copy pages. Any other backend is still rehearsed."""
    rehearse(NumpyBackend())  # what the template does before it forks
    assert rehearse_unless_inherited(NumpyBackend()) == 0.0
    other = CountingBackend()  # a backend with state of its own (a GPU's, here a subclass)
    assert rehearse_unless_inherited(other) > 0.0
    assert other.calls == {"join_eliminate": 1, "table": 1, "best_value": 1}
