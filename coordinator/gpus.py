"""Which GPU each agent of a local run uses, when ``--gpu`` names several.

``round-robin`` gives agent ``k`` device ``k mod count``; ``split`` too, and every agent whose
planned bucket is large enough to be split splits it over all the devices
(:func:`agent_gpu_values`: ``D/LIST``; such an agent makes every device's context at its
warm-up, before the solve). ``balanced``
needs the pseudo-tree before any agent starts (an agent's CUDA context is made at its start):
the run's plan builds the candidate trees in process with the agents' own DFS code
(:meth:`dcop.coordinator.plan.RunPlan.candidates`, each once for the whole run; up to 8
candidates: 0.05 s at n = 20, 0.4 s at n = 100, 2.5 s at n = 300 on a shared 2-core VM), keeps
the one the run will keep, and places whole
subtrees by their GPU work (:func:`dcop.placement.balanced_devices`). Should the run keep
another tree (it chooses among the same candidates by the same rule, so only a changed spec
would), answers are the same: only the spread differs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dcop.placement import (
    balanced_devices,
    check_placement,
    device_for_agent,
    gpu_devices,
    gpu_min_entries,
    place,
)
from dcop.trees.dfs import choose_candidate, tree_separators

if TYPE_CHECKING:
    from dcop.coordinator.plan import RunPlan  # the plan asks this module for its devices


def agent_devices(
    plan: RunPlan,
    gpu: int | str,
    placement: str = "round-robin",
    count: int | None = None,
) -> dict[int, int]:
    """Each agent's CUDA device (agent ids: ``plan``'s layout). ``gpu`` is a
    ``--gpu`` value (``0``, ``0,1``, ``all``); ``count`` the devices visible here (found with
    CuPy when ``all`` needs it)."""
    check_placement(placement)
    text = str(gpu)
    if text.strip() == "all" and count is None:
        from dcop.backends import gpu_count

        count = gpu_count()
    devices = gpu_devices(text, count)
    if placement in ("round-robin", "split") or len(devices) == 1:
        return {k: device_for_agent(k, devices) for k in sorted(plan.layout.variable)}
    parent, work = _planned_tree(plan)
    return balanced_devices(parent, work, devices)


def agent_gpu_values(
    plan: RunPlan,
    gpu: int | str,
    placement: str = "round-robin",
    count: int | None = None,
    split_min_entries: int | None = None,
) -> dict[int, str]:
    """Each agent's ``--gpu`` value: its device (:func:`agent_devices`), and with ``split``
    ``D/LIST`` for an agent whose bucket (in the planned pseudo-tree) runs on a GPU and has at
    least ``split_min_entries`` joined entries (default: the split backend's threshold): the
    devices that bucket is split over."""
    devices = agent_devices(plan, gpu, placement, count)
    if placement != "split" or len(set(devices.values())) < 2:
        return {k: str(d) for k, d in devices.items()}
    every = ",".join(str(d) for d in sorted(set(devices.values())))
    _, work = _planned_tree(plan)
    threshold = split_min_entries if split_min_entries is not None else _split_threshold()
    # only an agent whose bucket will be split gets the list: it makes the other devices'
    # contexts at its warm-up, before the solve, and the others never make them
    return {
        k: f"{d}/{every}" if work.get(k, 0.0) >= max(threshold, 1) else str(d)
        for k, d in devices.items()
    }


def _split_threshold() -> int:
    from dcop.gpu.multi import DEFAULT_SPLIT_MIN_ENTRIES

    return DEFAULT_SPLIT_MIN_ENTRIES


def _planned_tree(plan: RunPlan) -> tuple[dict[int, int | None], dict[int, float]]:
    """The pseudo-tree the agents will build and keep, and each agent's GPU work (joined
    entries of its DPOP bucket where that runs on a GPU, else 0)."""
    runs = plan.candidates(plan.tree_count)
    run = runs[choose_candidate([r.summary for r in runs])]
    parent = run.parents()
    separators = tree_separators(parent, run.pseudo_parents())
    sizes = plan.problem.domain_sizes()
    domains = {a: sizes[v] for a, v in plan.layout.variable.items()}
    threshold = gpu_min_entries(plan.asked.gpu_min_entries)  # the agents' threshold
    work: dict[int, float] = {}
    for agent, separator in separators.items():
        joined = domains[agent] * math.prod(domains[u] for u in separator)
        work[agent] = float(joined) if place(joined, threshold) == "gpu" else 0.0
    return parent, work
