"""Setups go out during the hello phase: an agent gets its own as soon as it and its neighbours
have said where they listen (the Setup names their endpoints), not after every agent's hello."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from dcop.coordinator import Coordinator, peers_for, round_robin
from dcop.errors import RunTimeout
from dcop.model import CostTable, Problem, Variable
from dcop.protocol import COORDINATOR_ID, Hello, InProcHub, Setup, decode, encode

#: x0 - x1 - x2 - x3: agent i runs xi
CHAIN = Problem.build(
    [Variable(f"x{i}", (0, 1)) for i in range(4)],
    [CostTable((f"x{i}", f"x{i + 1}"), np.eye(2)) for i in range(3)],
)


def setups_seen(box: queue.Queue, timeout: float = 0.3) -> bool:
    """Whether a Setup is waiting in an agent's box (it is taken out)."""
    try:
        _, frames = box.get(timeout=timeout)
    except queue.Empty:
        return False
    return isinstance(decode(frames).body, Setup)


def test_setups_follow_the_hellos_of_an_agent_and_its_neighbours() -> None:
    peers = peers_for(CHAIN, *round_robin(["127.0.0.1"], 0, list(range(31000, 31005))))
    hub = InProcHub()
    coordinator = hub.transport(COORDINATOR_ID)
    agents = {a.id: hub.transport(a.id) for a in peers.agents}
    ids = {a.variable: a.id for a in peers.agents}
    failure: list[BaseException] = []

    def run() -> None:
        try:
            Coordinator(CHAIN, peers, coordinator, timeout=3.0, hello_timeout=3.0).run()
        except BaseException as exc:  # the run times out: not every agent says hello
            failure.append(exc)

    def hello(var: str) -> None:
        me = ids[var]
        agents[me].send(
            COORDINATOR_ID, encode(me, COORDINATOR_ID, Hello(var, 1, "h", f"tcp://h:{me}"))
        )

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    hello("x0")
    assert not setups_seen(hub.box(ids["x0"]))  # its neighbour x1 has not said hello
    hello("x1")
    assert setups_seen(hub.box(ids["x0"]), 5.0)  # x0 and x1 known: x0's setup goes out now
    assert not setups_seen(hub.box(ids["x1"]))  # x1 still waits for x2
    hello("x2")
    assert setups_seen(hub.box(ids["x1"]), 5.0)
    assert not setups_seen(hub.box(ids["x2"]))  # x3 never says hello
    thread.join(10)
    assert len(failure) == 1 and isinstance(failure[0], RunTimeout)
    with pytest.raises(queue.Empty):  # x3 never got a setup, nor x2
        while True:
            _, frames = hub.box(ids["x2"]).get_nowait()
            assert not isinstance(decode(frames).body, Setup)
