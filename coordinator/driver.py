"""The coordinator's side of one problem: hello, setup, start, trees, go, results, stop.

It never computes the solution. It hands each agent its share of the problem and its neighbours'
endpoints (the ones the agents reported in their hellos), picks the roots of every candidate tree
(one per connected component), lets the agents build the candidate trees by distributed DFS and
size their UTIL messages, keeps the tree whose largest UTIL is smallest, and decides: DPOP, ADPOP
with the run's z, or for ``auto`` the largest z whose UTILs fit. A run whose UTILs cannot fit the
message or memory limit is refused there, before any table is built, naming the agent, the size
and the largest z that fits. It then gathers the agents' values and recomputes the assignment's
cost on the Problem. Any fault - an agent that exits, loses its link, stops answering, reports an
error or misses a deadline - ends the problem with an error naming the agent.

Agents are one-shot (they exit at the end: stop) or serving (``--serve``: they stay up for the next
problem: done). With a problem-independent peers.json the coordinator gives the i-th variable to
the i-th agent (by id).
"""

from __future__ import annotations

import functools
import logging
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.coordinator.elimination import EliminationTree, offer
from dcop.coordinator.metrics import wire_metrics
from dcop.coordinator.topology import (
    Layout,
    auto_tree_count,
    check_wire_limits,
    first_candidate_largest,
    layout_for,
)
from dcop.errors import (
    DcopError,
    ProblemMismatch,
    ProtocolError,
    RunError,
    RunTimeout,
    TableTooLarge,
)
from dcop.model import CostTable, Problem
from dcop.protocol import (
    COORDINATOR_ID,
    HEARTBEAT_INTERVAL_S,
    Done,
    Error,
    Go,
    Heartbeat,
    Hello,
    Message,
    Ready,
    Result,
    RunSpec,
    Setup,
    Sizing,
    Start,
    Stop,
    Transport,
    TreeReport,
    WireTable,
    decode,
    encode,
)
from dcop.protocol.codec import message_bytes
from dcop.protocol.digest import combine_digests, table_digest
from dcop.protocol.messages import Neighbour, sizing_at
from dcop.protocol.peers import Peers
from dcop.protocol.ratelog import RateLimitedLog
from dcop.protocol.runspec import AUTO_TREES, sizing_choices
from dcop.results.partition import PartitionResult
from dcop.results.run import RunResult, TreeChoice
from dcop.sizes import total
from dcop.sumproduct import log_constant
from dcop.tables import choose_dtype
from dcop.trees.candidates import default_candidates

log = logging.getLogger("dcop.coordinator")
#: Undecodable frames: one line per sender per few seconds, with a count (a flood must not fill
#: the disk).
_drops = RateLimitedLog(log)

#: The exception an agent's Error message becomes, by its kind.
ERROR_TYPES: dict[str, type[DcopError]] = {
    "error": RunError,
    "too_large": TableTooLarge,
    "mismatch": ProblemMismatch,
    "timeout": RunTimeout,
}
#: A UTIL message's header and per-table framing, beside its entries (bytes; generous).
UTIL_OVERHEAD_BYTES = 4096

#: An agent process's own memory beside its tables (interpreter, NumPy, ZeroMQ; RSS counts the
#: pages it shares with its template too), in the agents' memory plan.
AGENT_BASE_BYTES = 64 << 20


#: MAR's down pass (the bucket's beliefs, joined, and the messages to the children), in UTILs of
#: the largest size, beside the up pass (measured: 230 MiB more than PR for a 64 MiB UTIL).
MAR_DOWN_UTILS = 3


def agent_peak_bytes(
    part_bytes: float, largest_bytes: float, total_bytes: float, marginals: bool = False
) -> float:
    """An agent's planned peak: its base, its own tables (the received frame and its backend
    copy), the UTIL it builds, and the children's UTILs it holds meanwhile (at most the whole
    tree's, at most twice its own: issue 33 item 7 measured 2.07x the UTIL for a chain of
    large UTILs); with ``marginals`` (MAR) also its down pass. ``--max-memory`` caps this for
    every agent."""
    held = min(max(0.0, total_bytes - largest_bytes), 2 * largest_bytes)
    down = MAR_DOWN_UTILS * largest_bytes if marginals else 0.0
    return AGENT_BASE_BYTES + 2 * part_bytes + largest_bytes + held + down


#: How the run's pseudo-tree is chosen: ``auto`` offers the coordinator's elimination tree beside
#: the agents' DFS candidates where it is narrower than the first DFS tree, and keeps the
#: candidate with the smallest predicted UTILs; ``dfs`` builds the agents' DFS trees only (for
#: deployments whose agents hold their own problem and link to their neighbours only);
#: ``elimination`` runs the elimination tree alone (no DFS tree is built: no token walk).
TREE_POLICIES = ("auto", "dfs", "elimination")

