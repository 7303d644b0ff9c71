"""The agent protocol: message types, the validating msgpack codec, constants and transports.

* ``constants``  PROTOCOL_VERSION, heartbeats and timeouts, default ports, message size limits
* ``runspec``    RunSpec: the run's parameters, validated once at the edge, carried in Start;
  ``sizing_choices`` (the z list every TreeReport is sized for)
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
    Ready,
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
    "Ready",
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
