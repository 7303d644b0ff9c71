"""Who is where: peers.json from a Problem, its check against the problem, and the DFS roots.

:func:`peers_for` is the one place agents are numbered and given neighbours: agent ``i`` owns the
``i``-th variable of the Problem (file order), its neighbours are those of the primal graph. The
local launcher, ``dcop peers`` and every deployment call it with their own endpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dcop.errors import InputError
from dcop.model import Problem
from dcop.protocol import COORDINATOR_ID
from dcop.protocol.constants import MAX_NAME_CHARS, MAX_SCOPE, MAX_TABLES
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
    specific: bool = True,
) -> Peers:
    """peers.json for ``problem``: one agent per variable (ids in the Problem's order) at
    ``endpoint(id, variable)``, named after the file's agent of that variable (pyDCOP, FRODO;
    :func:`dcop.io.placement.agent_placement`); with ``public_keys`` (by id, ``COORDINATOR_ID``
    for the coordinator) every process is known by its CURVE key. ``specific=False`` leaves
    out the variables and neighbours: serving agents that take any problem (the coordinator
    then gives each named agent the variable the file places on it)."""
    names = list(problem.variables)
    ident = {v: i for i, v in enumerate(names)}
    adjacency = problem.neighbours()
    keys = public_keys or {}
    placement = placement_names(problem)
    agents = tuple(
        AgentEntry(
            i,
            var if specific else None,
            endpoint(i, var),
            tuple(sorted(ident[u] for u in adjacency[var])) if specific else (),
            keys.get(i),
            placement.get(var),
        )
        for i, var in enumerate(names)
    )
    return Peers(problem_ref or problem.name, coordinator, agents, keys.get(COORDINATOR_ID))


def placement_names(problem: Problem) -> dict[str, str]:
    """The file's agent of each variable, for files that name agents (else empty)."""
    from dcop.io.placement import agent_placement

    if not problem.meta.get("agents") and not any(v.agent for v in problem.variables.values()):
        return {}
    placement, _ = agent_placement(problem)
    return placement


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


