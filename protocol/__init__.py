"""The agent protocol: message types, the validating msgpack codec, constants and transports.

* ``constants``  PROTOCOL_VERSION, HEARTBEAT_INTERVAL_S, PEER_TIMEOUT_S, message size limits
* ``runspec``    RunSpec: the run's parameters, validated once at the edge, carried in Start
* ``messages``   frozen dataclasses, one per message type, with ``to_wire()`` / ``from_wire()``
* ``codec``      ``encode`` / ``decode`` of the envelope; every failure is a ``ProtocolError``
* ``transport``  the ``Transport`` interface and an in-process hub for tests
* ``zmqlink``    ZeroMQ transports (ROUTER/DEALER), with optional CURVE
* ``curve``      CurveZMQ key generation and loading

Nothing here solves anything or touches a device.
"""

from dcop.protocol.codec import Envelope, decode, encode
from dcop.protocol.constants import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    HEARTBEAT_INTERVAL_S,
    PEER_TIMEOUT_S,
    PROTOCOL_VERSION,
)
from dcop.protocol.messages import (
    MESSAGE_TYPES,
    AgentMetrics,
    Degree,
    Error,
    Heartbeat,
    Hello,
    Message,
    Ready,
    Result,
    Setup,
    Start,
    Stop,
    Token,
    Util,
    Value,
    WireTable,
)
from dcop.protocol.runspec import ALGOS, RunSpec, peer_timeout_for
from dcop.protocol.transport import InProcHub, InProcTransport, Transport

__all__ = [
    "ALGOS",
    "COORDINATOR_ID",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "HEARTBEAT_INTERVAL_S",
    "MESSAGE_TYPES",
    "PEER_TIMEOUT_S",
    "PROTOCOL_VERSION",
    "AgentMetrics",
    "Degree",
    "Envelope",
    "Error",
    "Heartbeat",
    "Hello",
    "InProcHub",
    "InProcTransport",
    "Message",
    "Ready",
    "Result",
    "RunSpec",
    "Setup",
    "Start",
    "Stop",
    "Token",
    "Transport",
    "Util",
    "Value",
    "WireTable",
    "decode",
    "encode",
    "peer_timeout_for",
]
