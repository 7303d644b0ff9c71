"""Which agent runs each variable: pyDCOP's agents, distribution and hints, one agent per variable.

pyDCOP places *computations* on agents, several per agent if capacities allow; our deployments
run one agent process per variable. :func:`agent_placement` honours a file's wishes as far as
that allows and says, one line per problem, what it cannot honour. It is pure: it reads the
Problem (``Problem.meta`` as the readers fill it, and ``Variable.agent``) and returns the
placement with the warnings, so the deploy code can call it and show or refuse them.

What it reads, in order of priority (first come, first served; an agent runs one variable):

1. ``meta["placement_hints"]["distribution"]``: ``{agent: [names]}``, an explicit distribution
   (a ``distribution`` section laid out as pyDCOP's distribution files);
2. ``meta["placement_hints"]["must_host"]``: ``{agent: [names]}`` (pyDCOP's
   ``distribution_hints.must_host``);
3. without any ``placement_hints`` (FRODO XML, our own writers): ``Variable.agent``;
4. ``meta["placement_hints"]["hosting_costs"]``: pyDCOP's ``hosting_costs`` (``default``, and
   per agent ``default`` and ``computations``): each remaining variable goes to the cheapest
   free agent, cheapest pairs first (greedy, ties in file order; not an optimal assignment);
5. the remaining free agents of ``meta["agents"]``, in file order;
6. variables still without an agent get ``a_<variable>`` (a name no agent has).

Warnings (never silence): two variables wished on one agent, a variable wished on two agents,
names that are neither declared agents nor variables, constraints named where only variables
run, ``host_with`` groups of several variables, declared agents that host no variable, and
variables that the declared agents do not cover.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dcop.model import Problem

#: Names listed in one warning before it says how many more there are.
SHOWN = 5


def agent_placement(problem: Problem) -> tuple[dict[str, str], list[str]]:
    """The agent of every variable (distinct agents) and the warnings; see the module docstring.

    Parameters
    ----------
    problem
        A Problem as a reader returns it (``meta["agents"]``, ``meta["placement_hints"]``,
        ``meta["constraints"]`` and ``Variable.agent`` are used when present).

    Returns
    -------
    placement
        ``{variable: agent name}`` for every variable, one variable per agent.
    warnings
        One line for each wish that cannot be honoured.
    """
    variables = list(problem.variables)
    declared = [str(a) for a in _as_list(problem.meta.get("agents"))]
    known_agents = set(declared)
    hints = problem.meta.get("placement_hints")
    hints = hints if isinstance(hints, Mapping) else None
    constraints = {str(c) for c in _as_list(problem.meta.get("constraints"))}
    warnings: list[str] = []
    placement: dict[str, str] = {}
    host_of: dict[str, str] = {}  # agent -> the variable it runs

    crowded: dict[tuple[str, str], list[str]] = {}  # (source, agent) -> variables turned away
    doubled: dict[tuple[str, str], list[str]] = {}  # (source, variable) -> other agents wished

    def wish(agent: str, var: str, source: str) -> None:
        if var in placement:
            if placement[var] != agent:
                doubled.setdefault((source, var), []).append(agent)
            return
        if agent in host_of:
            crowded.setdefault((source, agent), []).append(var)
            return
        placement[var] = agent
        host_of[agent] = var

    def report_wishes() -> None:
        for (source, agent), turned in crowded.items():
            warnings.append(
                f"{source}: agent {agent!r} would host {host_of[agent]!r} and {_names(turned)}, "
                f"but an agent runs one variable; placed elsewhere: {_names(turned)}"
            )
        for (source, var), others in doubled.items():
            warnings.append(
                f"{source}: variable {var!r} is wished on agents {_names(others)} too, but it "
                f"runs on agent {placement[var]!r}"
            )
        crowded.clear()
        doubled.clear()

    if hints is not None:
        for source in ("distribution", "must_host"):
            wishes = hints.get(source)
            if not isinstance(wishes, Mapping):
                continue
            strangers: list[str] = []  # agents the agents section does not declare
            hosted_constraints: list[str] = []
            unknown: list[str] = []
            for agent, names in wishes.items():
                agent = str(agent)
                if declared and agent not in known_agents:
                    strangers.append(agent)
                    continue
                for name in _as_list(names):
                    name = str(name)
                    if name in problem.variables:
                        wish(agent, name, source)
                    elif name in constraints:
                        hosted_constraints.append(name)
                    else:
                        unknown.append(name)
            report_wishes()
            if strangers:
                warnings.append(
                    f"{source} names agents that the agents section does not declare: "
                    f"{_names(strangers)}: ignored"
                )
            if hosted_constraints:
                warnings.append(
                    f"{source} names constraints {_names(hosted_constraints)}: constraints run "
                    "with their variables here, ignored"
                )
            if unknown:
                warnings.append(
                    f"{source} names {_names(unknown)}, neither variables nor constraints: ignored"
                )
        for group in _as_list(hints.get("host_with")):
            together = [str(n) for n in _as_list(group) if str(n) in problem.variables]
            if len(together) > 1:
                warnings.append(
                    f"host_with asks for variables {_names(together)} on one agent, but an agent "
                    "runs one variable: ignored"
                )
        _by_hosting_costs(hints.get("hosting_costs"), variables, declared, placement, host_of)
    else:
        for name, var in problem.variables.items():
            if var.agent is not None:
                wish(str(var.agent), name, "agent")
        report_wishes()

    free = [a for a in declared if a not in host_of]
    for name in variables:
        if name not in placement and free:
            agent = free.pop(0)
            placement[name] = agent
            host_of[agent] = name
    uncovered = [name for name in variables if name not in placement]
    if uncovered and declared:
        warnings.append(
            f"{_count(len(declared), 'agent')} for {_count(len(variables), 'variable')}: "
            f"agents named after them (a_<variable>) run {_names(uncovered)}"
        )
    taken = set(host_of) | known_agents | set(variables)
    for name in uncovered:
        agent = f"a_{name}"
        while agent in taken:
            agent += "_"
        taken.add(agent)
        placement[name] = agent
        host_of[agent] = name
    idle = [a for a in declared if a not in host_of]
    if idle:
        warnings.append(
            f"agents that host no variable: {_names(idle)} ({_count(len(declared), 'agent')} "
            f"for {_count(len(variables), 'variable')})"
        )
    return {name: placement[name] for name in variables}, warnings


def _by_hosting_costs(
    costs: Any,
    variables: Sequence[str],
    declared: Sequence[str],
    placement: dict[str, str],
    host_of: dict[str, str],
) -> None:
    """Give each remaining variable the cheapest free agent (pyDCOP's hosting_costs)."""
    if not isinstance(costs, Mapping) or not declared:
        return
    overall = _number(costs.get("default"), 0.0)
    pairs: list[tuple[float, int, int, str, str]] = []
    for a_pos, agent in enumerate(declared):
        if agent in host_of:
            continue
        own = costs.get(agent)
        own = own if isinstance(own, Mapping) else {}
        agent_default = _number(own.get("default"), overall)
        specific = own.get("computations")
        specific = specific if isinstance(specific, Mapping) else {}
        for v_pos, var in enumerate(variables):
            if var not in placement:
                cost = _number(specific.get(var), agent_default)
                pairs.append((cost, v_pos, a_pos, var, agent))
    for _, _, _, var, agent in sorted(pairs):
        if var not in placement and agent not in host_of:
            placement[var] = agent
            host_of[agent] = var


def _number(value: Any, default: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range: the largest cost there is
        return math.inf if value > 0 else -math.inf
    return number if not math.isnan(number) else default


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, int, float)):
        return [value]
    if isinstance(value, Mapping):
        return list(value)
    if isinstance(value, Iterable):
        return list(value)
    return []


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:SHOWN])
    more = len(names) - SHOWN
    return shown + (f" and {more} more" if more > 0 else "")
