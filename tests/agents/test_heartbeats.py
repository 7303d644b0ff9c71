"""When an agent heartbeats: only on a link to the coordinator quiet for half the peer
timeout, counted from its start (not from its hello, which may be a long launch ago), and never
while it only waits for the coordinator (for its setup, or for the go once its part of the
candidate trees is done)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

from dcop.agents.agent import Agent, AgentConfig
from dcop.backends import get_backend
from dcop.protocol import COORDINATOR_ID, RunSpec, Start
from dcop.protocol.codec import decode


class _Transport:
    """Records what the agent sends."""

    endpoint = "inproc://fake"

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any]] = []
        #: links that completed a handshake since the agent last asked
        self.joined: list[int] = []
        #: links whose queue a failed connection took before their latest join
        self.dropped: set[int] = set()

    def send(self, peer: int, frames: list[Any]) -> None:
        self.sent.append((peer, decode(frames).body))

    def joined_peers(self) -> list[int]:
        joined, self.joined = self.joined, []
        return joined

    def dropped_before_join(self, peer: int) -> bool:
        return peer in self.dropped


def _agent(clock: list[float]) -> tuple[Agent, _Transport]:
    transport = _Transport()
    agent = Agent(
        AgentConfig(me=1, heartbeat_s=1.0),
        transport,  # type: ignore[arg-type]
        get_backend("numpy"),
        now=lambda: clock[0],
    )
    return agent, transport


def _beats(transport: _Transport) -> int:
    return sum(
        1 for peer, body in transport.sent if peer == COORDINATOR_ID and body.TYPE == "heartbeat"
    )


def test_no_heartbeat_on_start_after_a_long_launch() -> None:
    clock = [0.0]
    agent, transport = _agent(clock)
    spec = RunSpec(peer_timeout_s=9.0)  # quiet allowed: 4.5 s
    agent.last_to_coordinator = 0.0  # its hello
    agent.session = SimpleNamespace(
        spec=spec, held_start=None, job=None, phase="dfs", awaiting_go=False, go=True
    )  # type: ignore[assignment]
    clock[0] = 60.0  # the launch of the others took a minute
    agent._on_start(Start(spec, ()))
    agent._beat()
    assert _beats(transport) == 0
    clock[0] = 61.0
    agent._beat()  # 1 s quiet, the next check at 2 s: still within 3 s
    assert _beats(transport) == 0
    clock[0] = 63.0
    agent._beat()  # 3 s quiet, the next check at 4 s: still within 4.5 s
    assert _beats(transport) == 0
    clock[0] = 64.0
    agent._beat()  # the next check (5 s) would be too late: it beats now
    assert _beats(transport) == 1


def test_a_waiting_agent_sends_no_heartbeat() -> None:
    clock = [100.0]
    agent, transport = _agent(clock)
    agent._beat()
    assert _beats(transport) == 0


def test_an_agent_waiting_for_its_go_sends_no_heartbeat() -> None:
    """Its part of the candidate trees done, an agent waits on the coordinator's go alone: the
    coordinator counts its silence only from the go (the start rides on the setup, so that wait
    can be the rest of a long launch)."""
    clock = [0.0]
    agent, transport = _agent(clock)
    spec = RunSpec(peer_timeout_s=9.0)
    session = SimpleNamespace(
        spec=spec, held_start=None, job=None, phase="dfs", awaiting_go=True, go=None
    )
    agent.session = session  # type: ignore[assignment]
    agent._on_start(Start(spec, ()))
    clock[0] = 60.0
    agent._beat()
    assert _beats(transport) == 0
    session.awaiting_go, session.go = False, True  # the go came: a quiet link beats
    agent._beat()
    assert _beats(transport) == 1


def test_before_the_go_a_heartbeat_goes_only_with_news() -> None:
    """Before the go the coordinator watches no silence, only whether the candidate trees move:
    an agent whose DFS sent nothing since its last beat stays quiet; one whose tokens moved
    beats; one still waiting for a neighbour's degree says so once, when that wait nears the
    peer timeout (the coordinator names it if the DFS stalls)."""
    from dcop.protocol.constants import LINKING_PHASE

    clock = [0.0]
    agent, transport = _agent(clock)
    spec = RunSpec(peer_timeout_s=9.0)  # quiet allowed: 4.5 s
    session = SimpleNamespace(
        spec=spec, held_start=None, job=None, phase="dfs", awaiting_go=False, go=None
    )
    agent.session = session  # type: ignore[assignment]
    agent._on_start(Start(spec, ()))
    clock[0] = 5.0
    agent._beat()  # waiting for a child's token, nothing sent: no beat
    assert _beats(transport) == 0
    agent.meter.sent("token", 40)  # the walk went on through me
    clock[0] = 10.0
    agent._beat()
    assert _beats(transport) == 1
    clock[0] = 15.0
    agent._beat()  # nothing new since
    assert _beats(transport) == 1
    # and with nothing new, no timed wake comes due: the loop sleeps to its idle bound
    from dcop.agents.agent import IDLE_WAKE_S

    assert agent._wake_at(16.0) == 15.0 + IDLE_WAKE_S
    agent.meter.sent("token", 40)
    assert agent._wake_at(16.0) < 15.0 + IDLE_WAKE_S
    linking, quiet = _agent(clock)
    linking.session = SimpleNamespace(  # type: ignore[assignment]
        spec=spec, held_start=None, job=None, phase=LINKING_PHASE, awaiting_go=False, go=None
    )
    linking._on_start(Start(spec, ()))
    clock[0] = 19.0  # started at 15: quiet long enough, but linking for 4 s only
    linking._beat()
    assert _beats(quiet) == 0
    clock[0] = 24.0
    linking._beat()  # linking for 9 s: it says so, once
    assert _beats(quiet) == 1
    clock[0] = 34.0
    linking._beat()
    assert _beats(quiet) == 1


def test_no_heartbeat_once_the_result_is_out() -> None:
    """The coordinator stops watching an agent's silence once its result is in."""
    clock = [0.0]
    agent, transport = _agent(clock)
    spec = RunSpec(peer_timeout_s=9.0)
    agent.session = SimpleNamespace(
        spec=spec, held_start=None, job=None, phase="value", awaiting_go=False, go=True
    )  # type: ignore[assignment]
    agent._on_start(Start(spec, ()))
    agent.result_sent = True
    clock[0] = 30.0
    agent._beat()
    assert _beats(transport) == 0
    agent.result_sent = False  # the same quiet link without a result: a beat
    agent._beat()
    assert _beats(transport) == 1


