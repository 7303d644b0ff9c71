"""Message types of the agent protocol: frozen dataclasses with ``to_wire()`` / ``from_wire()``.

Every message travels inside an envelope ``{"v": version, "t": type, "s": sender, "r": receiver,
"p": payload}`` (see :mod:`dcop.protocol.codec`); the classes here only know their payload.
``from_wire`` validates every field's type, range and size and raises :class:`ProtocolError` with
the field name, so the codec never hands an agent a half-checked message.

Flow of one run (A = agent, C = coordinator, N = neighbour)::

    A->C hello      C->A setup      A->N degree      A->C ready      C->A start
    A->N token (DFS: child / back)  A->parent util   A->children value
    A->C result     C->A stop       (heartbeat both ways, error A->C at any time)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
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
    TABLE_DTYPES,
)
from dcop.protocol.digest import DIGEST_CHARS
from dcop.protocol.runspec import RunSpec

Payload = Mapping[str, Any]
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
@dataclass(frozen=True, eq=False)
class WireTable:
    """A cost table on the wire: scope, shape, dtype and the raw C-order bytes (never pickled)."""

    scope: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    data: bytes

    @staticmethod
    def from_array(scope: tuple[str, ...], array: npt.ArrayLike) -> WireTable:
        """Pack a host array (float64 unless it already is float32)."""
        arr = np.asarray(array)
        dtype = "<f4" if arr.dtype == np.float32 else "<f8"
        arr = np.asarray(arr, dtype=dtype, order="C")  # (ascontiguousarray would make 0-d 1-d)
        return WireTable(tuple(scope), tuple(int(s) for s in arr.shape), dtype, arr.tobytes())

    def to_array(self) -> npt.NDArray[Any]:
        """A read-only view of the bytes as an array of ``shape``."""
        return np.frombuffer(self.data, dtype=self.dtype).reshape(self.shape)

    @property
    def entries(self) -> int:
        return math.prod(self.shape)

    def to_wire(self) -> dict[str, Any]:
        return {
            "scope": list(self.scope),
            "shape": list(self.shape),
            "dtype": self.dtype,
            "data": self.data,
        }

    @staticmethod
    def from_wire(p: Payload) -> WireTable:
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
        dtype = _choice(p, "dtype", TABLE_DTYPES)
        data = _get(p, "data")
        if type(data) is not bytes:
            raise ProtocolError("table data must be raw bytes (msgpack bin)")
        expected = math.prod(shape) * np.dtype(dtype).itemsize
        if len(data) != expected:
            raise ProtocolError(
                f"table data has {len(data)} bytes, shape and dtype need {expected}"
            )
        table = WireTable(scope, tuple(shape), dtype, data)
        if np.isnan(table.to_array()).any():
            raise ProtocolError("table contains NaN")
        return table


def _tables(p: Payload, key: str) -> tuple[WireTable, ...]:
    out = []
    for i, t in enumerate(_seq(p, key, MAX_TABLES)):
        if not isinstance(t, dict):
            raise ProtocolError(f"field {key!r}[{i}] must be a table map")
        out.append(WireTable.from_wire(t))
    return tuple(out)


# ---- messages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hello:
    """Agent -> coordinator on start: who I am."""

    TYPE: ClassVar[str] = "hello"
    variable: str
    pid: int
    host: str = ""

    def to_wire(self) -> dict[str, Any]:
        return {"variable": self.variable, "pid": self.pid, "host": self.host}

    @staticmethod
    def from_wire(p: Payload) -> Hello:
        return Hello(_str(p, "variable"), _int(p, "pid", 0, 1 << 40), _str(p, "host", empty=True))


@dataclass(frozen=True, eq=False)
class Setup:
    """Coordinator -> agent: the agent's share of the problem (its domain and its tables, in the
    run's dtype) and the digest of that share (see :mod:`dcop.protocol.digest`)."""

    TYPE: ClassVar[str] = "setup"
    variable: str
    domain: int
    tables: tuple[WireTable, ...]
    digest: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "domain": self.domain,
            "tables": [t.to_wire() for t in self.tables],
            "digest": self.digest,
        }

    @staticmethod
    def from_wire(p: Payload) -> Setup:
        digest = _str(p, "digest", DIGEST_CHARS)
        if len(digest) != DIGEST_CHARS or any(c not in "0123456789abcdef" for c in digest):
            raise ProtocolError("field 'digest' must be a sha256 in lower-case hex")
        return Setup(
            _str(p, "variable"), _int(p, "domain", 1, MAX_DOMAIN), _tables(p, "tables"), digest
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
    """Coordinator -> agent: solve by ``spec``; ``root`` agents start the DFS of their component."""

    TYPE: ClassVar[str] = "start"
    spec: RunSpec
    root: bool

    def to_wire(self) -> dict[str, Any]:
        return {"spec": self.spec.to_wire(), "root": self.root}

    @staticmethod
    def from_wire(p: Payload) -> Start:
        return Start(RunSpec.from_wire(_sub(p, "spec")), _bool(p, "root"))


@dataclass(frozen=True)
class Degree:
    """Agent -> neighbour: my number of neighbours (for the most-neighbours-first DFS)."""

    TYPE: ClassVar[str] = "degree"
    degree: int
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {"degree": self.degree, "clock": self.clock}

    @staticmethod
    def from_wire(p: Payload) -> Degree:
        return Degree(_int(p, "degree", 0, MAX_LIST), _float(p, "clock", lo=0.0))


@dataclass(frozen=True)
class Token:
    """The DFS token. ``child``: you are my child; ``path`` lists your ancestors from the root.
    ``back``: your child's subtree is done. ``visited`` is every agent the token has reached."""

    TYPE: ClassVar[str] = "token"
    kind: Literal["child", "back"]
    path: tuple[int, ...]
    visited: tuple[int, ...]
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": list(self.path),
            "visited": list(self.visited),
            "clock": self.clock,
        }

    @staticmethod
    def from_wire(p: Payload) -> Token:
        kind = _choice(p, "kind", TOKEN_KINDS)
        return Token(
            "child" if kind == "child" else "back",
            _ids(p, "path"),
            _ids(p, "visited"),
            _float(p, "clock", lo=0.0),
        )


