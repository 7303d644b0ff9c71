"""DCOP agents: one process per variable running DFS, DPOP and ADPOP(z) over a Transport.

``Agent`` (the state machine, :mod:`dcop.agents.agent`) never imports zmq; an agent process
(:mod:`dcop.agents.run`, behind ``dcop-agent``'s command line in :mod:`dcop.agents.cli`) wires it
to the ZeroMQ transport of :mod:`dcop.protocol.zmqlink`.
``Agent`` and ``AgentConfig`` load on first use, so that importing a submodule does not load the
agent and its backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dcop.agents.agent import Agent, AgentConfig

__all__ = ["Agent", "AgentConfig"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from dcop.agents import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'dcop.agents' has no attribute {name!r}")
