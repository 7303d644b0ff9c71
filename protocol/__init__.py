"""The agent protocol: message types, the validating msgpack codec, constants and transports.

* ``constants``  PROTOCOL_VERSION, heartbeats and timeouts, default ports, message size limits
* ``runspec``    RunSpec: the run's parameters, validated once at the edge, carried in Start
  (inside each Setup); ``sizing_choices`` (the z list every TreeReport is sized for)
* ``messages``   frozen msgspec Structs, one per message type, each field declared once with
  its bounds
* ``codec``      ``encode`` / ``decode`` of the envelope (one validating decoder); every failure
  is a ``ProtocolError``
* ``transport``  the ``Transport`` interface (frames by id, lost peers) and an in-process hub
* ``zmqlink``    ZeroMQ transports (ROUTER/DEALER): who sent a frame, refusals, liveness, CURVE
* ``curve``      CurveZMQ key generation and loading
* ``endpoints``  what to bind, the ephemeral port range, self-connection checks
* ``ratelog``    rate-limited log lines for refused frames
* ``peers``      peers.json
* ``agent_options``  what starts one agent (``dcop-agent``'s options as data), shared by the
  launcher and the agent process
* ``digest``     the digest of one agent's part of a problem, carried in Setup

Nothing here solves anything or touches a device: the pseudo-tree algorithm (DFS, candidates,
sizing) lives in :mod:`dcop.trees`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dcop.protocol.codec import Envelope, decode, encode
    from dcop.protocol.constants import (
        COORDINATOR_ID,
        DEFAULT_AGENT_BASE_PORT,
        DEFAULT_COORDINATOR_PORT,
        DEFAULT_MAX_MESSAGE_BYTES,
        HEARTBEAT_INTERVAL_S,
        PEER_TIMEOUT_S,
        PROTOCOL_VERSION,
        ZMTP_HEARTBEAT_IVL_S,
    )
    from dcop.protocol.messages import (
        MESSAGE_TYPES,
        AgentMetrics,
        Degree,
        Done,
        Down,
        Error,
        Go,
        Heartbeat,
        Hello,
        IpcTable,
        Message,
        Neighbour,
        Offer,
        Result,
        Setup,
        Sizing,
        Start,
        Stop,
        Token,
        TreeReport,
        Util,
        Value,
        WireTable,
    )
    from dcop.protocol.runspec import ALGOS, TASKS, RunSpec, peer_timeout_for
    from dcop.protocol.transport import (
        AgentTransport,
        Frames,
        InProcHub,
        InProcTransport,
        PeerLoss,
        Received,
        Transport,
    )

#: Each re-exported name and its module: loaded on first use, so that a command which only
#: needs a constant (``dcop solve``'s options) does not import msgspec, the codec and the
#: messages (~30 ms of every start-up).
_HOME = {
    "Envelope": "dcop.protocol.codec",
    "decode": "dcop.protocol.codec",
    "encode": "dcop.protocol.codec",
    "COORDINATOR_ID": "dcop.protocol.constants",
    "DEFAULT_AGENT_BASE_PORT": "dcop.protocol.constants",
    "DEFAULT_COORDINATOR_PORT": "dcop.protocol.constants",
    "DEFAULT_MAX_MESSAGE_BYTES": "dcop.protocol.constants",
    "HEARTBEAT_INTERVAL_S": "dcop.protocol.constants",
    "PEER_TIMEOUT_S": "dcop.protocol.constants",
    "PROTOCOL_VERSION": "dcop.protocol.constants",
    "ZMTP_HEARTBEAT_IVL_S": "dcop.protocol.constants",
    "MESSAGE_TYPES": "dcop.protocol.messages",
    "AgentMetrics": "dcop.protocol.messages",
    "Degree": "dcop.protocol.messages",
    "Done": "dcop.protocol.messages",
    "Down": "dcop.protocol.messages",
    "Error": "dcop.protocol.messages",
    "Go": "dcop.protocol.messages",
    "Heartbeat": "dcop.protocol.messages",
    "Hello": "dcop.protocol.messages",
    "IpcTable": "dcop.protocol.messages",
    "Message": "dcop.protocol.messages",
    "Neighbour": "dcop.protocol.messages",
    "Offer": "dcop.protocol.messages",
    "Result": "dcop.protocol.messages",
    "Setup": "dcop.protocol.messages",
    "Sizing": "dcop.protocol.messages",
    "Start": "dcop.protocol.messages",
    "Stop": "dcop.protocol.messages",
    "Token": "dcop.protocol.messages",
    "TreeReport": "dcop.protocol.messages",
    "Util": "dcop.protocol.messages",
    "Value": "dcop.protocol.messages",
    "WireTable": "dcop.protocol.messages",
    "ALGOS": "dcop.protocol.runspec",
    "TASKS": "dcop.protocol.runspec",
    "RunSpec": "dcop.protocol.runspec",
    "peer_timeout_for": "dcop.protocol.runspec",
    "AgentTransport": "dcop.protocol.transport",
    "Frames": "dcop.protocol.transport",
    "InProcHub": "dcop.protocol.transport",
    "InProcTransport": "dcop.protocol.transport",
    "PeerLoss": "dcop.protocol.transport",
    "Received": "dcop.protocol.transport",
    "Transport": "dcop.protocol.transport",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'dcop.protocol' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "ALGOS",
    "COORDINATOR_ID",
    "DEFAULT_AGENT_BASE_PORT",
    "DEFAULT_COORDINATOR_PORT",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "HEARTBEAT_INTERVAL_S",
    "MESSAGE_TYPES",
    "PEER_TIMEOUT_S",
    "PROTOCOL_VERSION",
    "TASKS",
    "ZMTP_HEARTBEAT_IVL_S",
    "AgentMetrics",
    "AgentTransport",
    "Degree",
    "Done",
    "Down",
    "Envelope",
    "Error",
    "Frames",
    "Go",
    "Heartbeat",
    "Hello",
    "InProcHub",
    "InProcTransport",
    "IpcTable",
    "Message",
    "Neighbour",
    "Offer",
    "PeerLoss",
    "Received",
    "Result",
    "RunSpec",
    "Setup",
    "Sizing",
    "Start",
    "Stop",
    "Token",
    "Transport",
    "TreeReport",
    "Util",
    "Value",
    "WireTable",
    "decode",
    "encode",
    "peer_timeout_for",
]