def _hellos(transport: _Transport) -> list[int]:
    return [k for k, (peer, body) in enumerate(transport.sent) if body.TYPE == "hello"]


def test_an_unanswered_agent_repeats_its_hello_less_and_less_often() -> None:
    """A one-shot agent its coordinator has not answered says hello again at the checks 1, 2, 4
    ... s apart, up to half the peer timeout; a serving agent waiting for a problem every
    check."""
    clock = [0.0]
    agent, transport = _agent(clock)
    agent.cfg.peer_timeout_s = 10.0  # the longest gap: 5 s
    said = []
    for second in range(40):
        clock[0] = float(second)
        before = len(_hellos(transport))
        agent._beat()
        if len(_hellos(transport)) > before:
            said.append(second)
    assert said[:5] == [0, 1, 3, 7, 12]
    assert all(b - a == 5 for a, b in itertools.pairwise(said[3:]))
    agent.coordinator_heard = True  # answered: no more hellos
    clock[0] = 100.0
    agent._beat()
    assert len(_hellos(transport)) == len(said)
    serving, sent = _agent(clock)
    serving.cfg.serving = True
    for second in range(5):
        clock[0] = 200.0 + second
        serving._beat()
    assert len(_hellos(sent)) == 5


def test_a_one_shot_agent_stops_repeating_its_hello_once_its_coordinator_link_joined() -> None:
    """The timer's repeats are for a link that never joined; once it has, however long the
    setup takes (its neighbours' hellos first), no hello more (issue 49: 3.1 per agent at n =
    1000 before)."""
    clock = [0.0]
    agent, transport = _agent(clock)
    agent.cfg.peer_timeout_s = 10.0
    agent._beat()  # its first hello (at the start)
    transport.joined.append(COORDINATOR_ID)
    agent._greet_new_coordinator()
    for second in range(1, 60):
        clock[0] = float(second)
        agent._beat()
    assert len(_hellos(transport)) == 1
    assert agent._wake_at(60.0) == clock[0] + agent.cfg.idle_wake_s  # and no wake for one


