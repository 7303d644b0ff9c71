"""Message types of the agent protocol: each declared once, as a frozen msgspec Struct.

Every message travels as one msgpack envelope ``{"v": version, "s": sender, "r": receiver, "n":
problem, "p": payload}`` whose payload is tagged with its type (``"t"``), followed by one frame
per table (see :mod:`dcop.protocol.codec`). A field's type is its check: bounds and sizes are
``Meta`` annotations, and the codec's one decoder validates a whole message against them, naming
the field that is wrong (``$.p.tables[0].shape``). ``__post_init__`` keeps only the rules across
fields (a shape per scope, roots below the tree count, a marginal that sums to one).

Flow of one problem (A = agent, C = coordinator, N = neighbour)::

    A->C hello (with the endpoint it bound)
    C->A setup (part, digest, neighbours' endpoints, and the start: run spec, trees this agent
         roots, its place in the elimination tree), as soon as it and its relatives said hello
    A->N degree (links work); once every neighbour's is in, the agent starts:
    A->N token: the DFS of each candidate tree, sizing the UTILs in its back tokens
    root->C tree (a candidate's UTIL sizes)      C->A go (the tree and z chosen, or a refusal)
    A->parent offer (GPU agents of one GPU: an IPC buffer for the UTIL, opened ahead)
    A->parent util      A->children value (MAR: down)      A->C result
    MB-DPOP, in a cluster: util chunks up, more (room for chunks) down; the root's replay down
    (the best context), a last util up, then value
    C->A stop (one-shot agents exit) or done (serving agents wait for the next problem)
    A->C heartbeat and error at any time; a serving agent repeats its hello while idle
"""

from __future__ import annotations

import math
import sys
import threading
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
import numpy.typing as npt
from msgspec import Meta, Struct, field
from msgspec.structs import force_setattr

from dcop.protocol.constants import (
    MAX_AGENT_ID,
    MAX_DOMAIN,
    MAX_LIST,
    MAX_NAME_CHARS,
    MAX_SCOPE,
    MAX_TABLES,
    MAX_TEXT_CHARS,
    MAX_TREES,
    MAX_Z_CHOICES,
)
from dcop.protocol.digest import DIGEST_CHARS
from dcop.protocol.runspec import RunSpec
from dcop.sizes import SIZE_CAP, as_size

#: What a table's data may be: bytes, or a view of an array or of a received frame.
Buffer = bytes | memoryview
TOKEN_KINDS = ("child", "back")
#: Bytes of a CUDA IPC memory handle (``cudaIpcMemHandle_t``).
IPC_HANDLE_BYTES = 64
_BIG = (1 << 62) - 1

#: Set by the codec while it decodes in this thread: the rules across fields (``__post_init__``)
#: check what arrives, not what this side builds (a message made here is trusted, as before).
DECODING = threading.local()


def _arriving() -> bool:
    return getattr(DECODING, "active", False)