#: ``monitor()`` lists agents whose process has ended, as ``(id, exit code)``.
Monitor = Callable[[], list[tuple[int, int]]]


@dataclass
class Progress:
    """Where a problem stands, for the live display: phase, counts and bytes so far."""

    phase: str = "hello"
    elapsed_s: float = 0.0
    agents: int = 0
    hellos: int = 0
    ready: int = 0
    trees: int = 0
    trees_expected: int = 0
    utils: int = 0
    utils_expected: int = 0
    results: int = 0
    sent_bytes: int = 0
    phases: dict[str, int] = field(default_factory=dict)


class Coordinator:
    """Drives one distributed DPOP/ADPOP problem over a Transport (ZMQ or in-process).

    ``hellos`` carries what earlier problems of the same agents already learnt (a serving
    cluster); ``on_status`` is called about once a heartbeat with a :class:`Progress`.
    """

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
        hellos: dict[int, Hello] | None = None,
        on_status: Callable[[Progress], None] | None = None,
        host_memory: int | None = None,
        origin: float | None = None,
        tree: str = "auto",
        order_time: float | None = None,
    ) -> None:
        if tree not in TREE_POLICIES:
            raise DcopError(f"unknown tree policy {tree!r}; use one of {', '.join(TREE_POLICIES)}")
        self.problem = problem
        #: memory every agent of this run shares (they run on this host: ``dcop run``)
        self.host_memory = host_memory
        #: where ``timeout`` and ``times.total`` count from (monotonic): the command's start, so
        #: the agents' launch counts; None: when :meth:`run` is called
        self.origin = origin
        self.peers = peers
        self.transport = transport
        self.spec = spec if spec is not None else RunSpec()
        self.timeout = timeout
        self.hello_timeout = min(timeout, hello_timeout if hello_timeout is not None else timeout)
        self.heartbeat_s = heartbeat_s
        self.monitor = monitor
        self.before_start = before_start
        self.on_status = on_status
        # float32 where integer totals stay exact: chosen once, here, for every agent's tables;
        # sums of exponentials are never exact in float32 (PR/MAR run in float64)
        self.dtype = np.dtype(np.float64 if self.spec.summing else choose_dtype(problem))
        if self.spec.summing:
            log_constant(problem)  # a model with a WCSP top has no Z: refused here
        check_wire_limits(problem)
        self.layout: Layout = layout_for(problem, peers)
        self.active = sorted(self.layout.variable)
        first = None
        if self.spec.trees == AUTO_TREES:
            first = first_candidate_largest(problem, self.layout)
            self.spec = self.spec.replace(trees=auto_tree_count(problem, self.layout, first))
        self.tree_policy = tree
        #: the elimination tree offered beside the DFS candidates (None: not offered), and why
        self.elimination: EliminationTree | None
        self.elimination, self.elimination_note = offer(
            problem, self.layout, tree, first, order_time
        )
        if tree == "elimination" and self.elimination is not None:
            # it runs the elimination tree: DFS trees would only be built, and each walk is
            # 2(n - 1) tokens in turn (seconds at a thousand agents); the Start says none
            self.spec = self.spec.replace(trees=0)
        self.hellos: dict[int, Hello] = dict(hellos or {})
        self.number = 0
        #: agents whose Setup went out
        self.set_up: set[int] = set()
        self.ready: set[int] = set()
        self.roots: list[list[int]] = []
        self.reports: dict[tuple[int, int], TreeReport] = {}
        self.choice: TreeChoice | None = None
        self.results: dict[int, Result] = {}
        self.last_seen: dict[int, float] = {}
        self.heartbeats: dict[int, Heartbeat] = {}
        self.sent: dict[str, list[int]] = {}
        self.received: dict[str, list[int]] = {}
        self.phase = "hello"
        self.t0 = 0.0
        #: seconds from the origin until every agent had said hello (launched and listening)
        self.launch_s = 0.0
        #: seconds from the origin to each agent's first hello (the launch, agent by agent)
        self.hello_at: dict[int, float] = {}
        #: agents whose Start went out (they heartbeat from then on)
        self.started: set[int] = set()
        #: what moved last in the phase (readies, reports, results, the agents' bytes) and when
        self.moved: tuple[int, ...] = ()
        self.moved_at = 0.0

    def _links(self, agent: int) -> tuple[int, ...]:
        """The agents ``agent`` links to beyond its neighbours (the elimination tree's)."""
        return self.elimination.links.get(agent, ()) if self.elimination is not None else ()

    def name(self, agent_id: int) -> str:
        var = self.layout.variable.get(agent_id)
        return f"agent {agent_id} ({var})" if var else f"agent {agent_id}"

    # ---- the run ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to the end; return the typed result. Raises a DcopError naming the agent on a
        fault (RunTimeout, TableTooLarge, ProblemMismatch, RunError)."""
        self.t0 = self.origin if self.origin is not None else time.monotonic()
        self._turn: float | None = None  # the last turn of the waiting loop (_check_own_pause)
        deadline = self.t0 + self.timeout
        try:
            # Setups go out during the hello phase: each agent's as soon as it and its
            # neighbours have said where they listen (its setup names their endpoints), so the
            # first agents link up while later ones still start.
            # 31 random bits tell this problem from a serving agent's last one, in a msgpack
            # int of 5 bytes (62 bits took 9 in every message's header)
            self.number = secrets.randbits(31) + 1
            self._check_parts()  # before any table is sent
            self._send_setups(self.active)  # agents whose hellos came before this problem
            self._wait(self._all_said_hello, self.t0 + self.hello_timeout, "hello")
            self.launch_s = time.monotonic() - self.t0
            # No wait for every agent's ready (its links up, its neighbours' degrees in): an
            # agent keeps its start until then itself. That round trip through the coordinator
            # was 25 ms of a 30-agent run on the 2-core VM; the DFS now begins where agents are
            # ready while the last ones still link up.
            if self.before_start is not None:
                self.before_start()
            t_start = time.monotonic()
            self._start()
            self._wait(self._trees_reported, deadline, "dfs")
            self.choice = self._choose()
            for a in self.active:
                self._send(a, Go(self.choice.tree, self.choice.z))
            self._wait(lambda: len(self.results) == len(self.active), deadline, "solve")
            solve_s = time.monotonic() - t_start
        except BaseException as exc:
            self._end(f"aborted: {exc}" if isinstance(exc, DcopError) else "aborted")
            raise
        self._end("done")
        return self._result(time.monotonic() - self.t0, solve_s)

    def _end(self, reason: str) -> None:
        """Stop one-shot agents, release serving ones (they wait for the next problem)."""
        for a in self.active:
            hello = self.hellos.get(a)
            if hello is None:
                continue
            self._send(a, Done(reason[:200]) if hello.serving else Stop(reason[:200]))

    def _start(self) -> None:
        names = self.layout.variable
        adjacency = self.layout.neighbours
        dfs = default_candidates(self.spec.trees) if self.spec.trees else []
        self.roots = [c.roots(adjacency, names) for c in dfs]
        dfs_roots = list(self.roots)
        if self.elimination is not None:  # candidate number spec.trees
            self.roots.append(self.elimination.roots)
        for a in self.active:
            mine = tuple(k for k, roots in enumerate(dfs_roots) if a in roots)
            given = self.elimination.given[a] if self.elimination is not None else None
            self._send(a, Start(self.spec, mine, given))
            # an agent heartbeats once it has work: its silence counts from its start, as sent
            # (sending 2000 starts took seconds on a loaded 2-core host: counted from the first,
            # the last agents' first heartbeat came past the peer timeout, issue 49)
            now = time.monotonic()
            self.last_seen[a] = max(self.last_seen.get(a, now), now)
            self.started.add(a)

    def _all_said_hello(self) -> bool:
        # asked after every message of the hello phase: the count first, so that the check
        # over every agent runs only once it can succeed (at n = 1000 it was 1 s of CPU)
        return len(self.hellos) >= len(self.active) and all(a in self.hellos for a in self.active)

    def _trees_reported(self) -> bool:
        return all((k, r) in self.reports for k, roots in enumerate(self.roots) for r in roots)

    def _wait(self, done: Callable[[], bool], deadline: float, phase: str) -> None:
        self.phase = phase
        log.info("coordinator: %s", phase)
        next_beat = time.monotonic()
        self.moved_at = next_beat
        while not done():
            now = time.monotonic()
            # since the last turn of any phase: a stop between two phases counts too
            self._check_own_pause(now - (self._turn or now))
            self._turn = now
            if now >= deadline:
                raise RunTimeout(self._deadline_message(phase))
            if now >= next_beat:
                next_beat = now + self.heartbeat_s
                self._check(now)
                self._report_status(now)
            item = self.transport.recv(min(deadline, next_beat) - now)
            if item is not None:
                self._on_frames(*item)

    @functools.cached_property
    def tables_of(self) -> dict[str, list[CostTable]]:
        """Each variable's tables, in the problem's order (``Problem.tables_of`` reads every
        table: asked for each agent, that was quadratic in n)."""
        out: dict[str, list[CostTable]] = {v: [] for v in self.problem.variables}
        for t in self.problem.tables:
            for v in dict.fromkeys(t.scope):
                out[v].append(t)
        return out

    @functools.cached_property
    def part_bytes(self) -> dict[int, int]:
        """Each agent's own tables in the run's dtype (its Setup's frames), in bytes."""
        sizes = self.problem.domain_sizes()
        itemsize = self.dtype.itemsize
        return {
            a: sum(math.prod(sizes[v] for v in t.scope) for t in self.tables_of[var]) * itemsize
            for a, var in self.layout.variable.items()
        }

    def _check_parts(self) -> None:
        """Refuse (too_large) before any table is sent a setup over the message limit, or an
        agent whose own tables alone break --max-memory: each agent in a table's scope gets
        its own copy, and a tiny file's one huge table once took 27 agents to 16.9 GiB."""
        memory = self.spec.max_memory_bytes
        if not self.part_bytes:
            return
        a, nbytes = max(self.part_bytes.items(), key=lambda kv: (kv[1], -kv[0]))
        if nbytes > self.spec.max_message_bytes:  # its exact size is checked as it is sent
            raise TableTooLarge(
                f"{self.name(a)}'s own tables hold {nbytes / 2**20:.4g} MiB, more than the "
                f"message limit of {self.spec.max_message_bytes / 2**20:g} MiB its setup must "
                "fit in; refused before any table was sent"
            )
        if self.host_memory is not None:
            # the tables only: the agents' base is mostly pages shared with their template
            together = sum(2 * b for b in self.part_bytes.values())
            if together > self.host_memory:
                raise TableTooLarge(
                    f"the agents' own tables (each agent in a table's scope gets its own copy) "
                    f"need {together / 2**30:.4g} GiB together, more than the "
                    f"{self.host_memory / 2**30:.4g} GiB this host has free; refused before "
                    "any table was sent"
                )
        need = agent_peak_bytes(nbytes, 0, 0)
        if memory is not None and need > memory:
            raise TableTooLarge(
                f"{self.name(a)}'s own tables hold {nbytes / 2**20:.4g} MiB: with its base and "
                f"their copy it needs {need / 2**20:.4g} MiB > the memory limit of "
                f"{memory / 2**20:g} MiB; refused before any table was sent"
            )

    def _check_own_pause(self, gap_s: float) -> None:
        """The coordinator's own loop stood still for ``gap_s`` (SIGSTOP, a starved host): past
        the peer timeout its agents have taken it for dead, and whatever it finds next (agents
        gone, silent) is its own doing, not theirs: say so, instead of blaming "agent 0"."""
        if gap_s > self.spec.peer_timeout:
            raise RunError(
                f"the coordinator itself stood still for {gap_s:.1f} s during {self.phase} "
                f"(stopped, e.g. SIGSTOP, or starved of CPU), longer than the peer timeout of "
                f"{self.spec.peer_timeout:g} s: its agents took it for dead"
            )
        if gap_s > 2 * self.heartbeat_s:
            # a shorter pause: the agents' silence meanwhile was this loop's deafness
            for ident in self.last_seen:
                self.last_seen[ident] += gap_s

    def _deadline_message(self, phase: str) -> str:
        if phase == "hello":
            late = [a for a in self.active if a not in self.hellos]
            what = "did not say hello"
        elif phase == "dfs" and any(a not in self.ready for a in self.active):
            late = [a for a in self.active if a not in self.ready]
            what = "did not get ready (links to neighbours not up, or their degrees not in)"
        elif phase == "dfs":
            late = sorted(
                {
                    r
                    for k, roots in enumerate(self.roots)
                    for r in roots
                    if (k, r) not in self.reports
                }
            )
            what = "did not report its candidate trees (the DFS did not finish)"
        else:
            late = [a for a in self.active if a not in self.results]
            what = "sent no result"
        names = ", ".join(self.name(a) for a in late[:5]) + (" ..." if len(late) > 5 else "")
        limit = self.hello_timeout if phase == "hello" else self.timeout
        return f"timed out after {limit:g} s: {names} {what}"

    def _check(self, now: float) -> None:
        """Dead processes, lost links and silent agents end the problem, naming the agent."""
        if self.monitor is not None:
            dead = [(a, c) for a, c in self.monitor() if a in self.layout.variable]
            if dead:
                self._drain(0.3)  # an agent's own error message names the cause better
                ident, code = dead[0]
                raise RunError(f"{self.name(ident)} exited with code {code} during {self.phase}")
        for loss in self.transport.lost_peers():
            if loss.peer in self.layout.variable and loss.peer not in self.results:
                self._blame(
                    loss.peer,
                    f"{self.name(loss.peer)} lost its link during {self.phase} ({loss.reason})",
                    own=True,
                )
        for ident in self.active:
            if ident not in self.started or ident in self.results:
                continue  # (an agent waiting for its start sends no heartbeats)
            silent = now - self.last_seen.get(ident, now)
            if silent > self.spec.peer_timeout:
                raise RunError(
                    f"{self.name(ident)} stopped answering (silent for {silent:.1f} s "
                    f"during {self.phase})"
                )
        if self.phase in ("dfs", "solve"):
            self._check_moves(now)

    def _check_moves(self, now: float) -> None:
        """A phase in which nothing moves for the peer timeout (no agent sent a byte, reported
        a tree or a result, and none is computing) has stalled: every agent alive and waiting on
        a message that will never come (one was lost or refused). It ends the run naming what
        is still out, instead of waiting for the run's timeout."""
        moved = (
            len(self.ready),
            len(self.reports),
            len(self.results),
            sum(b.sent_bytes for b in self.heartbeats.values()),
        )
        busy = any(b.busy for a, b in self.heartbeats.items() if a not in self.results)
        if moved != self.moved or busy:
            self.moved, self.moved_at = moved, now
            return
        still = now - self.moved_at
        if still <= self.spec.peer_timeout:
            return
        if self.phase == "solve":
            late = [a for a in self.active if a not in self.results]
            names = ", ".join(self.name(a) for a in late[:5]) + (" ..." if len(late) > 5 else "")
            raise RunError(
                f"the solve stalled: nothing moved for {still:.1f} s (the peer timeout) with "
                f"{len(late)} agent(s) without a result ({names}); a UTIL or VALUE was lost or "
                "refused (see the agents' logs)"
            )
        out = [
            (k, r)
            for k, roots in enumerate(self.roots)
            for r in roots
            if (k, r) not in self.reports
        ]
        trees = ", ".join(f"tree {k} from {self.name(r)}" for k, r in out[:5])
        raise RunError(
            f"the DFS stalled: nothing moved for {still:.1f} s (the peer timeout) with "
            f"{len(out)} candidate tree(s) unfinished ({trees}{' ...' if len(out) > 5 else ''}); "
            "a token was lost or refused (see the agents' logs)"
        )

    def _report_status(self, now: float) -> None:
        if self.on_status is None:
            return
        phases: dict[str, int] = {}
        for a in self.active:
            beat = self.heartbeats.get(a)
            label = "result" if a in self.results else (beat.phase if beat else self.phase)
            phases[label] = phases.get(label, 0) + 1
        self.on_status(
            Progress(
                phase=self.phase,
                elapsed_s=now - self.t0,
                agents=len(self.active),
                hellos=sum(a in self.hellos for a in self.active),
                ready=len(self.ready),
                trees=len(self.reports),
                trees_expected=sum(len(r) for r in self.roots),
                utils=sum(1 for b in self.heartbeats.values() if b.util_sent),
                utils_expected=len(self.active) - len(self.roots[0]) if self.roots else 0,
                results=len(self.results),
                sent_bytes=sum(b.sent_bytes for b in self.heartbeats.values()),
                phases=phases,
            )
        )

    def _blame(self, peer: int, report: str, own: bool = False) -> None:
        """A link to ``peer`` was lost (``own``: the coordinator's; else a neighbour's, whose
        report this is): name the cause at ``peer``'s end when it shows within half a second
        (its process exited, else its link to the coordinator dropped), else the report."""
        end = time.monotonic() + 0.5
        link_lost: str | None = None  # why the coordinator's own link to ``peer`` closed
        while time.monotonic() < end:
            if self.monitor is not None:
                for ident, code in self.monitor():
                    if ident == peer:
                        raise RunError(
                            f"{self.name(peer)} exited with code {code} during {self.phase}"
                        )
            elif own or link_lost is not None:
                break  # nothing more to learn without a process monitor
            if not own and link_lost is None:
                link_lost = next(
                    (loss.reason for loss in self.transport.lost_peers() if loss.peer == peer),
                    None,
                )
            self._drain(0.05)
        if link_lost is not None:
            raise RunError(f"{self.name(peer)} lost its link during {self.phase} ({link_lost})")
        raise RunError(report if own else f"{self.name(peer)} is unreachable: {report}")

    def _drain(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            item = self.transport.recv(left)
            if item is None:
                return
            self._on_frames(*item)

    # ---- frames -------------------------------------------------------------------------------
    def _on_frames(self, sender: int | None, frames: list[bytes | memoryview]) -> None:
        try:
            if sender is None:
                raise ProtocolError("a message from an unidentified peer")
            env = decode(
                frames,
                max_message_bytes=self.spec.max_message_bytes,
                known_senders=self.layout.agents,
                receiver=COORDINATOR_ID,
            )
            if env.sender != sender:
                raise ProtocolError(f"a message from {sender} claims to come from {env.sender}")
            if env.problem not in (0, self.number):
                return  # a late message of an earlier problem
        except ProtocolError as exc:
            _drops.warning((sender,), "coordinator: dropped a frame from %s: %s", sender, exc)
            return
        self.last_seen[sender] = time.monotonic()
        counts = self.received.setdefault(env.type, [0, 0])
        counts[0] += 1
        counts[1] += message_bytes(frames)
        body = env.body
        who = self.name(sender)
        match body:
            case Hello():
                self._on_hello(sender, body)
            case Ready():
                self.ready.add(sender)
            case TreeReport():
                self._on_tree(sender, body)
            case Result():
                self.results[sender] = body
            case Error():
                if body.peer is not None:
                    self._blame(body.peer, f"{who} reports: {body.reason}")
                reason = (
                    body.reason if body.reason.startswith("agent ") else f"{who}: {body.reason}"
                )
                raise ERROR_TYPES[body.kind](reason)
            case Heartbeat():
                self.heartbeats[sender] = body
            case _:
                log.warning("coordinator: unexpected %s from %s", env.type, who)

    def _on_hello(self, sender: int, hello: Hello) -> None:
        expected = self.layout.variable.get(sender)
        if hello.variable and expected is not None and hello.variable != expected:
            raise RunError(
                f"{self.name(sender)} says its variable is {hello.variable!r}; the coordinator "
                f"gives it {expected!r}"
            )
        if not hello.endpoint:
            raise RunError(f"{self.name(sender)} did not say where it listens")
        first = sender not in self.hellos
        self.hellos[sender] = hello
        if first:
            self.hello_at[sender] = time.monotonic() - self.t0
        if first and sender in self.layout.variable:
            # the last of an agent and its neighbours to say hello sends that agent's Setup
            relatives = {*self.layout.neighbours[sender], *self._links(sender)}
            self._send_setups((sender, *sorted(relatives)))

    def _send_setups(self, agents: Sequence[int]) -> None:
        """Send its Setup to each of ``agents`` that has none yet and that, with each of its
        neighbours and tree links, has said where it listens (the Setup names their endpoints)."""
        for a in agents:
            if a in self.set_up or a not in self.hellos:
                continue
            peers = (*self.layout.neighbours[a], *self._links(a))
            if all(n in self.hellos for n in peers):
                self.set_up.add(a)
                self._send(a, self._setup(a))

    def _on_tree(self, sender: int, report: TreeReport) -> None:
        if not 0 <= report.tree < len(self.roots) or sender not in self.roots[report.tree]:
            raise ProtocolError(f"a tree report from {sender}, which roots no such tree")
        if not 1 <= len(report.sizings) <= len(sizing_choices(self.spec)):
            raise ProtocolError(f"a tree report with {len(report.sizings)} sizings")
        self.reports[(report.tree, sender)] = report

    def _setup(self, agent: int) -> Setup:
        variable = self.layout.variable[agent]
        own = self.tables_of[variable]
        domain = self.problem.variables[variable].size
        # float64 for the digest, hashed chunk by chunk (a default-only table of 2^25 entries
        # held whole in float64 took the coordinator to 2x --max-memory: issue 33), and the
        # run's dtype for the wire, made and dropped here: never cached in the coordinator
        digest = combine_digests(
            variable, domain, [table_digest(t.scope, t.shape, t.dense_chunks()) for t in own]
        )
        tables = tuple(WireTable.from_array(t.scope, t.dense(self.dtype)) for t in own)
        neighbours = tuple(
            Neighbour(n, self.layout.variable[n], self.hellos[n].endpoint, self.hellos[n].ipc)
            for n in sorted(self.layout.neighbours[agent])
        )
        links = tuple(
            Neighbour(n, self.layout.variable[n], self.hellos[n].endpoint, self.hellos[n].ipc)
            for n in self._links(agent)
        )
        return Setup(variable, domain, tables, digest, neighbours, links)

    def _send(self, peer: int, body: Message) -> None:
        frames = encode(COORDINATOR_ID, peer, body, self.number)
        size = message_bytes(frames)
        if size > self.spec.max_message_bytes:
            raise TableTooLarge(
                f"the {body.TYPE} message for {self.name(peer)} has {size} bytes, more than "
                f"the message limit of {self.spec.max_message_bytes}"
            )
        self.transport.send(peer, frames)
        counts = self.sent.setdefault(body.TYPE, [0, 0])
        counts[0] += 1
        counts[1] += size

    # ---- choosing the tree and z --------------------------------------------------------------
    def _choose(self) -> TreeChoice:
        """The candidate tree with the smallest largest UTIL, and the z to run it with."""
        zs = sizing_choices(self.spec)
        main = zs.index(self.spec.z) if self.spec.algo == "adpop" else 0
        per_tree = [
            combine_sizings([self.reports[(k, r)].sizings for r in roots], len(zs))
            for k, roots in enumerate(self.roots)
        ]
        widths = [
            max(self.reports[(k, r)].width for r in roots) for k, roots in enumerate(self.roots)
        ]
        dfs_count = self.spec.trees
        kinds = ["dfs"] * dfs_count + ["elimination"] * (len(self.roots) - dfs_count)
        # --tree elimination runs the elimination tree (no DFS tree was built)
        allowed = [
            k
            for k in range(len(per_tree))
            if self.tree_policy != "elimination" or kinds[k] == "elimination"
        ]
        tree = min(
            allowed or range(len(per_tree)),
            key=lambda k: (per_tree[k][main].largest, per_tree[k][main].total, k),
        )
        best_dfs = min((per_tree[k][main].largest for k in range(dfs_count)), default=None)
        if kinds[tree] == "elimination":
            why = (
                f"the elimination tree ({self.elimination_note}); its largest UTIL "
                f"{per_tree[tree][main].largest:.4g} entries, "
                + (
                    f"the best DFS tree's {best_dfs:.4g}"
                    if best_dfs is not None
                    else "no DFS tree built"
                )
            )
            if self.tree_policy == "elimination":
                why = "--tree elimination: " + why
        else:
            why = (
                f"DFS candidate {tree}: the smallest largest UTIL ({best_dfs:.4g} entries); the "
                f"elimination tree was {self.elimination_note}"
            )
        sizings = per_tree[tree]
        itemsize = self.dtype.itemsize
        limit = self.spec.max_message_bytes
        memory = self.spec.max_memory_bytes

        def fits(j: int) -> bool:
            nbytes = sizings[j].largest * itemsize
            if nbytes + UTIL_OVERHEAD_BYTES > limit:
                return False
            if memory is None:
                return True
            who = sizings[j].agent
            part = (
                self.part_bytes.get(who, 0)
                if who is not None
                else max(self.part_bytes.values(), default=0)
            )
            total = sizings[j].total * itemsize
            return agent_peak_bytes(part, nbytes, total, self.spec.task == "mar") <= memory

        fitting = [z for j, z in enumerate(zs) if z is not None and fits(j)]
        if self.spec.algo == "auto":
            chosen = 0 if fits(0) else (zs.index(max(fitting)) if fitting else None)
        else:
            chosen = main if fits(main) else None
        if chosen is None:
            raise TableTooLarge(
                self._refusal(sizings[main], zs[main], itemsize, max(fitting) if fitting else None)
            )
        return TreeChoice(
            tree=tree,
            z=zs[chosen],
            largest_entries=[s[main].largest for s in per_tree],
            widths=widths,
            predicted={z: s.largest for z, s in zip(zs, sizings, strict=True)},
            predicted_agent=sizings[chosen].agent,
            kinds=kinds,
            why=why,
        )

    def _refusal(self, sizing: Sizing, z: int | None, itemsize: int, fit: int | None) -> str:
        who = self.name(sizing.agent) if sizing.agent is not None else "an agent"
        what = "DPOP" if z is None else f"ADPOP(z={z})"
        limits = f"the message limit of {self.spec.max_message_bytes / 2**20:g} MiB"
        if self.spec.max_memory_bytes is not None:
            limits += f" or the memory limit of {self.spec.max_memory_bytes / 2**20:g} MiB"
        way = (
            f"the largest ADPOP z that fits is {fit} (--algo adpop --z {fit}, or --algo auto)"
            if fit is not None
            else "no ADPOP z fits either, not even z=1"
        )
        if self.spec.summing:
            # PR/MAR have no mini-bucket fallback here: say where an exact answer may still be
            way = (
                f"--task {self.spec.task} runs exact DPOP only; `dcop solve --task "
                f"{self.spec.task}` eliminates along the cheapest centralized order"
            )
        return (
            f"{what}'s largest UTIL, from {who}, would hold {sizing.largest:.4g} entries "
            f"({sizing.largest * itemsize / 2**20:.4g} MiB) > {limits}; {way}; refused before "
            "any table was built"
        )

    # ---- the answer ---------------------------------------------------------------------------
    def _result(self, wall_s: float, solve_s: float) -> RunResult:
        problem = self.problem
        var = self.layout.variable
        assert self.choice is not None
        roots = self.roots[self.choice.tree]
        if self.spec.summing:
            return self._sum_result(wall_s, solve_s, roots)
        assignment: dict[str, int] = {}
        for i, r in self.results.items():
            if r.value is None:
                raise RunError(f"{self.name(i)} sent no value")
            assignment[var[i]] = r.value
        for name, value in assignment.items():
            if value >= problem.variables[name].size:
                raise RunError(f"agent for {name!r} chose value index {value}, out of its domain")
        for name in problem.variables:
            assignment.setdefault(name, 0)  # a variable no agent was given: none (n = 0)
        cost = problem.evaluate(assignment)  # recomputed here, never trusted from the agents
        bound = problem.constant + sum(float(t.costs) for t in problem.tables if not t.scope)
        bound += sum(float(self.results[r].bound or 0.0) for r in roots)
        if problem.upper_bound is not None and bound >= problem.upper_bound:
            bound = math.inf
        ran = self.spec.replace(algo="dpop" if self.choice.z is None else "adpop", z=self.choice.z)
        metrics, per_agent = self._metrics(ran, roots, wall_s, solve_s)
        return RunResult(
            problem=problem,
            spec=self.spec,
            ran=ran,
            tree=self.choice,
            assignment=dict(sorted(assignment.items())),
            internal_cost=cost,
            bound=bound,
            roots=tuple(var[r] for r in roots),
            agents=per_agent,
            metrics=metrics,
            dtype=self.dtype.name,
            times={"total": wall_s, "launch": self.launch_s, "solve": solve_s},
        )

    def _metrics(
        self, ran: RunSpec, roots: list[int], wall_s: float, solve_s: float
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        return wire_metrics(
            problem=self.problem,
            layout=self.layout,
            exact=ran.exact,
            task=ran.task,
            roots=roots,
            trees=len(self.roots),
            candidates_roots=sum(len(r) for r in self.roots),
            results=self.results,
            coordinator_sent=self.sent,
            coordinator_received=self.received,
            wall_s=wall_s,
            solve_s=solve_s,
            hellos=self.hellos,
            elimination_tree=self.elimination is not None,
        )

    def _sum_result(self, wall_s: float, solve_s: float, roots: list[int]) -> RunResult:
        """PR/MAR: ``ln Z`` is the roots' component ``ln Z`` plus the Problem's constant factor
        (which no agent holds); MAR adds every agent's marginal."""
        problem = self.problem
        var = self.layout.variable
        ln_z = log_constant(problem) + sum(float(self.results[r].bound or 0.0) for r in roots)
        marginals: dict[str, np.ndarray] | None = None
        if self.spec.task == "mar" and ln_z > -math.inf:
            marginals = {}
            for i, r in self.results.items():
                size = problem.variables[var[i]].size
                if r.marginal is None or len(r.marginal) != size:
                    raise RunError(f"{self.name(i)} sent no marginal over its {size} values")
                marginals[var[i]] = np.asarray(r.marginal)
            for name, v in problem.variables.items():
                marginals.setdefault(name, np.full(v.size, 1.0 / v.size))  # in no agent: n = 0
        assert self.choice is not None
        metrics, per_agent = self._metrics(self.spec, roots, wall_s, solve_s)
        times = {"total": wall_s, "launch": self.launch_s, "solve": solve_s}
        partition = PartitionResult(
            problem=problem,
            task=self.spec.task,
            algo="dpop",
            z=None,
            ordering="pseudo-tree",
            induced_width=metrics["theory"]["max_separator"],
            largest_table=metrics["largest_util_entries"],
            backend="agents",
            dtype=self.dtype.name,
            ln_lower=ln_z,
            ln_upper=ln_z,
            marginals=marginals,
            times=times,
        )
        return RunResult(
            problem=problem,
            spec=self.spec,
            ran=self.spec,
            tree=self.choice,
            assignment={},
            internal_cost=-ln_z,
            bound=-ln_z,
            roots=tuple(var[r] for r in roots),
            agents=per_agent,
            metrics=metrics,
            dtype=self.dtype.name,
            times=times,
            partition=partition,
        )


def combine_sizings(per_root: list[tuple[Sizing, ...]], count: int) -> list[Sizing]:
    """A forest's sizings for all ``count`` choices from its components' (each list may stop
    where it becomes DPOP's): per mini-bucket size, the largest UTIL over all components, and
    the total."""
    out = []
    for j in range(count):
        at = [sizing_at(s, j) for s in per_root]
        best = max(at, key=lambda s: (s.largest, -(s.agent or 0)))
        out.append(Sizing((), best.largest, best.agent, total(s.total for s in at)))
    return out