def host_blocks(n_agents: int, n_hosts: int) -> list[int]:
    """Host index of each agent: contiguous, balanced blocks in id order (ids follow the problem
    file, whose neighbouring variables are often numbered close together, so neighbours tend to
    share a host). The one placement rule of ``dcop peers`` and ``dcop deploy hosts``."""
    if n_hosts < 1:
        raise InputError("give at least one host")
    return [i * n_hosts // n_agents for i in range(n_agents)]


#: The largest TCP port.
MAX_PORT = 65535


def agent_port(base_port: int, agent: int) -> int:
    """The port of agent ``agent``: ``--base-port`` is the coordinator's, agents take the ones
    after it (agent i: base + 1 + i, on whichever host it runs)."""
    return base_port + 1 + agent


def block_placement(hosts: Sequence[str], base_port: int, n_agents: int) -> tuple[str, EndpointFn]:
    """The coordinator's endpoint (the first host, ``base_port``) and the endpoint of every
    agent: placed by :func:`host_blocks`, listening on :func:`agent_port`."""
    if not hosts:
        raise InputError("at least one host is needed")
    last = agent_port(base_port, max(n_agents, 1) - 1)
    if base_port < 1 or last > MAX_PORT:
        raise InputError(
            f"--base-port {base_port} with {n_agents} agents needs ports {base_port}..{last}: "
            f"ports go from 1 to {MAX_PORT}"
        )
    blocks = host_blocks(max(n_agents, 1), len(hosts))

    def endpoint(i: int, _variable: str) -> str:
        host = hosts[blocks[i]] if 0 <= i < len(blocks) else hosts[-1]
        return endpoint_of(host, agent_port(base_port, i))

    return endpoint_of(hosts[0], base_port), endpoint


@dataclass(frozen=True)
class Layout:
    """Who does what in one problem: the variable of each agent that takes part (by id), their
    neighbours (ids, from the primal graph), and every agent peers.json lists (the ids the
    coordinator accepts messages from)."""

    variable: dict[int, str]
    neighbours: dict[int, frozenset[int]]
    agents: frozenset[int]


def layout_for(problem: Problem, peers: Peers) -> Layout:
    """The layout of ``problem`` on ``peers``: a problem-specific peers.json must match the
    problem (:func:`check_peers`); with a problem-independent one (serving agents) the i-th
    variable goes to the agent with the i-th smallest id, and a problem with more variables than
    agents is refused."""
    agents = frozenset(a.id for a in peers.agents)
    if peers.problem_specific:
        check_peers(problem, peers)
        variable = {a.id: str(a.variable) for a in peers.agents}
    else:
        names = list(problem.variables)
        ids = sorted(agents)
        if len(names) > len(ids):
            raise InputError(
                f"the problem has {len(names)} variables but peers.json lists {len(ids)} agents "
                "(one agent runs one variable: start more agents, or write a peers file with "
                f"dcop peers --agents {len(names)})"
            )
        # the file's agents first (a named agent takes the variable the file places on it),
        # then every other variable on the next free agent, by id
        named = {a.name: a.id for a in peers.agents if a.name is not None}
        variable = {}
        for var, wanted in placement_names(problem).items():
            if wanted in named:
                variable[named.pop(wanted)] = var
        placed = set(variable.values())
        free = iter(i for i in ids if i not in variable)
        for var in names:
            if var not in placed:
                variable[next(free)] = var
    agent_of = {v: i for i, v in variable.items()}
    adjacency = problem.neighbours()
    neighbours = {i: frozenset(agent_of[u] for u in adjacency[v]) for i, v in variable.items()}
    return Layout(variable, neighbours, agents)


def check_wire_limits(problem: Problem) -> None:
    """InputError (one line, before any agent starts) for a problem the wire cannot carry,
    though ``dcop solve`` takes it: a variable name longer than a message allows, a table of
    more variables than a scope may have, or a variable in more tables than one Setup holds
    (each agent receives every table on its variable). Before, such a run waited for a hello
    that never came, or failed after the peer timeout."""
    for name in problem.variables:
        if len(name) > MAX_NAME_CHARS:
            raise InputError(
                f"variable {name[:40]!r}... has a name of {len(name)} characters: distributed "
                f"runs allow at most {MAX_NAME_CHARS} (dcop solve takes it)"
            )
    counts = dict.fromkeys(problem.variables, 0)
    for table in problem.tables:
        if table.arity > MAX_SCOPE:
            raise InputError(
                f"table {table.name!r} has {table.arity} variables: distributed runs allow at "
                f"most {MAX_SCOPE} per table (dcop solve takes it)"
            )
        for v in dict.fromkeys(table.scope):
            counts[v] += 1
    worst = max(counts, key=counts.__getitem__, default=None)
    if worst is not None and counts[worst] > MAX_TABLES:
        raise InputError(
            f"variable {worst!r} is in {counts[worst]} cost functions: a distributed agent "
            f"takes at most {MAX_TABLES} (dcop solve takes it; tables of the same scope may be "
            "summed into one)"
        )


def check_peers(problem: Problem, peers: Peers) -> None:
    """Raise InputError unless peers.json has one agent per variable with the problem's
    neighbours (a peers file that does not fit the problem is bad input)."""
    names = {a.variable: a for a in peers.agents}
    if not peers.problem_specific:
        raise InputError("peers.json gives no variables: it fits any problem")
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
        listed = {str(table[n].variable) for n in a.neighbours}
        actual = adjacency[str(a.variable)]
        if listed != actual:
            extra = sorted(listed - actual)
            lack = sorted(actual - listed)
            raise InputError(
                f"peers.json does not match the problem: agent {a.id} ({a.variable}) "
                f"neighbours differ (extra {extra}, missing {lack})"
            )