# ---- field types: each bound declared once -----------------------------------------------------
AgentId = Annotated[int, Meta(ge=0, le=MAX_AGENT_ID)]
Ids = Annotated[tuple[AgentId, ...], Meta(max_length=MAX_LIST)]
Name = Annotated[str, Meta(min_length=1, max_length=MAX_NAME_CHARS)]
ShortText = Annotated[str, Meta(max_length=MAX_NAME_CHARS)]  # may be empty
Text = Annotated[str, Meta(max_length=MAX_TEXT_CHARS)]  # may be empty
Reason = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT_CHARS)]
#: A finite number of seconds (a logical clock, a set-up time).
Seconds = Annotated[float, Meta(ge=0.0, le=sys.float_info.max)]
Big = Annotated[int, Meta(ge=0, le=_BIG)]
Count = Annotated[int, Meta(ge=0, le=MAX_LIST)]
#: a candidate tree: the DFS ones below MAX_TREES, the coordinator's elimination tree after them
TreeIndex = Annotated[int, Meta(ge=0, le=MAX_TREES)]
DomainSize = Annotated[int, Meta(ge=1, le=MAX_DOMAIN)]
DomainIndex = Annotated[int, Meta(ge=0, le=MAX_DOMAIN - 1)]
Z = Annotated[int, Meta(ge=1, le=MAX_SCOPE)]
Handle = Annotated[bytes, Meta(min_length=IPC_HANDLE_BYTES, max_length=IPC_HANDLE_BYTES)]
Digest = Annotated[str, Meta(pattern=f"^[0-9a-f]{{{DIGEST_CHARS}}}$")]
Dtype = Literal["<f8", "<f4"]
Scope = Annotated[tuple[Name, ...], Meta(max_length=MAX_SCOPE)]
Shape = Annotated[tuple[DomainSize, ...], Meta(max_length=MAX_SCOPE)]
IdScope = Annotated[tuple[AgentId, ...], Meta(max_length=MAX_SCOPE)]
Probability = Annotated[float, Meta(ge=0.0, le=1.0)]
Counts = Annotated[dict[str, Annotated[int, Meta(ge=0, le=_BIG)]], Meta(max_length=64)]
Finite = Annotated[float, Meta(ge=-sys.float_info.max, le=sys.float_info.max)]
Figures = Annotated[dict[Name, Finite], Meta(max_length=64)]
#: A predicted size (entries): a capped float, never an exact integer (:mod:`dcop.sizes`).
Size = Annotated[float, Meta(ge=0.0, le=SIZE_CAP)]
#: Back edges (descendant, ancestor) of a DFS subtree.
Links = Annotated[tuple[tuple[AgentId, AgentId], ...], Meta(max_length=MAX_LIST)]


# ---- tables -------------------------------------------------------------------------------------
class FrameRef:
    """A table's buffer, which travels as a frame of its own after the msgpack header (never
    copied into it): the codec swaps it for a reference to its frame and back. ``received``:
    it came in a message (its size and NaNs are checked against the table)."""

    __slots__ = ("buffer", "received")

    def __init__(self, buffer: Buffer, received: bool = False) -> None:
        self.buffer = buffer
        self.received = received


def _check_scope_and_shape(scope: tuple[str, ...], shape: tuple[int, ...]) -> None:
    if len(set(scope)) != len(scope):
        raise ValueError("table scope repeats a variable")
    if len(shape) != len(scope):
        raise ValueError(f"table shape has {len(shape)} axes for {len(scope)} variables")


