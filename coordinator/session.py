"""The coordinator's side of one problem as state: messages in, messages out (sans-IO).

A :class:`CoordinatorSession` is made from the run's :class:`~dcop.coordinator.plan.RunPlan` and
driven by the coordinator's loop (:mod:`dcop.coordinator.driver`), as an agent's
:class:`~dcop.agents.session.Session` is by its agent: each step returns the ``(agent, message)``
pairs to send and never touches a socket or a clock, so the same code runs over ZeroMQ and in
process. What it keeps is what the agents said (hellos, readies, tree reports, results,
heartbeats); what it decides is the candidates' roots, the tree and algorithm
(:func:`dcop.coordinator.choice.choose`), and each agent's Setup.

Phases of a problem::

    hello  -> each agent's Setup as soon as it, its neighbours and its tree links said hello;
              it carries the agent's Start (the run spec, the roots it starts, its place in the
              elimination tree), all known from the plan: each agent builds and sizes the
              candidate trees as soon as its links are up, while later agents still come up
    dfs    -> every candidate's roots report: choose; Go (tree, z) to every agent
    solve  -> every agent's Result
    end    -> Stop (one-shot agents) or Done (serving agents)

The outputs are iterables consumed one message at a time: a Setup holds the agent's tables in
the run's dtype, built as it goes out and dropped after, never all agents' at once.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import msgspec

from dcop.coordinator.choice import DFS_KIND, ELIMINATION_KIND, Decision, Limits, choose
from dcop.coordinator.plan import RunPlan
from dcop.errors import (
    DcopError,
    ProblemMismatch,
    ProtocolError,
    RunError,
    RunTimeout,
    TableTooLarge,
)
from dcop.protocol import (
    Done,
    Error,
    Go,
    Heartbeat,
    Hello,
    Message,
    Result,
    Setup,
    Start,
    Stop,
    TreeReport,
    WireTable,
)
from dcop.protocol.constants import LINKING_PHASE
from dcop.protocol.digest import combine_digests, table_digest
from dcop.protocol.messages import Neighbour
from dcop.protocol.runspec import sizing_choices
from dcop.results.run import TreeChoice
from dcop.sizes import as_count, entries
from dcop.trees.candidates import default_candidates

log = logging.getLogger("dcop.coordinator")

Out = Iterable[tuple[int, Message]]

#: The exception an agent's Error message becomes, by its kind.
ERROR_TYPES: dict[str, type[DcopError]] = {
    "error": RunError,
    "too_large": TableTooLarge,
    "mismatch": ProblemMismatch,
    "timeout": RunTimeout,
}


class PeerBlamed(Exception):
    """An agent reports that its link to ``peer`` failed: the loop finds out why at ``peer``'s
    end (its process, its own link) before it ends the run (``report`` otherwise)."""

    def __init__(self, peer: int, report: str) -> None:
        super().__init__(report)
        self.peer = peer
        self.report = report


@dataclass
class Progress:
    """Where a problem stands, for the live display: phase, counts and bytes so far."""

    phase: str = "hello"
    elapsed_s: float = 0.0
    agents: int = 0
    hellos: int = 0
    #: agents set up and not known to wait for a neighbour's degree (agents send no ready: the
    #: figure is the Setups sent less the agents whose last heartbeat says they still link up)
    ready: int = 0
    trees: int = 0
    trees_expected: int = 0
    utils: int = 0
    utils_expected: int = 0
    results: int = 0
    sent_bytes: int = 0
    phases: dict[str, int] = field(default_factory=dict)


class CoordinatorSession:
    """One problem seen from the coordinator (see the module docstring). ``hellos`` carries
    what earlier problems of the same agents already said (a serving cluster)."""

    def __init__(self, plan: RunPlan, hellos: dict[int, Hello] | None = None) -> None:
        self.plan = plan
        self.spec = plan.spec  # DFS candidates counted, the elimination tree offered
        self.layout = plan.layout
        self.active = sorted(self.layout.variable)
        self.hellos: dict[int, Hello] = dict(hellos or {})
        #: seconds from the run's origin to each agent's first hello (the launch, agent by agent)
        self.hello_at: dict[int, float] = {}
        #: agents whose Setup went out
        self.set_up: set[int] = set()
        #: each candidate's roots (one per component); the elimination tree's last (known from
        #: the plan before any agent is up: the Starts ride on the Setups)
        adjacency, names = self.layout.neighbours, self.layout.variable
        dfs = default_candidates(self.spec.trees) if self.spec.trees else []
        self.roots: list[list[int]] = [c.roots(adjacency, names) for c in dfs]
        self._dfs_roots = [frozenset(roots) for roots in self.roots]
        if plan.elimination is not None:
            self.roots.append(plan.elimination.roots)
        self.reports: dict[tuple[int, int], TreeReport] = {}
        self.choice: TreeChoice | None = None
        self.decision: Decision | None = None
        self.results: dict[int, Result] = {}
        self.heartbeats: dict[int, Heartbeat] = {}

    # ---- what each phase waits for ------------------------------------------------------------
    def all_said_hello(self) -> bool:
        # asked after every message of the hello phase: the count first, so that the check
        # over every agent runs only once it can succeed (at n = 1000 it was 1 s of CPU)
        return len(self.hellos) >= len(self.active) and all(a in self.hellos for a in self.active)

    def trees_reported(self) -> bool:
        return all((k, r) in self.reports for k, roots in enumerate(self.roots) for r in roots)

    def solved(self) -> bool:
        return len(self.results) == len(self.active)

    # ---- messages in --------------------------------------------------------------------------
    def on(self, sender: int, message: Message, at: float) -> Out:
        """Take one message from agent ``sender`` (``at``: seconds since the run's origin);
        return what to send. An agent's Error ends the run: it raises the error of its kind, or
        :class:`PeerBlamed` where it names a peer."""
        who = self.plan.name(sender)
        match message:
            case Hello():
                return self._on_hello(sender, message, at)
            case TreeReport():
                self._on_tree(sender, message)
            case Result():
                self.results[sender] = message
            case Error():
                if message.peer is not None:
                    raise PeerBlamed(message.peer, f"{who} reports: {message.reason}")
                reason = message.reason
                raise ERROR_TYPES[message.kind](
                    reason if reason.startswith("agent ") else f"{who}: {reason}"
                )
            case Heartbeat():
                self.heartbeats[sender] = message
            case _:
                log.warning("coordinator: unexpected %s from %s", message.TYPE, who)
        return ()

    def _on_hello(self, sender: int, hello: Hello, at: float) -> Out:
        expected = self.layout.variable.get(sender)
        if hello.variable and expected is not None and hello.variable != expected:
            raise RunError(
                f"{self.plan.name(sender)} says its variable is {hello.variable!r}; the "
                f"coordinator gives it {expected!r}"
            )
        if not hello.endpoint:
            raise RunError(f"{self.plan.name(sender)} did not say where it listens")
        first = sender not in self.hellos
        self.hellos[sender] = hello
        if first:
            self.hello_at[sender] = at
        if first and sender in self.layout.variable:
            # the last of an agent and its neighbours to say hello sends that agent's Setup
            relatives = {*self.layout.neighbours[sender], *self.plan.links(sender)}
            return self.setups((sender, *sorted(relatives)))
        return ()

    def _on_tree(self, sender: int, report: TreeReport) -> None:
        if not 0 <= report.tree < len(self.roots) or sender not in self.roots[report.tree]:
            raise ProtocolError(f"a tree report from {sender}, which roots no such tree")
        if not 1 <= len(report.sizings) <= len(sizing_choices(self.spec)):
            raise ProtocolError(f"a tree report with {len(report.sizings)} sizings")
        self.reports[(report.tree, sender)] = report

    # ---- messages out -------------------------------------------------------------------------
    def setups(self, agents: Sequence[int] | None = None) -> Iterator[tuple[int, Setup]]:
        """Its Setup for each of ``agents`` (None: every agent) that has none yet and that, with
        each of its neighbours and tree links, has said where it listens (the Setup names their
        endpoints); each built as it is taken."""
        for a in self.active if agents is None else agents:
            if a in self.set_up or a not in self.hellos:
                continue
            peers = (*self.layout.neighbours[a], *self.plan.links(a))
            if all(n in self.hellos for n in peers):
                self.set_up.add(a)
                yield a, self.setup(a)

    def setup(self, agent: int) -> Setup:
        """Agent ``agent``'s Setup: its variable, tables (the run's dtype), the digest of its
        part, its neighbours and tree links with where they listen."""
        plan = self.plan
        variable = self.layout.variable[agent]
        own = plan.tables_of[variable]
        domain = plan.problem.variables[variable].size
        # float64 for the digest, hashed chunk by chunk (a default-only table of 2^25 entries
        # held whole in float64 took the coordinator to 2x --max-memory: issue 33), and the
        # run's dtype for the wire, made and dropped here: never cached in the coordinator
        digest = combine_digests(
            variable, domain, [table_digest(t.scope, t.shape, t.dense_chunks()) for t in own]
        )
        tables = tuple(WireTable.from_array(t.scope, t.dense(plan.dtype)) for t in own)
        return Setup(
            variable,
            domain,
            tables,
            digest,
            self._relatives(sorted(self.layout.neighbours[agent])),
            self._relatives(plan.links(agent)),
            self.start(agent),
        )

    def _relatives(self, agents: Iterable[int]) -> tuple[Neighbour, ...]:
        var = self.layout.variable
        return tuple(
            Neighbour(n, var[n], self.hellos[n].endpoint, self.hellos[n].ipc) for n in agents
        )

    def start(self, agent: int) -> Start:
        """Agent ``agent``'s Start (carried by its Setup): the spec, the DFS candidates it roots,
        its place in the elimination tree (candidate number ``spec.trees``, where offered)."""
        elimination = self.plan.elimination
        return Start(
            self.spec,
            tuple(k for k, roots in enumerate(self._dfs_roots) if agent in roots),
            elimination.given[agent] if elimination is not None else None,
        )

    def go(self, time_left: float | None = None) -> Out:
        """Every candidate reported: keep a tree, decide what runs on it, tell every agent
        (``time_left``: of the run's timeout, which auto weighs MB-DPOP's work against)."""
        dfs_count = self.spec.trees
        kinds = [DFS_KIND] * dfs_count + [ELIMINATION_KIND] * (len(self.roots) - dfs_count)
        reports = [
            [(self.reports[(k, r)].width, self.reports[(k, r)].sizings) for r in roots]
            for k, roots in enumerate(self.roots)
        ]
        plan = self.plan
        self.choice, self.decision = choose(
            self.spec,
            reports,
            kinds,
            plan.tree_policy,
            plan.elimination_note,
            Limits.of(self.spec, plan.dtype.itemsize, plan.part_bytes),
            plan.name,
            [
                tuple(c for r in roots for c in self.reports[(k, r)].clusters)
                for k, roots in enumerate(self.roots)
            ],
            time_left,
        )
        if self.decision.clusters:  # MB-DPOP: the cut variables named for the agents
            var = plan.layout.variable
            named = tuple(
                msgspec.structs.replace(c, names=tuple(var[a] for a in c.cut))
                for c in self.decision.clusters
            )
            cuts = [
                {
                    "root": var[c.root],
                    "members": len(c.members),
                    "cut": list(c.names),
                    "contexts": as_count(entries(c.domains)),
                    "chunk": c.chunk,
                }
                for c in named
            ]
            self.decision = dataclasses.replace(self.decision, clusters=named)
            self.choice = dataclasses.replace(self.choice, clusters=named, cuts=cuts)
        log.info("coordinator: %s", self.decision.reason)
        go = Go(self.choice.tree, self.choice.z, self.decision.clusters)
        return [(a, go) for a in self.active]

    def end(self, reason: str) -> Out:
        """Stop one-shot agents, release serving ones (they wait for the next problem)."""
        return [
            (a, Done(reason[:200]) if hello.serving else Stop(reason[:200]))
            for a in self.active
            if (hello := self.hellos.get(a)) is not None
        ]

    # ---- where it stands ----------------------------------------------------------------------
    def late(self, phase: str) -> tuple[list[int], str]:
        """The agents a phase still waits for, and what they did not do."""
        if phase == "hello":
            return [a for a in self.active if a not in self.hellos], "did not say hello"
        if phase == "dfs" and (linking := self.linking()):
            return (
                linking,
                "did not get ready (links to neighbours not up, or their degrees not in)",
            )
        if phase == "dfs":
            return sorted({r for _, r in self.unfinished_trees()}), (
                "did not report its candidate trees (the DFS did not finish)"
            )
        return [a for a in self.active if a not in self.results], "sent no result"

    def unfinished_trees(self) -> list[tuple[int, int]]:
        """The candidates (number, root) whose report is still out."""
        return [
            (k, r)
            for k, roots in enumerate(self.roots)
            for r in roots
            if (k, r) not in self.reports
        ]

    def linking(self) -> list[int]:
        """The agents whose last heartbeat says they still wait for a neighbour's degree (their
        links not all up; an agent sends no ready, and beats only once it is quiet for long)."""
        return [
            a
            for a in self.active
            if (beat := self.heartbeats.get(a)) is not None and beat.phase == LINKING_PHASE
        ]

    def moved(self) -> tuple[int, ...]:
        """What the agents have done so far (reports, results, bytes sent): a phase in which it
        stays the same, with no agent computing, has stalled."""
        return (
            len(self.reports),
            len(self.results),
            sum(b.sent_bytes for b in self.heartbeats.values()),
        )

    def busy(self) -> bool:
        """Whether an agent without a result says it is computing."""
        return any(b.busy for a, b in self.heartbeats.items() if a not in self.results)

    def progress(self, phase: str, elapsed_s: float) -> Progress:
        phases: dict[str, int] = {}
        for a in self.active:
            beat = self.heartbeats.get(a)
            label = "result" if a in self.results else (beat.phase if beat else phase)
            phases[label] = phases.get(label, 0) + 1
        return Progress(
            phase=phase,
            elapsed_s=elapsed_s,
            agents=len(self.active),
            hellos=sum(a in self.hellos for a in self.active),
            ready=len(self.set_up) - len(self.linking()),
            trees=len(self.reports),
            trees_expected=sum(len(r) for r in self.roots),
            utils=sum(1 for b in self.heartbeats.values() if b.util_sent),
            utils_expected=len(self.active) - len(self.roots[0]) if self.roots else 0,
            results=len(self.results),
            sent_bytes=sum(b.sent_bytes for b in self.heartbeats.values()),
            phases=phases,
        )
