"""The search's mini-bucket size: the largest z whose pass fits the memory and the time.

Planning only (scopes, sizes, the backend's speed): ``dcop info`` and ``--algo auto`` ask it
without loading the search's compiled loops.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dcop.backends.base import TableBackend
from dcop.model import Problem
from dcop.orders.cost import GPU_SPEEDUP, SECONDS_PER_ENTRY
from dcop.orders.greedy import induced_width
from dcop.plan.bucket_plan import MemoryPlan, plan_for

#: Share of the memory left that the heuristic's tables may take (the cache gets what is left
#: of the search's share, ``dcop.search.solver.CACHE_SHARE``).
HEURISTIC_SHARE = 0.4

#: Bytes per second of the heuristic's tables read into the search's arrays on the host: a GPU's
#: pass of many GB is over in a fraction of the time its tables take to come across. On NumPy,
#: a copy into fresh pages (the 2-core host's page faults are slow).
HOST_BYTES_PER_S = 1e9
#: The same from a device, copied straight into pages touched beforehand by every core
#: (:mod:`dcop.host_arrays`): 6.9-8.7 GB/s on the H200 host for z = 9 passes of 9.4-18.9 GB
#: (2-2.7 GB/s through a page-locked buffer per table into untouched pages).
DEVICE_TO_HOST_BYTES_PER_S = 5e9

#: The largest pass's predicted seconds without a deadline.
PASS_SECONDS_NO_DEADLINE = 10.0


#: The search's mini-bucket pass on NumPy, seconds per joined entry: the fused kernels of a pass
#: whose buckets join 1e7-1e8 entries each (moment matching included) ran at 3-4e-9 on a core of
#: the 2-core CPU host (the paper's random networks, z = 7-8: 1e9 entries in 3.2-3.9 s, load 1-3);
#: ``SECONDS_PER_ENTRY`` (1e-8), BE's, predicted a z = 8 pass at 10 s and left it out of a 20 s
#: run whose search it cut from 9 s to 1.5 s.
PASS_SECONDS_PER_ENTRY_CPU = 4e-9


def seconds_per_entry(backend: TableBackend) -> float:
    """BE's predicted seconds per joined entry on ``backend``."""
    return SECONDS_PER_ENTRY if backend.name == "numpy" else SECONDS_PER_ENTRY / GPU_SPEEDUP


def pass_seconds_per_entry(backend: TableBackend) -> float:
    """The search's mini-bucket pass's predicted seconds per joined entry on ``backend``."""
    return PASS_SECONDS_PER_ENTRY_CPU if backend.name == "numpy" else seconds_per_entry(backend)


def rung_seconds(plan: MemoryPlan, backend: TableBackend) -> float:
    """A rung's predicted seconds before its search: the pass, and reading its messages into the
    search's flat arrays on the host (which dominates on a GPU, whose pass is fast)."""
    rate = HOST_BYTES_PER_S if backend.name == "numpy" else DEVICE_TO_HOST_BYTES_PER_S
    return plan.total_work * pass_seconds_per_entry(backend) + plan.message_bytes / rate


@dataclass
class PassClock:
    """The predicted seconds of the ladder's next pass, learned from the passes already run.

    A pass takes a fixed part (Python calls per bucket, compiling the search's arrays) and a part
    in proportion to its model (:func:`rung_seconds`). Before any pass the model is taken as it
    is. After one, the fixed part is what the model did not predict, the rest at the model's own
    rate; from two on, both parts are fitted to the last two passes (the rate then follows the
    machine, its load included). A prediction is never below the model: a late pass is cut at
    the deadline, but its time is lost, so it errs long. The ladder used to scale the last pass in proportion to
    the model, so that a small rung's fixed cost was multiplied by the work ratio: on
    CELAR6-SUB0, z = 4 was predicted at 1.35 s after z = 3's 0.06 s pass and ran in 0.36 s, and
    a rung that had time to run was skipped (round 4's "anytime that uses its time").
    """

    #: (model seconds, measured seconds) of every pass run, in order.
    seen: list[tuple[float, float]] = field(default_factory=list)

    def observe(self, model_s: float, measured_s: float) -> None:
        """A pass predicted at ``model_s`` by the model took ``measured_s``."""
        self.seen.append((max(0.0, model_s), max(0.0, measured_s)))

    def predict(self, model_s: float) -> float:
        """The predicted seconds of a pass the model puts at ``model_s``."""
        return max(model_s, self._learned(model_s))

    def _learned(self, model_s: float) -> float:
        if not self.seen:
            return model_s
        m1, t1 = self.seen[-1]
        if len(self.seen) >= 2:
            m0, t0 = self.seen[-2]
            if m1 > m0:
                rate = (t1 - t0) / (m1 - m0)
                if rate > 0:
                    return max(0.0, t1 - rate * m1) + rate * model_s
                # a larger pass ran faster than a smaller one (noise): in proportion, which errs
                # long
                return t1 * model_s / max(m1, 1e-12)
        return max(0.0, t1 - m1) + model_s


def choose_ibound(
    problem: Problem,
    order: list[str],
    backend: TableBackend,
    limit_bytes: float,
    seconds: float,
    resident: int | None = None,
    check: Callable[[], None] | None = None,
    plans: dict[int, MemoryPlan] | None = None,
) -> tuple[int, MemoryPlan, str]:
    """The largest mini-bucket size ``z`` whose pass fits ``limit_bytes`` * HEURISTIC_SHARE and
    whose work is predicted within ``seconds`` on ``backend``; z = induced width + 1 is exact.
    Returns z, its plan and why. ``check`` is called before each plan (it may raise to stop the
    planning: a plan of a 6400-variable grid takes a fifth of a second); ``plans`` keeps the
    plans made, by z (the ladder reads them)."""
    width = induced_width(problem.neighbours(), order)
    known = {} if plans is None else plans

    def plan(z: int) -> MemoryPlan:
        if z not in known:
            if check is not None:
                check()
            known[z] = plan_for(problem, order, z, np.float64, backend, resident=resident)
        return known[z]

    def fits(p: MemoryPlan) -> bool:
        room = HEURISTIC_SHARE * max(0.0, limit_bytes - p.resident_bytes)
        return p.fits(p.resident_bytes + room) and rung_seconds(p, backend) <= seconds

    top = max(1, width + 1)
    best = plan(top)
    if fits(best):
        return top, best, f"z = {top} is exact (induced width {width})"
    # no z past the one whose single table of z variables at the smallest domain would exceed
    # the memory or the time on its own: the search for z starts no higher (a 6400-variable
    # grid's width is 80; its z is below 30, and each plan costs a fifth of a second)
    room = HEURISTIC_SHARE * max(0.0, limit_bytes - best.resident_bytes) / 8
    entries = max(2.0, min(room, seconds / pass_seconds_per_entry(backend)))
    smallest = max(2, min(problem.domain_sizes().values(), default=2))
    lo, hi = 1, min(top, 2 + int(math.log(entries) / math.log(smallest)))
    lo_plan = plan(1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = plan(mid)
        if fits(p):
            lo, lo_plan = mid, p
        else:
            hi = mid
    reason = (
        f"z = {lo}: the largest whose tables fit {HEURISTIC_SHARE:.0%} of the memory left and "
        f"whose pass is predicted within {seconds:.3g} s (induced width {width})"
    )
    return lo, lo_plan, reason
