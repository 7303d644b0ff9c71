"""One agent's part of one problem, as state that takes messages and returns the messages to send.

A :class:`Session` is made from the coordinator's Setup (its variable, tables, neighbours) and
driven by :meth:`Session.on`: every call returns ``[(peer, message), ...]`` to send and never
touches a socket, so the same code runs over ZeroMQ, in process, and in tests. The only work that
runs beside it is a bucket's join+eliminate, on a worker thread (:attr:`Session.job`); the agent's
loop calls :meth:`Session.finish_job` when it is done.

Phases of a problem::

    setup  -> degree to every neighbour (it carries my neighbour list: the DFS looks two hops ahead)
    start  -> (it rides on the setup) once every neighbour's degree is in (ready; the start waits
              till then, and nothing goes to the coordinator): the DFS of every candidate tree (this
              agent starts those it roots); each back token carries the sender's separator and
              the sizing of its UTIL for every mini-bucket size the run may choose
              (:mod:`dcop.trees.sizing`); a finished root reports its tree
    go     -> the tree and z the coordinator chose; UTIL up once every child's has arrived,
              VALUE down once the parent's has; then the result to the coordinator.

PR and MAR (``spec.task``) run the same phases in log space: own tables become ``ln``
potentials, UTILs eliminate by log-sum-exp, and a root's bound is its component's ``ln Z``
(:mod:`dcop.sumproduct`). PR ends with the UTILs; MAR sends a ``down`` message (the parent's
bucket summed without the child's UTIL) instead of VALUE, and each agent reports its marginal.
Every message's clock advances mine (the simulated runtime is the critical path).

A GPU agent whose parent shares its CUDA IPC domain leaves its device UTIL tables on the GPU and
sends their IPC handles; that bookkeeping (offers, mapped buffers, which table goes which way,
counts by path) is the session's :class:`~dcop.agents.handover.Handover`.

Messages that come early (a child's token or UTIL before my own start or go) wait in a queue.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.agents.cluster import WINDOW, ClusterRole, cut_fields
from dcop.agents.handover import IPC_ALIGN, Handover
from dcop.agents.jobs import Job, Worker, runs_inline
from dcop.agents.metrics import Meter
from dcop.agents.parts import Assembly, HostEmpty, split, summed
from dcop.backends.base import (
    Compiles,
    IpcHandover,
    PinnedHost,
    Placed,
    TableBackend,
    capable,
)
from dcop.buckets import MiniBucketPlan, choose_value, eliminate_bucket, plan_bucket
from dcop.conditioned import CTX, Fold, check_names, chunk_util
from dcop.contraction.bucket import eliminate_sum_bucket
from dcop.errors import DcopError, ProtocolError
from dcop.model import CostTable
from dcop.placement import place
from dcop.protocol import (
    COORDINATOR_ID,
    Degree,
    Down,
    Go,
    IpcTable,
    Message,
    Offer,
    Result,
    RunSpec,
    Setup,
    Sizing,
    Start,
    Token,
    TreeReport,
    Util,
    Value,
    WireTable,
)
from dcop.protocol.constants import LINKING_PHASE
from dcop.protocol.digest import part_digest
from dcop.protocol.messages import ClusterCut, More, Replay, WideSep, sizing_at
from dcop.protocol.runspec import sizing_choices
from dcop.sizes import entries
from dcop.sumproduct import down_messages, marginal
from dcop.tables import Op, Table, domain_sizes
from dcop.trees.candidates import default_candidates
from dcop.trees.cutset import CHUNK_JOIN_ENTRIES, GPU_CHUNK_JOIN_ENTRIES, CutLimit
from dcop.trees.dfs import DfsState, DfsToken
from dcop.trees.given import GivenState
from dcop.trees.sizing import SizeSummary, UtilPlan, bucket_order, plan_util

Out = list[tuple[int, Message]]
#: Bytes the contraction engine's bucket (:func:`eliminate_sum_bucket`) takes per byte of the
#: bucket's largest table, input or joined (measured: 348 MiB for a 64 MiB one; the log-space
#: join+eliminate took 71 MiB for its 32 MiB output).
ENGINE_BYTES_PER_BYTE = 6


def resident_bytes() -> int:
    """This process's resident memory now (0 where /proc cannot tell)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


#: What a worker-thread job hands back: the step that applies its output on the agent's loop.
Finish = Callable[[], Out]


@dataclass(frozen=True)
class Part:
    """What an agent knows of a problem before the DFS: its variable and domain, its tables, and
    its neighbours (id -> variable)."""

    variable: str
    domain: int
    tables: tuple[Table, ...]
    neighbours: dict[int, str]
    #: each neighbour's CUDA IPC domain, where it has one (Setup's ``Neighbour.ipc``)
    ipc: dict[int, str] = field(default_factory=dict)
    #: agents linked for the coordinator's elimination tree that are not neighbours (id -> var)
    links: dict[int, str] = field(default_factory=dict)

    @property
    def peers(self) -> dict[int, str]:
        """Every agent this one is linked to: its neighbours and its extra tree links."""
        return {**self.neighbours, **self.links}


