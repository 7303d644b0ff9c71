"""One bucket step, shared by BE, MBE(z), MPE and the agents' UTIL and VALUE phases.

A *bucket* is the set of tables that hold a variable ``var`` when it is eliminated (in BE: the
tables whose earliest variable along the order is ``var``; in DPOP: an agent's own tables and the
UTIL tables its children sent that hold its variable). The step is:

1. :func:`partition_scopes` / :func:`partition_minibuckets`: split the bucket into mini-buckets
   whose joined scope holds at most ``z`` variables (one mini-bucket when ``z`` is None: exact).
2. :func:`eliminate_bucket`: join and eliminate each mini-bucket in one fused pass on a backend;
   outputs over no variable are scalars and are summed into :attr:`BucketOutput.scalar`.
3. :func:`choose_value`: given values of the bucket's other variables, the best value of ``var``.

Sizes can be planned before any data exists (:func:`plan_bucket` works on scopes and domain
sizes only): the memory check of BE and the sizing pass of the agents use it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dcop.backends.base import Placed, TableBackend, capable
from dcop.momentmatch import matched_groups
from dcop.tables import Op, Table

#: A check run before a mini-bucket's output is built: (var, output scope, output entries).
OutputCheck = Callable[[str, tuple[str, ...], int], None]


def partition_scopes(scopes: Sequence[Sequence[str]], z: int | None) -> list[list[int]]:
    """Group table positions into mini-buckets whose scope union has at most ``z`` variables.

    First fit by decreasing arity (the usual MBE heuristic, stable for equal arities); a scope
    wider than ``z`` forms a mini-bucket of its own. ``z=None`` keeps the whole bucket together.
    """
    if z is None:
        return [list(range(len(scopes)))] if scopes else []
    groups: list[tuple[set[str], list[int]]] = []
    for k in sorted(range(len(scopes)), key=lambda k: -len(scopes[k])):
        for scope, members in groups:
            if len(scope | set(scopes[k])) <= z:
                scope.update(scopes[k])
                members.append(k)
                break
        else:
            groups.append((set(scopes[k]), [k]))
    return [members for _, members in groups]


def partition_minibuckets(tables: Sequence[Table], z: int | None) -> list[list[Table]]:
    """:func:`partition_scopes` on tables: the mini-buckets themselves."""
    return [[tables[k] for k in group] for group in partition_scopes([t.scope for t in tables], z)]


@dataclass(frozen=True)
class MiniBucketPlan:
    """One mini-bucket's shape: which bucket tables it joins, its output scope and size."""

    members: tuple[int, ...]
    out_scope: tuple[str, ...]
    out_entries: int
    joined_entries: int


def output_scope_of(
    scopes: Sequence[Sequence[str]], var: str, order: Mapping[str, int] | None = None
) -> tuple[str, ...]:
    """The scope left after eliminating ``var`` from the join of ``scopes``: first appearance
    order, or sorted by ``order`` (an elimination position per variable) when given."""
    seen: dict[str, None] = {}
    for scope in scopes:
        for v in scope:
            if v != var:
                seen.setdefault(v, None)
    out = tuple(seen)
    return tuple(sorted(out, key=order.__getitem__)) if order is not None else out


def plan_bucket(
    scopes: Sequence[Sequence[str]],
    var: str,
    sizes: Mapping[str, int],
    z: int | None = None,
    order: Mapping[str, int] | None = None,
) -> list[MiniBucketPlan]:
    """The mini-buckets of a bucket and their output sizes, from scopes and domain sizes alone."""
    plans = []
    for members in partition_scopes(scopes, z):
        out = output_scope_of([scopes[k] for k in members], var, order)
        entries = math.prod(sizes[v] for v in out)
        plans.append(MiniBucketPlan(tuple(members), out, entries, entries * sizes[var]))
    return plans


@dataclass(frozen=True)
class BucketOutput:
    """What eliminating a bucket produced: tables over some variables, and the scalar part."""

    tables: tuple[Table, ...]
    scalar: float
    plans: tuple[MiniBucketPlan, ...]


def eliminate_bucket(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    *,
    z: int | None = None,
    op: Op = "min",
    order: Mapping[str, int] | None = None,
    check: OutputCheck | None = None,
    match: bool = False,
) -> BucketOutput:
    """Join and eliminate ``var`` from each mini-bucket of ``tables`` (fused, on ``backend``).

    ``order`` sorts each output's scope (BE keeps scopes in elimination order); ``check`` runs
    before each output is built and may raise (the memory limit). Scalar outputs are summed on
    the host; the rest stay where the backend keeps them. ``match`` (a minimisation split into
    mini-buckets) shifts costs between the mini-buckets first (:mod:`dcop.momentmatch`): the
    outputs' sum is still a lower bound, and a tighter one.
    """
    sizes = {v: s for t in tables for v, s in zip(t.scope, t.shape, strict=True)}
    plans = plan_bucket([t.scope for t in tables], var, sizes, z, order)
    # a backend that places work (dcop.placement) may hand the whole bucket to one of its own
    runner: TableBackend = backend
    if capable(backend, Placed):
        runner = backend.runner_for(tables, var, plans)
        if runner is not backend:  # the placing backend keeps count of where buckets ran
            backend.record(var, plans, "cpu")
    groups = [[tables[k] for k in plan.members] for plan in plans]
    if match and op == "min" and len(plans) > 1:
        groups = matched_groups(runner, groups, var, tables[0].data.dtype)
    out: list[Table] = []
    scalar = 0.0
    for plan, group in zip(plans, groups, strict=True):
        if check is not None:
            check(var, plan.out_scope, plan.out_entries)
        message = runner.join_eliminate(group, var, op, scope=plan.out_scope)
        if message.scope:
            out.append(message)
        else:
            scalar += float(runner.to_numpy(message.data))
    return BucketOutput(tuple(out), scalar, tuple(plans))


def choose_value(
    backend: TableBackend,
    tables: Sequence[Table],
    var: str,
    assignment: Mapping[str, int],
    op: Op = "min",
) -> int:
    """The best value of ``var`` for the sum of ``tables`` given the other variables' values;
    0 when no table holds ``var`` (every value is then as good)."""
    if not tables:
        return 0
    value, _ = backend.best_value(tables, var, assignment, op)
    return int(value)
