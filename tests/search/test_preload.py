"""The compiled loops' preload: it runs the loops once on its thread, and leaves a search's
answer as it was."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dcop.generators import random_network
from dcop.search import solve_aobb
from dcop.search.jit import COMPILED

LOADED = """
from dcop.search import kernel, local, preload
preload.start()
preload.join()
print(len(local.local_search.signatures), len(kernel.search.signatures), preload.loaded_s > 0)
"""


@pytest.mark.skipif(not COMPILED, reason="numba is not installed: nothing to preload")
def test_preload_loads_the_walk_and_the_local_search_in_a_fresh_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", LOADED], capture_output=True, text=True, timeout=120, check=True
    )
    local_sigs, walk_sigs, timed = out.stdout.split()
    assert int(local_sigs) >= 1 and int(walk_sigs) >= 1 and timed == "True"


def test_a_search_beside_the_preload_gives_the_same_answer_as_after_it() -> None:
    problem = random_network(14, 4, 0.35, 0.1, seed=3)
    # one thread: the same path every run (threads may return another optimal assignment)
    first = solve_aobb(problem, ordering="minfill", seed=1, threads=1)  # starts the preload
    from dcop.search import preload

    preload.join()
    again = solve_aobb(problem, ordering="minfill", seed=1, threads=1)
    assert first.exact and again.exact
    assert first.cost == again.cost and first.assignment == again.assignment
