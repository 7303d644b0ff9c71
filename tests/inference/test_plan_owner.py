"""One owner for the memory plan (issue 31, step 3): solve, PR/MAR, batch's auto and info plan
through :func:`dcop.plan.bucket_plan.plan_for`, and nothing else calls ``plan_memory``."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from dcop.cli.batch import choose_auto
from dcop.cli.solve import describe
from dcop.generators import random_network, spin_glass
from dcop.orders.greedy import elimination_order
from dcop.plan.bucket_plan import plan_for

ROOT = Path(__file__).resolve().parents[2]


def test_only_plan_for_calls_plan_memory() -> None:
    callers = []
    for path in [*ROOT.glob("dcop/**/*.py"), *ROOT.glob("coordinator/*.py")]:
        text = path.read_text()
        if re.search(r"\bplan_memory\(", text) and path.name not in ("memory.py", "bucket_plan.py"):
            callers.append(str(path.relative_to(ROOT)))
    # the bucket pass re-plans only when called without the caller's plan (tests, the library)
    assert callers == ["dcop/bucketpass.py"], callers


def test_info_and_auto_promise_what_the_solve_checks() -> None:
    problem = random_network(12, 4, 0.4, 0.1, seed=3)
    order = elimination_order("minfill", problem.neighbours())
    resident = 100 << 20
    plan = plan_for(problem, order, resident=resident)
    info = describe(problem)
    # info measures its own resident memory: compare the tables' part
    assert info["memory_bytes_minfill"] - info["memory_resident"] == plan.peak_bytes - resident
    assert choose_auto(problem, plan.peak_bytes, resident=resident) == ("be", None)
    assert plan.lean is not None  # BE's argbest decoding: larger here (d = 4, float32 tables)
    least = min(plan.peak_bytes, plan.lean.peak_bytes)
    assert choose_auto(problem, least - 1, resident=resident)[0] == "mbe"
    assert info["memory_bytes_argbest_auto"] - info["memory_resident"] > 0


def test_auto_is_be_where_only_its_argbest_decoding_fits() -> None:
    problem = spin_glass(9, seed=2)  # binary: a bit of argbest per entry
    order = elimination_order("minfill", problem.neighbours())
    plan = plan_for(problem, order, resident=0)
    assert plan.lean is not None and plan.lean.peak_bytes < plan.peak_bytes
    assert choose_auto(problem, plan.peak_bytes - 1, resident=0, ordering="minfill")[0] == "be"
    assert choose_auto(problem, plan.lean.peak_bytes, resident=0, ordering="minfill")[0] == "be"
    below = choose_auto(problem, plan.lean.peak_bytes - 1, resident=0, ordering="minfill")
    assert below[0] == "mbe"


def test_summing_tasks_plan_their_linear_copies() -> None:
    # tables above the NumPy backend's copy threshold: min-sum reads them in place
    problem = random_network(5, 600, 0.5, 0.0, seed=1)
    order = elimination_order("minfill", problem.neighbours())
    kw = {"resident": 0, "dtype": np.float64}
    assert (
        plan_for(problem, order, task="pr", **kw).peak_bytes
        > plan_for(problem, order, **kw).peak_bytes
    )
