"""The coordinator's side of one problem: hello, setup (with the start), trees, go, results, stop.

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

import logging
import secrets
import time
from collections.abc import Callable
from typing import NoReturn

from dcop.coordinator.answer import Gathered, run_result
from dcop.coordinator.plan import RunPlan
from dcop.coordinator.session import CoordinatorSession, Out, PeerBlamed, Progress
from dcop.errors import DcopError, ProtocolError, RunError, RunTimeout, TableTooLarge
from dcop.model import Problem
from dcop.protocol import (
    COORDINATOR_ID,
    HEARTBEAT_INTERVAL_S,
    Hello,
    Message,
    RunSpec,
    Transport,
    decode,
    encode,
)
from dcop.protocol.codec import message_bytes
from dcop.protocol.peers import Peers
from dcop.protocol.ratelog import RateLimitedLog
from dcop.results.run import RunResult

log = logging.getLogger("dcop.coordinator")
#: Undecodable frames: one line per sender per few seconds, with a count (a flood must not fill
#: the disk).
_drops = RateLimitedLog(log)

#: ``monitor()`` lists agents whose process has ended, as ``(id, exit code)``.
Monitor = Callable[[], list[tuple[int, int]]]

__all__ = ["Coordinator", "Monitor", "Progress"]


class Coordinator:
    """Drives one distributed DPOP/ADPOP problem over a Transport (ZMQ or in-process): the
    loop, the wire and liveness. What the problem's state is and what to send is the
    :class:`~dcop.coordinator.session.CoordinatorSession`'s; the run's decisions before it
    starts are its :class:`~dcop.coordinator.plan.RunPlan` (made here from ``problem``,
    ``peers``, ``spec``, ``tree`` and ``order_time`` unless ``plan`` is given).

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
        plan: RunPlan | None = None,
    ) -> None:
        #: the run as decided before it starts: layout, candidates, elimination tree, dtype
        self.plan = (
            plan
            if plan is not None
            else RunPlan(problem, peers, spec, tree=tree, order_time=order_time)
        )
        self.session = CoordinatorSession(self.plan, hellos)
        self.spec = self.session.spec
        self.layout = self.plan.layout
        #: memory every agent of this run shares (they run on this host: ``dcop run``)
        self.host_memory = host_memory
        #: where ``timeout`` and ``times.total`` count from (monotonic): the command's start, so
        #: the agents' launch counts; None: when :meth:`run` is called
        self.origin = origin
        self.transport = transport
        self.timeout = timeout
        self.hello_timeout = min(timeout, hello_timeout if hello_timeout is not None else timeout)
        self.heartbeat_s = heartbeat_s
        self.monitor = monitor
        self.before_start = before_start
        self.on_status = on_status
        self.number = 0
        #: messages and bytes by type: [count, bytes]
        self.sent: dict[str, list[int]] = {}
        self.received: dict[str, list[int]] = {}
        self.last_seen: dict[int, float] = {}
        self.phase = "hello"
        self.t0 = 0.0
        self._turn: float | None = None  # the last turn of the waiting loop (_check_own_pause)
        #: seconds from the origin until every agent had said hello (launched and listening)
        self.launch_s = 0.0
        #: agents whose Go went out: their silence counts from then on (before, an agent waits
        #: on its peers or on the coordinator, and only its process and links are watched)
        self.started: set[int] = set()
        #: what moved last in the phase (readies, reports, results, the agents' bytes) and when
        self.moved: tuple[int, ...] = ()
        self.moved_at = 0.0

    @property
    def hellos(self) -> dict[int, Hello]:
        """Every agent's hello so far (where it listens)."""
        return self.session.hellos

    @property
    def hello_at(self) -> dict[int, float]:
        """Seconds from the origin to each agent's first hello (the launch, agent by agent)."""
        return self.session.hello_at

    def name(self, agent_id: int) -> str:
        return self.plan.name(agent_id)

    # ---- the run ------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to the end; return the typed result. Raises a DcopError naming the agent on a
        fault (RunTimeout, TableTooLarge, ProblemMismatch, RunError)."""
        session = self.session
        self.t0 = self.origin if self.origin is not None else time.monotonic()
        deadline = self.t0 + self.timeout
        try:
            # Setups go out during the hello phase: each agent's as soon as it and its
            # neighbours have said where they listen (its setup names their endpoints), so the
            # first agents link up while later ones still start.
            # 31 random bits tell this problem from a serving agent's last one, in a msgpack
            # int of 5 bytes (62 bits took 9 in every message's header)
            self.number = secrets.randbits(31) + 1
            self.plan.check_parts(self.host_memory)  # before any table is sent
            self._send_all(session.setups())  # agents whose hellos came before this problem
            self._wait(session.all_said_hello, self.t0 + self.hello_timeout, "hello")
            self.launch_s = time.monotonic() - self.t0
            # Each agent's start came with its setup: it builds and sizes the candidate trees
            # as soon as its links are up (its neighbours' degrees in), while the last agents
            # still start; neither a ready nor a start goes through the coordinator (both were
            # a message per agent, and the start a barrier of the whole launch).
            if self.before_start is not None:
                self.before_start()
            t_start = time.monotonic()
            self._wait(session.trees_reported, deadline, "dfs")
            go = session.go(deadline - time.monotonic())
            now = time.monotonic()
            for a in session.active:
                # from its go on, an agent heartbeats while it works: its silence counts
                self.last_seen[a] = max(self.last_seen.get(a, now), now)
                self.started.add(a)
            self._send_all(go)
            self._wait(session.solved, deadline, "solve")
            solve_s = time.monotonic() - t_start
        except BaseException as exc:
            self._send_all(
                session.end(f"aborted: {exc}" if isinstance(exc, DcopError) else "aborted")
            )
            raise
        self._send_all(session.end("done"))
        return self._result(time.monotonic() - self.t0, solve_s)

    def _result(self, wall_s: float, solve_s: float) -> RunResult:
        session = self.session
        assert session.choice is not None and session.decision is not None
        decision = session.decision
        gathered = Gathered(
            choice=session.choice,
            ran=self.plan.reported_spec.replace(
                algo=decision.algo,
                z=decision.z,
                width=self.spec.width if decision.algo == "mbdpop" else None,
            ),
            roots=session.roots[session.choice.tree],
            results=session.results,
            hellos=session.hellos,
            candidates=session.roots,
            sent=self.sent,
            received=self.received,
            times={"total": wall_s, "launch": self.launch_s, "solve": solve_s},
        )
        return run_result(self.plan, gathered)

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
                if self.on_status is not None:
                    self.on_status(self.session.progress(self.phase, now - self.t0))
            item = self.transport.recv(min(deadline, next_beat) - now)
            if item is not None:
                self._on_frames(*item)

    # ---- liveness -----------------------------------------------------------------------------
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
        late, what = self.session.late(phase)
        limit = self.hello_timeout if phase == "hello" else self.timeout
        return f"timed out after {limit:g} s: {self._names(late)} {what}"

    def _names(self, agents: list[int]) -> str:
        """The first five of ``agents``, named."""
        return ", ".join(self.name(a) for a in agents[:5]) + (" ..." if len(agents) > 5 else "")

    def _check(self, now: float) -> None:
        """Dead processes, lost links and silent agents end the problem, naming the agent."""
        if self.monitor is not None:
            dead = [(a, c) for a, c in self.monitor() if a in self.layout.variable]
            if dead:
                self._drain(0.3)  # an agent's own error message names the cause better
                ident, code = dead[0]
                raise RunError(f"{self.name(ident)} exited with code {code} during {self.phase}")
        for loss in self.transport.lost_peers():
            if loss.peer in self.layout.variable and loss.peer not in self.session.results:
                self._blame(
                    loss.peer,
                    f"{self.name(loss.peer)} lost its link during {self.phase} ({loss.reason})",
                    own=True,
                )
        for ident in self.session.active:
            if ident not in self.started or ident in self.session.results:
                continue  # (an agent waiting for its go sends no heartbeats)
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
        moved = self.session.moved()
        if moved != self.moved or self.session.busy():
            self.moved, self.moved_at = moved, now
            return
        still = now - self.moved_at
        if still <= self.spec.peer_timeout:
            return
        if self.phase == "solve":
            late, _ = self.session.late("solve")
            raise RunError(
                f"the solve stalled: nothing moved for {still:.1f} s (the peer timeout) with "
                f"{len(late)} agent(s) without a result ({self._names(late)}); a UTIL or VALUE "
                "was lost or refused (see the agents' logs)"
            )
        out = self.session.unfinished_trees()
        trees = ", ".join(f"tree {k} from {self.name(r)}" for k, r in out[:5])
        linking = self.session.linking()
        why = (
            f"{self._names(linking)} did not get ready (links to neighbours not up, or their "
            "degrees not in)"
            if linking
            else "a token was lost or refused (see the agents' logs)"
        )
        raise RunError(
            f"the DFS stalled: nothing moved for {still:.1f} s (the peer timeout) with "
            f"{len(out)} candidate tree(s) unfinished ({trees}{' ...' if len(out) > 5 else ''}); "
            f"{why}"
        )

    def _blame(self, peer: int, report: str, own: bool = False) -> NoReturn:
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

    # ---- the wire -----------------------------------------------------------------------------
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
        now = time.monotonic()
        self.last_seen[sender] = now
        counts = self.received.setdefault(env.type, [0, 0])
        counts[0] += 1
        counts[1] += message_bytes(frames)
        try:
            out = self.session.on(sender, env.body, now - self.t0)
        except PeerBlamed as blamed:
            self._blame(blamed.peer, blamed.report)
        self._send_all(out)

    def _send_all(self, out: Out) -> None:
        for peer, body in out:
            self._send(peer, body)

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
