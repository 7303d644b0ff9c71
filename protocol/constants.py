"""Protocol constants: the one place for the wire version, liveness timing and size limits."""

from __future__ import annotations

#: Wire-protocol version; every message carries it and a mismatch is rejected (8: the start rides
#: on each agent's setup, and agents send no ready).
PROTOCOL_VERSION = 8

#: Seconds between an agent's checks for a heartbeat to the coordinator (proof that its loop
#: works, with its phase for the live status); one goes out only once the agent has its start,
#: and when it has sent the coordinator nothing for half the peer timeout (at least this).
#: Neighbours send none: ZeroMQ's own connection heartbeats (ZMTP) tell a transport when a link
#: is lost.
HEARTBEAT_INTERVAL_S = 1.0

#: An agent's phase, in its heartbeats, while it waits for a neighbour's degree (its links not all
#: up): the coordinator names such agents when the DFS does not finish (agents send no ready).
LINKING_PHASE = "degree exchange"

#: Least seconds between ZMTP PINGs on every ZeroMQ socket (the transport's own connection
#: heartbeat); a transport pings ``ZMTP_PINGS_PER_TIMEOUT`` times per heartbeat timeout, and not
#: more often than this. A peer that answers nothing for the transport's heartbeat timeout
#: (``peer_timeout_for`` of the frame limit, as a PONG may queue behind one largest frame) loses
#: its connection, and the transport reports it (``Transport.lost_peers``). A killed process is
#: noticed at once (its kernel closes the connection); heartbeats find a frozen host or a cut
#: link, within 1.5 heartbeat timeouts. (A PING a second on every link woke each of a
#: 1000-agent run's idle agents several times a second, and the coordinator a thousand; at four
#: per timeout, each agent's I/O thread still woke for a PING or PONG about every 0.3 s on a
#: tree, its wakes growing with the launch, so with n: two cut an agent's context switches from
#: 109-112 to 93-95 at n = 1000, its CPU within the shared machine's noise, issue 49.)
ZMTP_HEARTBEAT_IVL_S = 1.0
ZMTP_PINGS_PER_TIMEOUT = 2

#: Default ports: the coordinator's, and the first agent's (the k-th agent of a host listens on
#: ``DEFAULT_AGENT_BASE_PORT + k``). Both lie below every common ephemeral range (Linux
#: 32768-60999, the IANA range 49152-65535 of Windows and the BSDs): a port in that range can be
#: taken by any outgoing connection, even by a ZeroMQ socket reconnecting to that very port
#: (a TCP self-connection). See :mod:`dcop.protocol.endpoints`.
DEFAULT_COORDINATOR_PORT = 7000
DEFAULT_AGENT_BASE_PORT = 7001

#: Refused frames are logged once per peer and reason per this many seconds, with a count.
REFUSAL_LOG_INTERVAL_S = 5.0

#: Seconds of silence after which a peer (agent or coordinator) is declared dead.
PEER_TIMEOUT_S = 10.0
#: ...and at least this much per agent of a run on one host (``runspec.peer_timeout_at_scale``):
#: every agent that gets its start works at once, and on a 2-core host shared with other work the
#: last of 2000 agents heartbeated (and their links' ZMTP pings went) more than 10 s after it.
PEER_TIMEOUT_PER_AGENT_S = 0.01

#: Default largest message of a run (256 MiB: a float64 UTIL table of 32 M entries); a run's
#: own limit is its RunSpec's ``max_message_bytes`` (``--max-message-mib``).
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
#: Highest ``--max-message-mib``: msgpack's bin32 caps one table at 4 GiB.
MAX_MESSAGE_MIB = 4095

#: Slowest rate (bytes/s) at which a peer is assumed to pack, send, receive and unpack one frame:
#: heartbeats queue behind a large frame on the same socket, so silence is judged against it
#: (see :func:`dcop.protocol.runspec.peer_timeout_for`).
SLOWEST_FRAME_BYTES_PER_S = 100e6


#: The coordinator's id on the wire; agents are 0..MAX_AGENT_ID.
COORDINATOR_ID = -1
MAX_AGENT_ID = (1 << 31) - 1

#: Per-field limits checked on decode.
MAX_NAME_CHARS = 256
MAX_SCOPE = 64
MAX_DOMAIN = 1 << 24
MAX_TABLES = 4096
MAX_LIST = 1 << 20
MAX_TEXT_CHARS = 4096

#: Candidate pseudo-trees a run may build at once (the DFS ones; the coordinator's elimination
#: tree, where offered, is number MAX_TREES at most), and mini-bucket sizes it may size for.
MAX_TREES = 16
MAX_Z_CHOICES = MAX_SCOPE + 1

#: dtypes a table may travel in (little-endian floats).
TABLE_DTYPES = ("<f8", "<f4")
