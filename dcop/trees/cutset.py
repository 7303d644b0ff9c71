"""MB-DPOP's cycle cuts: which UTILs are too wide, how they group into clusters, and what to
condition on so that every UTIL message fits the limit.

Pure code over agent ids and domain sizes, run on both sides: each agent while its DFS back token
goes up (it carries the still-open wide separators of its subtree, :class:`OpenWide`), and the
coordinator's own simulation of a tree (:func:`clusters_of`), so both find the same cut.

A UTIL over the message limit but within what an agent may hold goes up in parts
(:func:`rows_per_part`), as it is: no cut. An agent is *wide* when its separator does not fit what
it may hold, or passes ``--width`` (:class:`CutLimit`). A cluster is a
non-wide agent, its root, with every wide agent reached from it through wide agents only (the
agents whose UTILs it must take many times); its cut is a set of variables, picked greedily: the
variable in the most separators still over the limit, then the largest domain, then the
shallowest (it removes most entries from most messages). Every agent of the cluster then computes
its UTIL once per assignment of the cut (a *context*), in chunks of ``chunk`` contexts joined at
once (one batched kernel on a GPU); a chunk's UTIL goes up in parts too; the root keeps the best
per value of its own separator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dcop.sizes import entries

#: Bytes of an entry as the cut sizes it: float64, the wider of a run's dtypes (both sides size
#: alike without knowing the other's tables).
CUT_ITEMSIZE = 8
#: Bytes a UTIL message takes beyond its tables (the coordinator's refusal uses the same).
CUT_OVERHEAD_BYTES = 4096
#: An agent process's own memory beside its tables (interpreter, NumPy, ZeroMQ; RSS counts the
#: pages it shares with its template too), in the agents' memory plan: what ``--max-memory``
#: leaves for tables is the rest.
AGENT_BASE_BYTES = 64 << 20
#: The largest UTIL table an agent holds without a cut where no ``--max-memory`` says (the
#: table, the join it comes from and its parent's copy: a few times 128 MiB of float64). A UTIL
#: over the message limit but within this goes up in parts, as it is.
HOLD_ENTRIES = 1 << 24
#: A chunk's batched join at most this many entries (an agent's working memory for one chunk:
#: 128 MiB of float64; a join this large amortises a chunk's messages and Python on a CPU, and
#: its transfers on a GPU).
CHUNK_JOIN_ENTRIES = 1 << 24
#: The same for a cluster whose root computes on a GPU: on an H200 a chunk of 16 contexts of
#: 1e6 joined entries took 7.5 ms, nearly all of it fixed costs (launches, transfers' latency,
#: the job), where the join itself takes well under a millisecond; 2^27 entries (1 GiB of
#: float64) spreads those costs over 8x more contexts and leaves the device room for every agent.
GPU_CHUNK_JOIN_ENTRIES = 1 << 27
#: A cut goes in at least this many chunks where it has the contexts: a cluster's agents work as
#: a pipeline, each a chunk behind its child, and one chunk would leave each waiting for the whole
#: of its child's work (on an H200, GPU agents with a cut of 100 contexts in one chunk were only
#: 1.4x faster than CPU agents pipelining it in 7).
PIPELINE_CHUNKS = 8
#: Contexts a chunk holds at most: a table axis on the wire (MAX_DOMAIN).
CHUNK_MAX = 1 << 24
#: A cut of more contexts than this is refused: no limit on messages is worth that many passes.
MAX_CONTEXTS = 1e12
#: What auto predicts MB-DPOP's work takes: entries joined per second (NumPy's fused join on
#: one core) and seconds per chunk and agent (a message each way and a job on the worker thread).
CUT_ENTRIES_PER_S = 1e8
CUT_CHUNK_S = 2e-3
#: An asked MB-DPOP is refused when its predicted time passes the time left this many times
#: over (the prediction errs long; a run that cannot end within --timeout is refused at once).
CUT_TIME_SLACK = 10.0


@dataclass(frozen=True)
class CutLimit:
    """What MB-DPOP bounds: a message holds ``entries`` float64 entries (the message limit less
    its overhead: a larger UTIL goes in parts); an agent holds a UTIL of ``hold`` entries at most
    and ``width`` variables at most (MB-DPOP's ``--width``, FRODO's ``maxDim``): a wider
    separator is cut."""

    entries: float
    width: int | None = None
    #: entries a chunk's batched join may take (an agent's memory for one chunk)
    join_entries: float = float(CHUNK_JOIN_ENTRIES)
    #: entries of the largest UTIL an agent may hold (None: the message's ``entries``)
    hold: float | None = None

    @staticmethod
    def from_bytes(
        max_message_bytes: int, width: int | None = None, max_memory_bytes: int | None = None
    ) -> CutLimit:
        """The limit of a run spec's message limit, ``--width`` and memory limit per agent: a
        UTIL, and a chunk's join, take a quarter of what the memory leaves beside the agent's
        base at most (their inputs and outputs
        take a few times their entries); without one, :data:`HOLD_ENTRIES`, or a message's
        entries where the message limit allows more."""
        room = float(max(max_message_bytes - CUT_OVERHEAD_BYTES, CUT_ITEMSIZE) // CUT_ITEMSIZE)
        join = float(CHUNK_JOIN_ENTRIES)
        hold = max(room, float(HOLD_ENTRIES))
        if max_memory_bytes is not None:
            tables = max_memory_bytes - AGENT_BASE_BYTES
            quarter = max(1.0, tables / CUT_ITEMSIZE / 4)
            join, hold = min(join, quarter), quarter
        return CutLimit(room, width, join, hold)

    @property
    def held(self) -> float:
        return self.entries if self.hold is None else self.hold

    def over(self, domains: Iterable[int]) -> bool:
        """Whether a UTIL over variables of these domain sizes needs a cut: more than ``width``
        of them, or more entries than an agent holds."""
        sizes = list(domains)
        if self.width is not None and len(sizes) > self.width:
            return True
        return entries(sizes) > self.held


@dataclass(frozen=True)
class Wide:
    """A wide agent: its id, depth and domain size, and its separator (ancestor ids, root
    first) with their domain sizes. Every id of a member's separator is the cluster root, one of
    its ancestors or another member: so the root knows every depth and domain the cut needs."""

    agent: int
    depth: int
    domain: int
    separator: tuple[int, ...]
    domains: tuple[int, ...]


@dataclass(frozen=True)
class Cluster:
    """One cluster's plan: its root, its wide agents, the cut (ids, in the order contexts count
    them: the root's separator first, so the root's best per separator value is a run of
    contexts), the cut's domain sizes and the contexts per chunk."""

    root: int
    members: tuple[int, ...]
    cut: tuple[int, ...]
    domains: tuple[int, ...]
    chunk: int
    #: entries the cluster joins per context, over all its agents (the work of one context)
    work: float

    @property
    def contexts(self) -> float:
        return entries(self.domains)

    @property
    def chunks(self) -> int:
        return math.ceil(self.contexts / self.chunk)


