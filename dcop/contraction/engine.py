"""Exact PR and MAR by contracting the factor tables pairwise along a contraction tree.

:func:`plan_contraction` picks the tree (the cheapest in predicted flops among the trees of the
candidate elimination orders and opt_einsum's optimizers, within a time budget, the path search
timed apart) and slices it (cotengra) until its planned peak fits the device's room
(:func:`dcop.contraction.memory.contraction_room`). :func:`contract` runs it in scaled linear space
and, where that cannot hold the range, in log space along the same tree; the outcome says which.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.contraction.barren import barren_tables
from dcop.contraction.execute import LogSpace, Node, Scaled, TreeRun, run_sliced
from dcop.contraction.memory import contraction_room
from dcop.contraction.tree import Path, TreeStats, analyse, optimizer_path, order_path, slice_vars
from dcop.errors import TableTooLarge
from dcop.inference.memory import Limit, human_bytes
from dcop.model import Problem
from dcop.ordering import elimination_order

#: Spaces a run may ask for: ``auto`` is scaled linear, log space where that underflows.
SPACES: tuple[str, ...] = ("auto", "scaled", "log")
#: Predicted flops from which opt_einsum's random-greedy search gets the time budget.
SEARCH_FLOPS = 2e8
#: Default path-search budget in seconds (random-greedy only; the other sources are quick).
DEFAULT_BUDGET_S = 1.0
#: At most this many slices: a plan that needs more is refused.
MAX_SLICES = 1 << 16

OrderSource = Callable[[Mapping[str, set[str]], Sequence[str]], dict[str, list[str]]]


def default_orders(adjacency: Mapping[str, set[str]], names: Sequence[str]) -> dict[str, list[str]]:
    """The candidate elimination orders: min-fill, min-degree, the file's order both ways.
    (The ordering engine's best order plugs in here.)"""
    graph = {v: set(n) for v, n in adjacency.items()}
    return {
        "minfill": elimination_order("minfill", graph),
        "mindegree": elimination_order("mindegree", graph),
        "natural": list(names),
        "reverse-natural": list(names)[::-1],
    }


@dataclass
class ContractionPlan:
    """The chosen tree: its source, SSA path, sliced variables and costs (one slice's), the time
    its search took, and what every candidate would have cost."""

    source: str
    path: Path
    sliced: tuple[str, ...]
    stats: TreeStats
    slices: int
    itemsize: int
    search_s: float
    limit: Limit
    candidates: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def width(self) -> int:
        """Variables of the largest node (the induced width of an order's tree)."""
        return max((len(n) for n in self.stats.nodes), default=0)

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "flops": self.stats.flops * self.slices,
            "largest_intermediate": self.stats.largest,
            "peak_bytes_pr": self.stats.peak_pr * self.itemsize,
            "peak_bytes_mar": self.stats.peak_mar * self.itemsize,
            "sliced": list(self.sliced),
            "slices": self.slices,
            "search_s": self.search_s,
        }


def _sliced_scopes(
    scopes: Sequence[tuple[str, ...]], sliced: Sequence[str]
) -> list[tuple[str, ...]]:
    cut = set(sliced)
    return [tuple(v for v in s if v not in cut) for s in scopes]


