"""The coordinator: peers.json, launching agent processes, driving a run, results and metrics.

* ``run_local(problem, algo="dpop", z=None, gpu=None, timeout=120.0, ...)`` - one process per
  variable on this machine; returns the result dict.
* ``Coordinator`` - drives a run over any Transport (agents started elsewhere, or in-process).
* ``make_peers`` / ``load_peers`` - peers.json; ``keys`` - CurveZMQ key helpers.
* ``print_summary(result)`` - the readable summary (rich) of a result dict.
"""

from dcop.coordinator.driver import Coordinator, check_peers, choose_roots
from dcop.coordinator.launch import (
    AgentProcesses,
    agent_command,
    free_ports,
    make_peers,
    run_local,
    write_result,
)
from dcop.coordinator.report import print_summary
from dcop.protocol.peers import AgentEntry, Peers, load_peers, parse_peers

__all__ = [
    "AgentEntry",
    "AgentProcesses",
    "Coordinator",
    "Peers",
    "agent_command",
    "check_peers",
    "choose_roots",
    "free_ports",
    "load_peers",
    "make_peers",
    "parse_peers",
    "print_summary",
    "run_local",
    "write_result",
]
