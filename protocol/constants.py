"""Protocol constants: the one place for the wire version, liveness timing and size limits."""

from __future__ import annotations

#: Wire-protocol version; every message carries it and a mismatch is rejected.
PROTOCOL_VERSION = 1

#: Seconds between heartbeats an agent sends to the coordinator and to quiet neighbours.
HEARTBEAT_INTERVAL_S = 0.5

#: Seconds of silence after which a peer (agent or coordinator) is declared dead.
PEER_TIMEOUT_S = 10.0

#: Largest frame a decoder accepts (256 MiB: a float64 UTIL table of 32 M entries).
MAX_FRAME_BYTES = 256 * 1024 * 1024

#: Slowest rate (bytes/s) at which a peer is assumed to pack, send, receive and unpack one frame:
#: heartbeats queue behind a large frame on the same socket, so silence is judged against it.
SLOWEST_FRAME_BYTES_PER_S = 100e6


def peer_timeout_for(max_frame_bytes: int) -> float:
    """Silence allowed before a peer counts as dead when frames may reach ``max_frame_bytes``:
    PEER_TIMEOUT_S, or longer where one largest frame could hold the link that long."""
    return max(PEER_TIMEOUT_S, 2 * max_frame_bytes / SLOWEST_FRAME_BYTES_PER_S)


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

#: dtypes a table may travel in (little-endian floats).
TABLE_DTYPES = ("<f8", "<f4")
