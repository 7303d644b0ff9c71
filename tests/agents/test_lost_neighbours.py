"""A neighbour's link lost before the agent's result is an error it reports; lost after it (the
neighbour was stopped first, at the end of the run), it is let go: its connection is no longer
retried until this agent's own stop (issue 49: the stops of n agents take O(n), and every
neighbour gone meanwhile cost a reconnection, and a wake, every 100 ms)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from dcop.agents.agent import Agent, AgentConfig
from dcop.backends import get_backend
from dcop.protocol import COORDINATOR_ID
from dcop.protocol.codec import decode
from dcop.protocol.transport import PeerLoss


class _Transport:
    """Reports the losses it is given, records what the agent sends and which links it drops."""

    endpoint = "inproc://fake"

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any]] = []
        self.losses: list[PeerLoss] = []
        self.disconnected: list[int] = []

    def send(self, peer: int, frames: list[Any]) -> None:
        self.sent.append((peer, decode(frames).body))

    def lost_peers(self) -> list[PeerLoss]:
        losses, self.losses = self.losses, []
        return losses

    def disconnect_peer(self, peer: int) -> None:
        self.disconnected.append(peer)


def _agent() -> tuple[Agent, _Transport]:
    transport = _Transport()
    agent = Agent(AgentConfig(me=1), transport, get_backend("numpy"))  # type: ignore[arg-type]
    peers = SimpleNamespace(peers={2: "x2", 3: "x3"})
    agent.session = SimpleNamespace(part=peers, spec=None)  # type: ignore[assignment]
    return agent, transport


def _errors(transport: _Transport) -> list[Any]:
    return [b for p, b in transport.sent if p == COORDINATOR_ID and b.TYPE == "error"]


def test_a_neighbour_lost_before_the_result_is_reported_once_and_kept() -> None:
    agent, transport = _agent()
    transport.losses = [PeerLoss(2, 0.0), PeerLoss(2, 0.1)]
    assert agent._check_losses() is False
    errors = _errors(transport)
    assert len(errors) == 1 and errors[0].peer == 2
    assert transport.disconnected == []  # libzmq may yet link it again: the run decides


def test_a_neighbour_lost_after_the_result_is_let_go_without_a_report() -> None:
    agent, transport = _agent()
    agent.result_sent = True
    transport.losses = [PeerLoss(3, 0.0), PeerLoss(2, 0.0), PeerLoss(9, 0.0)]
    assert agent._check_losses() is False
    assert _errors(transport) == []
    # its neighbours' links closed (9 is none of its neighbours: not its link to drop)
    assert transport.disconnected == [3, 2]