def is_wide(domains: Sequence[int], limit: CutLimit) -> bool:
    """Whether a UTIL over a separator of these domain sizes needs a cut."""
    return limit.over(domains)


def choose_cut(
    wide: Sequence[Wide], root_separator: Sequence[int], depth: Mapping[int, int], limit: CutLimit
) -> tuple[int, ...]:
    """The cluster's cut: greedily the variable in the most separators still over the limit
    (then the largest domain, the shallowest, the smallest id) until none is, or until it passes
    :data:`MAX_CONTEXTS` contexts (then it is refused, and this is the least it would take);
    ordered with the root's separator first, then by depth (the order contexts count in)."""
    domain = {a: d for w in wide for a, d in zip(w.separator, w.domains, strict=True)}
    cut: set[int] = set()

    def rest(w: Wide) -> list[int]:
        return [d for a, d in zip(w.separator, w.domains, strict=True) if a not in cut]

    while True:
        over = [w for w in wide if limit.over(rest(w))]
        if not over or entries(domain[a] for a in cut) > MAX_CONTEXTS:
            # past MAX_CONTEXTS the cut is refused whatever it grows to: it stops there, which
            # also keeps it within a token's scope (a grid's cut would pass 64 variables)
            break
        counts: dict[int, int] = {}
        for w in over:
            for a in w.separator:
                if a not in cut:
                    counts[a] = counts.get(a, 0) + 1
        best = min(counts, key=lambda a: (-counts[a], -domain[a], depth.get(a, 0), a))
        cut.add(best)
    first = set(root_separator)
    return tuple(sorted(cut, key=lambda a: (a not in first, depth.get(a, 0), a)))