class WireTable(Struct, frozen=True, eq=False, gc=False):
    """A cost table on the wire: scope, shape, dtype and the raw C-order buffer (never pickled).

    ``data`` is any buffer (bytes, a memoryview of a NumPy array or of a received frame): a table
    is not copied on its way to or from the socket."""

    scope: Scope
    shape: Shape
    dtype: Dtype
    frame: FrameRef = field(name="data")

    def __post_init__(self) -> None:
        if not isinstance(self.frame, FrameRef):  # made here: WireTable(scope, shape, dtype, buf)
            force_setattr(self, "frame", FrameRef(self.frame))
        if self.frame.received:
            _check_scope_and_shape(self.scope, self.shape)
            expected = math.prod(self.shape) * np.dtype(self.dtype).itemsize
            if len(self.data) != expected:
                raise ValueError(
                    f"table data has {len(self.data)} bytes, shape and dtype need {expected}"
                )
            if np.isnan(self.to_array()).any():
                raise ValueError("table contains NaN")

    @property
    def data(self) -> memoryview:
        return memoryview(self.frame.buffer)

    @staticmethod
    def from_array(scope: tuple[str, ...], array: npt.ArrayLike) -> WireTable:
        """Wrap a host array (float64 unless it already is float32) without copying it when it is
        already C-contiguous little-endian."""
        arr = np.asarray(array)
        dtype = "<f4" if arr.dtype == np.float32 else "<f8"
        arr = np.asarray(arr, dtype=dtype, order="C")  # (ascontiguousarray would make 0-d 1-d)
        shape = tuple(int(s) for s in arr.shape)
        return WireTable(tuple(scope), shape, dtype, FrameRef(arr.data.cast("B")))  # type: ignore[arg-type]

    def to_array(self) -> npt.NDArray[Any]:
        """A read-only view of the buffer as an array of ``shape``."""
        return np.frombuffer(self.frame.buffer, dtype=self.dtype).reshape(self.shape)

    @property
    def entries(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.entries * np.dtype(self.dtype).itemsize


class IpcTable(Struct, frozen=True, eq=False, gc=False):
    """A table left in device memory and handed over by CUDA IPC (same host, same GPU): scope,
    shape, dtype and the exporter's ``cudaIpcMemHandle_t`` of a buffer holding exactly the table
    (C order). Only the handle crosses the socket; the receiver opens it, copies the table onto
    its own stream and closes it (:mod:`dcop.gpu.ipc`). The exporter keeps the buffer until its
    problem ends or its parent's answer (VALUE, down) arrives."""

    scope: Scope
    shape: Shape
    dtype: Dtype
    handle: Handle
    #: where the table starts in the buffer (an :class:`Offer`'s buffer holds several)
    offset: Big = 0

    def __post_init__(self) -> None:
        if not _arriving():
            return
        if not self.scope:
            raise ValueError("a table handed over by CUDA IPC needs a scope")
        _check_scope_and_shape(self.scope, self.shape)

    @property
    def entries(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.entries * np.dtype(self.dtype).itemsize


Tables = Annotated[tuple[WireTable, ...], Meta(max_length=MAX_TABLES)]


# ---- parts of messages --------------------------------------------------------------------------
class Neighbour(Struct, frozen=True, array_like=True, gc=False):
    """A neighbour as Setup names it: its agent id, variable, endpoint and CUDA IPC domain (its
    hello's ``ipc``; empty: none)."""

    id: AgentId
    variable: Name
    endpoint: Reason
    ipc: Text


class Sizing(Struct, frozen=True, array_like=True, gc=False):
    """One mini-bucket size's plan of a subtree, carried up by the DFS: the scopes (agent ids)
    of the UTIL tables the sender will send, and the subtree's largest UTIL (entries and who
    sends it) and total entries. Entries travel as capped floats (:mod:`dcop.sizes`): a
    prediction of 3^200 entries is a size to refuse, not an integer no wire can carry."""

    tables: Annotated[tuple[IdScope, ...], Meta(max_length=MAX_TABLES)]
    largest: Size
    agent: AgentId | None
    total: Size

    def __post_init__(self) -> None:
        _sizes_as_floats(self)


#: Sizes up to here are exact in a float64: made here, they go on the wire as integers.
_EXACT = 2.0**53


def _sizes_as_floats(message: Any) -> None:
    """Arriving (as msgpack integers or floats): capped floats. Made here: capped, and kept as an
    int where exact (below 2^53), the wire's compact form: a msgpack int of 1-5 bytes, where a
    float64 takes 9 (a 1000-agent tree's DFS tokens carried more bytes than its UTILs)."""
    arriving = _arriving()
    for key in ("largest", "total"):
        value = getattr(message, key)
        size = value if arriving and type(value) is float else as_size(value)
        if not arriving and size <= _EXACT and size.is_integer():
            force_setattr(message, key, int(size))
        elif size is not value:
            force_setattr(message, key, size)


Sizings = Annotated[tuple[Sizing, ...], Meta(max_length=MAX_Z_CHOICES)]


class WideSep(Struct, frozen=True, array_like=True, gc=False):
    """MB-DPOP: a wide agent's separator, carried up the DFS until its cluster's root (see
    :class:`dcop.trees.cutset.Wide`)."""

    agent: AgentId
    depth: Count
    domain: DomainSize
    separator: IdScope
    domains: Shape

    def __post_init__(self) -> None:
        if _arriving() and len(self.domains) != len(self.separator):
            raise ValueError("a wide separator needs one domain size per variable")


class ClusterCut(Struct, frozen=True, array_like=True, gc=False):
    """MB-DPOP: one cluster's plan (:class:`dcop.trees.cutset.Cluster`), found by its root and
    carried up to the coordinator, which adds the cut variables' ``names`` in its Go."""

    root: AgentId
    members: Ids
    cut: IdScope
    domains: Shape
    chunk: Annotated[int, Meta(ge=1, le=MAX_DOMAIN)]
    work: Size
    names: Annotated[tuple[Name, ...], Meta(max_length=MAX_SCOPE)] = ()

    def __post_init__(self) -> None:
        if not _arriving():
            return
        if not self.cut or len(self.domains) != len(self.cut):
            raise ValueError("a cluster cut needs variables, one domain size each")
        if self.names and len(self.names) != len(self.cut):
            raise ValueError("a cluster cut needs one name per cut variable")


Clusters = Annotated[tuple[ClusterCut, ...], Meta(max_length=MAX_LIST)]


def sizing_at(sizings: Sequence[Sizing], j: int) -> Sizing:
    """The sizing for choice index ``j`` (:func:`dcop.protocol.runspec.sizing_choices`) of a list
    that stops where it becomes DPOP's (index 0)."""
    return sizings[j] if j < len(sizings) else sizings[0]


class AgentMetrics(Struct, frozen=True, gc=False):
    """What one agent measured on its own wire and clock."""

    sent_count: Counts = field(default_factory=dict)
    sent_bytes: Counts = field(default_factory=dict)
    recv_count: Counts = field(default_factory=dict)
    recv_bytes: Counts = field(default_factory=dict)
    compute_s: Seconds = 0.0
    clock: Seconds = 0.0
    util_bytes: Big = 0
    util_entries: Big = 0
    util_tables: Annotated[int, Meta(ge=0, le=MAX_TABLES)] = 0
    dropped: Big = 0
    #: seconds spent getting ready (CUDA context, kernels): not part of the solve
    setup_s: Seconds = 0.0
    #: named figures of the agent's backend (GPU placement, kernel compiles, transfers)
    backend: Figures = field(default_factory=dict)
    #: UTIL bytes and tables handed to the parent by CUDA IPC (not on the network: they are in
    #: ``util_bytes`` and ``util_entries``, the message's size, but not in ``sent_bytes``)
    ipc_bytes: Big = 0
    ipc_tables: Annotated[int, Meta(ge=0, le=MAX_TABLES)] = 0
    #: bytes of the largest message I sent (MB-DPOP's promise: none over the limit)
    largest_sent: Big = 0

    def __post_init__(self) -> None:
        if not _arriving():
            return
        for counts in (self.sent_count, self.sent_bytes, self.recv_count, self.recv_bytes):
            unknown = [k for k in counts if k not in COUNTED_KINDS]
            if unknown:
                raise ValueError(f"a count names unknown message type {unknown[0][:40]!r}")


# ---- messages -----------------------------------------------------------------------------------
class _Message(Struct, frozen=True, gc=False, tag_field="t", tag=str.lower):
    """A message: its tag on the wire is its type (the class name in lower case)."""

    @property
    def TYPE(self) -> str:  # the message type, as the wire spells it
        return str(type(self).__struct_config__.tag)


class Hello(_Message, frozen=True):
    """Agent -> coordinator: who and where I am. ``variable`` is empty for a serving agent
    (it gets one per problem); ``endpoint`` is where my ROUTER is bound (the port the system
    picked, for a wildcard); ``serving`` agents stay up after a problem and repeat their hello
    while idle; ``setup_s`` is what getting ready took (CUDA context, kernels); ``ipc`` names the
    CUDA IPC domain of a GPU agent (:func:`dcop.gpu.ipc.ipc_domain`; empty: none): two agents of
    one domain hand UTILs over on the device."""

    variable: ShortText
    pid: Annotated[int, Meta(ge=0, le=1 << 40)]
    host: ShortText = ""
    endpoint: Text = ""
    serving: bool = False
    setup_s: Seconds = 0.0
    gpu: ShortText = ""
    ipc: Text = ""


class GivenTree(Struct, frozen=True, array_like=True, gc=False):
    """This agent's place in the coordinator's elimination pseudo-tree (candidate tree number
    ``spec.trees``, after the DFS candidates): its ancestors from the root down to its parent
    (``path``; empty for a root) with their domain sizes, and its children."""

    path: Ids
    domains: Annotated[tuple[DomainSize, ...], Meta(max_length=MAX_LIST)]
    children: Ids

    def __post_init__(self) -> None:
        if not _arriving():
            return
        if len(self.domains) != len(self.path):
            raise ValueError("field 'given' needs one domain size per ancestor")
        if len({*self.path, *self.children}) != len(self.path) + len(self.children):
            raise ValueError("field 'given' names an agent twice")


class Start(_Message, frozen=True):
    """Coordinator -> agent, inside its :class:`Setup` (never alone on the wire): solve by ``spec``; start the DFS of candidate tree k for every k in
    ``roots`` (this agent is that tree's root in its component). ``given``: where the coordinator
    offers its elimination pseudo-tree as one more candidate, this agent's place in it."""

    spec: RunSpec
    roots: Annotated[tuple[TreeIndex, ...], Meta(max_length=MAX_TREES)] = ()
    given: GivenTree | None = None

    def __post_init__(self) -> None:
        if not _arriving():
            return
        # "auto" is resolved by the coordinator before any Start; 0 then means no DFS tree: the
        # given (elimination) tree alone
        if self.spec.trees < 1 and self.given is None:
            raise ValueError("field 'spec.trees' must be at least 1 in a start message")
        if any(k >= self.spec.trees for k in self.roots) or len(set(self.roots)) != len(self.roots):
            raise ValueError(f"field 'roots' must name distinct trees below {self.spec.trees}")

    @property
    def root(self) -> bool:
        """Whether this agent roots at least one candidate tree."""
        return bool(self.roots)


class Setup(_Message, frozen=True, eq=False):
    """Coordinator -> agent, once per problem: the agent's variable, domain, its tables (in the
    run's dtype), the digest of that share (see :mod:`dcop.protocol.digest`), and its neighbours
    with their endpoints (the agent links to them now). ``links``: agents that are not
    neighbours but its parent or children in the coordinator's elimination pseudo-tree
    (:class:`GivenTree`); the agent links to them too. ``start``: how to solve (the problem's
    :class:`Start`, which the coordinator knows before any agent is up): it rides on the setup,
    so that each agent starts its candidate trees as soon as it is linked, while later agents are
    still coming up (a message of its own to every agent, once every agent had said hello, was
    a barrier of the whole launch and woke a thousand agents at once; wire version 8)."""

    variable: Name
    domain: DomainSize
    tables: Tables
    digest: Digest
    neighbours: Annotated[tuple[Neighbour, ...], Meta(max_length=MAX_LIST)] = ()
    links: Annotated[tuple[Neighbour, ...], Meta(max_length=MAX_LIST)] = ()
    start: Start | None = None

    def __post_init__(self) -> None:
        if not _arriving():
            return
        if len({n.id for n in self.neighbours}) != len(self.neighbours):
            raise ValueError("field 'neighbours' names an agent twice")
        if len({n.id for n in self.links}) != len(self.links):
            raise ValueError("field 'links' names an agent twice")
        if {n.id for n in self.neighbours} & {n.id for n in self.links}:
            raise ValueError("field 'links' names a neighbour")


class Degree(_Message, frozen=True):
    """Agent -> neighbour, once per problem: my neighbours (their ids: the DFS heuristics look
    two hops ahead) and so my degree. It also proves the link works."""

    neighbours: Ids
    clock: Seconds

    @property
    def degree(self) -> int:
        return len(self.neighbours)


#: A token's fields on the wire: one letter each. The DFS sends 2(n-1) tokens per candidate tree,
#: the most numerous messages of a run; full names were a third of a token's bytes.
_TOKEN_WIRE_NAMES = {
    "tree": "k",
    "kind": "d",
    "open": "o",
    "clock": "c",
    "path": "p",
    "domains": "D",
    "links": "l",
    "separator": "s",
    "width": "w",
    "sizings": "z",
    "wide": "W",
    "clusters": "C",
}


#: A token's clock before any compute. msgspec omits a default by identity: every zero clock is
#: made this object, so that it stays off the wire.
_NO_TIME = 0.0


class Token(_Message, frozen=True, omit_defaults=True, rename=_TOKEN_WIRE_NAMES):
    """The DFS token of candidate tree ``tree`` (see :class:`dcop.trees.dfs.DfsToken`).
    ``child``: you are my child; ``path`` and ``domains`` are your ancestors from the root and
    their domain sizes (one size for all where they are equal), ``open`` their unvisited
    neighbours. ``back``: my subtree is done; it
    carries the subtree's back edges to the receiver and above (``links``: descendant, ancestor),
    my separator, the subtree's largest separator and, per mini-bucket size the run may choose,
    the sizing of my UTIL message (the first, DPOP's, holds the subtree's largest and total UTIL
    entries). A run that may choose MB-DPOP adds the subtree's open ``wide`` separators and the
    ``clusters`` closed below (:mod:`dcop.trees.cutset`). No visited set: the token stays O(depth) (see :mod:`dcop.trees.dfs`),
    and fields at their defaults do not travel: a child's back fields, a back token's path and
    kind, and the clock, still 0 while trees are built (it counts compute, which starts with the
    UTILs): a 1000-agent tree's tokens carried more bytes than its UTILs."""

    tree: TreeIndex
    kind: Literal["child", "back"] = "back"
    open: Annotated[tuple[Count, ...], Meta(max_length=MAX_LIST)] = ()
    clock: Seconds = _NO_TIME
    path: Ids = ()
    domains: Annotated[tuple[DomainSize, ...], Meta(max_length=MAX_LIST)] = ()
    links: Links = ()
    separator: Ids = ()
    width: Count = 0
    sizings: Sizings = ()
    wide: Annotated[tuple[WideSep, ...], Meta(max_length=MAX_LIST)] = ()
    clusters: Clusters = ()

    def __post_init__(self) -> None:
        if self.clock == 0.0 and self.clock is not _NO_TIME:
            force_setattr(self, "clock", _NO_TIME)


class TreeReport(_Message, frozen=True, tag="tree"):
    """A root -> coordinator: candidate tree ``tree`` is built in my component; its largest
    separator, and per mini-bucket size of the run its UTIL sizing."""

    tree: TreeIndex
    width: Count
    sizings: Sizings
    #: MB-DPOP: the tree's clusters (empty where no UTIL needs a cut, or the run cannot cut)
    clusters: Clusters = ()


class Go(_Message, frozen=True):
    """Coordinator -> agents: run UTIL/VALUE on candidate tree ``tree``, with mini-buckets of
    ``z`` variables (None: DPOP, exact). MB-DPOP: ``clusters`` are the tree's cycle cuts, with
    the cut variables' names (empty: no UTIL is conditioned)."""

    tree: TreeIndex
    z: Z | None
    clusters: Clusters = ()

    def __post_init__(self) -> None:
        if _arriving() and any(not c.names for c in self.clusters):
            raise ValueError("a go's cluster cut needs the cut variables' names")


class Whole(Struct, frozen=True, array_like=True, gc=False):
    """The table a UTIL sent in parts adds up to: its scope and shape (each part carries a block
    of its rows: see :class:`Util`)."""

    scope: Scope
    shape: Shape

    def __post_init__(self) -> None:
        if _arriving():
            _check_scope_and_shape(self.scope, self.shape)


#: The first axis of a part of a UTIL sent in parts: a block of the whole table's rows (its
#: leading variables flattened in C order).
ROWS = "\x00rows"


class Util(_Message, frozen=True, eq=False):
    """Child -> parent: the UTIL tables (one for DPOP, mini-bucket outputs for ADPOP). ``tables``
    travel as frames; ``shared`` ones stay on the GPU the parent shares and travel as CUDA IPC
    handles (:class:`IpcTable`).

    MB-DPOP: a UTIL over the message limit goes in ``parts`` messages (this is part ``part``);
    ``whole`` is then the table they add up to, and ``tables`` holds one block of its rows in
    order: a table over (:data:`ROWS`, the whole's last variables). ``chunk`` >= 0 numbers one
    chunk of a cluster's contexts (the whole's first axis counts them; always sent in parts);
    -1 is a whole UTIL."""

    tables: Tables
    clock: Seconds
    shared: Annotated[tuple[IpcTable, ...], Meta(max_length=MAX_TABLES)]
    chunk: Annotated[int, Meta(ge=-1, le=_BIG)] = -1
    part: Annotated[int, Meta(ge=0, le=_BIG)] = 0
    parts: Annotated[int, Meta(ge=1, le=_BIG)] = 1
    whole: Whole | None = None

    def __post_init__(self) -> None:
        if not _arriving():
            return
        if len(self.tables) + len(self.shared) > MAX_TABLES:
            raise ValueError(f"a UTIL of more than {MAX_TABLES} tables")
        if self.part >= self.parts:
            raise ValueError("field 'part' must be below 'parts'")
        if (self.whole is not None or self.chunk >= 0) and (
            self.whole is None or self.shared or len(self.tables) != 1
        ):
            raise ValueError("a UTIL in parts (or a chunk) is one block of a whole table")
        if self.whole is not None:
            (block,) = self.tables
            rest = len(block.scope) - 1
            if (
                rest < 0
                or block.scope[0] != ROWS
                or rest > len(self.whole.scope)
                or block.scope[1:] != self.whole.scope[len(self.whole.scope) - rest :]
                or block.shape[1:] != self.whole.shape[len(self.whole.shape) - rest :]
            ):
                raise ValueError("a part of a UTIL is not a block of rows of its whole table")

    @property
    def entries(self) -> int:
        """Entries of the tables over variables, framed and shared (a scalar is no entry)."""
        framed = sum(t.entries for t in self.tables if t.scope)
        return framed + sum(t.entries for t in self.shared)  # a shared table always has a scope


class Offer(_Message, frozen=True):
    """Child -> parent of one GPU, once the tree is chosen: the CUDA IPC handle of the buffer my
    UTIL tables will be copied into (``nbytes``). The parent opens it at once, while my subtree
    still computes, so that taking the UTIL later is only a device copy (:mod:`dcop.gpu.ipc`)."""

    handle: Handle
    nbytes: Annotated[int, Meta(ge=1, le=_BIG)]
    clock: Seconds


class More(_Message, frozen=True):
    """MB-DPOP, parent -> a child of its cluster: send your chunks below ``upto`` (a chunk is
    sent only when the parent has room for it, so a cluster's memory stays a few chunks)."""

    upto: Annotated[int, Meta(ge=0, le=_BIG)]
    clock: Seconds


class Replay(_Message, frozen=True):
    """MB-DPOP, down a cluster from its root: the best context (the cut variables' values) for
    the root's separator values; each member computes its UTIL once more, conditioned on it, so
    that VALUE can pick every member's value."""

    values: Annotated[tuple[tuple[Name, DomainIndex], ...], Meta(max_length=MAX_SCOPE)]
    clock: Seconds


class Value(_Message, frozen=True):
    """Parent -> child: the values (domain indices) of the child's separator."""

    values: Annotated[tuple[tuple[Name, DomainIndex], ...], Meta(max_length=MAX_LIST)]
    clock: Seconds


class Down(_Message, frozen=True, eq=False):
    """Parent -> child, for MAR: the log-space message over the child's separator (the parent's
    bucket summed without the child's own UTIL; :func:`dcop.sumproduct.down_messages`)."""

    tables: Annotated[tuple[WireTable, ...], Meta(min_length=1, max_length=1)]
    clock: Seconds


class Result(_Message, frozen=True):
    """Agent -> coordinator: my value, my place in the pseudo-tree and my metrics. Roots add
    ``bound``: their component's optimum (DPOP) or lower bound (ADPOP); for PR/MAR its ``ln Z``.
    PR and MAR send no value; MAR sends my variable's ``marginal`` (None where ``Z = 0``)."""

    value: DomainIndex | None
    bound: float | None
    parent: AgentId | None
    children: Ids
    pseudo_parents: Ids
    separator: Ids
    metrics: AgentMetrics
    marginal: (
        Annotated[tuple[Probability, ...], Meta(min_length=1, max_length=MAX_DOMAIN)] | None
    ) = None

    def __post_init__(self) -> None:
        if not _arriving():
            return
        if self.bound is not None and math.isnan(self.bound):
            raise ValueError("field 'bound' must not be NaN")
        if self.marginal is not None and not math.isclose(sum(self.marginal), 1.0, abs_tol=1e-6):
            raise ValueError(f"field 'marginal' sums to {sum(self.marginal):.9g}, not 1")


#: What an Error reports: a failure, a table or message over a limit (memory included), a problem
#: file that differs from the coordinator's, or an agent's own deadline.
ErrorKind = Literal["error", "too_large", "mismatch", "timeout"]
ERROR_KINDS: tuple[str, ...] = ("error", "too_large", "mismatch", "timeout")


def _clip(message: Struct, text: str) -> None:
    """Cut a reason to what the wire carries (an agent's error message may be longer)."""
    if len(text) > MAX_TEXT_CHARS:
        force_setattr(message, "reason", text[:MAX_TEXT_CHARS])


class Error(_Message, frozen=True):
    """Agent -> coordinator: something failed; ``peer`` names a neighbour that went silent."""

    reason: Reason
    peer: AgentId | None = None
    kind: ErrorKind = "error"

    def __post_init__(self) -> None:
        _clip(self, self.reason)


class Stop(_Message, frozen=True):
    """Coordinator -> agent: exit (``reason`` is "done", "shutdown" or why the run ended)."""

    reason: Reason = "done"

    def __post_init__(self) -> None:
        _clip(self, self.reason)


class Done(_Message, frozen=True):
    """Coordinator -> serving agent: this problem is over (``reason`` is "done" or why it
    ended); drop it and wait for the next one."""

    reason: Reason = "done"

    def __post_init__(self) -> None:
        _clip(self, self.reason)


class Heartbeat(_Message, frozen=True):
    """Agent -> coordinator: alive (the loop runs), with where it stands for the live status: its
    phase, the bytes it has sent in this problem (heartbeats not counted: a still total shows a
    stalled phase), whether its UTIL has gone out and whether it is computing (``busy``: a long
    bucket on its worker thread, which moves no byte for a while)."""

    phase: ShortText = ""
    sent_bytes: Big = 0
    util_sent: bool = False
    busy: bool = False


Message = (
    Hello
    | Setup
    | Degree
    | Token
    | TreeReport
    | Go
    | Offer
    | Util
    | More
    | Replay
    | Value
    | Down
    | Result
    | Error
    | Stop
    | Done
    | Heartbeat
)

#: The messages that travel on their own, by wire type (a Start rides inside a Setup).
MESSAGE_CLASSES: dict[str, type[_Message]] = {
    str(cls.__struct_config__.tag): cls for cls in typing.get_args(Message)
}
MESSAGE_TYPES: tuple[str, ...] = tuple(MESSAGE_CLASSES)
#: What message counts are kept by: the types, and MB-DPOP's UTIL chunks apart from whole UTILs.
CHUNK_KIND = "chunk"
COUNTED_KINDS: frozenset[str] = frozenset((*MESSAGE_TYPES, CHUNK_KIND))