def plan_contraction(
    scopes: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
    adjacency: Mapping[str, set[str]],
    names: Sequence[str],
    task: str,
    limit: Limit,
    itemsize: int = 8,
    ordering: str = "auto",
    budget_s: float = DEFAULT_BUDGET_S,
    orders: OrderSource = default_orders,
) -> ContractionPlan:
    """The tree to contract ``scopes`` along (see the module docstring); raises TableTooLarge when
    no slicing of it fits ``limit``."""
    t0 = time.perf_counter()
    paths: dict[str, Path] = {}
    if ordering == "auto":
        for name, order in orders(adjacency, names).items():
            paths[f"order:{name}"] = order_path(scopes, sizes, order)
        paths["opt_einsum:greedy"] = optimizer_path(scopes, sizes, "greedy")
    else:
        order = elimination_order(ordering, {v: set(n) for v, n in adjacency.items()})
        paths[f"order:{ordering}"] = order_path(scopes, sizes, order)
    stats = {name: analyse(scopes, sizes, p) for name, p in paths.items()}
    best = min(stats, key=lambda k: stats[k].flops)
    if ordering == "auto" and budget_s > 0 and stats[best].flops > SEARCH_FLOPS:
        spent = time.perf_counter() - t0
        path = optimizer_path(scopes, sizes, "random-greedy", max(0.05, budget_s - spent))
        paths["opt_einsum:random-greedy"] = path
        stats["opt_einsum:random-greedy"] = analyse(scopes, sizes, path)
    room = limit.bytes / itemsize
    # the cheapest fitting tree; where none fits, the cheapest once sliced to fit
    ranked = sorted(stats, key=lambda k: stats[k].flops)
    choice: tuple[float, str, tuple[str, ...], TreeStats, int] | None = None
    for name in ranked:
        got = _fit(scopes, sizes, paths[name], stats[name], task, room)
        if got is None:
            continue
        sliced, sliced_stats, slices = got
        total = sliced_stats.flops * slices
        if choice is None or total < choice[0]:
            choice = (total, name, sliced, sliced_stats, slices)
        if not sliced:
            break  # the cheapest tree that fits whole: slicing another cannot beat it
    search_s = time.perf_counter() - t0
    candidates = {
        k: {"flops": s.flops, "largest_intermediate": float(s.largest)} for k, s in stats.items()
    }
    if choice is None:
        least = min(stats.values(), key=lambda s: s.peak(task))
        raise TableTooLarge(
            f"{task.upper()} by contraction: the best tree's planned peak of "
            f"{human_bytes(least.peak(task) * itemsize)} (largest intermediate "
            f"{human_bytes(least.largest * itemsize)}) exceeds {limit.text}, and no slicing into "
            f"at most {MAX_SLICES} slices fits it"
        )
    _, name, sliced, sliced_stats, slices = choice
    return ContractionPlan(
        name, paths[name], sliced, sliced_stats, slices, itemsize, search_s, limit, candidates
    )


def _fit(
    scopes: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
    path: Path,
    stats: TreeStats,
    task: str,
    room: float,
) -> tuple[tuple[str, ...], TreeStats, int] | None:
    """The variables to slice so that ``path``'s peak fits ``room`` entries (none when it fits
    whole), the stats of one slice and the number of slices; None when nothing fits."""
    if stats.peak(task) <= room:
        return (), stats, 1
    target = stats.largest
    inputs = sum(math.prod(sizes[v] for v in s) for s in scopes)
    if inputs > room:
        return None
    while target > 1:
        target //= 2
        sliced = slice_vars(scopes, sizes, path, target)
        slices = math.prod(sizes[v] for v in sliced)
        if slices > MAX_SLICES:
            return None
        cut = _sliced_scopes(scopes, sliced)
        one = analyse(cut, sizes, path)
        # the leaves stay whole on the device; each slice's views of them are copied as used
        if one.peak(task) - sum(math.prod(sizes[v] for v in s) for s in cut) + inputs <= room:
            return sliced, one, slices
    return None


@dataclass
class ContractionOutcome:
    """``ln Z`` (the Problem's constant included), the marginals of a MAR run, and how it ran."""

    ln_z: float
    marginals: dict[str, np.ndarray] | None
    plan: ContractionPlan
    space: str
    times: dict[str, float]
    pruned: int = 0


def _ranges(
    logs: Sequence[np.ndarray],
    path: Path,
    nodes: Sequence[frozenset[str]],
    sizes: Mapping[str, int],
) -> tuple[list[float], list[bool]]:
    """An upper bound on ``ln(peak / smallest positive entry)`` of every node (the leaves' own
    ranges added up, plus the log of the entries summed), and whether its subtree holds a zero."""
    spans: list[float] = []
    zeros: list[bool] = []
    for t in logs:
        finite = t[np.isfinite(t)]
        spans.append(float(finite.max() - finite.min()) if finite.size else 0.0)
        zeros.append(bool(finite.size < t.size))
    m = len(logs)
    for k, (i, j) in enumerate(path):
        summed = (nodes[i] | nodes[j]) - nodes[m + k]
        spans.append(spans[i] + spans[j] + sum(math.log(sizes[v]) for v in summed))
        zeros.append(zeros[i] or zeros[j])
    return spans, zeros


