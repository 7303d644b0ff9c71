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
from typing import Any

from dcop.coordinator.metrics import summarize
from dcop.errors import ProtocolError, RunError
from dcop.model import Problem
from dcop.ordering import most_neighbours_first
from dcop.protocol import (
    COORDINATOR_ID,
    HEARTBEAT_INTERVAL_S,
    MAX_FRAME_BYTES,
    PEER_TIMEOUT_S,
    Error,
    Heartbeat,
    Hello,
    Message,
    Ready,
    Result,
    Setup,
    Start,
    Stop,
    Transport,
    WireTable,
    decode,
    encode,
)
from dcop.protocol.peers import Peers
from dcop.tables import choose_dtype

log = logging.getLogger("dcop.coordinator")

#: ``monitor()`` lists agents whose process has ended, as ``(id, exit code)``.
Monitor = Callable[[], list[tuple[int, int]]]


def check_peers(problem: Problem, peers: Peers) -> None:
    """Raise RunError unless peers.json has one agent per variable with the problem's neighbours."""
    names = {a.variable: a for a in peers.agents}
    for a in peers.agents:
        if a.variable not in problem.variables:
            raise RunError(
                f"peers.json does not match the problem: agent {a.id} has variable "
                f"{a.variable!r}, which the problem does not have"
            )
    missing = [v for v in problem.variables if v not in names]
    if missing:
        raise RunError(
            f"peers.json does not match the problem: no agent for variable "
            f"{missing[0]!r} ({len(missing)} missing)"
        )
    adjacency = problem.neighbours()
    table = peers.by_id()
    for a in peers.agents:
        listed = {table[n].variable for n in a.neighbours}
        if listed != adjacency[a.variable]:
            extra = sorted(listed - adjacency[a.variable])
            lack = sorted(adjacency[a.variable] - listed)
            raise RunError(
                f"peers.json does not match the problem: agent {a.id} ({a.variable}) "
                f"neighbours differ (extra {extra}, missing {lack})"
            )


def choose_roots(peers: Peers) -> list[int]:
    """One root per connected component of the peers graph: most neighbours, then name."""
    table = peers.by_id()
    adjacency = {a.variable: {table[n].variable for n in a.neighbours} for a in peers.agents}
    by_name = {a.variable: a.id for a in peers.agents}
    seen: set[str] = set()
    roots: list[int] = []
    for name in most_neighbours_first(adjacency, list(adjacency)):
        if name in seen:
            continue
        roots.append(by_name[name])
        stack = [name]
        seen.add(name)
        while stack:
            for u in adjacency[stack.pop()]:
                if u not in seen:
                    seen.add(u)
                    stack.append(u)
    return roots


class Coordinator:
    """Drives one distributed DPOP/ADPOP run over a Transport (ZMQ or in-process)."""

    def __init__(
        self,
        problem: Problem,
        peers: Peers,
        transport: Transport,
        *,
        algo: str = "dpop",
        z: int | None = None,
        timeout: float = 120.0,
        hello_timeout: float | None = None,
        peer_timeout: float = PEER_TIMEOUT_S,
        heartbeat_s: float = HEARTBEAT_INTERVAL_S,
        monitor: Monitor | None = None,
        before_start: Callable[[], None] | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        if algo not in ("dpop", "adpop"):
            raise RunError(f"unknown distributed algorithm {algo!r}; use dpop or adpop")
        if algo == "adpop" and (z is None or z < 1):
            raise RunError("ADPOP needs a mini-bucket size z >= 1 (--z)")
        self.problem = problem
        self.peers = peers
        self.transport = transport
        self.algo = algo
        self.z = z if algo == "adpop" else None
        self.timeout = timeout
        self.hello_timeout = min(timeout, hello_timeout if hello_timeout is not None else timeout)
        self.peer_timeout = peer_timeout
        self.heartbeat_s = heartbeat_s
        self.monitor = monitor
        self.before_start = before_start
        self.max_frame_bytes = max_frame_bytes
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
    def run(self) -> dict[str, Any]:
        """Run to the end; return the result dict (see :func:`dcop.coordinator.metrics.summarize`)."""
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
                self._send(
                    a.id,
                    Start("dpop" if self.algo == "dpop" else "adpop", self.z or 0, a.id in roots),
                )
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
                raise RunError(self._deadline_message(phase))
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
            if silent > self.peer_timeout:
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
                max_bytes=self.max_frame_bytes,
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
                raise RunError(
                    body.reason if body.reason.startswith("agent ") else f"{who}: {body.reason}"
                )
            case Heartbeat():
                pass
            case _:
                log.warning("coordinator: unexpected %s from %s", env.type, who)

    def _setup(self, variable: str) -> Setup:
        dtype = choose_dtype(self.problem)  # float32 where integer totals stay exact
        tables = tuple(
            WireTable.from_array(t.scope, t.costs.astype(dtype))
            for t in self.problem.tables
            if variable in t.scope
        )
        return Setup(variable, self.problem.variables[variable].size, tables)

    def _send(self, peer: int, body: Message) -> None:
        frame = encode(COORDINATOR_ID, peer, body)
        if len(frame) > self.max_frame_bytes:
            raise RunError(
                f"the {body.TYPE} message for {self.name(peer)} has {len(frame)} bytes, "
                f"more than the frame limit of {self.max_frame_bytes}"
            )
        self.transport.send(peer, frame)
        self.sent.setdefault(body.TYPE, [0, 0])
        self.sent[body.TYPE][0] += 1
        self.sent[body.TYPE][1] += len(frame)

    # ---- the answer ---------------------------------------------------------------------------
    def _result(self, roots: list[int], wall_s: float, solve_s: float) -> dict[str, Any]:
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
        return summarize(
            problem=problem,
            peers=self.peers,
            algo=self.algo,
            z=self.z,
            roots=roots,
            results=self.results,
            assignment=assignment,
            cost=cost,
            bound=bound,
            coordinator_sent=self.sent,
            coordinator_received=self.received,
            wall_s=wall_s,
            solve_s=solve_s,
            hellos=self.hellos,
        )