def plan_cluster(
    root: int,
    root_domain: int,
    root_path: Sequence[int],
    root_separator: Sequence[int],
    root_separator_domains: Sequence[int],
    wide: Sequence[Wide],
    limit: CutLimit,
) -> Cluster:
    """A cluster's cut, its chunk size and its work per context, from the root's place (its
    path from the tree's root, its separator) and its members (sorted by depth, then id)."""
    wide = sorted(wide, key=lambda w: (w.depth, w.agent))
    depth = {a: i for i, a in enumerate(root_path)} | {root: len(root_path)}
    depth |= {w.agent: w.depth for w in wide}
    cut = choose_cut(wide, root_separator, depth, limit)
    domain = {a: d for w in wide for a, d in zip(w.separator, w.domains, strict=True)}
    domain |= dict(zip(root_separator, root_separator_domains, strict=True))
    domain |= {w.agent: w.domain for w in wide} | {root: root_domain}
    cut_set = set(cut)
    slices = [
        entries(d for a, d in zip(w.separator, w.domains, strict=True) if a not in cut_set)
        for w in wide
    ]
    joins = [s * w.domain for s, w in zip(slices, wide, strict=True)]
    root_sep = [domain[a] for a in root_separator if a not in cut_set]
    root_join = entries(root_sep) * root_domain
    contexts = entries(domain[a] for a in cut)
    by_join = limit.join_entries / max([*joins, root_join])
    chunk = int(max(1.0, min(by_join, float(CHUNK_MAX), math.ceil(contexts / PIPELINE_CHUNKS))))
    return Cluster(
        root,
        tuple(w.agent for w in wide),
        cut,
        tuple(domain[a] for a in cut),
        chunk,
        sum(joins) + root_join,
    )


@dataclass(frozen=True)
class TreeShape:
    """A pseudo-tree as the coordinator simulates it: parent and separator per agent, and the
    domain sizes."""

    parent: Mapping[int, int | None]
    separator: Mapping[int, tuple[int, ...]]
    domains: Mapping[int, int]

    def depth(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for a in self.parent:
            d, p = 0, self.parent[a]
            while p is not None:
                d, p = d + 1, self.parent[p]
            out[a] = d
        return out

    def children(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {a: [] for a in self.parent}
        for a, p in self.parent.items():
            if p is not None:
                out[p].append(a)
        return out


def clusters_of(tree: TreeShape, limit: CutLimit) -> list[Cluster]:
    """Every cluster of a whole tree, as the agents find them on their back tokens."""
    depth = tree.depth()
    children = tree.children()
    sep_domains = {a: tuple(tree.domains[b] for b in tree.separator[a]) for a in tree.parent}
    wide = {a for a in tree.parent if is_wide(sep_domains[a], limit)}
    out: list[Cluster] = []
    for root in sorted(tree.parent, key=lambda a: (depth[a], a)):
        if root in wide:
            continue
        members: list[Wide] = []
        stack = [c for c in children[root] if c in wide]
        while stack:
            a = stack.pop()
            members.append(Wide(a, depth[a], tree.domains[a], tree.separator[a], sep_domains[a]))
            stack += [c for c in children[a] if c in wide]
        if members:
            path = []
            p = tree.parent[root]
            while p is not None:
                path.append(p)
                p = tree.parent[p]
            out.append(
                plan_cluster(
                    root,
                    tree.domains[root],
                    path[::-1],
                    tree.separator[root],
                    sep_domains[root],
                    members,
                    limit,
                )
            )
    return out


def rows_per_part(shape: Sequence[int], limit: CutLimit) -> tuple[int, int]:
    """How a table of ``shape`` goes up in parts within the message limit: its first ``lead``
    axes flattened into rows, ``rows`` of them per message (the fewest leading axes whose rest
    fits one message; at most :data:`CHUNK_MAX` rows, a table axis on the wire)."""
    lead = 0
    while lead < len(shape) and entries(shape[lead:]) > limit.entries:
        lead += 1
    rest = max(entries(shape[lead:]), 1.0)
    return lead, int(max(1, min(limit.entries // rest, CHUNK_MAX)))


class ClusterSize(Protocol):
    """What the time of a cluster depends on (a :class:`Cluster`, or the wire's ClusterCut)."""

    @property
    def domains(self) -> tuple[int, ...]: ...

    @property
    def members(self) -> tuple[int, ...]: ...

    @property
    def chunk(self) -> int: ...

    @property
    def work(self) -> float: ...


def cut_seconds(clusters: Iterable[ClusterSize]) -> float:
    """MB-DPOP's predicted time beyond DPOP's: each cluster joins ``work`` entries per context,
    and pays a message and a job per chunk and agent (clusters run side by side, but auto
    counts them one after the other: a prediction that errs long)."""
    total = 0.0
    for c in clusters:
        contexts = entries(c.domains)
        chunks = math.ceil(contexts / c.chunk)
        total += contexts * c.work / CUT_ENTRIES_PER_S + chunks * (len(c.members) + 1) * CUT_CHUNK_S
    return min(total, 2.0**1000)