def adopt_setup(
    me: int,
    setup: Setup,
    backend: TableBackend,
    local: tuple[Sequence[CostTable], int] | None = None,
    expected: tuple[str, dict[int, str]] | None = None,
) -> Part:
    """Check a Setup and turn it into this agent's :class:`Part`.

    With ``local`` (the tables and domain an agent read from its own problem file) the file wins,
    but only if its digest equals the coordinator's (else :class:`~dcop.errors.ProblemMismatch`).
    ``expected`` (variable, neighbours) comes from a problem-specific peers.json.
    """
    from dcop.errors import ProblemMismatch

    neighbours = {n.id: n.variable for n in setup.neighbours}
    if me in neighbours:
        raise ProtocolError(f"agent {me} is named as its own neighbour")
    if expected is not None:
        variable, listed = expected
        if setup.variable != variable:
            raise DcopError(
                f"coordinator set up variable {setup.variable!r}, peers.json says {variable!r}"
            )
        if listed != neighbours:
            raise DcopError(
                f"the coordinator's neighbours {sorted(neighbours)} for {variable!r} are not "
                f"peers.json's {sorted(listed)}"
            )
    dtype = setup.tables[0].dtype if setup.tables else "<f8"  # the run's, chosen once
    if local is not None:
        costs, domain = local
        mine = part_digest(setup.variable, domain, [(t.scope, t.costs) for t in costs])
        if mine != setup.digest or domain != setup.domain:
            raise ProblemMismatch(
                f"problem mismatch: agent {me} ({setup.variable})'s problem file gives its part "
                f"digest {mine[:12]}, the coordinator's copy {setup.digest[:12]} (the agents "
                "and the coordinator must read the same problem)"
            )
        tables = tuple(backend.table(t.scope, t.costs, dtype) for t in costs)
    else:
        domain = setup.domain
        tables = tuple(
            backend.table(t.scope, a, a.dtype) for t in setup.tables for a in [t.to_array()]
        )
    names = set(neighbours.values())
    for t in tables:
        if setup.variable not in t.scope:
            raise DcopError(f"a table over {t.scope} does not hold {setup.variable!r}")
        strangers = [v for v in t.scope if v != setup.variable and v not in names]
        if strangers:
            raise DcopError(
                f"a table links {setup.variable!r} with {strangers[0]!r}, which is not a neighbour"
            )
    links = {n.id: n.variable for n in setup.links}
    if me in links:
        raise ProtocolError(f"agent {me} is named as its own tree link")
    ipc = {n.id: n.ipc for n in (*setup.neighbours, *setup.links) if n.ipc}
    return Part(setup.variable, domain, tables, neighbours, ipc, links)


