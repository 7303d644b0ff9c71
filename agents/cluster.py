"""One agent's part in MB-DPOP: its place in a cluster, the cut fields of its back token, and the
state of the conditioned UTIL phase.

On the DFS (:func:`cut_fields`), a wide agent puts its separator on its back token; the first
non-wide agent above closes the cluster and plans its cut (:func:`dcop.trees.cutset.plan_cluster`);
the plans ride up to the coordinator, which sends them back in Go with the cut variables' names.

In a cluster (:class:`ClusterRole`) every member computes its UTIL chunk by chunk of contexts
(:func:`dcop.conditioned.chunk_util`) and sends each chunk up, in parts
(:mod:`dcop.agents.parts`); a parent grants room for
:data:`WINDOW` chunks ahead (``more``), so a cluster holds a few chunks, never a whole UTIL. The
root folds each chunk into its best UTIL per separator value (:class:`dcop.conditioned.Fold`) and
sends that up as its UTIL. When the root knows its separator's values (VALUE, or it is the tree's
root) it picks the best context and sends it down (``replay``); the members compute their UTIL
once more, conditioned on it, and VALUE goes down as in DPOP.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dcop.agents.parts import Assembly, HostEmpty
from dcop.conditioned import CTX, Fold, contexts
from dcop.errors import ProtocolError
from dcop.protocol.messages import ClusterCut, Whole, WideSep, WireTable
from dcop.trees.cutset import CutLimit, Wide, is_wide, plan_cluster

#: Chunks a cluster child may send ahead of its parent's use of them.
WINDOW = 2


def cut_fields(
    me: int,
    domain: int,
    parent: int | None,
    path: Sequence[int],
    separator: Sequence[int],
    domains: Mapping[int, int],
    below_wide: Sequence[WideSep],
    below_clusters: Sequence[ClusterCut],
    limit: CutLimit,
) -> tuple[tuple[WideSep, ...], tuple[ClusterCut, ...]]:
    """My back token's open wide separators and closed clusters: mine added where I am wide (a
    tree's root never is), or the cluster below closed where I am not."""
    sep_domains = tuple(domains[a] for a in separator)
    if parent is not None and is_wide(sep_domains, limit):
        mine = WideSep(me, len(path), domain, tuple(separator), sep_domains)
        return (mine, *below_wide), tuple(below_clusters)
    if not below_wide:
        return (), tuple(below_clusters)
    members = [Wide(w.agent, w.depth, w.domain, w.separator, w.domains) for w in below_wide]
    plan = plan_cluster(me, domain, path, separator, sep_domains, members, limit)
    closed = ClusterCut(plan.root, plan.members, plan.cut, plan.domains, plan.chunk, plan.work)
    return (), (*below_clusters, closed)


