"""The agent process: one variable per problem, an event loop over a Transport, and its liveness.

The per-problem work (degree exchange, the DFS of the candidate trees with their sizing, UTIL
and VALUE) is a :class:`~dcop.agents.session.Session`; this module is the process around it:

* **hello** to the coordinator with the endpoint this agent bound (the system picks the port when
  peers.json gives a wildcard), its pid, host and set-up time. A serving agent (``--serve``)
  repeats its hello while it has no problem, so that a coordinator started later finds it. A
  one-shot agent says it once, and again only where its link to the coordinator may have lost
  it (a failed handshake, a lost connection: see :meth:`Agent._greet_new_coordinator`).
* **setup** opens a problem: the agent links to the neighbours the coordinator names (at the
  endpoints they reported) and the session runs; every message carries the problem's number and
  messages of another problem are dropped. **result** goes to the coordinator with the agent's
  metrics. **done** ends a serving agent's problem (it waits for the next); **stop** ends the
  process.
* **Liveness**: the agent sends a heartbeat to the coordinator (not to its neighbours); ZeroMQ's
  own connection heartbeats (ZMTP) tell the transport when a link is lost. A lost neighbour is
  reported to the coordinator; a lost coordinator ends a one-shot agent (a serving agent waits for
  the next one). The overall deadline ends anything else.

Bad frames are logged and dropped; the agent carries on. Failures inside a problem are reported
as an Error whose kind tells the coordinator what it was (too large, mismatch, timeout, error).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from dcop.agents.jobs import Worker
from dcop.agents.metrics import Meter
from dcop.agents.pauses import GcPauses
from dcop.agents.session import Out, Session, adopt_setup
from dcop.backends.base import BucketShape, Compiles, Placed, TableBackend, capable
from dcop.errors import DcopError, ProblemMismatch, ProtocolError, RunTimeout, TableTooLarge
from dcop.model import CostTable
from dcop.protocol import (
    COORDINATOR_ID,
    DEFAULT_MAX_MESSAGE_BYTES,
    HEARTBEAT_INTERVAL_S,
    PEER_TIMEOUT_S,
    Done,
    Envelope,
    Error,
    Go,
    Heartbeat,
    Hello,
    Message,
    Setup,
    Start,
    Stop,
    Util,
    decode,
    encode,
)
from dcop.protocol.codec import message_bytes
from dcop.protocol.constants import LINKING_PHASE
from dcop.protocol.messages import CHUNK_KIND
from dcop.protocol.ratelog import RateLimitedLog
from dcop.protocol.transport import AgentTransport
from dcop.tables import Op

log = logging.getLogger("dcop.agents")
#: Undecodable frames are logged once per sender per few seconds, with a count: a flood of them
#: must not fill the disk (a stranger's garbage is refused by the transport; this is for the
#: peers it accepts).
_drops = RateLimitedLog(log)

FROM_COORDINATOR = ("setup", "go", "stop", "done", "heartbeat")
FROM_NEIGHBOUR = (
    "degree",
    "token",
    "offer",
    "util",
    "more",
    "replay",
    "value",
    "down",
    "heartbeat",
)
FAULTS = ("crash-at-util", "hang-at-util", "crash-at-start", "crash-after-util")
#: Messages of a problem kept until its setup arrives (neighbours may be set up first).
AHEAD_MAX = 4096
#: Longest a one-shot agent's loop sleeps with nothing due (no hello to repeat soon, no
#: heartbeat owed): the bound on noticing that its launcher is gone (every frame, lost link and
#: finished job wakes it at once). A wake once a heartbeat_s cost each agent of a 1000-agent tree
#: about 20 empty turns of its loop (several ms of CPU) while it waited for the others, and the
#: turns grew with the run's length, so with n (issue 49).
IDLE_WAKE_S = 5.0
#: The same bound for an agent forked from a template, which watches the launcher for its agents
#: and stops them once it is gone (:mod:`dcop.agents.forked`): the loop's own check is only a
#: fallback then. The agents of a 2000-agent tree live 30-35 s while the others start; with
#: the bound at 5 s each woke 8.5 times by itself, at 60 s 5.0 times, and its main thread took
#: 26.6 ms of CPU against 23.6 (one run each, 2-core VM at load 30-97; most of it the kernel's).
#: With this bound, a pair of 2000-agent runs at load 47-72 gave 31.6 ms of CPU an agent in all
#: against 31.1 at 5 s: the gain is below the loaded machine's noise.
WATCHED_IDLE_WAKE_S = 30.0
ErrorKind = Literal["error", "too_large", "mismatch", "timeout"]


@dataclass
class AgentConfig:
    """What an agent knows before any message: itself, and from a problem-specific peers.json its
    variable and neighbours (id -> variable), which the coordinator's setup must then match."""

    me: int
    variable: str | None = None
    neighbours: dict[int, str] | None = None
    timeout_s: float = 120.0
    #: silence allowed before the run's own setting arrives with its start
    peer_timeout_s: float = PEER_TIMEOUT_S
    heartbeat_s: float = HEARTBEAT_INTERVAL_S
    #: the largest message this agent accepts at all (its sockets' cap); a run may ask for less
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    host: str = ""
    #: stay up after a problem and wait for the next (``--serve``)
    serving: bool = False
    #: seconds getting ready took before the loop started (CUDA context, kernels)
    setup_s: float = 0.0
    gpu: str = ""
    #: CUDA IPC domain of a GPU agent (:func:`dcop.gpu.ipc.ipc_domain`; empty: none)
    ipc: str = ""
    fault: str | None = None  # test-only fault injection, one of FAULTS
    #: the process that launched this agent and coordinates it (``dcop run``; None: started by
    #: hand, or serving): checked at each wake of the loop by itself (at most ``idle_wake_s``
    #: apart), its end ends the agent
    launcher_pid: int | None = None
    #: longest sleep of the loop with nothing due (IDLE_WAKE_S, or WATCHED_IDLE_WAKE_S where a
    #: template watches the launcher for this agent)
    idle_wake_s: float = IDLE_WAKE_S