class Session:
    """One problem seen from one agent (see the module docstring).

    ``util_hook`` runs at the start of the UTIL phase (fault injection in tests);
    ``prepare`` is called with each bucket's planned scopes and shapes once the tree is chosen,
    so a GPU backend compiles its kernels before the data arrive; ``ipc`` is this agent's CUDA
    IPC domain (empty: it hands nothing over on the device).
    """

    def __init__(
        self,
        me: int,
        part: Part,
        backend: TableBackend,
        meter: Meter,
        *,
        util_hook: Callable[[], None] | None = None,
        prepare: Callable[[list[tuple[str, ...]], list[tuple[int, ...]], str, int | None, Op], None]
        | None = None,
        ipc: str = "",
        wake: Callable[[], None] | None = None,
        worker: Worker,
    ) -> None:
        self.me = me
        #: called by a finished job (ends the agent loop's wait; see :meth:`Worker.submit`)
        self.wake = wake
        #: the agent's long-lived worker thread for its jobs
        self.worker = worker
        self.part = part
        self.var = part.variable
        self.backend = backend
        self.meter = meter
        self.util_hook = util_hook
        self.prepare = prepare
        self.ipc = ipc
        #: UTILs handed between GPU agents by CUDA IPC (the backend's hand-over: a GPU agent's
        #: placed backend; None without one: every table as bytes)
        self.handover = Handover(
            backend if isinstance(backend, IpcHandover) else None,
            ipc,
            part.ipc,
            part.neighbours,
            self.charge,
        )
        #: my own tables, on the device since Go when my whole bucket will run there
        self.staged: list[Table] | None = None
        self.ids = {v: i for i, v in part.neighbours.items()} | {self.var: me}
        self.clock = 0.0
        # degree exchange
        self.hoods: dict[int, tuple[int, ...]] = {}
        self.ready = False
        #: the coordinator's start (from my setup), kept until every neighbour's degree is in
        #: (the DFS looks two hops ahead)
        self.held_start: Start | None = None
        # the DFS of each candidate tree, and what the children's back tokens said
        self.spec: RunSpec | None = None
        self.zs: tuple[int | None, ...] = ()
        self.trees: list[DfsState | GivenState] = []
        self.child_sizings: list[dict[int, tuple[Sizing, ...]]] = []
        #: MB-DPOP: each child's open wide separators and closed clusters, per tree; the limit
        #: the cuts are planned for (None: the run does not cut) and my role in a cluster
        self.child_cuts: list[dict[int, tuple[tuple[WideSep, ...], tuple[ClusterCut, ...]]]] = []
        self.cut_limit: CutLimit | None = None
        self.role: ClusterRole | None = None
        #: MB-DPOP: children's UTILs arriving in parts (:mod:`dcop.agents.parts`), put together
        #: where my backend uploads them fastest
        self.host_empty: HostEmpty = (
            self.backend.host_empty if capable(self.backend, PinnedHost) else np.empty
        )
        self.arriving = Assembly(self.host_empty)
        self.early: list[tuple[int, Message]] = []
        # UTIL and VALUE on the chosen tree
        self.go: Go | None = None
        self.tree: DfsState | GivenState | None = None
        self.utils: dict[int, list[Table]] = {}
        self.scalars = 0.0
        self.bucket: list[Table] = []
        #: who runs my bucket: my backend, or a placed backend's host backend (_start_util)
        self.runner: TableBackend = backend
        self.plan: UtilPlan | None = None
        self.job: Job[Finish] | None = None
        self.util_sent = False
        self.bound: float | None = None
        self.assignment: dict[str, int] | None = None
        self.value: int | None = None
        # MAR: my own log tables, the parent's down message, my marginal once known
        self.own: list[Table] = []
        self.down: Table | None = None
        self.down_started = False
        self.marginal: tuple[float, ...] | None = None
        self.done = False

    # ---- what the agent's loop calls --------------------------------------------------------
    def begin(self) -> Out:
        """The first messages: my neighbour list to every neighbour (links are checked by it)."""
        hood = tuple(sorted(self.part.neighbours))
        out: Out = [(n, Degree(hood, self.clock)) for n in sorted(self.part.neighbours)]
        return out + self._progress()

    def on(self, sender: int, message: Message | Start) -> Out:
        """Take one message of this problem (a Start: the one my setup carried); return what
        to send."""
        clock = getattr(message, "clock", None)
        if clock is not None and not (
            isinstance(message, More) or (isinstance(message, Util) and message.chunk >= 0)
        ):
            # a message leaves its sender at the sender's clock: mine is at least that late
            # (MB-DPOP's chunks and credits count where a chunk uses them: a pipeline's next
            # chunk may arrive while I still compute this one)
            self.clock = max(self.clock, clock)
        match message:
            case Degree():
                if sender not in self.part.neighbours or sender in self.hoods:
                    raise ProtocolError(f"a degree message from {sender}")
                self.hoods[sender] = message.neighbours
                if self.me not in message.neighbours:
                    raise ProtocolError(f"agent {sender} does not list me as its neighbour")
            case Start():
                if sender != COORDINATOR_ID or self.spec is not None or self.held_start is not None:
                    raise ProtocolError("a second start")
                if not self.ready:
                    self.held_start = message
                    return self._progress()
                return self._start(message) + self._progress()
            case Token() | Util() | Offer() | More() | Replay() if self.spec is None or (
                isinstance(message, Util | Offer | More | Replay) and self.tree is None
            ):
                self.early.append((sender, message))  # ahead of my own start or go
            case Token():
                return self._on_token(sender, message) + self._progress()
            case Go():
                if sender != COORDINATOR_ID or self.go is not None:
                    raise ProtocolError("a second go")
                return self._go(message) + self._progress()
            case Offer():
                self._on_offer(sender, message)
            case Util() if message.chunk >= 0:
                self._on_chunk(sender, message)
            case Util():
                self._on_util(sender, message)
            case More():
                tree = self.tree
                if self.role is None or self.role.root or tree is None or sender != tree.parent:
                    raise ProtocolError(f"a more message from {sender}, not my cluster parent")
                self.role.grant(message.upto, message.clock)
            case Replay():
                return self._on_replay(sender, message)
            case Value():
                if (
                    self.tree is None
                    or self.summing
                    or sender != self.tree.parent
                    or self.assignment is not None
                ):
                    raise ProtocolError(f"VALUE from {sender}, which is not my waiting parent")
                self.assignment = dict(message.values)
                self.handover.parent_done()
            case Down():
                if (
                    self.tree is None
                    or self.task != "mar"
                    or sender != self.tree.parent
                    or self.down is not None
                ):
                    raise ProtocolError(f"a down message from {sender}, not my waiting parent")
                self.handover.parent_done()
                (table,) = message.tables
                array = table.to_array()
                self.down = self.backend.table(table.scope, array, array.dtype)
            case _:
                raise ProtocolError(f"no handler for {message.TYPE} in a problem")
        return self._progress()

    def finish_job(self) -> Out:
        """Apply the finished worker-thread job (a UTIL, or MAR's down messages); return what to
        send."""
        assert self.job is not None
        finish = self.job.result()
        self.job = None
        return finish()

    def _util_done(
        self,
        wire: tuple[WireTable, ...],
        shared: tuple[IpcTable, ...],
        exported: list[Any],
        scalar: float,
        spent: float,
    ) -> Out:
        """The UTIL computed: send it up (a root keeps the bound)."""
        assert self.tree is not None
        self.charge(spent)
        self.handover.exported = exported
        if self.tree.parent is None:
            if wire or shared:
                scope = (wire or shared)[0].scope
                raise DcopError(f"root {self.var!r} holds tables over {scope}")
            self.bound = scalar
            self.unmap_taken()  # before my VALUEs go out (a child may free its buffer then)
            return self._progress()
        self.handover.count(self.tree.parent, wire, shared)
        self.util_sent = True
        limit = self.cut_limit
        if limit is not None and not shared and sum(t.entries for t in wire) > limit.entries:
            scope, table = summed(wire, scalar)  # MB-DPOP: over the message limit, in parts
            return self._in_parts(scope, table, -1) + self._progress()
        if scalar != 0.0 or not (wire or shared):
            wire = (*wire, WireTable.from_array((), scalar))
        return [(self.tree.parent, Util(wire, self.clock, shared)), *self._progress()]

    def _in_parts(self, scope: tuple[str, ...], table: np.ndarray, chunk: int) -> Out:
        """MB-DPOP: a UTIL (a chunk's, or a whole one over the message limit) to my parent in
        as many messages as the limit needs."""
        assert self.tree is not None and self.tree.parent is not None
        assert self.cut_limit is not None
        whole, blocks = split(scope, table, self.cut_limit)
        return [
            (self.tree.parent, Util((b,), self.clock, (), chunk, k, len(blocks), whole))
            for k, b in enumerate(blocks)
        ]

    def charge(self, seconds: float) -> None:
        """Add compute time to the logical clock (the simulated runtime) and the metrics."""
        self.meter.computed(seconds)
        self.clock += seconds

    @property
    def task(self) -> str:
        """``min``, ``pr`` or ``mar`` (``min`` until the start names the run)."""
        return self.spec.task if self.spec is not None else "min"

    @property
    def summing(self) -> bool:
        """Whether this problem sums (PR/MAR) instead of minimising."""
        return self.task != "min"

    @property
    def awaiting_go(self) -> bool:
        """Whether my part of every candidate tree is done (my back tokens and reports sent)
        and only the coordinator's go is still to come: nothing of mine moves until then."""
        return self.spec is not None and self.go is None and all(t.done for t in self.trees)

    @property
    def phase(self) -> str:
        if not self.ready:
            return LINKING_PHASE
        if self.spec is None:
            return "waiting for start"
        if self.go is None:
            return "dfs"
        if not self.util_sent and self.bound is None:
            return "util"
        if not self.done:
            return "down" if self.task == "mar" else "value"
        return "finished"

    # ---- phases -----------------------------------------------------------------------------
    def _progress(self) -> Out:
        out: Out = []
        if not self.ready and len(self.hoods) == len(self.part.neighbours):
            self.ready = True
            if self.held_start is not None:
                start, self.held_start = self.held_start, None
                out += self._start(start)
        tree = self.tree
        if tree is not None and self.job is None and self.role is not None:
            out += self._cluster_progress()
        elif (
            tree is not None
            and self.job is None
            and not self.util_sent
            and self.bound is None
            and len(self.utils) == len(tree.children)
        ):
            self._start_util()
        if self.done or tree is None:
            return out
        if self.task == "min":
            known = (tree.parent is None and self.bound is not None) or self.assignment is not None
            if known and (self.role is None or self.role.last):
                out += self._value_phase()
        elif self.task == "pr":
            self.done = self.bound is not None or self.util_sent
        elif (
            not self.down_started
            and self.job is None
            and ((tree.parent is None and self.bound is not None) or self.down is not None)
            and (tree.parent is None or self.util_sent)
        ):
            self._start_down()
        return out

    def _start(self, start: Start) -> Out:
        spec = start.spec
        self.spec = spec
        self.zs = sizing_choices(spec)
        if spec.may_cut:
            limit = CutLimit.from_bytes(spec.max_message_bytes, spec.width, spec.max_memory_bytes)
            if spec.max_memory_bytes is None and self._runs_on(CHUNK_JOIN_ENTRIES) == "gpu":
                # a cluster I root runs its chunks on a device: larger chunks (see the constant)
                limit = dataclasses.replace(limit, join_entries=float(GPU_CHUNK_JOIN_ENTRIES))
            self.cut_limit = limit
        degrees = {n: len(h) for n, h in self.hoods.items()}
        hoods = {n: frozenset(h) for n, h in self.hoods.items()}
        dfs = default_candidates(spec.trees) if spec.trees else []  # 0: the given tree alone
        for k, candidate in enumerate(dfs):
            self.trees.append(
                DfsState(
                    self.me,
                    self.part.domain,
                    self.part.neighbours,
                    degrees=degrees,
                    neighbourhoods=hoods,
                    heuristic=candidate.heuristic,
                    seed=candidate.seed,
                    tree=k,
                )
            )
            self.child_sizings.append({})
            self.child_cuts.append({})
        out: Out = []
        for k in start.roots:
            out += self._wire(k, self.trees[k].start())
        if start.given is not None:
            # the coordinator's elimination tree: no walk, only the sizing pass up to its roots
            k = len(self.trees)
            self.trees.append(
                GivenState(
                    self.me,
                    self.part.domain,
                    self.part.neighbours,
                    start.given.path,
                    start.given.domains,
                    start.given.children,
                    k,
                )
            )
            self.child_sizings.append({})
            self.child_cuts.append({})
            out += self._wire(k, self.trees[k].start())
        early, self.early = self.early, []
        for sender, message in early:
            out += self.on(sender, message)
        return out

    def _on_token(self, sender: int, token: Token) -> Out:
        if not 0 <= token.tree < len(self.trees):
            raise ProtocolError(f"a token of tree {token.tree}, the run builds {len(self.trees)}")
        if token.kind == "back":
            if not 1 <= len(token.sizings) <= len(self.zs):
                raise ProtocolError(f"a back token with {len(token.sizings)} sizings")
            self.child_sizings[token.tree][sender] = token.sizings
            self.child_cuts[token.tree][sender] = (token.wide, token.clusters)
        # the subtree's largest and total UTIL are those of its DPOP sizing (they travel once)
        dpop = token.sizings[0] if token.sizings else None
        domains = token.domains
        if len(domains) == 1 and len(token.path) > 1:  # one size for every ancestor
            domains = domains * len(token.path)
        dfs = DfsToken(
            token.kind,
            path=token.path,
            domains=domains,
            open=token.open,
            links=token.links,
            separator=token.separator,
            width=token.width,
            largest=dpop.largest if dpop is not None else 0.0,
            total=dpop.total if dpop is not None else 0.0,
            tree=token.tree,
        )
        return self._wire(token.tree, self.trees[token.tree].receive(sender, dfs))

    def _wire(self, k: int, sends: list[tuple[int, DfsToken]]) -> Out:
        """The DFS's tokens as wire tokens (a back token gets my sizing); a finished root
        reports its tree."""
        state = self.trees[k]
        out: Out = []
        for peer, t in sends:
            sizings = self._sizings(k) if t.kind == "back" else ()
            wide, clusters = self._cuts(k) if t.kind == "back" else ((), ())
            out.append(
                (
                    peer,
                    Token(
                        tree=k,
                        kind=t.kind,
                        open=t.open,
                        clock=self.clock,
                        path=t.path,
                        domains=t.domains[:1] if len(set(t.domains)) == 1 else t.domains,
                        links=t.links,
                        separator=t.separator,
                        width=t.width,
                        sizings=sizings,
                        wide=wide,
                        clusters=clusters,
                    ),
                )
            )
        if state.done and state.parent is None and not sends:
            report = TreeReport(k, state.summary.width, self._sizings(k), self._cuts(k)[1])
            out.append((COORDINATOR_ID, report))
        return out

    def _cuts(self, k: int) -> tuple[tuple[WideSep, ...], tuple[ClusterCut, ...]]:
        """MB-DPOP: my back token's open wide separators and the clusters closed at or below me
        (none where the run does not cut)."""
        if self.cut_limit is None:
            return (), ()
        state = self.trees[k]
        below = [self.child_cuts[k].get(c, ((), ())) for c in state.children]
        return cut_fields(
            self.me,
            self.part.domain,
            state.parent,
            state.path,
            state.separator,
            self._domains(state),
            [w for wide, _ in below for w in wide],
            [c for _, clusters in below for c in clusters],
            self.cut_limit,
        )

    def _own_scopes(self, state: DfsState | GivenState) -> list[tuple[int, ...]]:
        """My tables whose other variables are my ancestors, as scopes of agent ids."""
        ancestors = set(state.path)
        return [
            tuple(self.ids[v] for v in t.scope)
            for t in self.part.tables
            if all(v == self.var or self.ids[v] in ancestors for v in t.scope)
        ]

    def _domains(self, state: DfsState | GivenState) -> dict[int, int]:
        return {**state.ancestor_domains(), self.me: self.part.domain}

    def _child_tables(self, k: int, j: int) -> list[tuple[tuple[int, ...], ...]]:
        """Each child's UTIL scopes for mini-bucket size index ``j`` (see :func:`sizing_at`)."""
        state = self.trees[k]
        return [sizing_at(self.child_sizings[k][c], j).tables for c in state.children]

    def _plan(self, k: int, j: int) -> UtilPlan:
        state = self.trees[k]
        return plan_util(
            self.me,
            self._own_scopes(state),
            self._child_tables(k, j),
            self._domains(state),
            self.zs[j],
        )

    def _sizings(self, k: int) -> tuple[Sizing, ...]:
        """My subtree's sizing for DPOP and for z = 1, 2, ... up to where it becomes DPOP's (my
        plan is DPOP's and every child's list has ended): a longer list would only repeat it."""
        state = self.trees[k]
        children = [self.child_sizings[k][c] for c in state.children]
        out: list[Sizing] = []
        for j in range(len(self.zs)):
            plan = self._plan(k, j)
            if j >= 1 and plan.groups <= 1 and all(len(c) <= j for c in children):
                break  # one mini-bucket here and below: z = j and more plan as DPOP does
            summary = (
                SizeSummary()
                if state.parent is None
                else SizeSummary(plan.entries, self.me, plan.entries)
            )
            for c in children:
                s = sizing_at(c, j)
                summary = summary.merge(SizeSummary(s.largest, s.agent, s.total))
            tables = plan.tables if state.parent is not None else ()
            out.append(Sizing(tables, summary.largest, summary.agent, summary.total))
        return tuple(out)

    def _go(self, go: Go) -> Out:
        if not 0 <= go.tree < len(self.trees) or not self.trees[go.tree].done:
            raise ProtocolError(f"go on tree {go.tree}, which this agent has not finished")
        if go.z not in self.zs:
            raise ProtocolError(f"go with z={go.z}, which the run did not size")
        self.go = go
        self.tree = self.trees[go.tree]
        j = self.zs.index(go.z)
        self.plan = self._plan(go.tree, j)
        self.role = ClusterRole.of(self.me, go.clusters, self.tree.children, self.host_empty)
        if self.role is not None:
            check_names([self.var, *self.part.neighbours.values()])
        if self.prepare is not None and self.role is None:
            self._prepare_kernels(go.tree, j)
        # a cluster's agent computes chunks on its backend's own terms: nothing staged or offered
        self.staged = self._stage_own() if self.role is None else None
        out: Out = self._offer() if self.role is None else []
        early, self.early = self.early, []
        for sender, message in early:
            out += self.on(sender, message)
        return out

    def _prepare_kernels(self, k: int, j: int) -> None:
        """Tell the backend the buckets' shapes (ids stand for the ancestors' names: only the
        shapes and axis orders matter to a kernel)."""
        assert self.prepare is not None
        state = self.trees[k]
        domains = self._domains(state)
        received = [s for tables in self._child_tables(k, j) for s in tables]
        bucket, _ = bucket_order(self.me, self._own_scopes(state), received)
        scopes = [tuple(str(a) for a in s) for s in bucket]
        shapes = [tuple(domains[a] for a in s) for s in bucket]
        if scopes:
            self.prepare(scopes, shapes, str(self.me), self.zs[j], self._op)

    def _stage_own(self) -> list[Table] | None:
        """A GPU agent whose every mini-bucket will run on the device uploads its own tables now,
        while its subtree computes, and each child's UTIL as it comes (:meth:`_on_util`): not in
        the bucket after the last UTIL (0.1-0.3 ms of a GPU bucket on the H200). The upload is
        charged when it happens. None when any mini-bucket stays on the CPU (a CPU agent's path)
        or for PR/MAR (their own tables are negated and reused downwards on the host)."""
        if not capable(self.backend, Placed) or self.summing or self.plan is None:
            return None
        min_entries = self.backend.min_entries
        joined = self.plan.joined  # my planned mini-buckets (self._plan(k, j), made at Go)
        if not joined or any(place(n, int(min_entries)) != "gpu" for n in joined):
            return None
        t0 = time.perf_counter()
        staged = [self.backend.stage(t) for t in self._own_tables()]
        self.charge(time.perf_counter() - t0)
        return staged

    def _own_tables(self) -> list[Table]:
        """My tables whose other variables are my ancestors (the rest are my pseudo-children's),
        as costs (-ln potentials for PR/MAR)."""
        assert self.tree is not None
        ancestors = {self.part.neighbours[i] for i in self.tree.path if i in self.part.neighbours}
        own = [t for t in self.part.tables if all(v == self.var or v in ancestors for v in t.scope)]
        if self.summing:
            own = [Table(t.scope, -t.data) for t in own]  # costs are -ln potentials
        return own

    @property
    def _op(self) -> Op:
        """How a bucket eliminates: min, or log-sum-exp for PR/MAR."""
        return "logsumexp" if self.summing else "min"

    def _on_util(self, sender: int, util: Util) -> None:
        assert self.tree is not None
        if sender not in self.tree.children or sender in self.utils:
            raise ProtocolError(f"UTIL from {sender}, which is not a waiting child")
        tables = [(t.scope, t.to_array()) for t in util.tables]
        if util.whole is not None:  # MB-DPOP: one part of a UTIL over the message limit
            (block,) = util.tables
            whole = self.arriving.take((sender, -1), util.whole, util.part, util.parts, block)
            if whole is None:
                return
            tables = [(util.whole.scope, whole)]
        # scalars (scope ()) stay host floats: they only add to the bound
        self.utils[sender] = [self.backend.table(s, a, a.dtype) for s, a in tables if s]
        if self.staged is not None and capable(self.backend, Placed):  # my bucket: on the device
            stage = self.backend.stage
            t0 = time.perf_counter()
            self.utils[sender] = [
                stage(t) if self.var in t.scope else t for t in self.utils[sender]
            ]
            self.charge(time.perf_counter() - t0)
        self.scalars += sum(float(a) for s, a in tables if not s)
        if util.shared:
            self.utils[sender] += self.handover.take(sender, util.shared)

    def _on_offer(self, sender: int, offer: Offer) -> None:
        """Map a child's offered UTIL buffer now, while its subtree still computes."""
        assert self.tree is not None
        if sender not in self.tree.children or sender in self.utils:
            raise ProtocolError(f"an offer from {sender}, which is not a waiting child")
        self.handover.map_offer(sender, offer.handle, offer.nbytes)

    def handover_figures(self) -> dict[str, float]:
        """My UTIL's tables and bytes by the path they took to my parent (:class:`Handover`)."""
        return self.handover.figures()

    def unmap_taken(self) -> None:
        """Unmap the children's buffers whose tables I took (:meth:`Handover.unmap_taken`)."""
        self.handover.unmap_taken()

    def release(self) -> None:
        """The problem ends: unmap children's buffers I still hold, drop the ones I exported."""
        self.handover.release()

    def _start_util(self) -> None:
        assert self.tree is not None and self.go is not None
        if self.util_hook is not None:
            self.util_hook()
        own = self.staged if self.staged is not None else self._own_tables()
        received = [t for c in self.tree.children for t in self.utils[c]]
        if self.role is not None:  # MB-DPOP's last pass: conditioned on the best context
            self.role.last = True
            # a cut variable's own tables lose it too: they go up with the children's
            at = self._at_context(own)
            received = [*self._at_context(received), *(t for t in at if self.var not in t.scope)]
            own = [t for t in at if self.var in t.scope]
        self.own = own
        self.bucket = [*own, *(t for t in received if self.var in t.scope)]
        # children's tables without my variable go up unchanged (MBE puts them in the bucket of
        # their deepest variable)
        passing = [t for t in received if self.var not in t.scope]
        z = self.go.z
        # A long join runs in the worker thread (NumPy and CuPy release the GIL) so that the loop
        # keeps answering and heartbeating: a long UTIL computation is not a dead agent. A short
        # one runs here, on hot caches (see dcop.agents.jobs).
        plans = self._bucket_plans(z)
        largest = max((p.joined_entries for p in plans), default=0)
        # Decided here, outside the timed computation: a placed backend hands a bucket that
        # stays on the CPU to its host backend, so that a GPU agent runs it exactly as a CPU
        # agent does (deciding inside cost GPU agents ~5% on all-CPU ADPOP buckets)
        self.runner = self.backend
        if capable(self.backend, Placed):
            self.runner = self.backend.runner_for(self.bucket, self.var, plans)
        self.job = self.worker.submit(
            lambda: self._util_compute(passing, z),
            self.wake,
            # the work is what the mini-buckets join: a bucket too large for DPOP may be a
            # few short joins in ADPOP
            inline=runs_inline(sum(p.joined_entries for p in plans), self._runs_on(largest)),
        )

    def _bucket_plans(self, z: int | None) -> list[MiniBucketPlan]:
        """My bucket's mini-buckets (one for DPOP), as the UTIL computation will run them."""
        if not self.bucket:
            return []
        sizes = domain_sizes(self.bucket)
        return plan_bucket([t.scope for t in self.bucket], self.var, sizes, z)

    def _runs_on(self, joined: int) -> str:
        """Where my backend runs a bucket of ``joined`` entries: "cpu" or "gpu"."""
        if capable(self.backend, Placed):  # a placed backend's threshold
            return place(joined, int(self.backend.min_entries))
        return "gpu" if self.backend.name == "cupy" else "cpu"

    def _util_compute(self, passing: list[Table], z: int | None) -> Finish:
        """Eliminate my variable from my bucket (on the worker thread, or on the loop's for a short
        bucket); the host tables, the scalar part and the time go to :meth:`_util_done` on the
        loop."""
        t0 = time.perf_counter()
        # my bucket on the host backend and nothing of mine on a device: the path of a CPU agent
        host = self.runner is not self.backend and all(
            isinstance(t.data, np.ndarray) for t in passing
        )
        waited = 0.0 if host else self._compile_wait_s()
        if self.summing and z is None and self._engine_fits():
            # exact PR/MAR: the contraction engine where it pays
            out = eliminate_sum_bucket(self.runner, self.bucket, self.var)
        elif self.summing and z is None:
            out = eliminate_bucket(self.runner, self.bucket, self.var, op="logsumexp")
        else:
            out = eliminate_bucket(self.runner, self.bucket, self.var, z=z, op=self._op)
        to_numpy = self.runner.to_numpy if host else self.backend.to_numpy
        wire, shared, exported = self.handover.pack(
            (*out.tables, *passing), self.tree.parent if self.tree else None, not host, to_numpy
        )
        scalar = self.scalars + out.scalar
        if self.summing and not self.bucket:
            scalar += math.log(self.part.domain)  # a variable in no table: Z counts its values
        if not host:
            self.backend.synchronize()
        # waiting for a kernel still compiling is set-up (as the compile is), not compute
        spent = time.perf_counter() - t0 - (0.0 if host else self._compile_wait_s() - waited)
        if self.runner is not self.backend and capable(self.backend, Placed):
            self.backend.record(self.var, out.plans, "cpu")
        return lambda: self._util_done(tuple(wire), tuple(shared), exported, scalar, spent)

    def _engine_fits(self) -> bool:
        """Whether the contraction engine's bucket fits the run's ``--max-memory`` beside what
        this process holds: it takes ENGINE_BYTES_PER_BYTE times the bucket's largest table
        (input or joined), where the fused log-space join+eliminate takes about twice its output
        (round 4, finding 4: PR/MAR agents peaked at 1.7-2.3x the limit)."""
        limit = self.spec.max_memory_bytes if self.spec is not None else None
        if limit is None or not self.bucket:
            return True
        itemsize = max(int(t.data.dtype.itemsize) for t in self.bucket)
        joined = math.prod(domain_sizes(self.bucket).values()) * itemsize
        largest = max(int(t.data.size) * int(t.data.dtype.itemsize) for t in self.bucket)
        return resident_bytes() + ENGINE_BYTES_PER_BYTE * max(joined, largest) <= limit

    def _compile_s(self) -> float:
        """Seconds my GPU backend has spent compiling kernels during the solve or waiting for
        them (MB-DPOP's chunks are not prepared at Go: their first compiles land here)."""
        if not capable(self.backend, Compiles):
            return 0.0
        times = self.backend.setup.as_dict()
        return float(times.get("compile_wait_s", 0.0)) + float(times.get("solve_compile_s", 0.0))

    def _compile_wait_s(self) -> float:
        """Seconds my GPU backend has waited for kernels compiling in the background."""
        if not capable(self.backend, Compiles):
            return 0.0
        return float(self.backend.setup.compile_wait_s)

    def _offer(self) -> Out:
        """A GPU agent whose parent shares its GPU offers it a buffer for the planned UTIL now,
        so that mapping it is off the path from my subtree's tables to my parent's bucket."""
        assert self.tree is not None and self.plan is not None
        if not self.plan.entries:
            return []
        itemsize = max((int(t.data.dtype.itemsize) for t in self.part.tables), default=8)
        nbytes = int(self.plan.entries) * itemsize + IPC_ALIGN * len(self.plan.tables)
        box = self.handover.offer(self.tree.parent, nbytes)
        if box is None:
            return []
        assert self.tree.parent is not None
        return [(self.tree.parent, Offer(box.handle, box.nbytes, self.clock))]

    # ---- MB-DPOP's conditioned phase (see dcop.agents.cluster) --------------------------------
    def _on_chunk(self, sender: int, util: Util) -> None:
        role = self.role
        if role is None:
            raise ProtocolError(f"a UTIL chunk from {sender} outside a cluster")
        (block,) = util.tables
        assert util.whole is not None  # the message's own check
        role.take(sender, util.chunk, util.part, util.parts, util.whole, block, util.clock)

    def _on_replay(self, sender: int, replay: Replay) -> Out:
        """The best context from my parent in the cluster: pass it down, then my last UTIL."""
        role = self.role
        assert self.tree is not None
        if role is None or role.root or sender != self.tree.parent or role.context is not None:
            raise ProtocolError(f"a replay from {sender}, not my waiting cluster parent")
        context = dict(replay.values)
        if sorted(context) != sorted(role.names) or any(
            not 0 <= context[v] < d for v, d in zip(role.names, role.cluster.domains, strict=True)
        ):
            raise ProtocolError("a replay that is not a context of my cluster's cut")
        role.context = context
        out: Out = [(c, Replay(replay.values, self.clock)) for c in sorted(role.members)]
        return out + self._progress()

    def _cluster_progress(self) -> Out:
        """What my cluster role can do next: a chunk, the last pass, or (the root) the best
        context and the bucket VALUE needs."""
        role, tree = self.role, self.tree
        assert role is not None and tree is not None
        plain = [c for c in tree.children if c not in role.members]
        if role.next < role.chunks:
            if all(c in self.utils for c in plain) and role.ready():
                self._start_chunk()
            return []
        everyone = len(self.utils) == len(tree.children)
        if not role.root:
            if role.context is not None and not role.last and everyone:
                self._start_util()
            return []
        out: Out = []
        # my separator's values are known: my VALUE came, or I am the tree's root with my bound
        known = self.assignment is not None or (tree.parent is None and self.bound is not None)
        if role.context is None and known:
            assert role.fold is not None
            best = role.fold.best_context(self.assignment or {})
            role.context = role.context_values(best)
            values = tuple(role.context.items())
            out += [(c, Replay(values, self.clock)) for c in sorted(role.members)]
        if role.context is not None and not role.last and everyone:
            role.last = True
            received = [t for c in tree.children for t in self.utils[c]]
            tables = self._at_context([*self._own_tables(), *received])
            self.bucket = [t for t in tables if self.var in t.scope]
        return out

    def _at_context(self, tables: Sequence[Table]) -> list[Table]:
        """Tables conditioned on my cluster's best context (their cut variables fixed); the
        parts left over no variable add to my scalars."""
        assert self.role is not None and self.role.context is not None
        context = self.role.context
        out: list[Table] = []
        for t in tables:
            at = {v: x for v, x in context.items() if v in t.scope}
            t = self.backend.condition(t, at) if at else t
            if t.scope:
                out.append(t)
            else:
                self.scalars += float(self.backend.to_numpy(t.data))
        return out

    def _start_chunk(self) -> None:
        role, tree = self.role, self.tree
        assert role is not None and tree is not None
        if self.util_hook is not None and role.next == 0:
            self.util_hook()
        i = role.next
        # the chunk starts once I am free, its inputs are in and my parent has room for it
        self.clock = max(self.clock, role.inputs_at(i))
        plain = [t for c in tree.children if c not in role.members for t in self.utils[c]]
        chunked = [self.backend.table(s, a, a.dtype) for s, a in role.chunk_rows(i)]
        tables = [*self._own_tables(), *plain, *chunked]
        self.job = self.worker.submit(lambda: self._chunk_compute(i, tables), self.wake)

    def _chunk_compute(self, i: int, tables: list[Table]) -> Finish:
        """One chunk of my cluster's contexts (on the worker thread): my UTIL at each, batched."""
        assert self.role is not None
        t0 = time.perf_counter()
        compiled = self._compile_s()
        util = chunk_util(self.backend, tables, self.var, self.role.names, self.role.contexts_of(i))
        scope = (CTX, *(v for v in util.scope if v != CTX))
        data = self.backend.to_numpy(self.backend.transpose(util, scope).data)
        if self.scalars:
            data = data + self.scalars
        self.backend.synchronize()
        # a kernel compiled for the chunks' shape (the first chunk's, the last's) is set-up, as
        # DPOP's kernels compiled at Go are: not compute
        spent = time.perf_counter() - t0 - (self._compile_s() - compiled)
        return lambda: self._chunk_done(i, scope, data, spent)

    def _chunk_done(self, i: int, scope: tuple[str, ...], data: np.ndarray, spent: float) -> Out:
        role, tree = self.role, self.tree
        assert role is not None and tree is not None
        self.charge(spent)
        role.drop(i)
        role.next = i + 1
        out: Out = [
            (c, More(i + 1 + WINDOW, self.clock))
            for c in sorted(role.members)
            if i + WINDOW < role.chunks
        ]
        if not role.root:
            return out + self._in_parts(scope, data, i) + self._progress()
        if role.fold is None:
            separator = set(tree.separator)
            first = [v for a, v in zip(role.cluster.cut, role.names, strict=True) if a in separator]
            sizes = dict(zip(scope[1:], data.shape[1:], strict=True))
            role.fold = Fold([*first, *scope[1:]], sizes, role.names, role.cluster.domains)
        role.fold.add(i * role.cluster.chunk, data)
        if role.next == role.chunks:
            out += self._fold_done()
        return out + self._progress()

    def _fold_done(self) -> Out:
        """The cluster root's UTIL, the best over every context: up as DPOP's, or my bound."""
        role, tree = self.role, self.tree
        assert role is not None and role.fold is not None and tree is not None
        scope, table = role.fold.table()
        if tree.parent is None:
            self.bound = float(table)
            return []
        self.util_sent = True
        assert self.cut_limit is not None
        if entries(table.shape) > self.cut_limit.entries:
            return self._in_parts(scope, table, -1)
        util = Util((WireTable.from_array(scope, table),), self.clock, ())
        return [(tree.parent, util)]

    # ---- MAR's downward pass --------------------------------------------------------------
    def _child_utils(self) -> dict[str, Table]:
        """Each child's UTIL as one table (DPOP sends one), keyed by the child's id."""
        assert self.tree is not None
        out: dict[str, Table] = {}
        for child in self.tree.children:
            tables = self.utils[child]
            if not tables:
                raise DcopError(f"agent {child} sent a UTIL without my variable")
            out[str(child)] = tables[0] if len(tables) == 1 else self.backend.join(tables)
        return out

    def _start_down(self) -> None:
        self.down_started = True
        self.job = self.worker.submit(self._down_compute, self.wake)

    def _down_compute(self) -> Finish:
        """MAR (worker thread): the down message to every child and my marginal."""
        t0 = time.perf_counter()
        child_utils = self._child_utils()
        sent = down_messages(self.backend, self.own, self.down, child_utils)
        probs, ln_norm = marginal(
            self.backend, self.own, self.down, child_utils, self.var, self.part.domain, sent
        )
        wire = {
            int(c): WireTable.from_array(t.scope, self.backend.to_numpy(t.data))
            for c, t in sent.items()
        }
        self.backend.synchronize()
        spent = time.perf_counter() - t0
        known = math.isfinite(ln_norm)  # Z = 0 (an inconsistent component): no marginal
        return lambda: self._down_done(wire, tuple(map(float, probs)) if known else None, spent)

    def _down_done(
        self, wire: dict[int, WireTable], probs: tuple[float, ...] | None, spent: float
    ) -> Out:
        assert self.tree is not None
        self.charge(spent)
        self.marginal = probs
        self.done = True
        return [(child, Down((wire[child],), self.clock)) for child in self.tree.children]

    def _value_phase(self) -> Out:
        assert self.tree is not None
        t0 = time.perf_counter()
        known = dict(self.assignment or {})
        context = self.role.context if self.role is not None else None
        known |= context or {}
        if context is not None and self.var in context:
            self.value = context[self.var]  # a cut variable: its value is the best context's
        else:
            self.value = choose_value(self.runner, self.bucket, self.var, known, "min")
        known[self.var] = self.value
        self.charge(time.perf_counter() - t0)
        out: Out = []
        for child in self.tree.children:
            needs = sorted({v for t in self.utils[child] for v in t.scope})
            missing = [v for v in needs if v not in known]
            if missing:
                raise DcopError(f"no value for {missing[0]!r} to send to agent {child}")
            out.append((child, Value(tuple((v, known[v]) for v in needs), self.clock)))
        self.done = True
        return out

    def result(self, metrics: Any) -> Result:
        """My result for the coordinator (a root adds its component's bound; MAR my marginal)."""
        assert self.tree is not None and (self.value is not None or self.summing)
        bound = self.bound if self.tree.parent is None else None
        if bound is not None and math.isnan(bound):
            # min: a NaN comes from inf - inf (no finite cost); a sum never makes one honestly
            if self.summing:
                raise DcopError(f"the log-sum-exp UTIL of {self.var!r} produced NaN")
            bound = math.inf
        return Result(
            self.value,
            bound,
            self.tree.parent,
            tuple(self.tree.children),
            tuple(self.tree.pseudo_parents),
            tuple(self.tree.separator),
            metrics,
            self.marginal,
        )
