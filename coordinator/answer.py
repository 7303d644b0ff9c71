"""The answer of one distributed run, assembled from the agents' results.

The coordinator never trusts an agent's cost: it gathers the values, checks each against its
domain and recomputes the assignment's cost on the Problem; the bound is the roots' reports plus
what no agent holds (the constant and the tables without a scope). PR/MAR add the model's
constant factor to the roots' ``ln Z``, MAR gathers every agent's marginal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dcop.coordinator.metrics import wire_metrics
from dcop.coordinator.plan import RunPlan
from dcop.errors import RunError
from dcop.protocol import Hello, Result, RunSpec
from dcop.results.partition import PartitionResult
from dcop.results.run import RunResult, TreeChoice
from dcop.sumproduct import log_constant


@dataclass(frozen=True)
class Gathered:
    """What a run gathered: the chosen tree, its roots, every agent's result and hello, the
    candidates' roots, what the coordinator sent and received by message type ([count,
    bytes]), and the run's times (``total``, ``launch``, ``solve``; seconds)."""

    choice: TreeChoice
    ran: RunSpec
    roots: list[int]
    results: Mapping[int, Result]
    hellos: Mapping[int, Hello]
    candidates: list[list[int]]
    sent: Mapping[str, list[int]]
    received: Mapping[str, list[int]]
    times: dict[str, float]


def run_result(plan: RunPlan, got: Gathered) -> RunResult:
    """The typed result of a run of ``plan`` (RunError where an agent's answer is unusable)."""
    if plan.spec.summing:
        return _sum_result(plan, got)
    problem = plan.problem
    var = plan.layout.variable
    assignment: dict[str, int] = {}
    for i, r in got.results.items():
        if r.value is None:
            raise RunError(f"{plan.name(i)} sent no value")
        assignment[var[i]] = r.value
    for name, value in assignment.items():
        if value >= problem.variables[name].size:
            raise RunError(f"agent for {name!r} chose value index {value}, out of its domain")
    for name in problem.variables:
        assignment.setdefault(name, 0)  # a variable no agent was given: none (n = 0)
    cost = problem.evaluate(assignment)  # recomputed here, never trusted from the agents
    bound = problem.constant + sum(float(t.costs) for t in problem.tables if not t.scope)
    bound += sum(float(got.results[r].bound or 0.0) for r in got.roots)
    if problem.upper_bound is not None and bound >= problem.upper_bound:
        bound = math.inf
    metrics, per_agent = _metrics(plan, got)
    return RunResult(
        problem=problem,
        spec=plan.reported_spec,
        ran=got.ran,
        tree=got.choice,
        assignment=dict(sorted(assignment.items())),
        internal_cost=cost,
        bound=bound,
        roots=tuple(var[r] for r in got.roots),
        agents=per_agent,
        metrics=metrics,
        dtype=plan.dtype.name,
        times=dict(got.times),
    )


def _metrics(plan: RunPlan, got: Gathered) -> tuple[dict[str, Any], dict[str, Any]]:
    return wire_metrics(
        problem=plan.problem,
        layout=plan.layout,
        # MB-DPOP's UTILs are conditioned: only DPOP's sizes are the separators'
        exact=got.ran.exact and got.ran.algo != "mbdpop",
        task=got.ran.task,
        roots=got.roots,
        trees=len(got.candidates),
        candidates_roots=sum(len(r) for r in got.candidates),
        results=dict(got.results),
        coordinator_sent=dict(got.sent),
        coordinator_received=dict(got.received),
        wall_s=got.times["total"],
        solve_s=got.times["solve"],
        hellos=dict(got.hellos),
        elimination_tree=plan.elimination is not None,
    )


def _sum_result(plan: RunPlan, got: Gathered) -> RunResult:
    """PR/MAR: ``ln Z`` is the roots' component ``ln Z`` plus the Problem's constant factor
    (which no agent holds); MAR adds every agent's marginal."""
    problem = plan.problem
    spec = plan.reported_spec
    var = plan.layout.variable
    ln_z = log_constant(problem) + sum(float(got.results[r].bound or 0.0) for r in got.roots)
    marginals: dict[str, np.ndarray] | None = None
    if spec.task == "mar" and ln_z > -math.inf:
        marginals = {}
        for i, r in got.results.items():
            size = problem.variables[var[i]].size
            if r.marginal is None or len(r.marginal) != size:
                raise RunError(f"{plan.name(i)} sent no marginal over its {size} values")
            marginals[var[i]] = np.asarray(r.marginal)
        for name, v in problem.variables.items():
            marginals.setdefault(name, np.full(v.size, 1.0 / v.size))  # in no agent: n = 0
    metrics, per_agent = _metrics(plan, got)
    times = dict(got.times)
    partition = PartitionResult(
        problem=problem,
        task=spec.task,
        algo="dpop",
        z=None,
        ordering="pseudo-tree",
        induced_width=metrics["theory"]["max_separator"],
        largest_table=metrics["largest_util_entries"],
        backend="agents",
        dtype=plan.dtype.name,
        ln_lower=ln_z,
        ln_upper=ln_z,
        marginals=marginals,
        times=times,
    )
    return RunResult(
        problem=problem,
        spec=spec,
        ran=spec,
        tree=got.choice,
        assignment={},
        internal_cost=-ln_z,
        bound=-ln_z,
        roots=tuple(var[r] for r in got.roots),
        agents=per_agent,
        metrics=metrics,
        dtype=plan.dtype.name,
        times=times,
        partition=partition,
    )