@dataclass(frozen=True, eq=False)
class Util:
    """Child -> parent: the UTIL tables (one for DPOP, mini-bucket outputs for ADPOP)."""

    TYPE: ClassVar[str] = "util"
    tables: tuple[WireTable, ...]
    clock: float

    def to_wire(self) -> dict[str, Any]:
        return {"tables": [t.to_wire() for t in self.tables], "clock": self.clock}

    @staticmethod
    def from_wire(p: Payload) -> Util:
        return Util(_tables(p, "tables"), _float(p, "clock", lo=0.0))


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
        )


@dataclass(frozen=True)
class Result:
    """Agent -> coordinator: my value, my place in the pseudo-tree and my metrics. Roots add
    ``bound``: their component's optimum (DPOP) or lower bound (ADPOP)."""

    TYPE: ClassVar[str] = "result"
    value: int
    bound: float | None
    parent: int | None
    children: tuple[int, ...]
    pseudo_parents: tuple[int, ...]
    separator: tuple[str, ...]
    metrics: AgentMetrics

    def to_wire(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "bound": self.bound,
            "parent": self.parent,
            "children": list(self.children),
            "pseudo_parents": list(self.pseudo_parents),
            "separator": list(self.separator),
            "metrics": self.metrics.to_wire(),
        }

    @staticmethod
    def from_wire(p: Payload) -> Result:
        return Result(
            _int(p, "value", 0, MAX_DOMAIN - 1),
            _opt_float(p, "bound"),
            _opt_int(p, "parent", 0, MAX_AGENT_ID),
            _ids(p, "children"),
            _ids(p, "pseudo_parents"),
            _names(p, "separator", MAX_LIST),
            AgentMetrics.from_wire(_sub(p, "metrics")),
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
    """Coordinator -> agent: shut down (``reason`` is "done" or why the run ended)."""

    TYPE: ClassVar[str] = "stop"
    reason: str = "done"

    def to_wire(self) -> dict[str, Any]:
        return {"reason": self.reason[:MAX_TEXT_CHARS]}

    @staticmethod
    def from_wire(p: Payload) -> Stop:
        return Stop(_str(p, "reason", MAX_TEXT_CHARS))


@dataclass(frozen=True)
class Heartbeat:
    """Liveness, both ways; carries nothing else."""

    TYPE: ClassVar[str] = "heartbeat"

    def to_wire(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def from_wire(p: Payload) -> Heartbeat:
        return Heartbeat()


Message = (
    Hello
    | Setup
    | Ready
    | Start
    | Degree
    | Token
    | Util
    | Value
    | Result
    | Error
    | Stop
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
        Util,
        Value,
        Result,
        Error,
        Stop,
        Heartbeat,
    )
}
MESSAGE_TYPES: tuple[str, ...] = tuple(MESSAGE_CLASSES)
