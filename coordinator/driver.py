"""The coordinator's run: hello -> setup -> ready -> start -> results -> stop, with deadlines.

It never computes the solution: it hands each agent its share of the problem, picks one DFS root
per connected component (the agent with the most neighbours, ties by variable name: the root
:func:`dcop.ordering.dfs_pseudo_tree` would choose), gathers the agents' values and recomputes the
assignment's cost on the Problem. Any fault - an agent that exits, stops answering, reports an
error or misses a deadline - ends the run with a :class:`RunError` naming the agent.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

import numpy as np

from dcop.coordinator.metrics import wire_metrics
from dcop.coordinator.result import RunResult
from dcop.coordinator.topology import check_peers, choose_roots
from dcop.errors import (
    DcopError,
    ProblemMismatch,
    ProtocolError,
    RunError,
    RunTimeout,
    TableTooLarge,
)
from dcop.model import Problem
from dcop.protocol import (
    COORDINATOR_ID,
    HEARTBEAT_INTERVAL_S,
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
    Transport,
    WireTable,
    decode,
    encode,
)
from dcop.protocol.digest import part_digest
from dcop.protocol.peers import Peers
from dcop.tables import choose_dtype

log = logging.getLogger("dcop.coordinator")

#: The exception an agent's Error message becomes, by its kind.
ERROR_TYPES: dict[str, type[DcopError]] = {
    "error": RunError,
    "too_large": TableTooLarge,
    "mismatch": ProblemMismatch,
    "timeout": RunTimeout,
}

#: ``monitor()`` lists agents whose process has ended, as ``(id, exit code)``.
Monitor = Callable[[], list[tuple[int, int]]]


class Coordinator:
    """Drives one distributed DPOP/ADPOP run over a Transport (ZMQ or in-process)."""

    def __init__(
        self,
        problem: Problem,
        peers: Peers,
        transport: Transport,
        spec: RunSpec | None = None,
        *,
        timeout: float = 120.0,
        hello_timeout: float | None = None,
        heartbeat_s: float = HEARTBEAT_INTERVAL_S,
        monitor: Monitor | None = None,
        before_start: Callable[[], None] | None = None,
    ) -> None:
        self.problem = problem
        self.peers = peers
        self.transport = transport
        self.spec = spec if spec is not None else RunSpec()
        self.timeout = timeout
        self.hello_timeout = min(timeout, hello_timeout if hello_timeout is not None else timeout)
        self.heartbeat_s = heartbeat_s
        self.monitor = monitor
        self.before_start = before_start
        # float32 where integer totals stay exact: chosen once, here, for every agent's tables
        self.dtype = np.dtype(choose_dtype(problem))
        self.agents = peers.by_id()
        self.hellos: dict[int, Hello] = {}
        self.ready: set[int] = set()
        self.results: dict[int, Result] = {}
        self.last_seen: dict[int, float] = {}
        self.sent: dict[str, list[int]] = {}
        self.received: dict[str, list[int]] = {}
        self.phase = "hello"

    def name(self, agent_id: int) -> str:
        entry = self.agents.get(agent_id)
        return f"agent {agent_id} ({entry.variable})" if entry else f"agent {agent_id}"

    # ---- the run ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to the end; return the typed result. Raises RunError naming the agent on a fault."""
        check_peers(self.problem, self.peers)
        t0 = time.monotonic()
        deadline = t0 + self.timeout
        try:
            self._wait(
                lambda: len(self.hellos) == len(self.agents), t0 + self.hello_timeout, "hello"
            )
            self._wait(lambda: len(self.ready) == len(self.agents), deadline, "ready")
            if self.before_start is not None:
                self.before_start()
            roots = choose_roots(self.peers)
            t_start = time.monotonic()
            for a in self.peers.agents:
                self._send(a.id, Start(self.spec, a.id in roots))
            self.phase = "solve"
            self._wait(lambda: len(self.results) == len(self.agents), deadline, "solve")
            solve_s = time.monotonic() - t_start
        except BaseException as exc:
            self._stop_all(f"aborted: {exc}" if isinstance(exc, RunError) else "aborted")
            raise
        self._stop_all("done")
        return self._result(roots, time.monotonic() - t0, solve_s)

    def _stop_all(self, reason: str) -> None:
        for a in self.peers.agents:
            self._send(a.id, Stop(reason[:200]))

    def _wait(self, done: Callable[[], bool], deadline: float, phase: str) -> None:
        self.phase = phase
        next_beat = time.monotonic()
        while not done():
            now = time.monotonic()
            if now >= deadline:
                raise RunTimeout(self._deadline_message(phase))
            if now >= next_beat:
                next_beat = now + self.heartbeat_s
                self._beat_and_check(now)
            item = self.transport.recv(min(deadline, next_beat) - now)
            if item is not None:
                self._on_frame(*item)

    def _deadline_message(self, phase: str) -> str:
        if phase == "hello":
            late = [a for a in self.agents if a not in self.hellos]
            what = "did not say hello"
        elif phase == "ready":
            late = [a for a in self.agents if a not in self.ready]
            what = "did not get ready (links to neighbours not up)"
        else:
            late = [a for a in self.agents if a not in self.results]
            what = "sent no result"
        names = ", ".join(self.name(a) for a in late[:5]) + (" ..." if len(late) > 5 else "")
        limit = self.hello_timeout if phase == "hello" else self.timeout
        return f"timed out after {limit:g} s: {names} {what}"

    def _beat_and_check(self, now: float) -> None:
        for ident in self.hellos:
            self._send(ident, Heartbeat())
        if self.monitor is not None:
            dead = self.monitor()
            if dead:
                self._drain(0.3)  # an agent's own error message names the cause better
                ident, code = dead[0]
                raise RunError(f"{self.name(ident)} exited with code {code} during {self.phase}")
        for ident in self.hellos:
            silent = now - self.last_seen.get(ident, now)
            if silent > self.spec.peer_timeout:
                raise RunError(
                    f"{self.name(ident)} stopped answering (silent for {silent:.1f} s "
                    f"during {self.phase})"
                )

    def _drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            item = self.transport.recv(left)
            if item is None:
                return
            self._on_frame(*item)

    # ---- frames -------------------------------------------------------------------------------
    def _on_frame(self, sender: int | None, frame: bytes) -> None:
        try:
            env = decode(
                frame,
                max_message_bytes=self.spec.max_message_bytes,
                known_senders=self.agents,
                receiver=COORDINATOR_ID,
            )
            if sender is None:
                raise ProtocolError(f"frame from an unidentified peer claims to be {env.sender}")
            if env.sender != sender:
                raise ProtocolError(f"frame from {sender} claims to come from {env.sender}")
        except ProtocolError as exc:
            log.warning("coordinator: dropped a frame from %s: %s", sender, exc)
            return
        self.last_seen[env.sender] = time.monotonic()
        self.received.setdefault(env.type, [0, 0])
        self.received[env.type][0] += 1
        self.received[env.type][1] += len(frame)
        body = env.body
        who = self.name(env.sender)
        match body:
            case Hello():
                entry = self.agents[env.sender]
                if body.variable != entry.variable:
                    raise RunError(
                        f"{who} says its variable is {body.variable!r}; peers.json "
                        f"says {entry.variable!r}"
                    )
                if env.sender not in self.hellos:
                    self.hellos[env.sender] = body
                    self._send(env.sender, self._setup(entry.variable))
            case Ready():
                self.ready.add(env.sender)
            case Result():
                self.results[env.sender] = body
            case Error():
                if body.peer is not None:
                    raise RunError(f"{who} reports: {body.reason}")
                reason = (
                    body.reason if body.reason.startswith("agent ") else f"{who}: {body.reason}"
                )
                raise ERROR_TYPES[body.kind](reason)
            case Heartbeat():
                pass
            case _:
                log.warning("coordinator: unexpected %s from %s", env.type, who)

    def _setup(self, variable: str) -> Setup:
        own = self.problem.tables_of(variable)
        domain = self.problem.variables[variable].size
        tables = tuple(WireTable.from_array(t.scope, t.costs.astype(self.dtype)) for t in own)
        digest = part_digest(variable, domain, [(t.scope, t.costs) for t in own])
        return Setup(variable, domain, tables, digest)

    def _send(self, peer: int, body: Message) -> None:
        frame = encode(COORDINATOR_ID, peer, body)
        if len(frame) > self.spec.max_message_bytes:
            raise RunError(
                f"the {body.TYPE} message for {self.name(peer)} has {len(frame)} bytes, "
                f"more than the message limit of {self.spec.max_message_bytes}"
            )
        self.transport.send(peer, frame)
        self.sent.setdefault(body.TYPE, [0, 0])
        self.sent[body.TYPE][0] += 1
        self.sent[body.TYPE][1] += len(frame)

    # ---- the answer ---------------------------------------------------------------------------
    def _result(self, roots: list[int], wall_s: float, solve_s: float) -> RunResult:
        problem = self.problem
        assignment = {self.agents[i].variable: r.value for i, r in self.results.items()}
        for var, value in assignment.items():
            if value >= problem.variables[var].size:
                raise RunError(f"agent for {var!r} chose value index {value}, out of its domain")
        cost = problem.evaluate(assignment)  # recomputed here, never trusted from the agents
        bound = problem.constant + sum(float(t.costs) for t in problem.tables if not t.scope)
        bound += sum(float(self.results[r].bound or 0.0) for r in roots)
        if problem.upper_bound is not None and bound >= problem.upper_bound:
            bound = math.inf
        metrics, per_agent = wire_metrics(
            problem=problem,
            peers=self.peers,
            exact=self.spec.exact,
            roots=roots,
            results=self.results,
            coordinator_sent=self.sent,
            coordinator_received=self.received,
            wall_s=wall_s,
            solve_s=solve_s,
            hellos=self.hellos,
        )
        name = {i: a.variable for i, a in self.agents.items()}
        return RunResult(
            problem=problem,
            spec=self.spec,
            assignment=dict(sorted(assignment.items())),
            cost=cost,
            bound=bound,
            roots=tuple(name[r] for r in roots),
            agents=per_agent,
            metrics=metrics,
            dtype=self.dtype.name,
            times={"total": wall_s, "solve": solve_s},
        )
