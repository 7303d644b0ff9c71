"""peers.json: who is where. Read by every agent and by the coordinator.

Format (version 1)::

    {"version": 1, "problem": "name or path", "coordinator": "tcp://host:port",
     "coordinator_public_key": "Z85 (optional)",
     "agents": [{"id": 0, "variable": "x0", "endpoint": "tcp://host:port",
                 "neighbours": [1, 2], "public_key": "Z85 (optional)"}, ...]}

Ids are 0..n-1 in any order; neighbours are ids and the relation must be symmetric. A
problem-independent file (for serving agents, ``dcop peers --agents N``) leaves out every
``variable`` and ``neighbours``: the coordinator hands them out per problem. An agent endpoint may
end in ``:*``: the agent binds a port the system picks and reports it in its hello.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dcop.errors import InputError
from dcop.protocol.constants import MAX_AGENT_ID
from dcop.protocol.endpoints import endpoint_port, in_ephemeral_range

PEERS_VERSION = 1
_ENDPOINT = re.compile(
    r"^(tcp://[^\s:/]+:(\d{1,5}|\*)|tcp://\[[0-9a-fA-F:.]+\]:(\d{1,5}|\*)|ipc://\S+)$"
)
_Z85 = re.compile(r"^[0-9a-zA-Z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}$")


@dataclass(frozen=True)
class AgentEntry:
    """One agent's line of peers.json. ``variable`` and ``neighbours`` are given in a
    problem-specific file and left out (None, ()) in a problem-independent one, whose agents get
    a variable per problem from the coordinator. An agent's endpoint may have a wildcard port
    (``tcp://host:*``): it binds a port the system picks and reports it in its hello."""

    id: int
    variable: str | None
    endpoint: str
    neighbours: tuple[int, ...] = ()
    public_key: str | None = None
    #: the agent's name in the problem file (pyDCOP/FRODO agents): a coordinator gives it the
    #: variables the file places on that agent
    name: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            out["name"] = self.name
        if self.variable is not None:
            out["variable"] = self.variable
            out["neighbours"] = list(self.neighbours)
        out["endpoint"] = self.endpoint
        if self.public_key is not None:
            out["public_key"] = self.public_key
        return out


@dataclass(frozen=True)
class Peers:
    """The whole peers.json."""

    problem: str
    coordinator: str
    agents: tuple[AgentEntry, ...]
    coordinator_public_key: str | None = None
    version: int = PEERS_VERSION

    def by_id(self) -> dict[int, AgentEntry]:
        return dict(self.index)

    @functools.cached_property
    def index(self) -> dict[int, AgentEntry]:
        """The agents by id, built once (read-only: shared by every agent forked from the
        template that read this file, each of which looks up only its own entry and its
        neighbours'; walking all of them touched every entry's page in every agent, an O(n)
        share of each agent's private memory)."""
        return {a.id: a for a in self.agents}

    @property
    def problem_specific(self) -> bool:
        """Whether the file gives every agent its variable (else the coordinator does)."""
        return all(a.variable is not None for a in self.agents)

    def agent(self, agent_id: int) -> AgentEntry:
        entry = self.index.get(agent_id)
        if entry is None:
            raise InputError(f"no agent with id {agent_id} in peers.json")
        return entry

    @property
    def secure(self) -> bool:
        return self.coordinator_public_key is not None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": self.version,
            "problem": self.problem,
            "coordinator": self.coordinator,
        }
        if self.coordinator_public_key is not None:
            out["coordinator_public_key"] = self.coordinator_public_key
        out["agents"] = [a.to_json() for a in self.agents]
        return out

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")


def _endpoint(value: Any, where: str, file: str) -> str:
    if not isinstance(value, str) or not _ENDPOINT.match(value):
        raise InputError(f"{where}: endpoint must look like tcp://host:port, not {value!r}", file)
    port_text = value.rsplit(":", 1)[1]
    if value.startswith("tcp://") and port_text != "*":
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise InputError(f"{where}: port {port} is out of range", file)
    return value


