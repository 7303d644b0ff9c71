"""In-process runs: every agent in a thread on an InProcHub, the real Coordinator, no sockets."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from dcop.agents import Agent, AgentConfig
from dcop.backends import get_backend
from dcop.coordinator import Coordinator, peers_for, round_robin
from dcop.model import Problem
from dcop.protocol import COORDINATOR_ID, InProcHub, RunSpec

RunFn = Callable[..., dict[str, Any]]


def run_in_process(
    problem: Problem,
    algo: str = "dpop",
    z: int | None = None,
    timeout: float = 30.0,
    backend: Any = None,
    coordinator_kw: dict[str, Any] | None = None,
    spec: RunSpec | None = None,
    keep: list[Any] | None = None,
    per_agent: Callable[[int], tuple[Any, dict[str, Any]]] | None = None,
    **agent_kw: Any,
) -> dict[str, Any]:
    """Solve ``problem`` with one agent thread per variable; return the result document, plus
    the agents under ``agent_objects`` and the typed result under ``run``. ``per_agent(id)``
    gives an agent its own backend and config fields (agents on different devices, say)."""
    spec = spec if spec is not None else RunSpec(algo, z)  # type: ignore[arg-type]
    peers = peers_for(
        problem, *round_robin(["127.0.0.1"], 0, list(range(20000, 20001 + problem.n)))
    )
    hub = InProcHub()
    coord_transport = hub.transport(COORDINATOR_ID)
    table = peers.by_id()
    agents = []
    for a in peers.agents:
        own, fields = per_agent(a.id) if per_agent is not None else (backend, {})
        config = AgentConfig(
            a.id,
            a.variable,
            {n: table[n].variable for n in a.neighbours},
            timeout_s=timeout + 5,
            **{**agent_kw, **fields},
        )
        agents.append(Agent(config, hub.transport(a.id), own or get_backend("numpy")))
    if keep is not None:
        keep.extend(agents)  # the agents, also when the run raises
    codes: dict[int, int] = {}
    threads = [
        threading.Thread(target=lambda ag=ag: codes.__setitem__(ag.me, ag.run()), daemon=True)
        for ag in agents
    ]
    for t in threads:
        t.start()
    try:
        run = Coordinator(
            problem,
            peers,
            coord_transport,
            spec,
            timeout=timeout,
            **(coordinator_kw or {}),
        ).run()
    finally:
        for t in threads:
            t.join(timeout + 10)
    assert all(not t.is_alive() for t in threads)
    assert codes == dict.fromkeys(codes, 0)
    doc = run.to_json()
    doc["agent_objects"] = agents
    doc["run"] = run
    return doc


@pytest.fixture(scope="session")
def run_inproc() -> RunFn:
    return run_in_process
