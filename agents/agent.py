"""The agent: one variable, an event loop over a Transport, and the DFS / DPOP / ADPOP state machine.

Phases (each step is triggered by a message; ``_progress`` fires whatever has become possible):

1. **hello** to the coordinator and **degree** (own neighbour count) to every neighbour.
2. **setup** from the coordinator (domain and the tables that hold the variable; or from the
   problem file given with ``--problem``). With setup and every neighbour's degree in hand, the
   agent sends **ready**: its links work both ways.
3. **start** (algo, z, root flag). Roots - the coordinator picks the highest-degree agent of each
   connected component, ties by variable name - begin the distributed DFS.
4. **DFS by token passing.** A ``child`` token carries the path of ancestors and the set of agents
   visited so far; the receiver takes the sender as parent, the other ancestors among its
   neighbours as pseudo-parents, then passes the token to its unvisited neighbours one at a time,
   most neighbours first (ties by variable name, as :func:`dcop.ordering.most_neighbours_first`), and
   finally returns it to its parent with a ``back`` token.
5. **UTIL up.** The agent's bucket = its own tables (those whose other variables are all its
   ancestors: it is the deepest variable of the scope) plus the children's UTIL tables that hold
   its variable. DPOP joins the bucket and eliminates the variable (one table, scope = separator).
   ADPOP(z) partitions it into mini-buckets of at most z variables and sends one table per
   mini-bucket; children's tables without the variable are passed up unchanged, as MBE places them
   in the bucket of their deepest variable. A root's tables are scalars: their sum is the
   component's optimum (DPOP) or lower bound (ADPOP).
6. **VALUE down.** Given its separator's values, the agent picks the best value of the sum of its
   bucket, sends each child the values of that child's separator, and reports a **result** (value,
   tree position, metrics) to the coordinator. It then waits for **stop**.

Liveness: heartbeats to the coordinator and to quiet neighbours; a neighbour silent for
``peer_timeout_s`` is reported (error with ``peer``); a coordinator silent that long after its first
message, or the overall deadline, ends the agent (so agents may be started long before the
coordinator). Bad frames are logged and dropped; the agent carries on.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dcop.agents.jobs import Job
from dcop.agents.metrics import Meter
from dcop.buckets import choose_value, eliminate_bucket
from dcop.errors import (
    DcopError,
    ProblemMismatch,
    ProtocolError,
    RunTimeout,
    TableTooLarge,
)
from dcop.model import CostTable
from dcop.protocol import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    HEARTBEAT_INTERVAL_S,
    PEER_TIMEOUT_S,
    Degree,
    Envelope,
    Error,
    Heartbeat,
    Hello,
    Message,
    Ready,
    Result,
    RunSpec,
    Setup,
    Start,
    Stop,
    Token,
    Transport,
    Util,
    Value,
    WireTable,
    decode,
    encode,
)
from dcop.protocol.digest import part_digest
from dcop.tables import Table, TableBackend

log = logging.getLogger("dcop.agents")

FROM_COORDINATOR = ("setup", "start", "stop", "heartbeat")
FROM_NEIGHBOUR = ("degree", "token", "util", "value", "heartbeat")
FAULTS = ("crash-at-util", "hang-at-util", "crash-at-start")


@dataclass
class AgentConfig:
    """What an agent knows before any message: itself and its neighbours (from peers.json)."""

    me: int
    variable: str
    neighbours: dict[int, str]  # id -> variable name
    timeout_s: float = 120.0
    #: silence allowed before Start; the run's RunSpec sets it from then on
    peer_timeout_s: float = PEER_TIMEOUT_S
    heartbeat_s: float = HEARTBEAT_INTERVAL_S
    #: the largest message this agent accepts at all (its sockets' cap); a run may ask for less
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    host: str = ""
    fault: str | None = None  # test-only fault injection, one of FAULTS


UtilOutput = tuple[tuple[WireTable, ...], float, float]
ErrorKind = Literal["error", "too_large", "mismatch", "timeout"]


class Agent:
    """One DCOP agent. ``run()`` returns the process exit code (0: stopped after a result)."""

    def __init__(
        self,
        config: AgentConfig,
        transport: Transport,
        backend: TableBackend,
        local_tables: Sequence[CostTable] | None = None,
        local_domain: int | None = None,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cfg = config
        self.me = config.me
        self.var = config.variable
        self.transport = transport
        self.backend = backend
        self.now = now
        self.local_tables = list(local_tables) if local_tables is not None else None
        self.local_domain = local_domain
        self.known = {COORDINATOR_ID, *config.neighbours}
        # setup
        self.domain: int | None = None
        self.tables: list[Table] = []
        self.degrees: dict[int, int] = {}
        self.ready_sent = False
        self.start: Start | None = None
        self.spec: RunSpec | None = None
        # DFS
        self.in_dfs = False
        self.parent: int | None = None
        self.path: tuple[int, ...] = ()
        self.visited: set[int] = set()
        self.children: list[int] = []
        self.pseudo_parents: list[int] = []
        self.waiting_on: int | None = None
        self.dfs_done = False
        # UTIL / VALUE
        self.utils: dict[int, list[Table]] = {}
        self.scalars = 0.0
        self.bucket: list[Table] = []
        self.util_sent = False
        self.util_job: Job[UtilOutput] | None = None
        self.bound: float | None = None
        self.separator: tuple[str, ...] = ()
        self.assignment: dict[str, int] | None = None
        self.value: int | None = None
        self.result_sent = False
        # liveness and metrics
        self.clock = 0.0
        self.meter = Meter()
        self.last_seen: dict[int, float] = {}
        self.last_sent: dict[int, float] = {}
        self.reported_dead: set[int] = set()
        self.stop_reason: str | None = None
        self.failed = False
        # the coordinator's silence counts only once it has spoken: agents that read their part
        # from a file (--problem) may be started long before the coordinator is
        self.coordinator_heard = False

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> int:
        start = self.now()
        deadline = start + self.cfg.timeout_s
        self.last_seen = dict.fromkeys(self.known, start)
        self._send(COORDINATOR_ID, Hello(self.var, os.getpid(), self.cfg.host))
        for peer in self.cfg.neighbours:
            self._send(peer, Degree(len(self.cfg.neighbours), self.clock))
        next_beat = start
        while self.stop_reason is None:
            now = self.now()
            if now >= deadline:
                self._fail(
                    f"agent {self.me} ({self.var}) timed out after {self.cfg.timeout_s:g} s "
                    f"in phase {self.phase}",
                    "timeout",
                )
                return 1
            if now >= next_beat:
                self._heartbeats(now)
                next_beat = now + self.cfg.heartbeat_s
                if self._coordinator_gone(now):
                    log.error(
                        "agent %d: coordinator silent for %.1f s; exiting",
                        self.me,
                        now - self.last_seen[COORDINATOR_ID],
                    )
                    return 1
            wait = min(next_beat, deadline) - now
            if self.util_job is not None:
                wait = min(wait, 0.01)
            item = self.transport.recv(wait)
            if item is not None:
                self.on_frame(*item)
            if self.util_job is not None and self.util_job.done():
                self._step(self._finish_util)
        return 0 if self.stop_reason == "done" and self.result_sent and not self.failed else 3

    @property
    def phase(self) -> str:
        if self.domain is None:
            return "setup"
        if not self.ready_sent:
            return "degree exchange"
        if self.start is None:
            return "waiting for start"
        if not self.dfs_done:
            return "dfs"
        if not self.util_sent and self.bound is None:
            return "util"
        if not self.result_sent:
            return "value"
        return "waiting for stop"

    def _heartbeats(self, now: float) -> None:
        self._send(COORDINATOR_ID, Heartbeat())
        # Neighbours may still be starting; liveness counts once links are up. Those already
        # heard from are kept alive meanwhile: otherwise an agent that waits for one slow
        # neighbour goes silent for all the others, which then report it dead (seen with dozens
        # of containers starting at once on two cores).
        waiting = not self.ready_sent and len(self.degrees) < len(self.cfg.neighbours)
        for peer in self.cfg.neighbours:
            if waiting and peer not in self.degrees:
                continue
            if now - self.last_sent.get(peer, 0.0) >= self.cfg.heartbeat_s:
                self._send(peer, Heartbeat())
            if waiting:
                continue
            silent = now - self.last_seen[peer]
            if silent > self.peer_timeout and peer not in self.reported_dead:
                self.reported_dead.add(peer)
                name = self.cfg.neighbours[peer]
                reason = f"neighbour agent {peer} ({name}) silent for {silent:.1f} s"
                log.error("agent %d: %s", self.me, reason)
                self._send(COORDINATOR_ID, Error(reason, peer))

    def _coordinator_gone(self, now: float) -> bool:
        # Before its first message the coordinator may not be started yet, or busy starting the
        # other agents: the overall deadline covers that wait.
        return self.coordinator_heard and (now - self.last_seen[COORDINATOR_ID] > self.peer_timeout)

    @property
    def peer_timeout(self) -> float:
        """The silence allowed before a peer counts as dead: the run's, once it has started."""
        return self.spec.peer_timeout if self.spec is not None else self.cfg.peer_timeout_s

    @property
    def max_message_bytes(self) -> int:
        """The run's message limit once it has started, this agent's cap before."""
        return self.spec.max_message_bytes if self.spec is not None else self.cfg.max_message_bytes

    # ---- frames -----------------------------------------------------------------------------
    def on_frame(self, sender: int | None, frame: bytes) -> None:
        """Decode, validate and dispatch one frame; a bad one is logged and dropped."""
        try:
            env = decode(
                frame,
                max_message_bytes=self.cfg.max_message_bytes,
                known_senders=self.known,
                receiver=self.me,
            )
            if sender is None:
                raise ProtocolError(f"frame from an unidentified peer claims to be {env.sender}")
            if env.sender != sender:
                raise ProtocolError(f"frame from {sender} claims to come from {env.sender}")
            allowed = FROM_COORDINATOR if env.sender == COORDINATOR_ID else FROM_NEIGHBOUR
            if env.type not in allowed:
                raise ProtocolError(f"unexpected {env.type} message from {env.sender}")
        except ProtocolError as exc:
            self.meter.dropped()
            log.warning("agent %d: dropped a frame from %s: %s", self.me, sender, exc)
            return
        self.last_seen[env.sender] = self.now()
        if env.sender == COORDINATOR_ID:
            self.coordinator_heard = True
        self.meter.received(env.type, len(frame))
        msg_clock = getattr(env.body, "clock", None)
        if msg_clock is not None:
            self.clock = max(self.clock, msg_clock)
        try:
            self.handle(env)
        except ProtocolError as exc:
            self.meter.dropped()
            log.warning("agent %d: rejected %s from %d: %s", self.me, env.type, env.sender, exc)
            return
        except DcopError as exc:
            self._fail(f"agent {self.me} ({self.var}): {exc}", error_kind(exc))
            return
        self._step(lambda: None)

    def _step(self, action: Callable[[], None]) -> None:
        """Run ``action`` then whatever became possible; a failure is reported, not raised."""
        try:
            action()
            self._progress()
        except DcopError as exc:
            self._fail(f"agent {self.me} ({self.var}): {exc}", error_kind(exc))
        except MemoryError:
            self._fail(
                f"agent {self.me} ({self.var}): out of memory in phase {self.phase} "
                f"(bucket of {len(self.bucket)} tables; use ADPOP with a smaller z)",
                "too_large",
            )
        except Exception as exc:  # a bug: tell the coordinator, do not hang
            log.exception("agent %d: unexpected failure", self.me)
            self._fail(f"agent {self.me} ({self.var}): {type(exc).__name__}: {exc}")

    def handle(self, env: Envelope) -> None:
        body = env.body
        match body:
            case Heartbeat():
                pass
            case Setup():
                self._on_setup(body)
            case Degree():
                self.degrees[env.sender] = body.degree
            case Start():
                if self.start is not None:
                    raise ProtocolError("a second start")
                if body.spec.max_message_bytes > self.cfg.max_message_bytes:
                    raise DcopError(
                        f"the run allows messages of {body.spec.max_message_bytes} bytes, but this "
                        f"agent was started with a limit of {self.cfg.max_message_bytes} bytes "
                        "(give every agent the run's --max-message-mib)"
                    )
                self.start = body
                self.spec = body.spec
                if self.cfg.fault == "crash-at-start":
                    os.kill(os.getpid(), signal.SIGKILL)
                if body.root:
                    self._begin_dfs_as_root()
            case Token():
                self._on_token(env.sender, body)
            case Util():
                if env.sender not in self.children or env.sender in self.utils:
                    raise ProtocolError(f"UTIL from {env.sender}, which is not a waiting child")
                # scalars (scope ()) stay host floats: they only add to the bound
                self.utils[env.sender] = [
                    self.backend.table(t.scope, a, a.dtype)
                    for t in body.tables
                    if t.scope
                    for a in [t.to_array()]
                ]
                self.scalars += sum(float(t.to_array()) for t in body.tables if not t.scope)
            case Value():
                if env.sender != self.parent or self.assignment is not None:
                    raise ProtocolError(f"VALUE from {env.sender}, which is not my waiting parent")
                self.assignment = dict(body.values)
            case Stop():
                self.stop_reason = body.reason
            case _:
                raise ProtocolError(f"no handler for {env.type}")

    # ---- setup ------------------------------------------------------------------------------
    def _on_setup(self, setup: Setup) -> None:
        if setup.variable != self.var:
            raise DcopError(
                f"coordinator set up variable {setup.variable!r}, peers.json says {self.var!r}"
            )
        if self.domain is not None:
            raise ProtocolError("a second setup")
        dtype = setup.tables[0].dtype if setup.tables else "<f8"  # the run's, chosen once
        if self.local_tables is not None:
            # the problem file wins, but only if it says what the coordinator says
            mine = part_digest(
                self.var, self.local_domain or 0, [(t.scope, t.costs) for t in self.local_tables]
            )
            if mine != setup.digest or self.local_domain != setup.domain:
                raise ProblemMismatch(
                    f"problem mismatch: agent {self.me} ({self.var})'s problem file gives its "
                    f"part digest {mine[:12]}, the coordinator's copy {setup.digest[:12]} "
                    "(the agents and the coordinator must read the same problem)"
                )
            self.domain = self.local_domain
            self.tables = [self.backend.table(t.scope, t.costs, dtype) for t in self.local_tables]
        else:
            self.domain = setup.domain
            self.tables = [
                self.backend.table(t.scope, a, a.dtype)
                for t in setup.tables
                for a in [t.to_array()]
            ]
        names = set(self.cfg.neighbours.values())
        for t in self.tables:
            if self.var not in t.scope:
                raise DcopError(f"a table over {t.scope} does not hold {self.var!r}")
            strangers = [v for v in t.scope if v != self.var and v not in names]
            if strangers:
                raise DcopError(
                    f"a table links {self.var!r} with {strangers[0]!r}, which peers.json does not "
                    f"list as a neighbour"
                )

    # ---- DFS --------------------------------------------------------------------------------
    def _dfs_order(self) -> list[int]:
        # most neighbours first, ties by variable name (= dcop.ordering.most_neighbours_first)
        return sorted(
            self.cfg.neighbours, key=lambda i: (-self.degrees.get(i, 0), self.cfg.neighbours[i])
        )

    def _begin_dfs_as_root(self) -> None:
        if self.in_dfs:
            raise ProtocolError("told to be a root after joining a DFS")
        self.in_dfs = True
        self.visited = {self.me}
        self._dfs_next()

    def _on_token(self, sender: int, token: Token) -> None:
        if token.kind == "child":
            if self.in_dfs:
                raise ProtocolError(f"a second DFS child token (from {sender})")
            if not token.path or token.path[-1] != sender:
                raise ProtocolError("a child token whose path does not end at its sender")
            self.in_dfs = True
            self.parent = sender
            self.path = token.path
            ancestors = set(token.path)
            self.pseudo_parents = [n for n in self._dfs_order() if n in ancestors and n != sender]
            self.visited = set(token.visited) | {self.me}
            self._dfs_next()
        else:
            if sender != self.waiting_on:
                raise ProtocolError(f"a back token from {sender}, not from the child I wait for")
            self.waiting_on = None
            self.visited |= set(token.visited)
            self._dfs_next()

    def _dfs_next(self) -> None:
        for peer in self._dfs_order():
            if peer not in self.visited:
                self.children.append(peer)
                self.waiting_on = peer
                self.visited.add(peer)
                self._send(
                    peer,
                    Token(
                        "child",
                        (*self.path, self.me),
                        tuple(sorted(self.visited - {peer})),
                        self.clock,
                    ),
                )
                return
        self.dfs_done = True
        if self.parent is not None:
            self._send(self.parent, Token("back", (), tuple(sorted(self.visited)), self.clock))

    # ---- UTIL and VALUE ---------------------------------------------------------------------
    def _progress(self) -> None:
        if (
            not self.ready_sent
            and self.domain is not None
            and (len(self.degrees) == len(self.cfg.neighbours))
        ):
            self.ready_sent = True
            self._send(COORDINATOR_ID, Ready(len(self.cfg.neighbours)))
        if (
            self.start is not None
            and self.dfs_done
            and not self.util_sent
            and self.bound is None
            and self.util_job is None
            and len(self.utils) == len(self.children)
        ):
            self._util_phase()
        if not self.result_sent and (
            (self.parent is None and self.bound is not None) or self.assignment is not None
        ):
            self._value_phase()

    def _util_phase(self) -> None:
        assert self.spec is not None and self.domain is not None
        if self.cfg.fault == "crash-at-util":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.cfg.fault == "hang-at-util":
            log.error("agent %d: fault injection: hanging", self.me)
            time.sleep(10 * self.cfg.timeout_s)
        ancestors = {self.cfg.neighbours[i] for i in self.path if i in self.cfg.neighbours}
        own = [t for t in self.tables if all(v == self.var or v in ancestors for v in t.scope)]
        received = [t for c in self.children for t in self.utils[c]]
        self.bucket = own + [t for t in received if self.var in t.scope]
        # children's tables without my variable go up unchanged (MBE puts them in the bucket of
        # their deepest variable)
        passing = [t for t in received if self.var not in t.scope]
        # The join runs in a worker thread (NumPy and CuPy release the GIL) so that the loop keeps
        # answering and heartbeating: a long UTIL computation is not a dead agent.
        self.util_job = Job(lambda: self._util_compute(passing), "dcop-util")

    def _util_compute(self, passing: list[Table]) -> UtilOutput:
        """Eliminate my variable from my bucket; return the host tables, the scalar part, time."""
        assert self.spec is not None
        t0 = time.perf_counter()
        out = eliminate_bucket(self.backend, self.bucket, self.var, z=self.spec.z, op="min")
        wire = tuple(
            WireTable.from_array(t.scope, self.backend.to_numpy(t.data))
            for t in (*out.tables, *passing)
            if t.scope
        )
        scalar = self.scalars + out.scalar
        self.backend.synchronize()
        return wire, scalar, time.perf_counter() - t0

    def _finish_util(self) -> None:
        assert self.util_job is not None
        wire, scalar, spent = self.util_job.result()
        self.util_job = None
        self.meter.computed(spent)
        self.clock += spent
        if self.parent is None:
            if wire:
                raise DcopError(f"root {self.var!r} holds tables over {wire[0].scope}")
            self.bound = scalar
            return
        if scalar != 0.0 or not wire:
            wire = (*wire, WireTable.from_array((), np.float64(scalar)))
        self.separator = tuple(sorted({v for t in wire for v in t.scope}))
        frame_len = self._send(self.parent, Util(wire, self.clock))
        self.meter.util_sent(frame_len, sum(t.entries for t in wire), len(wire))
        self.util_sent = True

    def _value_phase(self) -> None:
        t0 = time.perf_counter()
        known = dict(self.assignment or {})
        self.value = choose_value(self.backend, self.bucket, self.var, known, "min")
        known[self.var] = self.value
        self._charge(t0)
        for child in self.children:
            needs = sorted({v for t in self.utils[child] for v in t.scope})
            missing = [v for v in needs if v not in known]
            if missing:
                raise DcopError(f"no value for {missing[0]!r} to send to agent {child}")
            self._send(child, Value(tuple((v, known[v]) for v in needs), self.clock))
        metrics = self.meter.snapshot(self.clock)
        bound = self.bound if self.parent is None else None
        if bound is not None and math.isnan(bound):
            bound = math.inf
        self._send(
            COORDINATOR_ID,
            Result(
                self.value,
                bound,
                self.parent,
                tuple(self.children),
                tuple(self.pseudo_parents),
                self.separator,
                metrics,
            ),
        )
        self.result_sent = True

    def _charge(self, t0: float) -> None:
        """Add the compute time since ``t0`` to the logical clock (the simulated runtime)."""
        spent = time.perf_counter() - t0
        self.meter.computed(spent)
        self.clock += spent

    # ---- sending ----------------------------------------------------------------------------
    def _send(self, peer: int, body: Message) -> int:
        frame = encode(self.me, peer, body)
        if len(frame) > self.max_message_bytes:
            # the receiver would drop it: fail loudly here instead of waiting for a timeout
            raise TableTooLarge(
                f"{body.TYPE} message of {len(frame)} bytes exceeds the message limit of "
                f"{self.max_message_bytes} bytes (raise the limit with --max-message-mib, "
                "or use ADPOP with a smaller z)"
            )
        self.transport.send(peer, frame)
        self.last_sent[peer] = self.now()
        self.meter.sent(body.TYPE, len(frame))
        return len(frame)

    def _fail(self, reason: str, kind: ErrorKind = "error") -> None:
        log.error("%s", reason)
        self.failed = True
        self._send(COORDINATOR_ID, Error(reason, None, kind))


def error_kind(exc: BaseException) -> ErrorKind:
    """How an Error message classifies a failure (the coordinator raises the matching type)."""
    if isinstance(exc, TableTooLarge | MemoryError):
        return "too_large"
    if isinstance(exc, ProblemMismatch):
        return "mismatch"
    if isinstance(exc, RunTimeout):
        return "timeout"
    return "error"
