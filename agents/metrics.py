"""What an agent measures on its own wire and clock, kept in the protocol's ``AgentMetrics``.

Counts and bytes per message type, sent and received (measured frame lengths), compute time,
the size of the UTIL message it sent, and frames it dropped. The logical clock (the paper's
simulated runtime) is kept by the agent and stamped in at :meth:`Meter.snapshot`.
"""

from __future__ import annotations

from msgspec.structs import replace

from dcop.protocol import AgentMetrics


class Meter:
    """Accumulates one agent's :class:`~dcop.protocol.AgentMetrics`."""

    def __init__(self) -> None:
        self.metrics = AgentMetrics()

    def sent(self, kind: str, nbytes: int) -> None:
        """One message of type ``kind`` and ``nbytes`` bytes went out."""
        _count(self.metrics.sent_count, self.metrics.sent_bytes, kind, nbytes)
        if nbytes > self.metrics.largest_sent:
            self.metrics = replace(self.metrics, largest_sent=nbytes)

    def received(self, kind: str, nbytes: int) -> None:
        """One message of type ``kind`` and ``nbytes`` bytes came in."""
        _count(self.metrics.recv_count, self.metrics.recv_bytes, kind, nbytes)

    def computed(self, seconds: float) -> None:
        """``seconds`` of computation (joins, eliminations, value choices)."""
        self.metrics = replace(self.metrics, compute_s=self.metrics.compute_s + seconds)

    def util_sent(self, nbytes: int, entries: int, tables: int) -> None:
        """The UTIL message this agent sent: its bytes, table entries and number of tables."""
        self.metrics = replace(
            self.metrics, util_bytes=nbytes, util_entries=entries, util_tables=tables
        )

    def handed_over(self, nbytes: int, tables: int) -> None:
        """UTIL tables handed to the parent by CUDA IPC instead of the network."""
        self.metrics = replace(self.metrics, ipc_bytes=nbytes, ipc_tables=tables)

    def dropped(self) -> None:
        """A frame was refused and dropped."""
        self.metrics = replace(self.metrics, dropped=self.metrics.dropped + 1)

    def set_up(self, seconds: float) -> None:
        """Time spent getting ready (not part of the solve)."""
        self.metrics = replace(self.metrics, setup_s=seconds)

    def snapshot(self, clock: float, backend: dict[str, float] | None = None) -> AgentMetrics:
        """A copy to send, with the agent's logical clock and its backend's figures."""
        m = self.metrics
        return replace(
            m,
            sent_count=dict(m.sent_count),
            sent_bytes=dict(m.sent_bytes),
            recv_count=dict(m.recv_count),
            recv_bytes=dict(m.recv_bytes),
            clock=clock,
            backend=dict(backend or {}),
        )


def _count(counts: dict[str, int], sizes: dict[str, int], kind: str, nbytes: int) -> None:
    counts[kind] = counts.get(kind, 0) + 1
    sizes[kind] = sizes.get(kind, 0) + nbytes
