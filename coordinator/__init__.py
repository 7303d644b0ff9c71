"""The coordinator: peers.json, launching agent processes, driving a run, wire metrics.

Its typed result, ``RunResult``, lives with the others in :mod:`dcop.results.run` (re-exported
here).

* ``topology``   ``peers_for`` (one agent per variable, neighbours from the primal graph),
  ``layout_for`` (who runs which variable), ``check_peers``
* ``plan``       ``RunPlan``: what a run is, decided once before any agent hears of it (layout,
  DFS candidates simulated once each, the elimination tree offered, each agent's part)
* ``session``    ``CoordinatorSession``: one problem's state, messages in, messages out (sans-IO)
* ``choice``     the tree and algorithm decision (pure: sizings and limits in, a ``Decision`` out)
* ``answer``     the typed result from the agents' answers
* ``driver``     ``Coordinator``: drives one problem over any Transport (ZMQ or in-process): the
  loop, the wire and liveness
* ``launch``     ``run_local(problem, spec)``: one agent process per variable on this machine
* ``processes``  agent processes, forked from a pre-imported template
* ``cluster``    serving agents between problems (``--shutdown``)
* ``metrics``    wire metrics and the theory beside them
* ``keys``       CurveZMQ key helpers

The names below are imported on first use (PEP 562), so that ``dcop run`` can start the agents'
template from :mod:`dcop.coordinator.processes` before the heavier modules load.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: name -> the module that defines it
_EXPORTS = {
    "Coordinator": "dcop.coordinator.driver",
    "agent_command": "dcop.coordinator.launch",
    "free_ports": "dcop.coordinator.launch",
    "run_local": "dcop.coordinator.launch",
    "write_result": "dcop.coordinator.launch",
    "AgentProcesses": "dcop.coordinator.processes",
    "RunResult": "dcop.results.run",
    "Layout": "dcop.coordinator.topology",
    "RunPlan": "dcop.coordinator.plan",
    "check_peers": "dcop.coordinator.topology",
    "layout_for": "dcop.coordinator.topology",
    "peers_for": "dcop.coordinator.topology",
    "round_robin": "dcop.coordinator.topology",
    "AgentEntry": "dcop.protocol.peers",
    "Peers": "dcop.protocol.peers",
    "load_peers": "dcop.protocol.peers",
    "parse_peers": "dcop.protocol.peers",
}

if TYPE_CHECKING:
    from dcop.coordinator.driver import Coordinator
    from dcop.coordinator.launch import agent_command, free_ports, run_local, write_result
    from dcop.coordinator.plan import RunPlan
    from dcop.coordinator.processes import AgentProcesses
    from dcop.coordinator.topology import (
        Layout,
        check_peers,
        layout_for,
        peers_for,
        round_robin,
    )
    from dcop.protocol.peers import AgentEntry, Peers, load_peers, parse_peers
    from dcop.results.run import RunResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dcop.coordinator' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "AgentEntry",
    "AgentProcesses",
    "Coordinator",
    "Layout",
    "Peers",
    "RunPlan",
    "RunResult",
    "agent_command",
    "check_peers",
    "free_ports",
    "layout_for",
    "load_peers",
    "parse_peers",
    "peers_for",
    "round_robin",
    "run_local",
    "write_result",
]