@dataclass
class ClusterRole:
    """My part in one cluster: its root, or a member. ``members`` are my children in it (they
    send chunks); my other children send one whole UTIL."""

    cluster: ClusterCut
    root: bool
    members: frozenset[int]
    #: the next chunk to compute, and (a member) the chunks my parent has room for
    next: int = 0
    upto: int = WINDOW
    #: chunk -> child -> its UTIL for that chunk (scope, table over CTX first), once complete
    received: dict[int, dict[int, tuple[tuple[str, ...], np.ndarray]]] = field(default_factory=dict)
    #: the parts of chunks still coming, by (child, chunk)
    arriving: Assembly = field(default_factory=Assembly)
    #: simulated time: when each chunk's last part arrived, and each grant of room (upto, the
    #: parent's clock), so that a chunk starts when what it uses is in, not when a later
    #: chunk's part or grant happens to arrive
    arrived_at: dict[int, float] = field(default_factory=dict)
    grants: list[tuple[int, float]] = field(default_factory=list)
    fold: Fold | None = None
    #: the best context (cut variable -> value), once the root has chosen it
    context: dict[str, int] | None = None
    #: the last pass, conditioned on the best context, has begun (a member: its last UTIL; the
    #: root: its bucket for VALUE)
    last: bool = False

    @staticmethod
    def of(
        me: int,
        clusters: Sequence[ClusterCut],
        children: Sequence[int],
        empty: HostEmpty = np.empty,
    ) -> ClusterRole | None:
        """My role in the Go's clusters (None: I am in none, and run DPOP's UTIL); chunks are
        put together in arrays of ``empty``."""
        for c in clusters:
            if c.root == me or me in c.members:
                inside = frozenset(ch for ch in children if ch in set(c.members))
                return ClusterRole(c, c.root == me, inside, arriving=Assembly(empty))
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return self.cluster.names

    @property
    def total(self) -> int:
        return int(np.prod(self.cluster.domains, dtype=np.float64))

    @property
    def chunks(self) -> int:
        return -(-self.total // self.cluster.chunk)

    def contexts_of(self, chunk: int) -> np.ndarray:
        start = chunk * self.cluster.chunk
        return contexts(self.cluster.domains, start, min(start + self.cluster.chunk, self.total))

    def count(self, chunk: int) -> int:
        """Contexts in chunk ``chunk`` (the last may hold fewer)."""
        return min(self.cluster.chunk, self.total - chunk * self.cluster.chunk)

    def take(
        self,
        sender: int,
        chunk: int,
        part: int,
        parts: int,
        whole: Whole,
        block: WireTable,
        clock: float = 0.0,
    ) -> None:
        """One part of a member child's UTIL for a chunk: a block of rows of a table over
        (CTX, ...) whose first axis holds the chunk's contexts."""
        if sender not in self.members or not self.next <= chunk < self.chunks:
            raise ProtocolError(f"a UTIL chunk {chunk} from {sender}, not one I wait for")
        if not whole.scope or whole.scope[0] != CTX or whole.shape[0] != self.count(chunk):
            raise ProtocolError(f"UTIL chunk {chunk} from {sender} is not over its contexts")
        if sender in self.received.get(chunk, {}):
            raise ProtocolError(f"UTIL chunk {chunk} from {sender} twice")
        table = self.arriving.take((sender, chunk), whole, part, parts, block)
        self.arrived_at[chunk] = max(self.arrived_at.get(chunk, 0.0), clock)
        if table is not None:
            self.received.setdefault(chunk, {})[sender] = (whole.scope, table)

    def grant(self, upto: int, clock: float) -> None:
        """My parent's room for chunks below ``upto``, given at its ``clock``."""
        if upto > self.upto:
            self.grants.append((upto, clock))
            self.upto = upto

    def inputs_at(self, chunk: int) -> float:
        """When chunk ``chunk``'s inputs were in (simulated time): its members' parts and, a
        member past the first window, the grant that made room for it."""
        at = self.arrived_at.pop(chunk, 0.0)
        granted = [c for upto, c in self.grants if upto > chunk]
        if chunk >= WINDOW and granted and not self.root:
            at = max(at, granted[0])
        return at

    def ready(self) -> bool:
        """Whether the next chunk can be computed: every member child's UTIL for it is in, and
        (a member) my parent has room for it."""
        if self.next >= self.chunks or (not self.root and self.next >= self.upto):
            return False
        return len(self.received.get(self.next, {})) == len(self.members)

    def chunk_rows(self, chunk: int) -> list[tuple[tuple[str, ...], np.ndarray]]:
        """Each member child's UTIL for a complete chunk, over (CTX, ...)."""
        return [self.received[chunk][child] for child in sorted(self.members)]

    def drop(self, chunk: int) -> None:
        self.received.pop(chunk, None)
        for child in self.members:
            self.arriving.drop((child, chunk))

    def context_values(self, index: int) -> dict[str, int]:
        row = contexts(self.cluster.domains, index, index + 1)[0]
        return dict(zip(self.names, (int(x) for x in row), strict=True))
