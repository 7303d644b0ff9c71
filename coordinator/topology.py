"""Who is where: peers.json from a Problem, its check against the problem, and the DFS roots.

:func:`peers_for` is the one place agents are numbered and given neighbours: agent ``i`` owns the
``i``-th variable of the Problem (file order), its neighbours are those of the primal graph. The
local launcher, ``dcop peers`` and every deployment call it with their own endpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dcop.errors import InputError
from dcop.model import Problem
from dcop.ordering import most_neighbours_first
from dcop.protocol import COORDINATOR_ID
from dcop.protocol.peers import AgentEntry, Peers

#: endpoint(agent id, variable name) -> "tcp://host:port"
EndpointFn = Callable[[int, str], str]


def endpoint_of(host: str, port: int) -> str:
    """``tcp://host:port``, with brackets around an IPv6 address."""
    return (
        f"tcp://[{host}]:{port}"
        if ":" in host and not host.startswith("[")
        else (f"tcp://{host}:{port}")
    )


def peers_for(
    problem: Problem,
    coordinator: str,
    endpoint: EndpointFn,
    public_keys: Mapping[int, str] | None = None,
    problem_ref: str = "",
) -> Peers:
    """peers.json for ``problem``: one agent per variable (ids in the Problem's order) at
    ``endpoint(id, variable)``; with ``public_keys`` (by id, ``COORDINATOR_ID`` for the
    coordinator) every process is known by its CURVE key."""
    names = list(problem.variables)
    ident = {v: i for i, v in enumerate(names)}
    adjacency = problem.neighbours()
    keys = public_keys or {}
    agents = tuple(
        AgentEntry(
            i,
            var,
            endpoint(i, var),
            tuple(sorted(ident[u] for u in adjacency[var])),
            keys.get(i),
        )
        for i, var in enumerate(names)
    )
    return Peers(problem_ref or problem.name, coordinator, agents, keys.get(COORDINATOR_ID))


def round_robin(
    hosts: Sequence[str], base_port: int, ports: Sequence[int] | None = None
) -> tuple[str, EndpointFn]:
    """The coordinator's endpoint and an endpoint function for agents spread over ``hosts``.

    ``ports`` (coordinator first, then one per agent) or ``base_port`` for the coordinator on the
    first host and ``base_port + k`` for the k-th agent on each host."""
    if not hosts:
        raise InputError("at least one host is needed")
    per_host: dict[str, int] = {}
    chosen: dict[int, str] = {}

    def endpoint(i: int, _variable: str) -> str:
        if i not in chosen:
            host = hosts[i % len(hosts)]
            if ports is not None:
                port = ports[1 + i]
            else:
                per_host[host] = per_host.get(host, 0) + 1
                port = base_port + per_host[host]
            chosen[i] = endpoint_of(host, port)
        return chosen[i]

    return endpoint_of(hosts[0], ports[0] if ports is not None else base_port), endpoint


def check_peers(problem: Problem, peers: Peers) -> None:
    """Raise InputError unless peers.json has one agent per variable with the problem's
    neighbours (a peers file that does not fit the problem is bad input)."""
    names = {a.variable: a for a in peers.agents}
    for a in peers.agents:
        if a.variable not in problem.variables:
            raise InputError(
                f"peers.json does not match the problem: agent {a.id} has variable "
                f"{a.variable!r}, which the problem does not have"
            )
    missing = [v for v in problem.variables if v not in names]
    if missing:
        raise InputError(
            f"peers.json does not match the problem: no agent for variable "
            f"{missing[0]!r} ({len(missing)} missing)"
        )
    adjacency = problem.neighbours()
    table = peers.by_id()
    for a in peers.agents:
        listed = {table[n].variable for n in a.neighbours}
        if listed != adjacency[a.variable]:
            extra = sorted(listed - adjacency[a.variable])
            lack = sorted(adjacency[a.variable] - listed)
            raise InputError(
                f"peers.json does not match the problem: agent {a.id} ({a.variable}) "
                f"neighbours differ (extra {extra}, missing {lack})"
            )


def choose_roots(peers: Peers) -> list[int]:
    """One root per connected component of the peers graph: most neighbours, then name."""
    table = peers.by_id()
    adjacency = {a.variable: {table[n].variable for n in a.neighbours} for a in peers.agents}
    by_name = {a.variable: a.id for a in peers.agents}
    seen: set[str] = set()
    roots: list[int] = []
    for name in most_neighbours_first(adjacency, list(adjacency)):
        if name in seen:
            continue
        roots.append(by_name[name])
        stack = [name]
        seen.add(name)
        while stack:
            for u in adjacency[stack.pop()]:
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
    return roots