def contract(
    problem: Problem,
    task: str,
    backend: Any,
    dtype: Any = np.float64,
    max_bytes: float | None = None,
    ordering: str = "auto",
    space: str = "auto",
    budget_s: float = DEFAULT_BUDGET_S,
    orders: OrderSource = default_orders,
    room: Limit | None = None,
) -> ContractionOutcome:
    """PR (``task="pr"``) or MAR of ``problem`` by tree contraction on the table ``backend``;
    ``room`` overrides the memory the arrays may take (default: :func:`contraction_room`)."""
    from dcop.sumproduct import log_constant

    if space not in SPACES:
        raise ValueError(f"unknown space {space!r}; use one of {', '.join(SPACES)}")
    times: dict[str, float] = {}
    constant = log_constant(problem)
    sizes = problem.domain_sizes()
    tables = barren_tables(problem) if task == "pr" else [t for t in problem.tables if t.scope]
    pruned = sum(1 for t in problem.tables if t.scope) - len(tables)
    held = {v for t in tables for v in t.scope}
    # a variable in no (kept) table multiplies Z by its domain size (a barren one by one)
    barren = {v for t in problem.tables if t.scope for v in t.scope} - held if pruned else set()
    free = [v for v in problem.variables if v not in held and v not in barren]
    constant += sum(math.log(sizes[v]) for v in free)
    scopes = [tuple(t.scope) for t in tables]
    itemsize = np.dtype(dtype).itemsize
    limit = room if room is not None else contraction_room(backend, max_bytes)
    adjacency = _adjacency(scopes, [v for v in problem.variables if v in held])
    plan = plan_contraction(
        scopes,
        sizes,
        adjacency,
        [v for v in problem.variables if v in held],
        task,
        limit,
        itemsize,
        ordering,
        budget_s,
        orders,
    )
    times["path"] = plan.search_s
    marginals: dict[str, np.ndarray] | None = None
    t0 = time.perf_counter()
    if not scopes:
        run = TreeRun(ln_z=0.0)
        used = "scaled"
    else:
        logs = [-np.asarray(t.costs, np.float64) for t in tables]
        run, used = _run(backend, dtype, sizes, logs, scopes, plan, task, space)
    backend.synchronize()
    times["contract"] = time.perf_counter() - t0
    ln_z = run.ln_z + constant
    if task == "mar" and ln_z > -math.inf:
        marginals = {}
        for v in problem.variables:
            if v in run.log_marginals:
                vec = run.log_marginals[v]
                peak = float(np.max(vec))
                weights = np.exp(vec - peak)
                marginals[v] = weights / weights.sum()
            else:
                marginals[v] = np.full(sizes[v], 1.0 / sizes[v])
    return ContractionOutcome(ln_z, marginals, plan, used, times, pruned)


def _adjacency(scopes: Sequence[tuple[str, ...]], names: Sequence[str]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {v: set() for v in names}
    for scope in scopes:
        for v in scope:
            graph[v].update(u for u in scope if u != v)
    return graph


def _run(
    backend: Any,
    dtype: Any,
    sizes: Mapping[str, int],
    logs: Sequence[np.ndarray],
    scopes: Sequence[tuple[str, ...]],
    plan: ContractionPlan,
    task: str,
    space: str,
) -> tuple[TreeRun, str]:
    from dcop.contraction.tree import node_scopes

    full = node_scopes(scopes, plan.path)
    spans, zeros = _ranges(logs, plan.path, full, sizes)
    nodes = node_scopes(_sliced_scopes(scopes, plan.sliced), plan.path)
    mar = task == "mar"
    if space in ("auto", "scaled"):
        probe = Scaled(backend, dtype, sizes)
        limit = -probe.ln_tiny
        checks = [s > limit for s in spans]
        positive = not any(zeros[: len(logs)])
        track = any(c and z for c, z in zip(checks, zeros, strict=True))
        scaled = Scaled(backend, dtype, sizes, positive=positive, track_support=track)
        leaves = [scaled.leaf(s, x, c) for s, x, c in zip(scopes, logs, checks, strict=False)]
        run = run_sliced(scaled, leaves, plan.path, nodes, checks, mar, plan.sliced)
        if not run.underflow or space == "scaled":
            return run, "scaled"
        del leaves
    logspace = LogSpace(backend, dtype, sizes)
    leaves_log: list[Node] = [logspace.leaf(s, x, False) for s, x in zip(scopes, logs, strict=True)]
    run = run_sliced(logspace, leaves_log, plan.path, nodes, [False] * len(nodes), mar, plan.sliced)
    return run, "log" if space == "log" else "log (scaled linear space underflowed)"