def _key(value: Any, where: str, file: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _Z85.match(value):
        raise InputError(f"{where}: public key must be 40 Z85 characters", file)
    return value


def parse_peers(data: Any, file: str = "peers.json") -> Peers:
    """Validate a decoded peers.json; every problem is an InputError naming the agent."""
    if not isinstance(data, dict):
        raise InputError("peers.json must hold a JSON object", file)
    if data.get("version") != PEERS_VERSION:
        raise InputError(f"unsupported peers.json version {data.get('version')!r}", file)
    problem = data.get("problem", "")
    if not isinstance(problem, str):
        raise InputError("'problem' must be a string", file)
    coordinator = _endpoint(data.get("coordinator"), "coordinator", file)
    coord_key = _key(data.get("coordinator_public_key"), "coordinator", file)
    raw_agents = data.get("agents")
    if not isinstance(raw_agents, list) or not raw_agents:
        raise InputError("'agents' must be a non-empty list", file)
    agents: list[AgentEntry] = []
    for k, raw in enumerate(raw_agents):
        if not isinstance(raw, dict):
            raise InputError(f"agents[{k}] must be an object", file)
        ident = raw.get("id")
        if type(ident) is not int or not 0 <= ident <= MAX_AGENT_ID:
            raise InputError(f"agents[{k}]: 'id' must be a non-negative integer", file)
        where = f"agent {ident}"
        variable = raw.get("variable")
        if variable is not None and (not isinstance(variable, str) or not variable):
            raise InputError(f"{where}: 'variable' must be a non-empty string", file)
        neighbours = raw.get("neighbours", [])
        if not isinstance(neighbours, list) or any(type(n) is not int for n in neighbours):
            raise InputError(f"{where}: 'neighbours' must be a list of agent ids", file)
        name = raw.get("name")
        if name is not None and (not isinstance(name, str) or not name):
            raise InputError(f"{where}: 'name' must be a non-empty string", file)
        agents.append(
            AgentEntry(
                ident,
                variable,
                _endpoint(raw.get("endpoint"), where, file),
                tuple(neighbours),
                _key(raw.get("public_key"), where, file),
                name,
            )
        )
    ids = [a.id for a in agents]
    if len(set(ids)) != len(ids):
        raise InputError("two agents share an id", file)
    named = [a.variable for a in agents if a.variable is not None]
    if named and len(named) != len(agents):
        raise InputError(
            "either every agent has a 'variable' (a problem-specific file) or none has", file
        )
    if len(set(named)) != len(named):
        raise InputError("two agents share a variable", file)
    if endpoint_port(coordinator) is None and coordinator.startswith("tcp://"):
        raise InputError("the coordinator's endpoint needs a port (agents connect to it)", file)
    endpoints = [a.endpoint for a in agents if not a.endpoint.endswith(":*")] + [coordinator]
    if len(set(endpoints)) != len(endpoints):
        raise InputError("two processes share an endpoint", file)
    table = {a.id: a for a in agents}
    for a in agents:
        for n in a.neighbours:
            if n not in table or n == a.id:
                raise InputError(f"agent {a.id}: unknown neighbour {n}", file)
            if a.id not in table[n].neighbours:
                raise InputError(f"agent {a.id} lists {n} as neighbour but not the reverse", file)
    if coord_key is not None and any(a.public_key is None for a in agents):
        raise InputError("with a coordinator key, every agent needs a public_key", file)
    keys = [k for k in [coord_key, *(a.public_key for a in agents)] if k is not None]
    if len(set(keys)) != len(keys):  # the key decides who sent a frame: it must name one process
        raise InputError("two processes share a public key", file)
    return Peers(problem, coordinator, tuple(agents), coord_key)


def ephemeral_endpoints(peers: Peers) -> list[tuple[str, str]]:
    """``(who, endpoint)`` of every listening endpoint in ``peers`` whose port lies in this
    host's ephemeral range (see :mod:`dcop.protocol.endpoints`): a tool that writes or checks
    peers.json warns about them or refuses them."""
    listed = [("coordinator", peers.coordinator)]
    listed += [(f"agent {a.id}", a.endpoint) for a in peers.agents]
    return [(who, e) for who, e in listed if in_ephemeral_range(endpoint_port(e))]


def load_peers(path: str | Path) -> Peers:
    """Read and validate peers.json."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise InputError(f"cannot read peers file: {exc.strerror}", str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", str(path), exc.lineno) from None
    return parse_peers(data, str(path))
