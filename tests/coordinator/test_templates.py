"""Agents forked from several templates: every agent started, accounted for and stopped; asking
never blocks; a request no template took is dropped at the stop (its agent never starts)."""

from __future__ import annotations

import signal
from pathlib import Path

from dcop.coordinator.launch import agent_options, command_line, free_ports
from dcop.coordinator.processes import (
    AGENTS_PER_TEMPLATE,
    AgentProcesses,
    _Forked,
    _Requests,
    templates_for,
)
from dcop.coordinator.topology import peers_for
from dcop.protocol import RunSpec
from tests.conftest import random_problem


def test_one_template_per_hundred_agents_at_most_one_per_core() -> None:
    import os

    cores = os.cpu_count() or 1
    assert templates_for(1) == templates_for(AGENTS_PER_TEMPLATE) == 1
    assert templates_for(AGENTS_PER_TEMPLATE + 1) == min(cores, 2)
    assert templates_for(100 * AGENTS_PER_TEMPLATE) == cores


def test_requests_go_in_order_and_a_dropped_one_never_starts() -> None:
    requests = _Requests()
    for ident in range(3):
        requests.put((ident, [], Path(f"{ident}.log"), None))
    handles = [_Forked(requests, ident) for ident in range(3)]
    taker = object()
    assert requests.take(taker)[0] == 0  # type: ignore[arg-type, index]
    assert requests.taken == {0: taker}
    assert handles[1].poll() is None  # still waiting for a template
    requests.close()
    assert requests.take(taker) is None  # type: ignore[arg-type]
    assert handles[1].poll() == handles[2].poll() == -int(signal.SIGKILL)
    handles[2].wait(0.0)  # returns at once: nothing to wait for


def test_agents_forked_from_two_templates_all_start_and_all_stop(tmp_path: Path) -> None:
    n = 8
    problem = random_problem(1, n=n)
    (port,) = free_ports(1)  # nobody listens there: the agents wait for their coordinator
    peers = peers_for(problem, f"tcp://127.0.0.1:{port}", lambda i, v: "tcp://127.0.0.1:*")
    peers_file = tmp_path / "peers.json"
    peers.write(peers_file)
    procs = AgentProcesses(templates=2)
    try:
        for a in peers.agents:
            options = agent_options(a.id, peers_file, timeout=60.0, spec=RunSpec())
            procs.start(a.id, command_line(options), tmp_path / f"agent-{a.id}.log", options)
        assert len(procs.templates) == 2
        pids = {ident: handle.pid for ident, handle in procs.procs.items()}
        assert len(set(pids.values())) == n  # one process per agent
        assert set(procs.requests.taken) == set(range(n))
        assert procs.dead() == []
    finally:
        procs.stop(grace_s=0.2, term_s=5.0)
    codes = procs.exit_codes()
    assert len(codes) == n and None not in codes.values()
    used = procs.usage()
    assert used["templates"] == 2 and len(used["agent_cpu_s"]) == n
    assert all(template.popen.poll() is not None for template in procs.templates)
