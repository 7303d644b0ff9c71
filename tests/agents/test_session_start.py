"""A start that reaches an agent before its neighbours' degrees waits for them.

The start rides on each agent's setup, which goes out as soon as the agent and its neighbours have
said hello; an agent's DFS looks two hops ahead (its neighbours' neighbour lists, from their degree
messages), so the agent keeps the start until the last degree is in. It sends the coordinator no
ready (wire version 8).
"""

from __future__ import annotations

import numpy as np
import pytest

from dcop.agents.jobs import Worker
from dcop.agents.metrics import Meter
from dcop.agents.session import Part, Session
from dcop.backends import get_backend
from dcop.errors import ProtocolError
from dcop.protocol import COORDINATOR_ID, Degree, RunSpec, Start, Token
from dcop.tables import Table


def _root_session() -> Session:
    """Agent 1 (x1, domain 2) with neighbours 0 (x0) and 2 (x2), the root of tree 0."""
    backend = get_backend("numpy")
    table = Table(("x0", "x1"), np.zeros((2, 2), np.float32))
    part = Part("x1", 2, (table,), {0: "x0", 2: "x2"})
    return Session(1, part, backend, Meter(), worker=Worker("test-jobs"))


def _types(out: list[tuple[int, object]]) -> list[tuple[int, type]]:
    return [(peer, type(message)) for peer, message in out]


def _first_token_when_ready() -> tuple[int, object]:
    """The token a root sends when its start comes after every degree."""
    session = _root_session()
    session.begin()
    session.on(0, Degree((1,), 0.0))
    assert session.on(2, Degree((1, 3), 0.0)) == []  # ready: nothing to tell the coordinator
    (token,) = session.on(COORDINATOR_ID, Start(RunSpec(trees=1), (0,)))
    assert isinstance(token[1], Token)
    return token


def test_a_start_before_the_degrees_waits_for_them() -> None:
    session = _root_session()
    assert _types(session.begin()) == [(0, Degree), (2, Degree)]
    start = Start(RunSpec(trees=1), (0,))
    assert session.on(COORDINATOR_ID, start) == []  # no token yet: my neighbours' lists missing
    assert session.phase == "degree exchange"
    assert session.on(0, Degree((1,), 0.0)) == []
    (token,) = session.on(2, Degree((1, 3), 0.0))  # the last degree: ready, then the DFS
    assert token == _first_token_when_ready()  # the same walk as with every list known
    assert session.phase == "dfs"
    with pytest.raises(ProtocolError, match="second start"):
        session.on(COORDINATOR_ID, start)


def test_a_second_start_while_the_first_waits_is_refused() -> None:
    session = _root_session()
    session.begin()
    session.on(COORDINATOR_ID, Start(RunSpec(trees=1), (0,)))
    with pytest.raises(ProtocolError, match="second start"):
        session.on(COORDINATOR_ID, Start(RunSpec(trees=1), (0,)))


def test_a_run_whose_agent_never_gets_ready_names_it(run_inproc, monkeypatch) -> None:
    """A run whose agent never gets ready (a neighbour's degree never came) still ends naming
    the agents that wait: agents send no ready, but their heartbeats say what they wait for
    (a peer timeout of 2 s: they beat after 1 s; the DFS stalls after 2 s more)."""
    from dcop.agents import session as session_module
    from dcop.errors import RunError, RunTimeout
    from tests.conftest import random_problem

    problem = random_problem(3, n=6, p_inf=0.0)
    begin = session_module.Session.begin

    def silent_agent_0(self: Session) -> list[tuple[int, object]]:
        out = begin(self)
        return [] if self.me == 0 else out  # agent 0 never sends its degree

    monkeypatch.setattr(session_module.Session, "begin", silent_agent_0)
    with pytest.raises((RunTimeout, RunError), match="did not get ready") as failed:
        run_inproc(problem, timeout=6.0, spec=RunSpec(peer_timeout_s=2.0))
    names = {v for v in problem.variables if f"({v})" in str(failed.value)}
    first = next(iter(problem.variables))  # agent 0's variable
    assert names == problem.neighbours()[first], str(failed.value)


def test_a_coordinator_lost_right_after_its_setup_is_lost() -> None:
    """An agent that sees its coordinator's link drop before reading the setup queued behind
    the loss takes the setup, then the loss: a one-shot agent exits instead of waiting for a
    coordinator that is gone (the run's timeout). Found when the starts stopped waiting for
    every ready: a coordinator could now die with setups just sent."""
    from dcop.agents.agent import Agent, AgentConfig
    from dcop.protocol import InProcHub, Setup, WireTable, encode

    hub = InProcHub()
    coordinator = hub.transport(COORDINATOR_ID)
    agent = Agent(AgentConfig(0), hub.transport(0), get_backend("numpy"))
    table = WireTable.from_array(("x0",), np.zeros(2, np.float32))
    coordinator.send(0, encode(COORDINATOR_ID, 0, Setup("x0", 2, (table,), "0" * 64), 1))
    coordinator.close()  # the coordinator is gone; its setup still waits in the agent's box
    assert agent._check_losses() is True  # lost, after taking the setup
    assert agent.coordinator_heard and agent.session is not None


@pytest.mark.parametrize(
    ("domains", "sent"),
    [((2,), (2,)), ((2, 2), (2,)), ((3, 2), (3, 2, 2))],
)
def test_a_child_token_names_one_domain_size_when_all_are_equal(
    domains: tuple[int, ...], sent: tuple[int, ...]
) -> None:
    """One size stands for every ancestor's where they are equal (a 1000-agent tree's tokens
    carried a size per ancestor); a receiver reads it back as one per ancestor."""
    session = _root_session()
    session.begin()
    session.on(0, Degree((1,), 0.0))
    session.on(2, Degree((1, 3), 0.0))
    session.on(COORDINATOR_ID, Start(RunSpec(trees=1), ()))
    path = (5, 0)  # an ancestor above my parent x0
    (out,) = session.on(0, Token(0, "child", (1, 1), 0.0, path=path, domains=domains))
    peer, token = out
    assert peer == 2 and isinstance(token, Token)
    assert token.path == (5, 0, 1) and token.domains == sent
    assert session.trees[0].ancestor_domains() == {5: (domains * 2)[0], 0: 2}
