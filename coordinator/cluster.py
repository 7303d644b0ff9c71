"""Serving agents between problems: stopping them all (``dcop coordinator --shutdown``).

Serving agents (``dcop-agent --serve``) repeat their hello while they have no problem, so a
coordinator that starts later learns where they are. Each ``dcop coordinator --problem`` run
then solves one problem with them and leaves them up; :func:`shutdown_agents` tells every agent
of peers.json to exit.
"""

from __future__ import annotations

import logging
import time

from dcop.errors import ProtocolError
from dcop.protocol import COORDINATOR_ID, Heartbeat, Hello, Stop, Transport, decode, encode
from dcop.protocol.curve import CurveConfig
from dcop.protocol.peers import Peers

log = logging.getLogger("dcop.coordinator")


def shutdown_agents(peers: Peers, curve: CurveConfig | None, wait_s: float) -> list[int]:
    """Stop every agent of ``peers`` that says hello within ``wait_s`` seconds; return the ids
    stopped (an agent that is not running is not waited for longer)."""
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    ids = {a.id for a in peers.agents}
    transport = ZmqCoordinatorTransport(peers.coordinator, curve, agents=ids)
    try:
        return stop_agents(transport, ids, wait_s, "shutdown")
    finally:
        transport.close()


def stop_agents(
    transport: Transport, ids: set[int], wait_s: float, reason: str, spare_serving: bool = False
) -> list[int]:
    """Answer the hello or heartbeat of every agent in ``ids`` with a stop saying ``reason``,
    for up to ``wait_s`` seconds; return the ids stopped. A coordinator that cannot run a
    problem (its peers.json does not fit it, say) still releases the agents started for it;
    with ``spare_serving`` it leaves serving agents (``--serve``) up for the next problem."""
    stopped: list[int] = []
    spared: set[int] = set()
    deadline = time.monotonic() + wait_s
    while len(stopped) + len(spared) < len(ids) and (left := deadline - time.monotonic()) > 0:
        item = transport.recv(left)
        if item is None:
            continue
        sender, frames = item
        try:
            env = decode(frames, known_senders=ids, receiver=COORDINATOR_ID)
        except ProtocolError as exc:  # a bad frame is logged, the others still get their stop
            log.warning("coordinator: dropped a frame from %s: %s", sender, exc)
            continue
        if sender is None or env.sender != sender or sender in spared:
            continue
        if sender in stopped:  # still there: the stop was lost on a connection libzmq replaced
            if isinstance(env.body, Hello):
                transport.send(sender, encode(COORDINATOR_ID, sender, Stop(reason[:200])))
            continue
        if spare_serving and isinstance(env.body, Hello) and env.body.serving:
            spared.add(sender)
        elif isinstance(env.body, Hello | Heartbeat):
            transport.send(sender, encode(COORDINATOR_ID, sender, Stop(reason[:200])))
            stopped.append(sender)
    missing = sorted(ids - set(stopped) - spared)
    if missing:
        log.warning("coordinator: no hello from agents %s: not stopped", missing[:10])
    time.sleep(0.2)  # let the stop messages leave before the socket closes
    return sorted(stopped)