def test_a_one_shot_agent_says_hello_again_only_when_its_coordinator_link_connects_again() -> None:
    """The hello sent at the start waits in the link's queue and leaves on its first connection:
    no second one then (one message more for every agent and its coordinator, issue 49); a
    later connection (the coordinator's port taken over, a squatter gone) gets a new one. A
    serving agent greets every connection."""
    clock = [0.0]
    agent, transport = _agent(clock)
    agent._hello()
    transport.joined.append(COORDINATOR_ID)
    agent._greet_new_coordinator()
    assert len(_hellos(transport)) == 1
    transport.joined.append(COORDINATOR_ID)
    agent._greet_new_coordinator()
    assert len(_hellos(transport)) == 2
    serving, sent = _agent(clock)
    serving.cfg.serving = True
    for _ in range(2):
        sent.joined.append(COORDINATOR_ID)
        serving._greet_new_coordinator()
    assert len(_hellos(sent)) == 2


def test_a_first_join_after_a_failed_handshake_says_hello_again() -> None:
    """A squatter on the coordinator's port, or a refused key: the failed connection took the
    hello queued at the start (issue 33), and the first clean join says it again."""
    clock = [0.0]
    agent, transport = _agent(clock)
    agent._hello()
    transport.dropped.add(COORDINATOR_ID)
    transport.joined.append(COORDINATOR_ID)
    agent._greet_new_coordinator()
    assert len(_hellos(transport)) == 2


def test_an_idle_agent_sleeps_until_something_is_due() -> None:
    """The loop wakes by itself only when a hello or a heartbeat is due, and at most IDLE_WAKE_S
    apart (to notice a launcher that is gone); a serving agent at each check (issue 49: a wake a
    second was about 20 empty turns per agent of a 1000-agent tree)."""
    from dcop.agents.agent import IDLE_WAKE_S

    clock = [50.0]
    agent, _ = _agent(clock)
    tick = 51.0  # a heartbeat_s after the last check
    agent.next_hello = 52.5  # not answered yet: its next hello
    assert agent._wake_at(tick) == 52.5
    agent.coordinator_heard = True  # set up, waiting for its start: nothing due
    assert agent._wake_at(tick) == 50.0 + IDLE_WAKE_S
    spec = RunSpec(peer_timeout_s=9.0)  # quiet allowed: 4.5 s
    agent.session = SimpleNamespace(
        spec=spec, held_start=None, job=None, phase="dfs", awaiting_go=False, go=True
    )  # type: ignore[assignment]
    agent.last_to_coordinator = 49.0
    due = agent._wake_at(tick)  # started: its heartbeat is due 3.5 s after its last message
    assert 52.5 < due < 52.6
    clock[0] = due
    agent._beat()  # and it does beat then (the next check would be too late)
    assert agent.last_to_coordinator == due
    agent.result_sent = True  # its result is out: nothing due again
    assert agent._wake_at(due + 1) == due + IDLE_WAKE_S
    agent.cfg.serving = True
    assert agent._wake_at(due + 1) == due + 1