class Agent:
    """One DCOP agent. ``run()`` returns the process exit code (0: stopped after a result, or a
    serving agent told to shut down)."""

    def __init__(
        self,
        config: AgentConfig,
        transport: AgentTransport,
        backend: TableBackend,
        local: tuple[Sequence[CostTable], int] | None = None,
        now: Callable[[], float] = time.monotonic,
        worker: Worker | None = None,
    ) -> None:
        self.cfg = config
        #: the long-lived thread the sessions' jobs run on (dcop-agent's was rehearsed at set-up)
        self.worker = worker if worker is not None else Worker("dcop-jobs")
        self.me = config.me
        self.transport = transport
        self.backend = backend
        self.local = local
        self.now = now
        self.session: Session | None = None
        self.problem = 0
        self.meter = Meter()
        #: collector pauses, counted from each problem's set-up
        self.gc_pauses = GcPauses()
        self.result_sent = False
        self.failed = False
        self.stop_reason: str | None = None
        self.coordinator_heard = False
        self.last_seen_coordinator = 0.0
        #: when this agent last sent the coordinator anything (a heartbeat waits for quiet), or
        #: skipped a heartbeat that had nothing to tell (before the go)
        self.last_to_coordinator = -float("inf")
        #: before the go: the bytes my last heartbeat (or my start) reported, and whether one
        #: said that I still wait for a neighbour's degree
        self.beat_bytes = 0
        self.told_linking = False
        #: when my start came (with my setup)
        self.started_at = 0.0
        #: a one-shot agent's repeated hello, until its coordinator answers: when, and the gap
        self.next_hello = -float("inf")
        #: handshakes completed on the link to the coordinator (see _greet_new_coordinator)
        self.coordinator_joins = 0
        self.hello_gap = config.heartbeat_s
        self.problem_deadline = float("inf")
        self.reported_lost: set[int] = set()
        self.solved = 0
        #: neighbours' messages of a problem whose setup has not reached me yet
        self.ahead: list[tuple[int, Envelope, int]] = []

    # ---- the loop ---------------------------------------------------------------------------
    def run(self) -> int:
        """Serve until stopped; a signal (KeyboardInterrupt) ends it cleanly: exit code 0 when
        no problem was left unfinished, else 3 (the coordinator hears why)."""
        self.gc_pauses.start()
        try:
            return self._loop()
        except KeyboardInterrupt as exc:
            unfinished = self.session is not None and not self.result_sent
            log.warning("agent %d: %s; exiting", self.me, exc or "interrupted")
            if unfinished:
                self._fail(f"agent {self.me} ({self._var()}) was stopped by {exc or 'a signal'}")
            return 3 if unfinished else 0
        finally:
            self.gc_pauses.stop()

    def _loop(self) -> int:
        start = self.now()
        deadline = start + self.cfg.timeout_s if not self.cfg.serving else float("inf")
        self._hello()
        next_beat = start + self.cfg.heartbeat_s
        while self.stop_reason is None:
            now = self.now()
            if now >= min(deadline, self.problem_deadline):
                self._fail(
                    f"agent {self.me} timed out after {self.cfg.timeout_s:g} s in phase "
                    f"{self.phase}",
                    "timeout",
                )
                if not self.cfg.serving:
                    return 1
                self._end_problem("timed out")
            if self._check_losses():
                return 1
            # a join first: a hello the timer would repeat may have just left on it
            self._greet_new_coordinator()
            if now >= next_beat:
                next_beat = now + self.cfg.heartbeat_s
                if self.cfg.launcher_pid is not None and not process_alive(self.cfg.launcher_pid):
                    # a lost link to it says nothing before it has spoken (issue 48, round 4:
                    # kill -9 of dcop run during launch left its agents up for their timeout)
                    log.error(
                        "agent %d: the coordinator that launched it (pid %d) is gone; exiting",
                        self.me,
                        self.cfg.launcher_pid,
                    )
                    return 1
                self._beat()
            wait = self._wake_at(next_beat) - self.now()
            if self.session is not None and self.session.job is not None:
                wait = min(wait, 0.005)  # a finished job wakes the transport; this bounds a miss
            item = self.transport.recv(max(0.0, min(wait, deadline - self.now())))
            if item is not None:
                self.on_frames(*item)
            if (
                self.session is not None
                and self.session.job is not None
                and self.session.job.done()
            ):
                self._step(self._finish_job)
        if self.stop_reason == "done" or self.stop_reason == "shutdown":
            return 0 if (self.result_sent or self.cfg.serving) and not self.failed else 3
        return 3

    def _wake_at(self, tick: float) -> float:
        """When the loop next wakes by itself, ``tick`` (a heartbeat_s after the last check) at
        the earliest: then for a serving agent (it repeats its hello while idle); otherwise when
        its next hello is due (before its coordinator has spoken) or its next heartbeat (while it
        has work), and at most ``cfg.idle_wake_s`` away. Frames, joined or lost links and a
        finished job end the wait sooner."""
        if self.cfg.serving:
            return tick
        now = self.now()
        if self.session is None and not self.coordinator_heard and self.coordinator_joins == 0:
            due = self.next_hello
        elif self._has_work() and self._may_owe_beat():
            # _beat sends once the link would otherwise stay quiet past _quiet_s at its next
            # check: due then (a hair after, the test being strict)
            due = self.last_to_coordinator + self._quiet_s() - self.cfg.heartbeat_s + 1e-3
        else:
            due = float("inf")
        return max(tick, min(due, now + self.cfg.idle_wake_s))

    @property
    def phase(self) -> str:
        if self.session is None:
            return "waiting for a problem" if self.cfg.serving else "setup"
        if self.result_sent:
            return "waiting for stop"
        return self.session.phase

    def _hello(self) -> None:
        self._send(
            COORDINATOR_ID,
            Hello(
                self.cfg.variable or "",
                os.getpid(),
                self.cfg.host,
                self.transport.endpoint,
                self.cfg.serving,
                self.cfg.setup_s,
                self.cfg.gpu,
                self.cfg.ipc,
            ),
        )

    def _beat(self) -> None:
        # an idle serving agent repeats its hello: a coordinator started later learns of it; so
        # does a one-shot agent its coordinator has not answered yet, less and less often, but
        # only while its link to the coordinator has never joined (a transport that reports no
        # joins, or a handshake still to come). Once joined, a hello that may be lost is said
        # again at the join (_greet_new_coordinator): a repeat on a timer was 3.1 hellos per
        # agent at n = 1000 (5.3 at 2000), the coordinator answering each agent only once its
        # neighbours have said hello too (issue 49).
        if self.session is None and (self.cfg.serving or not self.coordinator_heard):
            if self.cfg.serving or (self.coordinator_joins == 0 and self.now() >= self.next_hello):
                self._hello()
                self.next_hello = self.now() + self.hello_gap - self.cfg.heartbeat_s / 2
                self.hello_gap = min(2 * self.hello_gap, self._quiet_s())
        elif not self._has_work():
            return  # waiting for the coordinator: it watches my process and link meanwhile
        elif self.now() + self.cfg.heartbeat_s - self.last_to_coordinator > self._quiet_s():
            # (beats are checked once a heartbeat_s: this one goes out if waiting for the next
            # check would leave the link quiet for longer than allowed)
            # heartbeats do not count: the coordinator reads a still total as a stalled phase
            sent = self._sent_bytes()
            phase = self.phase
            if self.session is not None and self.session.go is None:
                # Before the go the coordinator watches no silence, only whether the candidate
                # trees move: a beat goes out only with news (bytes sent since the last, or a
                # first word that I still wait for a neighbour's degree, once that wait is near
                # the peer timeout: the coordinator names me if the DFS stalls). Agents waiting
                # on others during a long launch sent 370 empty beats in a 1000-agent run.
                linking = (
                    phase == LINKING_PHASE
                    and not self.told_linking
                    and self.now() - self.started_at > self._quiet_s()
                )
                if sent == self.beat_bytes and not linking:
                    self.last_to_coordinator = self.now()  # quiet again from here
                    return
                self.told_linking = self.told_linking or linking
            self.beat_bytes = sent
            util = self.meter.metrics.sent_count.get("util", 0) > 0
            busy = self.session is not None and self.session.job is not None
            self._send(COORDINATOR_ID, Heartbeat(phase, sent, util, busy))

    def _may_owe_beat(self) -> bool:
        """Whether a heartbeat can come due: from the go on, or before it with news (bytes sent
        since my last beat, or a wait for a neighbour's degree not yet told). An agent waiting
        on others before its go then sleeps till a frame or its idle bound wakes it."""
        session = self.session
        if session is None or session.go is not None:
            return True
        linking = self.phase == LINKING_PHASE and not self.told_linking
        return linking or self._sent_bytes() != self.beat_bytes

    def _sent_bytes(self) -> int:
        """What I have sent in this problem, heartbeats not counted (bytes)."""
        return sum(b for t, b in self.meter.metrics.sent_bytes.items() if t != "heartbeat")

    def _has_work(self) -> bool:
        """Whether my problem is started (its start, from my setup, is in, held or taken), my
        part of it is not waiting on the coordinator's go, and my result is not yet out: only
        then does the coordinator need my heartbeats (while the candidate trees are built, as
        a sign that the DFS moves; from the go on, as proof that my loop runs). Otherwise an
        agent only waits for the coordinator, which sees a dead process or a lost link (ZMTP)
        without them: during a 1000-agent launch of tens of seconds, the waiting agents'
        heartbeats were most of the run's messages. After, the coordinator has my result and
        no longer watches my silence."""
        session = self.session
        if session is None or self.result_sent:
            return False
        started = session.spec is not None or session.held_start is not None
        return started and not session.awaiting_go

    def _quiet_s(self) -> float:
        """How long the link to the coordinator stays quiet before a heartbeat goes on it.

        ZMTP heartbeats already watch every connection (a dead or frozen process, a cut link);
        this message proves that the loop runs, and feeds the live status. The coordinator
        calls an agent silent after the peer timeout: a heartbeat every half of it is enough
        (it goes out a check early, so the link is never quiet for more than half the timeout
        and one heartbeat_s), and none where anything else went to the coordinator meanwhile.
        At one a second they were 51-77 % of a 1000-agent run's messages, at a third of the
        timeout 12 %."""
        session = self.session
        spec = session.spec if session is not None else None
        if session is not None and session.held_start is not None:
            spec = session.held_start.spec  # the run's, held with my start till my links are up
        timeout = spec.peer_timeout if spec is not None else self.cfg.peer_timeout_s
        return max(self.cfg.heartbeat_s, timeout / 2)

    def _greet_new_coordinator(self) -> None:
        """A serving agent waiting for a problem says hello as soon as its link to the
        coordinator's port connects (a coordinator started for the next problem), instead of at
        its next heartbeat: that wait was most of a warm cluster's time per problem. A one-shot
        agent not yet answered does so when the link connects again (the coordinator's port
        taken over, a squatter gone: issue 33), or connects for the first time after a failed
        handshake (a squatter, a refused key: the hello queued at its start went with that
        connection); a first clean connection took that hello, and a second one was a message
        more for every agent and its coordinator (issue 49)."""
        if COORDINATOR_ID not in self.transport.joined_peers():
            return
        self.coordinator_joins += 1
        if self.session is not None or not (self.cfg.serving or not self.coordinator_heard):
            return
        if (
            self.coordinator_joins == 1
            and not self.cfg.serving
            and not self.transport.dropped_before_join(COORDINATOR_ID)
        ):
            return
        self._hello()

    def _check_losses(self) -> bool:
        """React to links ZeroMQ lost; True when this agent must exit (its coordinator is gone)."""
        for loss in self.transport.lost_peers():
            if loss.peer == COORDINATOR_ID:
                if not self.coordinator_heard:
                    # its first words (a setup) may wait behind the loss: a coordinator that
                    # died right after sending them is lost, not "not started yet"
                    self._drain()
                if not self.coordinator_heard:
                    continue  # not started yet: its first message is still to come
                if self.cfg.serving:
                    self._drain()  # its last words (the problem's done) may still be queued
                    if self.session is None:  # its problem is over: leaving is what it does
                        log.info("agent %d: the coordinator left; waiting for the next", self.me)
                        continue
                    log.warning(
                        "agent %d: the coordinator went away during problem %d; waiting for "
                        "the next",
                        self.me,
                        self.problem,
                    )
                    self._end_problem("the coordinator went away")
                    continue
                self._drain()  # its last words (a stop) may still be queued
                if self.stop_reason is not None:
                    return False
                log.error("agent %d: lost the coordinator (%s); exiting", self.me, loss.reason)
                return True
            if self.session is not None and loss.peer in self.session.part.peers:
                if self.result_sent:
                    # its part is done: a neighbour that left (stopped before it) is let go.
                    # Kept, libzmq called it again every 100 ms until this agent's own stop:
                    # the stops of n agents take O(n), so O(n) wakes per agent (at n = 2000,
                    # 17.5 retried connections per agent against 5 at n = 1000; issue 49)
                    self.transport.disconnect_peer(loss.peer)
                    continue
                if loss.peer in self.reported_lost:
                    continue
                self.reported_lost.add(loss.peer)
                name = self.session.part.peers[loss.peer]
                reason = f"lost the link to neighbour agent {loss.peer} ({name}): {loss.reason}"
                log.error("agent %d: %s", self.me, reason)
                self._send(COORDINATOR_ID, Error(reason, loss.peer))
        return False

    def _finish_job(self) -> None:
        assert self.session is not None
        self._out(self.session.finish_job())
        self.session.unmap_taken()  # children's buffers: unmapped off the path of my UTIL

    def _drain(self) -> None:
        """Handle every message already received."""
        while self.stop_reason is None and (item := self.transport.recv(0.0)) is not None:
            self.on_frames(*item)

    # ---- frames -----------------------------------------------------------------------------
    def on_frames(self, sender: int | None, frames: Sequence[bytes | memoryview]) -> None:
        """Decode, validate and dispatch one message; a bad one is logged and dropped."""
        size = message_bytes(frames)
        try:
            if sender is None:
                raise ProtocolError("a message from an unidentified peer")
            env = decode(
                list(frames),
                max_message_bytes=self.cfg.max_message_bytes,
                receiver=self.me,
            )
            if env.sender != sender:
                raise ProtocolError(f"a message from {sender} claims to come from {env.sender}")
            allowed = FROM_COORDINATOR if sender == COORDINATOR_ID else FROM_NEIGHBOUR
            if env.type not in allowed:
                raise ProtocolError(f"unexpected {env.type} message from {sender}")
        except ProtocolError as exc:
            self.meter.dropped()
            _drops.warning(
                (self.me, sender), "agent %d: dropped a frame from %s: %s", self.me, sender, exc
            )
            return
        if sender == COORDINATOR_ID:
            self.coordinator_heard = True
            self.last_seen_coordinator = self.now()
        body = env.body
        if isinstance(body, Stop):
            self.stop_reason = body.reason
            log.info("agent %d: stop (%s)", self.me, body.reason)
            return
        if isinstance(body, Heartbeat):
            return
        if isinstance(body, Setup):
            self._step(lambda: self._on_setup(env.problem, body, size))
            return
        if self.session is None or env.problem != self.problem:
            if env.problem and sender != COORDINATOR_ID and len(self.ahead) < AHEAD_MAX:
                # a neighbour that got its setup first: keep it for when mine arrives
                self.ahead.append((sender, env, size))
            else:
                log.debug("agent %d: dropped a %s of problem %d", self.me, env.type, env.problem)
            return
        self._dispatch(sender, env, size)

    def _dispatch(self, sender: int, env: Envelope, size: int) -> None:
        body = env.body
        self.meter.received(env.type, size)
        if isinstance(body, Done):
            self._end_problem(body.reason)
            return
        if isinstance(body, Go):
            # my silence counts from the go, as the coordinator counts it (before it, I wait on
            # my peers or on the coordinator, which watches my process and links meanwhile)
            self.last_to_coordinator = max(self.last_to_coordinator, self.now())
        session = self.session
        assert session is not None  # checked by the caller
        self._step(lambda: self._out(session.on(sender, body)))

    def _on_setup(self, problem: int, setup: Setup, size: int) -> None:
        if self.session is not None and problem != self.problem:
            if not self.cfg.serving:
                raise ProtocolError("a second problem for a one-shot agent")
            self._end_problem("replaced by a new problem")
        if self.session is not None:
            raise ProtocolError("a second setup for the same problem")
        expected = None
        if self.cfg.variable is not None and self.cfg.neighbours is not None:
            expected = (self.cfg.variable, self.cfg.neighbours)
        self.problem = problem
        self.gc_pauses.seconds, self.gc_pauses.collections = 0.0, 0
        self.meter = Meter()
        self.meter.set_up(self.cfg.setup_s)
        self.meter.received("setup", size)
        self.result_sent = False
        self.failed = False
        self.reported_lost = set()
        self.problem_deadline = (
            self.now() + self.cfg.timeout_s if self.cfg.serving else float("inf")
        )
        part = adopt_setup(self.me, setup, self.backend, self.local, expected)
        for n in (*setup.neighbours, *setup.links):  # links: the elimination tree's extra edges
            self.transport.connect_peer(n.id, n.endpoint)
        # frames held from anyone else can never be delivered in this problem; a one-shot
        # agent's neighbours are known for good, a serving agent's change with the next problem
        self.transport.settle(
            [n.id for n in (*setup.neighbours, *setup.links)], for_good=not self.cfg.serving
        )
        self.session = Session(
            self.me,
            part,
            self.backend,
            self.meter,
            util_hook=self._util_fault if self.cfg.fault else None,
            prepare=self._prepare if capable(self.backend, Compiles) else None,
            ipc=self.cfg.ipc,
            wake=getattr(self.transport, "wake", None),
            worker=self.worker,
        )
        log.info("agent %d: problem %d, variable %s", self.me, problem, part.variable)
        session = self.session
        self._out(session.begin())
        if setup.start is not None:  # held by the session until my links are up
            self._on_start(setup.start)
            self._out(session.on(COORDINATOR_ID, setup.start))
        ahead, self.ahead = self.ahead, []
        for sender, env, size in ahead:
            if env.problem == problem and sender in part.peers:
                self._dispatch(sender, env, size)

    def _on_start(self, start: Start) -> None:
        if start.spec.max_message_bytes > self.cfg.max_message_bytes:
            raise DcopError(
                f"the run allows messages of {start.spec.max_message_bytes} bytes, but this "
                f"agent was started with a limit of {self.cfg.max_message_bytes} bytes (give "
                "every agent the run's --max-message-mib)"
            )
        if self.cfg.fault == "crash-at-start":
            os.kill(os.getpid(), signal.SIGKILL)
        # my quiet link counts from my start (on my setup): the hello I sent may be a long
        # launch ago; my degrees, sent before it, are no news for a heartbeat
        self.last_to_coordinator = max(self.last_to_coordinator, self.now())
        self.beat_bytes, self.told_linking = self._sent_bytes(), False
        self.started_at = self.now()
        if start.spec.gpu_min_entries is not None and capable(self.backend, Placed):
            self.backend.min_entries = start.spec.gpu_min_entries  # the run's GPU placement
        log.info("agent %d: start (%s, roots of trees %s)", self.me, start.spec.label, start.roots)

    def _util_fault(self) -> None:
        if self.cfg.fault == "crash-at-util":
            os.kill(os.getpid(), signal.SIGKILL)
        if self.cfg.fault == "hang-at-util":
            log.error("agent %d: fault injection: hanging", self.me)
            time.sleep(10 * self.cfg.timeout_s)

    def _prepare(
        self,
        scopes: list[tuple[str, ...]],
        shapes: list[tuple[int, ...]],
        var: str,
        z: int | None,
        op: Op = "min",
    ) -> None:
        """Compile the GPU kernels of my (mini-)buckets before the UTIL data arrive."""
        from dcop.buckets import partition_scopes

        if not capable(self.backend, Compiles) or not scopes:
            return
        prepare = self.backend.prepare_bucket
        tables = self.session.part.tables if self.session is not None else ()
        dtype = tables[0].data.dtype if tables else "float64"
        for members in partition_scopes(scopes, z):
            # compiled on a thread of its own: the loop goes on answering (a bucket whose data
            # come before its kernel runs with the generic one, or waits for it)
            shape = BucketShape(
                [scopes[k] for k in members], [shapes[k] for k in members], var, op, dtype
            )
            prepare(shape, background=True)

    def _end_problem(self, reason: str) -> None:
        """Drop the current problem (a serving agent then waits for the next one)."""
        if self.session is not None:
            self.session.release()
            for n in self.session.part.peers:
                self.transport.disconnect_peer(n)
            log.info("agent %d: problem %d ends (%s)", self.me, self.problem, reason)
        self.session = None
        self.problem = 0  # from now on this agent speaks outside any problem (its hello)
        self.problem_deadline = float("inf")
        if not self.cfg.serving:
            self.stop_reason = reason if reason != "done" else "done"

    def _step(self, action: Callable[[], object]) -> None:
        """Run ``action`` then send the result once the session is done; a failure is reported,
        not raised."""
        try:
            action()
            session = self.session
            if session is not None and session.done and not self.result_sent:
                figures = {**self._backend_figures(), **session.handover_figures()}
                metrics = self.meter.snapshot(session.clock, figures)
                self._send(COORDINATOR_ID, session.result(metrics))
                self.result_sent = True
                self.solved += 1
                log.info("agent %d: result sent (value %s)", self.me, session.value)
        except DcopError as exc:
            self._fail(f"agent {self.me} ({self._var()}): {exc}", error_kind(exc))
        except MemoryError:
            self._fail(
                f"agent {self.me} ({self._var()}): out of memory in phase {self.phase} "
                "(use ADPOP with a smaller z, or --algo auto)",
                "too_large",
            )
        except Exception as exc:  # a bug: tell the coordinator, do not hang
            log.exception("agent %d: unexpected failure", self.me)
            self._fail(f"agent {self.me} ({self._var()}): {type(exc).__name__}: {exc}")

    def _var(self) -> str:
        if self.session is not None:
            return self.session.var
        return self.cfg.variable or "no variable yet"

    def _backend_figures(self) -> dict[str, float]:
        figures: dict[str, float] = {}
        if capable(self.backend, Placed):
            figures.update({k: float(v) for k, v in self.backend.placement_metrics().items()})
        if capable(self.backend, Compiles):
            setup = self.backend.setup.as_dict()
            figures.update({f"setup_{k}": float(v) for k, v in setup.items()})
        figures.update(self.gc_pauses.figures())
        return figures

    # ---- sending ----------------------------------------------------------------------------
    def _out(self, out: Out) -> None:
        for peer, message in out:
            self._send(peer, message)

    def _send(self, peer: int, body: Message) -> int:
        limit = self.cfg.max_message_bytes
        session = self.session
        if session is not None and session.spec is not None:
            limit = session.spec.max_message_bytes
        frames = encode(self.me, peer, body, self.problem)
        size = message_bytes(frames)
        if size > limit:
            # the receiver would drop it: fail loudly here instead of waiting for a timeout
            raise TableTooLarge(
                f"{body.TYPE} message of {size} bytes exceeds the message limit of {limit} "
                "bytes (raise the limit with --max-message-mib, or use ADPOP with a smaller z "
                "or --algo auto)"
            )
        self.transport.send(peer, frames)
        if peer == COORDINATOR_ID:
            self.last_to_coordinator = self.now()
        if not isinstance(body, Hello):
            chunk = isinstance(body, Util) and body.chunk >= 0
            self.meter.sent(CHUNK_KIND if chunk else body.TYPE, size)
            if isinstance(body, Util) and not chunk:
                # the UTIL's size counts tables handed over by CUDA IPC as if they were framed
                # (the paper's message size); the network bytes are only what crossed the socket
                scoped = [t for t in body.tables if t.scope]
                ipc_bytes = sum(t.nbytes for t in body.shared)
                self.meter.util_sent(size + ipc_bytes, body.entries, len(scoped) + len(body.shared))
                self.meter.handed_over(ipc_bytes, len(body.shared))
                if self.cfg.fault == "crash-after-util":
                    time.sleep(0.5)  # long enough for ZeroMQ to deliver it
                    os.kill(os.getpid(), signal.SIGKILL)
        return size

    def _fail(self, reason: str, kind: ErrorKind = "error") -> None:
        log.error("%s", reason)
        self.failed = True
        try:
            self._send(COORDINATOR_ID, Error(reason, None, kind))
        except DcopError:  # the reason itself is short; nothing else can go wrong here
            log.exception("agent %d: could not report the failure", self.me)


def error_kind(exc: BaseException) -> ErrorKind:
    """How an Error message classifies a failure (the coordinator raises the matching type)."""
    if isinstance(exc, TableTooLarge | MemoryError):
        return "too_large"
    if isinstance(exc, ProblemMismatch):
        return "mismatch"
    if isinstance(exc, RunTimeout):
        return "timeout"
    return "error"


__all__ = ["FAULTS", "Agent", "AgentConfig", "error_kind"]


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state = stat[stat.rindex(b")") + 2 :][:1]
    return state not in (b"Z", b"X")
