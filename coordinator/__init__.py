"""The coordinator: peers.json, launching agent processes, driving a run, results and metrics.

* ``topology``  ``peers_for`` (one agent per variable, neighbours from the primal graph),
  ``check_peers``, ``choose_roots``
* ``driver``    ``Coordinator``: drives one run over any Transport (ZMQ or in-process)
* ``launch``    ``run_local(problem, spec)``: one agent process per variable on this machine
* ``result``    ``RunResult``: the typed result, written as the shared result document
* ``metrics``   wire metrics and the theory beside them; ``report`` the readable summary
* ``keys``      CurveZMQ key helpers
"""

from dcop.coordinator.driver import Coordinator
from dcop.coordinator.launch import (
    agent_command,
    free_ports,
    run_local,
    write_result,
)
from dcop.coordinator.processes import AgentProcesses
from dcop.coordinator.report import print_summary
from dcop.coordinator.result import RunResult
from dcop.coordinator.topology import Layout, check_peers, layout_for, peers_for, round_robin
from dcop.protocol.peers import AgentEntry, Peers, load_peers, parse_peers

__all__ = [
    "AgentEntry",
    "AgentProcesses",
    "Coordinator",
    "Layout",
    "Peers",
    "RunResult",
    "agent_command",
    "check_peers",
    "free_ports",
    "layout_for",
    "load_peers",
    "parse_peers",
    "peers_for",
    "print_summary",
    "round_robin",
    "run_local",
    "write_result",
]
