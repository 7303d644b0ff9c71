"""Message types of the agent protocol: frozen dataclasses with ``to_wire()`` / ``from_wire()``.

Every message travels inside an envelope ``{"v": version, "t": type, "s": sender, "r": receiver,
"n": problem, "p": payload}``, followed by one frame per table (see :mod:`dcop.protocol.codec`);
the classes here only know their payload. ``from_wire`` validates every field's type, range and
size and raises :class:`ProtocolError` with the field name, so the codec never hands an agent a
half-checked message.

Flow of one problem (A = agent, C = coordinator, N = neighbour)::

    A->C hello (with the endpoint it bound)      C->A setup (part, digest, neighbours' endpoints)
    A->N degree (links work)     A->C ready      C->A start (run spec, trees this agent roots)
    A->N token: the DFS of each candidate tree, sizing the UTILs in its back tokens
    root->C tree (a candidate's UTIL sizes)      C->A go (the tree and z chosen, or a refusal)
    A->parent offer (GPU agents of one GPU: an IPC buffer for the UTIL, opened ahead)
    A->parent util      A->children value (MAR: down)      A->C result
    C->A stop (one-shot agents exit) or done (serving agents wait for the next problem)
    A->C heartbeat and error at any time; a serving agent repeats its hello while idle
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from dcop.errors import ProtocolError
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
    TABLE_DTYPES,
)
from dcop.protocol.digest import DIGEST_CHARS
from dcop.protocol.runspec import RunSpec

Payload = Mapping[str, Any]
#: What a table's data may be: bytes, or a view of an array or of a received frame.
Buffer = bytes | memoryview
TOKEN_KINDS = ("child", "back")


# ---- field validators ---------------------------------------------------------------------------
def _get(p: Payload, key: str) -> Any:
    if key not in p:
        raise ProtocolError(f"missing field {key!r}")
    return p[key]


def _int(p: Payload, key: str, lo: int, hi: int) -> int:
    v = _get(p, key)
    if type(v) is not int:
        raise ProtocolError(f"field {key!r} must be an integer, not {type(v).__name__}")
    if not lo <= v <= hi:
        raise ProtocolError(f"field {key!r} = {v} is out of range [{lo}, {hi}]")
    return v


def _opt_int(p: Payload, key: str, lo: int, hi: int) -> int | None:
    if p.get(key) is None:
        if key not in p:
            raise ProtocolError(f"missing field {key!r}")
        return None
    return _int(p, key, lo, hi)


def _bool(p: Payload, key: str) -> bool:
    v = _get(p, key)
    if type(v) is not bool:
        raise ProtocolError(f"field {key!r} must be a boolean")
    return v


def _float(p: Payload, key: str, allow_inf: bool = False, lo: float = -math.inf) -> float:
    v = _get(p, key)
    if type(v) not in (float, int):
        raise ProtocolError(f"field {key!r} must be a number, not {type(v).__name__}")
    f = float(v)
    if math.isnan(f) or (math.isinf(f) and not allow_inf):
        raise ProtocolError(f"field {key!r} must be finite")
    if f < lo:
        raise ProtocolError(f"field {key!r} = {f} is below {lo}")
    return f


def _opt_float(p: Payload, key: str) -> float | None:
    if key in p and p[key] is None:
        return None
    return _float(p, key, allow_inf=True)


def _str(p: Payload, key: str, max_chars: int = MAX_NAME_CHARS, empty: bool = False) -> str:
    v = _get(p, key)
    return _check_str(v, key, max_chars, empty)


def _check_str(v: Any, key: str, max_chars: int = MAX_NAME_CHARS, empty: bool = False) -> str:
    if type(v) is not str:
        raise ProtocolError(f"field {key!r} must be a string, not {type(v).__name__}")
    if len(v) > max_chars:
        raise ProtocolError(f"field {key!r} is longer than {max_chars} characters")
    if not v and not empty:
        raise ProtocolError(f"field {key!r} must not be empty")
    return v


def _choice(p: Payload, key: str, choices: tuple[str, ...]) -> str:
    v = _str(p, key)
    if v not in choices:
        raise ProtocolError(f"field {key!r} = {v!r} is not one of {', '.join(choices)}")
    return v


def _seq(p: Payload, key: str, max_len: int) -> list[Any] | tuple[Any, ...]:
    v = _get(p, key)
    if not isinstance(v, list | tuple):
        raise ProtocolError(f"field {key!r} must be an array, not {type(v).__name__}")
    if len(v) > max_len:
        raise ProtocolError(f"field {key!r} has {len(v)} items, more than {max_len}")
    return v


def _ids(p: Payload, key: str, max_len: int = MAX_LIST) -> tuple[int, ...]:
    out: list[int] = []
    for i, v in enumerate(_seq(p, key, max_len)):
        if type(v) is not int or not 0 <= v <= MAX_AGENT_ID:
            raise ProtocolError(f"field {key!r}[{i}] must be an agent id")
        out.append(v)
    return tuple(out)


def _names(p: Payload, key: str, max_len: int) -> tuple[str, ...]:
    return tuple(_check_str(v, f"{key}[{i}]") for i, v in enumerate(_seq(p, key, max_len)))


def _map(p: Payload, key: str, max_len: int) -> Mapping[Any, Any]:
    v = _get(p, key)
    if not isinstance(v, dict):
        raise ProtocolError(f"field {key!r} must be a map, not {type(v).__name__}")
    if len(v) > max_len:
        raise ProtocolError(f"field {key!r} has {len(v)} entries, more than {max_len}")
    return v


def _sub(p: Payload, key: str) -> Payload:
    return _map(p, key, 64)


# ---- tables -------------------------------------------------------------------------------------
class FrameRef:
    """A buffer that travels as a frame of its own after the msgpack header (never copied into
    it): the codec swaps it for a reference to its frame (see :mod:`dcop.protocol.codec`)."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer


@dataclass(frozen=True, eq=False)
class WireTable:
    """A cost table on the wire: scope, shape, dtype and the raw C-order buffer (never pickled).

    ``data`` is any buffer (bytes, a memoryview of a NumPy array or of a received frame): a table
    is not copied on its way to or from the socket."""

    scope: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    data: Buffer

    @staticmethod
    def from_array(scope: tuple[str, ...], array: npt.ArrayLike) -> WireTable:
        """Wrap a host array (float64 unless it already is float32) without copying it when it is
        already C-contiguous little-endian."""
        arr = np.asarray(array)
        dtype = "<f4" if arr.dtype == np.float32 else "<f8"
        arr = np.asarray(arr, dtype=dtype, order="C")  # (ascontiguousarray would make 0-d 1-d)
        return WireTable(tuple(scope), tuple(int(s) for s in arr.shape), dtype, arr.data.cast("B"))

    def to_array(self) -> npt.NDArray[Any]:
        """A read-only view of the buffer as an array of ``shape``."""
        return np.frombuffer(self.data, dtype=self.dtype).reshape(self.shape)

    @property
    def entries(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.entries * np.dtype(self.dtype).itemsize

    def to_wire(self) -> dict[str, Any]:
        return {
            "scope": list(self.scope),
            "shape": list(self.shape),
            "dtype": self.dtype,
            "data": FrameRef(self.data),
        }

    @staticmethod
    def from_wire(p: Payload) -> WireTable:
        scope, shape = _scope_and_shape(p)
        dtype = _choice(p, "dtype", TABLE_DTYPES)
        data = _get(p, "data")
        if not isinstance(data, Frame):
            raise ProtocolError("table data must travel as a frame of its own")
        expected = math.prod(shape) * np.dtype(dtype).itemsize
        if len(data.view) != expected:
            raise ProtocolError(
                f"table data has {len(data.view)} bytes, shape and dtype need {expected}"
            )
        table = WireTable(scope, tuple(shape), dtype, data.view)
        if np.isnan(table.to_array()).any():
            raise ProtocolError("table contains NaN")
        return table


class Frame:
    """A received table frame, as the codec hands it to :meth:`WireTable.from_wire`."""

    __slots__ = ("view",)

    def __init__(self, view: memoryview) -> None:
        self.view = view


#: Bytes of a CUDA IPC memory handle (``cudaIpcMemHandle_t``).
IPC_HANDLE_BYTES = 64


@dataclass(frozen=True, eq=False)
class IpcTable:
    """A table left in device memory and handed over by CUDA IPC (same host, same GPU): scope,
    shape, dtype and the exporter's ``cudaIpcMemHandle_t`` of a buffer holding exactly the table
    (C order). Only the handle crosses the socket; the receiver opens it, copies the table onto
    its own stream and closes it (:mod:`dcop.gpu.ipc`). The exporter keeps the buffer until its
    problem ends or its parent's answer (VALUE, down) arrives."""

    scope: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    handle: bytes
    #: where the table starts in the buffer (an :class:`Offer`'s buffer holds several)
    offset: int = 0

    @property
    def entries(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.entries * np.dtype(self.dtype).itemsize

    def to_wire(self) -> dict[str, Any]:
        return {
            "scope": list(self.scope),
            "shape": list(self.shape),
            "dtype": self.dtype,
            "handle": self.handle,
            "offset": self.offset,
        }

    @staticmethod
    def from_wire(p: Payload) -> IpcTable:
        scope, shape = _scope_and_shape(p)
        if not scope:
            raise ProtocolError("a table handed over by CUDA IPC needs a scope")
        dtype = _choice(p, "dtype", TABLE_DTYPES)
        return IpcTable(scope, shape, dtype, _handle(p), _int(p, "offset", 0, (1 << 62) - 1))


def _handle(p: Payload) -> bytes:
    handle = _get(p, "handle")
    if type(handle) is not bytes or len(handle) != IPC_HANDLE_BYTES:
        raise ProtocolError(f"field 'handle' must be {IPC_HANDLE_BYTES} bytes")
    return handle


def _scope_and_shape(p: Payload) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """A table's scope (distinct names) and its shape (one domain size per variable)."""
    scope = _names(p, "scope", MAX_SCOPE)
    if len(set(scope)) != len(scope):
        raise ProtocolError("table scope repeats a variable")
    shape_raw = _seq(p, "shape", MAX_SCOPE)
    if len(shape_raw) != len(scope):
        raise ProtocolError(f"table shape has {len(shape_raw)} axes for {len(scope)} variables")
    shape: list[int] = []
    for i, s in enumerate(shape_raw):
        if type(s) is not int or not 1 <= s <= MAX_DOMAIN:
            raise ProtocolError(f"table shape[{i}] must be an integer in [1, {MAX_DOMAIN}]")
        shape.append(s)
    return scope, tuple(shape)


def _tables(p: Payload, key: str) -> tuple[WireTable, ...]:
    out = []
    for i, t in enumerate(_seq(p, key, MAX_TABLES)):
        if not isinstance(t, dict):
            raise ProtocolError(f"field {key!r}[{i}] must be a table map")
        out.append(WireTable.from_wire(t))
    return tuple(out)


def _scopes(p: Payload, key: str) -> tuple[tuple[int, ...], ...]:
    """A list of scopes given as agent ids (the sizing of a UTIL message)."""
    out = []
    for i, raw in enumerate(_seq(p, key, MAX_TABLES)):
        if not isinstance(raw, list | tuple) or len(raw) > MAX_SCOPE:
            raise ProtocolError(f"field {key!r}[{i}] must be a scope of at most {MAX_SCOPE} ids")
        if any(type(a) is not int or not 0 <= a <= MAX_AGENT_ID for a in raw):
            raise ProtocolError(f"field {key!r}[{i}] must hold agent ids")
        out.append(tuple(raw))
    return tuple(out)


# ---- messages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hello:
    """Agent -> coordinator: who and where I am. ``variable`` is empty for a serving agent
    (it gets one per problem); ``endpoint`` is where my ROUTER is bound (the port the system
    picked, for a wildcard); ``serving`` agents stay up after a problem and repeat their hello
    while idle; ``setup_s`` is what getting ready took (CUDA context, kernels); ``ipc`` names the
    CUDA IPC domain of a GPU agent (:func:`dcop.gpu.ipc.ipc_domain`; empty: none): two agents of
    one domain hand UTILs over on the device."""

    TYPE: ClassVar[str] = "hello"
    variable: str
    pid: int
    host: str = ""
    endpoint: str = ""
    serving: bool = False
    setup_s: float = 0.0
    gpu: str = ""
    ipc: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "pid": self.pid,
            "host": self.host,
            "endpoint": self.endpoint,
            "serving": self.serving,
            "setup_s": self.setup_s,
            "gpu": self.gpu,
            "ipc": self.ipc,
        }

    @staticmethod
    def from_wire(p: Payload) -> Hello:
        return Hello(
            _str(p, "variable", empty=True),
            _int(p, "pid", 0, 1 << 40),
            _str(p, "host", empty=True),
            _str(p, "endpoint", MAX_TEXT_CHARS, empty=True),
            _bool(p, "serving"),
            _float(p, "setup_s", lo=0.0),
            _str(p, "gpu", empty=True),
            _str(p, "ipc", MAX_TEXT_CHARS, empty=True),
        )


@dataclass(frozen=True)
class Neighbour:
    """A neighbour as Setup names it: its agent id, variable, endpoint and CUDA IPC domain (its
    hello's ``ipc``)."""

    id: int
    variable: str
    endpoint: str
    ipc: str = ""


@dataclass(frozen=True, eq=False)
class Setup:
    """Coordinator -> agent, once per problem: the agent's variable, domain, its tables (in the
    run's dtype), the digest of that share (see :mod:`dcop.protocol.digest`), and its neighbours
    with their endpoints (the agent links to them now)."""

    TYPE: ClassVar[str] = "setup"
    variable: str
    domain: int
    tables: tuple[WireTable, ...]
    digest: str
    neighbours: tuple[Neighbour, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "domain": self.domain,
            "tables": [t.to_wire() for t in self.tables],
            "digest": self.digest,
            "neighbours": [[n.id, n.variable, n.endpoint, n.ipc] for n in self.neighbours],
        }

    @staticmethod
    def from_wire(p: Payload) -> Setup:
        digest = _str(p, "digest", DIGEST_CHARS)
        if len(digest) != DIGEST_CHARS or any(c not in "0123456789abcdef" for c in digest):
            raise ProtocolError("field 'digest' must be a sha256 in lower-case hex")
        neighbours = []
        for i, raw in enumerate(_seq(p, "neighbours", MAX_LIST)):
            if not isinstance(raw, list | tuple) or len(raw) != 4:
                raise ProtocolError(
                    f"field 'neighbours'[{i}] must be [id, variable, endpoint, ipc domain]"
                )
            ident, name, endpoint, domain = raw
            if type(ident) is not int or not 0 <= ident <= MAX_AGENT_ID:
                raise ProtocolError(f"field 'neighbours'[{i}] must start with an agent id")
            neighbours.append(
                Neighbour(
                    ident,
                    _check_str(name, f"neighbours[{i}].variable"),
                    _check_str(endpoint, f"neighbours[{i}].endpoint", MAX_TEXT_CHARS),
                    _check_str(domain, f"neighbours[{i}].ipc", MAX_TEXT_CHARS, empty=True),
                )
            )
        if len({n.id for n in neighbours}) != len(neighbours):
            raise ProtocolError("field 'neighbours' names an agent twice")
        return Setup(
            _str(p, "variable"),
            _int(p, "domain", 1, MAX_DOMAIN),
            _tables(p, "tables"),
            digest,
            tuple(neighbours),
        )


@dataclass(frozen=True)
class Ready:
    """Agent -> coordinator: set up, and every neighbour's degree has arrived (links work)."""

    TYPE: ClassVar[str] = "ready"
    degree: int

    def to_wire(self) -> dict[str, Any]:
        return {"degree": self.degree}

    @staticmethod
    def from_wire(p: Payload) -> Ready:
        return Ready(_int(p, "degree", 0, MAX_LIST))


@dataclass(frozen=True)
class Start:
    """Coordinator -> agent: solve by ``spec``; start the DFS of candidate tree k for every k in
    ``roots`` (this agent is that tree's root in its component)."""

    TYPE: ClassVar[str] = "start"
    spec: RunSpec
    roots: tuple[int, ...] = ()

    @property
    def root(self) -> bool:
        """Whether this agent roots at least one candidate tree."""
        return bool(self.roots)

    def to_wire(self) -> dict[str, Any]:
        return {"spec": self.spec.to_wire(), "roots": list(self.roots)}

    @staticmethod
    def from_wire(p: Payload) -> Start:
        spec = RunSpec.from_wire(_sub(p, "spec"))
        roots = _ids(p, "roots", MAX_TREES)
        if spec.trees < 1:  # "auto" is resolved by the coordinator before any Start
            raise ProtocolError("field 'spec.trees' must be at least 1 in a start message")
        if any(k >= spec.trees for k in roots) or len(set(roots)) != len(roots):
            raise ProtocolError(f"field 'roots' must name distinct trees below {spec.trees}")
        return Start(spec, roots)


@dataclass(frozen=True)
class Degree:
    """Agent -> neighbour, once per problem: my neighbours (their ids: the DFS heuristics look
    two hops ahead) and so my degree. It also proves the link works."""

    TYPE: ClassVar[str] = "degree"
    neighbours: tuple[int, ...]
    clock: float

    @property
    def degree(self) -> int:
        return len(self.neighbours)

    def to_wire(self) -> dict[str, Any]:
        return {"neighbours": list(self.neighbours), "clock": self.clock}

    @staticmethod
    def from_wire(p: Payload) -> Degree:
        return Degree(_ids(p, "neighbours"), _float(p, "clock", lo=0.0))


@dataclass(frozen=True)
class Sizing:
    """One mini-bucket size's plan of a subtree, carried up by the DFS: the scopes (agent ids)
    of the UTIL tables the sender will send, and the subtree's largest UTIL (entries and who
    sends it) and total entries."""

    tables: tuple[tuple[int, ...], ...]
    largest: int
    agent: int | None
    total: int

    def to_wire(self) -> list[Any]:
        return [[list(s) for s in self.tables], self.largest, self.agent, self.total]

    @staticmethod
    def from_wire(raw: Any) -> Sizing:
        if not isinstance(raw, list | tuple) or len(raw) != 4:
            raise ProtocolError("a sizing must be [tables, largest, agent, total]")
        p = {"tables": raw[0], "largest": raw[1], "agent": raw[2], "total": raw[3]}
        big = (1 << 62) - 1
        return Sizing(
            _scopes(p, "tables"),
            _int(p, "largest", 0, big),
            _opt_int(p, "agent", 0, MAX_AGENT_ID),
            _int(p, "total", 0, big),
        )


def sizing_at(sizings: Sequence[Sizing], j: int) -> Sizing:
    """The sizing for choice index ``j`` (:func:`dcop.protocol.runspec.sizing_choices`) of a list
    that stops where it becomes DPOP's (index 0)."""
    return sizings[j] if j < len(sizings) else sizings[0]


def _sizings(p: Payload, key: str) -> tuple[Sizing, ...]:
    return tuple(Sizing.from_wire(raw) for raw in _seq(p, key, MAX_Z_CHOICES))


@dataclass(frozen=True)
class Token:
    """The DFS token of candidate tree ``tree`` (see :class:`dcop.trees.dfs.DfsToken`).
    ``child``: you are my child; ``path`` and ``domains`` are your ancestors from the root and
    their domain sizes, ``open`` their unvisited neighbours. ``back``: my subtree is done; it
    carries the subtree's visited agents, my separator, the subtree's summary and, per
    mini-bucket size the run may choose, the sizing of my UTIL message."""

    TYPE: ClassVar[str] = "token"
    tree: int
    kind: Literal["child", "back"]
    path: tuple[int, ...]
    domains: tuple[int, ...]
    open: tuple[int, ...]
    visited: tuple[int, ...]
    separator: tuple[int, ...]
    width: int
    largest: int
    total: int
    sizings: tuple[Sizing, ...]
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {
            "tree": self.tree,
            "kind": self.kind,
            "path": list(self.path),
            "domains": list(self.domains),
            "open": list(self.open),
            "visited": list(self.visited),
            "separator": list(self.separator),
            "width": self.width,
            "largest": self.largest,
            "total": self.total,
            "sizings": [s.to_wire() for s in self.sizings],
            "clock": self.clock,
        }

    @staticmethod
    def from_wire(p: Payload) -> Token:
        kind = _choice(p, "kind", TOKEN_KINDS)
        domains = _seq(p, "domains", MAX_LIST)
        if any(type(d) is not int or not 1 <= d <= MAX_DOMAIN for d in domains):
            raise ProtocolError("field 'domains' must hold domain sizes")
        big = (1 << 62) - 1
        return Token(
            _int(p, "tree", 0, MAX_TREES - 1),
            "child" if kind == "child" else "back",
            _ids(p, "path"),
            tuple(domains),
            _counts(p, "open"),
            _ids(p, "visited"),
            _ids(p, "separator"),
            _int(p, "width", 0, MAX_LIST),
            _int(p, "largest", 0, big),
            _int(p, "total", 0, big),
            _sizings(p, "sizings"),
            _float(p, "clock", lo=0.0),
        )


def _counts(p: Payload, key: str) -> tuple[int, ...]:
    raw = _seq(p, key, MAX_LIST)
    if any(type(c) is not int or not 0 <= c <= MAX_LIST for c in raw):
        raise ProtocolError(f"field {key!r} must hold counts")
    return tuple(raw)


@dataclass(frozen=True)
class TreeReport:
    """A root -> coordinator: candidate tree ``tree`` is built in my component; its largest
    separator, and per mini-bucket size of the run its UTIL sizing."""

    TYPE: ClassVar[str] = "tree"
    tree: int
    width: int
    sizings: tuple[Sizing, ...]

    def to_wire(self) -> dict[str, Any]:
        return {
            "tree": self.tree,
            "width": self.width,
            "sizings": [s.to_wire() for s in self.sizings],
        }

    @staticmethod
    def from_wire(p: Payload) -> TreeReport:
        return TreeReport(
            _int(p, "tree", 0, MAX_TREES - 1), _int(p, "width", 0, MAX_LIST), _sizings(p, "sizings")
        )


@dataclass(frozen=True)
class Go:
    """Coordinator -> agents: run UTIL/VALUE on candidate tree ``tree``, with mini-buckets of
    ``z`` variables (None: DPOP, exact)."""

    TYPE: ClassVar[str] = "go"
    tree: int
    z: int | None

    def to_wire(self) -> dict[str, Any]:
        return {"tree": self.tree, "z": self.z}

    @staticmethod
    def from_wire(p: Payload) -> Go:
        return Go(_int(p, "tree", 0, MAX_TREES - 1), _opt_int(p, "z", 1, MAX_SCOPE))


@dataclass(frozen=True, eq=False)
class Util:
    """Child -> parent: the UTIL tables (one for DPOP, mini-bucket outputs for ADPOP). ``tables``
    travel as frames; ``shared`` ones stay on the GPU the parent shares and travel as CUDA IPC
    handles (:class:`IpcTable`)."""

    TYPE: ClassVar[str] = "util"
    tables: tuple[WireTable, ...]
    clock: float
    shared: tuple[IpcTable, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {
            "tables": [t.to_wire() for t in self.tables],
            "clock": self.clock,
            "shared": [t.to_wire() for t in self.shared],
        }

    @staticmethod
    def from_wire(p: Payload) -> Util:
        tables = _tables(p, "tables")
        shared = []
        for i, t in enumerate(_seq(p, "shared", MAX_TABLES - len(tables))):
            if not isinstance(t, dict):
                raise ProtocolError(f"field 'shared'[{i}] must be a table map")
            shared.append(IpcTable.from_wire(t))
        return Util(tables, _float(p, "clock", lo=0.0), tuple(shared))

    @property
    def entries(self) -> int:
        """Entries of the tables over variables, framed and shared (a scalar is no entry)."""
        framed = sum(t.entries for t in self.tables if t.scope)
        return framed + sum(t.entries for t in self.shared)  # a shared table always has a scope


@dataclass(frozen=True)
class Offer:
    """Child -> parent of one GPU, once the tree is chosen: the CUDA IPC handle of the buffer my
    UTIL tables will be copied into (``nbytes``). The parent opens it at once, while my subtree
    still computes, so that taking the UTIL later is only a device copy (:mod:`dcop.gpu.ipc`)."""

    TYPE: ClassVar[str] = "offer"
    handle: bytes
    nbytes: int
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {"handle": self.handle, "nbytes": self.nbytes, "clock": self.clock}

    @staticmethod
    def from_wire(p: Payload) -> Offer:
        return Offer(_handle(p), _int(p, "nbytes", 1, (1 << 62) - 1), _float(p, "clock", lo=0.0))


@dataclass(frozen=True)
class Value:
    """Parent -> child: the values (domain indices) of the child's separator."""

    TYPE: ClassVar[str] = "value"
    values: tuple[tuple[str, int], ...]
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {"values": dict(self.values), "clock": self.clock}

    @staticmethod
    def from_wire(p: Payload) -> Value:
        raw = _map(p, "values", MAX_LIST)
        values = []
        for k, v in raw.items():
            name = _check_str(k, "values key")
            if type(v) is not int or not 0 <= v < MAX_DOMAIN:
                raise ProtocolError(f"value of {name!r} must be a domain index")
            values.append((name, v))
        return Value(tuple(values), _float(p, "clock", lo=0.0))


@dataclass(frozen=True, eq=False)
class Down:
    """Parent -> child, for MAR: the log-space message over the child's separator (the parent's
    bucket summed without the child's own UTIL; :func:`dcop.sumproduct.down_messages`)."""

    TYPE: ClassVar[str] = "down"
    tables: tuple[WireTable, ...]
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {"tables": [t.to_wire() for t in self.tables], "clock": self.clock}

    @staticmethod
    def from_wire(p: Payload) -> Down:
        tables = _tables(p, "tables")
        if len(tables) != 1:
            raise ProtocolError(f"a down message holds one table, not {len(tables)}")
        return Down(tables, _float(p, "clock", lo=0.0))


def _probabilities(p: Payload, key: str) -> tuple[float, ...] | None:
    """An optional list of probabilities (a marginal): each in [0, 1], summing to about 1."""
    if p.get(key) is None:
        if key not in p:
            raise ProtocolError(f"missing field {key!r}")
        return None
    raw = _seq(p, key, MAX_DOMAIN)
    if not raw:
        raise ProtocolError(f"field {key!r} must not be empty")
    out = []
    for v in raw:
        if type(v) not in (int, float) or not 0.0 <= float(v) <= 1.0:
            raise ProtocolError(f"field {key!r} must hold probabilities in [0, 1]")
        out.append(float(v))
    if not math.isclose(sum(out), 1.0, abs_tol=1e-6):
        raise ProtocolError(f"field {key!r} sums to {sum(out):.9g}, not 1")
    return tuple(out)


def _figures(p: Payload, key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in _map(p, key, 64).items():
        name = _check_str(k, f"{key} key")
        if type(v) not in (int, float) or not math.isfinite(v):
            raise ProtocolError(f"field {key!r}[{name!r}] must be a finite number")
        out[name] = float(v)
    return out


@dataclass(frozen=True)
class AgentMetrics:
    """What one agent measured on its own wire and clock."""

    sent_count: dict[str, int] = field(default_factory=dict)
    sent_bytes: dict[str, int] = field(default_factory=dict)
    recv_count: dict[str, int] = field(default_factory=dict)
    recv_bytes: dict[str, int] = field(default_factory=dict)
    compute_s: float = 0.0
    clock: float = 0.0
    util_bytes: int = 0
    util_entries: int = 0
    util_tables: int = 0
    dropped: int = 0
    #: seconds spent getting ready (CUDA context, kernels): not part of the solve
    setup_s: float = 0.0
    #: named figures of the agent's backend (GPU placement, kernel compiles, transfers)
    backend: dict[str, float] = field(default_factory=dict)
    #: UTIL bytes and tables handed to the parent by CUDA IPC (not on the network: they are in
    #: ``util_bytes`` and ``util_entries``, the message's size, but not in ``sent_bytes``)
    ipc_bytes: int = 0
    ipc_tables: int = 0

    def to_wire(self) -> dict[str, Any]:
        return {
            "sent_count": self.sent_count,
            "sent_bytes": self.sent_bytes,
            "recv_count": self.recv_count,
            "recv_bytes": self.recv_bytes,
            "compute_s": self.compute_s,
            "clock": self.clock,
            "util_bytes": self.util_bytes,
            "util_entries": self.util_entries,
            "util_tables": self.util_tables,
            "dropped": self.dropped,
            "setup_s": self.setup_s,
            "backend": self.backend,
            "ipc_bytes": self.ipc_bytes,
            "ipc_tables": self.ipc_tables,
        }

    @staticmethod
    def from_wire(p: Payload) -> AgentMetrics:
        def counts(key: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for k, v in _map(p, key, len(MESSAGE_TYPES)).items():
                if k not in MESSAGE_TYPES:
                    raise ProtocolError(f"field {key!r} names unknown message type {k!r}")
                if type(v) is not int or not 0 <= v < (1 << 62):
                    raise ProtocolError(f"field {key!r}[{k!r}] must be a count")
                out[k] = v
            return out

        big = (1 << 62) - 1
        return AgentMetrics(
            counts("sent_count"),
            counts("sent_bytes"),
            counts("recv_count"),
            counts("recv_bytes"),
            _float(p, "compute_s", lo=0.0),
            _float(p, "clock", lo=0.0),
            _int(p, "util_bytes", 0, big),
            _int(p, "util_entries", 0, big),
            _int(p, "util_tables", 0, MAX_TABLES),
            _int(p, "dropped", 0, big),
            _float(p, "setup_s", lo=0.0),
            _figures(p, "backend"),
            _int(p, "ipc_bytes", 0, big),
            _int(p, "ipc_tables", 0, MAX_TABLES),
        )


@dataclass(frozen=True)
class Result:
    """Agent -> coordinator: my value, my place in the pseudo-tree and my metrics. Roots add
    ``bound``: their component's optimum (DPOP) or lower bound (ADPOP); for PR/MAR its ``ln Z``.
    PR and MAR send no value; MAR sends my variable's ``marginal`` (None where ``Z = 0``)."""

    TYPE: ClassVar[str] = "result"
    value: int | None
    bound: float | None
    parent: int | None
    children: tuple[int, ...]
    pseudo_parents: tuple[int, ...]
    separator: tuple[int, ...]
    metrics: AgentMetrics
    marginal: tuple[float, ...] | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "bound": self.bound,
            "parent": self.parent,
            "children": list(self.children),
            "pseudo_parents": list(self.pseudo_parents),
            "separator": list(self.separator),
            "metrics": self.metrics.to_wire(),
            "marginal": None if self.marginal is None else list(self.marginal),
        }

    @staticmethod
    def from_wire(p: Payload) -> Result:
        return Result(
            _opt_int(p, "value", 0, MAX_DOMAIN - 1),
            _opt_float(p, "bound"),
            _opt_int(p, "parent", 0, MAX_AGENT_ID),
            _ids(p, "children"),
            _ids(p, "pseudo_parents"),
            _ids(p, "separator"),
            AgentMetrics.from_wire(_sub(p, "metrics")),
            _probabilities(p, "marginal"),
        )


#: What an Error reports: a failure, a table or message over a limit (memory included), a problem
#: file that differs from the coordinator's, or an agent's own deadline.
ERROR_KINDS = ("error", "too_large", "mismatch", "timeout")


@dataclass(frozen=True)
class Error:
    """Agent -> coordinator: something failed; ``peer`` names a neighbour that went silent."""

    TYPE: ClassVar[str] = "error"
    reason: str
    peer: int | None = None
    kind: Literal["error", "too_large", "mismatch", "timeout"] = "error"

    def to_wire(self) -> dict[str, Any]:
        return {"reason": self.reason[:MAX_TEXT_CHARS], "peer": self.peer, "kind": self.kind}

    @staticmethod
    def from_wire(p: Payload) -> Error:
        kind = _choice(p, "kind", ERROR_KINDS)
        return Error(
            _str(p, "reason", MAX_TEXT_CHARS),
            _opt_int(p, "peer", 0, MAX_AGENT_ID),
            kind,  # type: ignore[arg-type]  # one of ERROR_KINDS
        )


@dataclass(frozen=True)
class Stop:
    """Coordinator -> agent: exit (``reason`` is "done", "shutdown" or why the run ended)."""

    TYPE: ClassVar[str] = "stop"
    reason: str = "done"

    def to_wire(self) -> dict[str, Any]:
        return {"reason": self.reason[:MAX_TEXT_CHARS]}

    @staticmethod
    def from_wire(p: Payload) -> Stop:
        return Stop(_str(p, "reason", MAX_TEXT_CHARS))


@dataclass(frozen=True)
class Done:
    """Coordinator -> serving agent: this problem is over (``reason`` is "done" or why it
    ended); drop it and wait for the next one."""

    TYPE: ClassVar[str] = "done"
    reason: str = "done"

    def to_wire(self) -> dict[str, Any]:
        return {"reason": self.reason[:MAX_TEXT_CHARS]}

    @staticmethod
    def from_wire(p: Payload) -> Done:
        return Done(_str(p, "reason", MAX_TEXT_CHARS))


@dataclass(frozen=True)
class Heartbeat:
    """Agent -> coordinator: alive (the loop runs), with where it stands for the live status: its
    phase, the bytes it has sent in this problem and whether its UTIL has gone out."""

    TYPE: ClassVar[str] = "heartbeat"
    phase: str = ""
    sent_bytes: int = 0
    util_sent: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"phase": self.phase, "sent_bytes": self.sent_bytes, "util_sent": self.util_sent}

    @staticmethod
    def from_wire(p: Payload) -> Heartbeat:
        return Heartbeat(
            _str(p, "phase", empty=True),
            _int(p, "sent_bytes", 0, (1 << 62) - 1),
            _bool(p, "util_sent"),
        )


Message = (
    Hello
    | Setup
    | Ready
    | Start
    | Degree
    | Token
    | TreeReport
    | Go
    | Offer
    | Util
    | Value
    | Down
    | Result
    | Error
    | Stop
    | Done
    | Heartbeat
)

MESSAGE_CLASSES: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        Hello,
        Setup,
        Ready,
        Start,
        Degree,
        Token,
        TreeReport,
        Go,
        Offer,
        Util,
        Value,
        Down,
        Result,
        Error,
        Stop,
        Done,
        Heartbeat,
    )
}
MESSAGE_TYPES: tuple[str, ...] = tuple(MESSAGE_CLASSES)
