"""DCOP agents: one process per variable running DFS, DPOP and ADPOP(z) over a Transport.

``Agent`` (the state machine, :mod:`dcop.agents.agent`) never imports zmq; ``dcop-agent``
(:mod:`dcop.agents.cli`) wires it to the ZeroMQ transport of :mod:`dcop.protocol.zmqlink`.
"""

from dcop.agents.agent import Agent, AgentConfig

__all__ = ["Agent", "AgentConfig"]
