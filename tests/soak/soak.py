"""Soak test: many consecutive distributed DPOP/ADPOP runs with faults and attacks mixed in.

    python tests/soak/soak.py [--runs 200] [--kill-share 0.2] [--sigterm-share 0.1]
        [--forge-share 0.1] [--self-connect-share 0.1] [--secure-share 0.5] [--seed 0]
        [--timeout 60] [--max-n 20] [--modes MODE[:VARIANT][:secure],...]

Each run generates a random instance (random / scale-free / grid, n 4..``--max-n``, d 2..8, the
domain lowered when the DFS pseudo-tree's UTIL tables would be too large for this machine) and
solves it with one agent process per variable (ZeroMQ on loopback) as DPOP or ADPOP(z). Run 0 is
a plain warm-up; every later run draws one fault mode by its share (the rest run plain):

* ``kill`` (``run_local``): one agent is SIGKILLed right when every agent has said hello,
  before the starts (``ready``), or 0-30 ms into the solve (``solve``). The run must end with a
  RunError that names the killed agent, within the run's timeout (the delay from the kill to the
  error is measured); a run the kill reached too late must still be right.
* ``sigterm``: the instance is written to a file and solved by a real ``python -m dcop run FILE
  --json OUT`` process with a TMPDIR of its own; SIGTERM reaches it once all its agent processes
  exist (``hello``), once every agent has said hello (``ready``, seen in the rewritten peers.json) or
  0-150 ms into the solve (``solve``). It must exit within ``--sigterm-limit`` s (the delay is
  measured) with exit code 130 and a result document of status ``interrupted`` naming SIGTERM -
  or, when it had finished first, a right answer - and leave no agent or template process (its
  descendants, tracked while it runs, and any process naming its TMPDIR) and an empty TMPDIR.
* ``forge`` (``run_local`` with a work folder for the agents' logs): a stranger - ZeroMQ
  DEALERs of this process - connects to every agent's endpoint (from the run's peers.json) and
  sends a zeroed Setup, a Go and a Stop as the coordinator (routing identity -1), plus garbage,
  once every agent has said hello (``ready``: it then waits for each agent to log the refusal) or 0-50
  ms into the solve (``solve``). With ``secure`` (``--secure-share`` of these runs, CurveZMQ) it
  speaks with a key of its own, which CURVE refuses, and with a neighbour's valid key, whose
  claim to be the coordinator is refused. The run must end ok with the right answer, every agent
  exiting 0; at ``ready`` every agent's log must show the refusal.
* ``self-connect``: an agent is asked to connect to its own endpoint. ``setup``: a stranger says
  hello to the coordinator as an agent that starts 3 s late and reports a neighbour's endpoint
  as its own, so that the coordinator's Setup gives that neighbour its own endpoint as a
  neighbour's. Open mode: the neighbour must refuse, ending the run with an error that names it
  and says "own endpoint" (if the late agent spoke first, the stranger is refused instead and the
  run must be right). Secure: CURVE refuses the stranger (the coordinator logs it) and the run
  must be right. ``peers``: the agent's peers.json gives it the coordinator's endpoint as its own
  (``localhost`` for ``127.0.0.1``): it must refuse before its hello, ending the run with an error
  naming it and saying "own endpoint". The kernel's TCP self-connection (a socket reconnecting to
  a port of the ephemeral range where nobody listens is given that very port) cannot be made to
  happen in a run: the one way to force it, ZeroMQ's source-address syntax, is no valid
  peers.json endpoint; ``tests/protocol/test_zmqlink.py`` covers the transport's guard.

After every run nothing may be left behind: no process started for the run (looked up by its
work or temporary folder, since agents run in their own sessions and would not show up as
children), no child process, no file descriptor or socket of this process beyond the warm-up
baseline, no thread, no file in the (private) temporary folder. A completed DPOP run's cost must
equal the centralized BE optimum (exactly: integer costs) and its bound its cost; a completed
ADPOP run's bounds must hold the BE optimum. A watchdog marks a run that outlives its timeout by
``--grace`` seconds as a hang and kills it.

``--modes`` fixes the fault of runs 1, 2, ... in turn instead of drawing it (e.g.
``sigterm:ready,forge:solve:secure,self-connect:peers``; an omitted variant is drawn, secure
mode only where an item says so). Writes
``--out``.json (every run) and ``--out``.md (the summary). Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import zmq

# A private temporary folder for this process and every agent it starts: other jobs on the
# machine may write to /tmp at the same time, so only an empty private folder proves no leak.
# Work folders (kept logs, problem files, result documents) live beside it, not in it.
_PRIVATE_TMP = tempfile.mkdtemp(prefix="dcop-soak-")
_WORK = Path(tempfile.mkdtemp(prefix="dcop-soak-work-"))
os.environ["TMPDIR"] = _PRIVATE_TMP
tempfile.tempdir = None  # re-read TMPDIR on next use

import dcop  # noqa: E402
from dcop.coordinator import AgentProcesses, RunResult, run_local  # noqa: E402
from dcop.errors import DcopError  # noqa: E402
from dcop.generators import generate  # noqa: E402
from dcop.inference import solve_be  # noqa: E402
from dcop.io import read_problem, write_problem  # noqa: E402
from dcop.model import Problem  # noqa: E402
from dcop.orders.greedy import induced_width  # noqa: E402
from dcop.protocol import (  # noqa: E402
    COORDINATOR_ID,
    Go,
    Hello,
    RunSpec,
    Setup,
    Stop,
    WireTable,
    encode,
)
from dcop.protocol.curve import load_keypair  # noqa: E402
from dcop.protocol.digest import part_digest  # noqa: E402
from dcop.protocol.peers import AgentEntry, Peers, load_peers  # noqa: E402
from dcop.protocol.zmqlink import claim  # noqa: E402
from dcop.trees.pseudotree import dfs_pseudo_tree  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
#: The report's default folder: a test's output is not committed (tests/soak/last_run/ keeps the
#: report of the last full soak by hand).
OUT = _WORK.parent / "dcop-soak"  # beside the work folders, never in the private TMPDIR


def package_place(package: Path) -> str:
    """Which dcop ran, without naming a folder of this machine: the checkout beside this script,
    or another one (a link tree on PYTHONPATH)."""
    here = REPO / "dcop"
    return "this checkout's dcop/" if package == here.resolve() else "another checkout's dcop/"


TOPOLOGIES = ("random", "scalefree", "grid")
GRID_SIZES = (4, 9, 16)
#: Largest UTIL/BE table (entries) a run may need: keeps 20 agents x 2 cores comfortable.
MAX_TABLE_ENTRIES = 1 << 20
#: Fault modes (in the order their shares are laid out) and their variants.
VARIANTS: dict[str, tuple[str, ...]] = {
    "kill": ("ready", "solve"),
    "sigterm": ("hello", "ready", "solve"),
    "forge": ("ready", "solve"),
    "self-connect": ("setup", "peers"),
}
#: Upper end of the random delay of a ``solve`` variant (seconds after every agent is ready).
SOLVE_DELAY_MAX_S = {"kill": 0.03, "sigterm": 0.15, "forge": 0.05}
#: Seconds the late agent of a ``self-connect:setup`` run waits before it starts.
LATE_AGENT_S = 3.0
#: What an agent's log says when it refused a forged coordinator frame, or a CURVE client.
CLAIM_REFUSED = "claims to be the coordinator"
CURVE_REFUSED = "refused a CURVE client"
OWN_ENDPOINT = "own endpoint"


# ---- instances ------------------------------------------------------------------------------
def pseudo_tree_width(problem: Problem) -> int:
    """Induced width along the DFS pseudo-tree (what DPOP's UTIL tables depend on)."""
    adjacency = problem.neighbours()
    tree = dfs_pseudo_tree(adjacency)
    return induced_width(adjacency, tree.elimination_order())


def make_instance(
    rng: np.random.Generator, index: int, max_n: int = 20
) -> tuple[Problem, dict[str, Any]]:
    """A random instance; ``d`` is lowered until d^(w+1) fits ``MAX_TABLE_ENTRIES``."""
    topology = str(rng.choice(TOPOLOGIES))
    grid_sizes = [g for g in GRID_SIZES if g <= max_n] or [GRID_SIZES[0]]
    n = int(rng.choice(grid_sizes)) if topology == "grid" else int(rng.integers(4, max_n + 1))
    d = int(rng.integers(2, 9))
    p1 = float(rng.choice([0.2, 0.3, 0.4]))
    if topology == "random":
        # floor(p1 n (n-1) / 2) edges must connect n nodes: p1 >= 2 / n.
        p1 = max(p1, math.ceil(200 / n) / 100)
    p2 = float(rng.choice([0.0, 0.1, 0.2, 0.3]))
    seed = 1000 + index
    while True:
        problem = generate(topology, n, d, p1=p1, p2=p2, seed=seed)
        width = pseudo_tree_width(problem)
        if d**width * d <= MAX_TABLE_ENTRIES or d == 2:
            break
        d -= 1
    params = {"topology": topology, "n": n, "d": d, "p1": p1, "p2": p2, "seed": seed}
    params["pseudo_tree_width"] = width
    return problem, params


# ---- what a run leaves behind -------------------------------------------------------------------
def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def socket_count() -> int:
    return len(psutil.Process().net_connections(kind="all"))


def tmp_listing() -> list[str]:
    return sorted(os.listdir(_PRIVATE_TMP))


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text`` (zombies excluded)."""
    out = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(text in part for part in proc.info["cmdline"] or ()):
                out.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def live_children() -> list[int]:
    try:
        kids = psutil.Process().children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [k.pid for k in kids if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]


def alive(proc: psutil.Process) -> bool:
    """Whether ``proc`` (the very process, not a later one with its pid) still runs."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def title(proc: psutil.Process) -> str:
    """A process's command line as ``ps`` shows it (forked agents set theirs)."""
    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def listening_port(pid: int) -> int | None:
    """The TCP port process ``pid`` listens on (an agent has one ROUTER), or None."""
    try:
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN:
                return int(conn.laddr.port)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    return None


class LogLines(logging.Handler):
    """Keeps what this process's transports log (the coordinator's refusals) during one run."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


# ---- the plan of one run ----------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """The fault of one run: its mode, the variant, the agent it aims at, the delay of a
    ``solve`` variant, and secure mode (for forge and self-connect runs)."""

    fault: str | None
    variant: str | None
    victim: int
    delay_s: float
    secure: bool


def parse_modes(text: str) -> list[tuple[str, str | None, bool]]:
    """``--modes``: ``MODE[:VARIANT][:secure]`` items, comma-separated (``plain`` for none); a
    variant left out is drawn, secure mode only where the item says so."""
    out: list[tuple[str, str | None, bool]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        mode, *rest = item.split(":")
        if mode != "plain" and mode not in VARIANTS:
            raise SystemExit(f"--modes: unknown mode {mode!r} (plain, {', '.join(VARIANTS)})")
        secure = bool(rest) and rest[-1] == "secure"
        rest = rest[:-1] if secure else rest
        variant = rest[0] if rest else None
        if variant is not None and variant not in VARIANTS.get(mode, ()):
            raise SystemExit(f"--modes: {mode} has no variant {variant!r}")
        out.append((mode, variant, secure))
    return out


def draw_plan(
    index: int, rng: np.random.Generator, args: argparse.Namespace, problem: Problem
) -> Plan:
    """The fault of run ``index`` (run 0, the warm-up, has none). Every draw is made whatever
    the mode, so that a run's instance and plan do not depend on the earlier runs' modes."""
    shares = [args.kill_share, args.sigterm_share, args.forge_share, args.self_connect_share]
    u, pick, victim = float(rng.random()), float(rng.random()), int(rng.integers(0, problem.n))
    unit, secure_draw = float(rng.random()), float(rng.random()) < args.secure_share
    fault: str | None = None
    variant: str | None = None
    secure: bool | None = None
    if index > 0 and args.modes:
        mode, variant, secure = args.modes[(index - 1) % len(args.modes)]
        fault = None if mode == "plain" else mode
    elif index > 0:
        edges = np.cumsum(shares)
        k = int(np.searchsorted(edges, u, side="right"))
        fault = list(VARIANTS)[k] if k < len(VARIANTS) else None
    if fault is None:
        return Plan(None, None, victim, 0.0, False)
    if variant is None:
        variant = VARIANTS[fault][int(pick * len(VARIANTS[fault]))]
    delay_s = unit * SOLVE_DELAY_MAX_S.get(fault, 0.0) if variant == "solve" else 0.0
    return Plan(fault, variant, victim, delay_s, secure_draw if secure is None else secure)


# ---- run_local hooks --------------------------------------------------------------------------
class RunHooks:
    """run_local's hooks for a plain run: remember the agent processes and the run's folder."""

    def __init__(self) -> None:
        self.procs: AgentProcesses | None = None
        self.folder: Path | None = None  # holds peers.json (and, with a workdir, the logs)
        self.failure: str | None = None  # the soak's own attack could not be made

    def agent_argv(self, agent_id: int, argv: list[str]) -> list[str] | None:
        self.folder = Path(argv[argv.index("--peers") + 1]).parent
        return argv

    def before_start(self, procs: AgentProcesses) -> None:
        self.procs = procs

    def kill_everything(self) -> None:
        """For the watchdog: end every agent of a hung run."""
        if self.procs is not None:
            for proc in self.procs.procs.values():
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGKILL)

    def finish(self) -> None:
        """After the run: end the hooks' own threads and sockets."""


class Killer(RunHooks):
    """Kills one agent, now (``ready``) or after a delay (``solve``)."""

    def __init__(self, plan: Plan) -> None:
        super().__init__()
        self.plan = plan
        self.killed_at: float | None = None
        self.timer: threading.Timer | None = None

    def before_start(self, procs: AgentProcesses) -> None:
        super().before_start(procs)
        if self.plan.variant == "ready":
            self.kill()
        else:
            self.timer = threading.Timer(self.plan.delay_s, self.kill)
            self.timer.daemon = True
            self.timer.start()

    def kill(self) -> None:
        assert self.procs is not None
        proc = self.procs.procs[self.plan.victim]
        if proc.poll() is None:
            self.killed_at = time.monotonic()
            os.kill(proc.pid, signal.SIGKILL)

    def finish(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()


def forged_frames(problem: Problem, agent: AgentEntry) -> list[list[Any]]:
    """What a coordinator could say to break a run: a zeroed Setup (with a digest that fits
    it), a Go and a Stop, each well-formed and addressed to ``agent``."""
    variable = str(agent.variable)
    zeroed = tuple(
        WireTable.from_array(t.scope, np.zeros(t.costs.shape)) for t in problem.tables_of(variable)
    )
    size = problem.variables[variable].size
    digest = part_digest(variable, size, [(t.scope, t.to_array()) for t in zeroed])
    return [
        encode(COORDINATOR_ID, agent.id, Setup(variable, size, zeroed, digest)),
        encode(COORDINATOR_ID, agent.id, Go(0, None)),
        encode(COORDINATOR_ID, agent.id, Stop("forged by the soak")),
    ]


def dealer(
    ctx: zmq.Context[Any],
    endpoint: str,
    ident: bytes | None,
    keys: tuple[bytes, bytes] | None = None,
    server_key: str | None = None,
) -> zmq.Socket[Any]:
    """A stranger's DEALER to ``endpoint`` (a CURVE client with ``keys`` and ``server_key``; in
    open mode ``ident`` is also its PLAIN user name, as an agent's)."""
    sock = ctx.socket(zmq.DEALER)
    if ident is not None:
        claim(sock, ident, plain=keys is None)
    sock.setsockopt(zmq.LINGER, 1000)
    if keys is not None and server_key is not None:
        sock.curve_publickey, sock.curve_secretkey = keys
        sock.curve_serverkey = server_key.encode()
    sock.connect(endpoint)
    return sock


def send(sock: zmq.Socket[Any], frames: list[bytes]) -> None:
    """Send without blocking: a client refused at the handshake has no link, and a blocking
    send would wait for one for ever."""
    with contextlib.suppress(zmq.Again):
        sock.send_multipart(frames, zmq.NOBLOCK)


class Forger(RunHooks):
    """Sends every agent forged coordinator frames and garbage, once all have said hello (and waits
    for their refusals in the logs) or a few ms into the solve (from a thread)."""

    #: Seconds a ``ready`` forger waits for every agent to log its refusal.
    WAIT_S = 15.0

    def __init__(self, plan: Plan, problem: Problem) -> None:
        super().__init__()
        self.plan = plan
        self.problem = problem
        self.expected: dict[int, list[str]] = {}  # agent -> what its log must say
        self.timer: threading.Timer | None = None

    def before_start(self, procs: AgentProcesses) -> None:
        super().before_start(procs)
        if self.plan.variant == "ready":
            self.forge(wait=True)
        else:
            self.timer = threading.Timer(self.plan.delay_s, self.forge)
            self.timer.daemon = True
            self.timer.start()

    def forge(self, wait: bool = False) -> None:
        assert self.folder is not None
        ctx: zmq.Context[Any] = zmq.Context()
        try:
            peers = load_peers(self.folder / "peers.json")
            for agent in peers.agents:
                self.attack(ctx, peers, agent)
            if wait:
                end = time.monotonic() + self.WAIT_S
                while time.monotonic() < end and self.unrefused():
                    time.sleep(0.05)
        except Exception as exc:  # the attack itself failed: a failure of the run, not a crash
            self.failure = f"forging failed: {type(exc).__name__}: {exc}"
        finally:
            ctx.destroy(linger=1000)

    def attack(self, ctx: zmq.Context[Any], peers: Peers, agent: AgentEntry) -> None:
        frames = forged_frames(self.problem, agent)
        claimers: list[zmq.Socket[Any]] = []
        if not self.plan.secure:
            claimers.append(dealer(ctx, agent.endpoint, b"-1"))
            self.expected[agent.id] = [CLAIM_REFUSED]
        else:
            # a key of its own (CURVE refuses it), and a neighbour's valid key (its claim to be
            # the coordinator is refused)
            server = str(agent.public_key)
            claimers.append(dealer(ctx, agent.endpoint, b"-1", zmq.curve_keypair(), server))
            self.expected[agent.id] = [CURVE_REFUSED]
            if agent.neighbours:
                stolen = load_keypair(self.folder_keys, agent.neighbours[0])
                claimers.append(dealer(ctx, agent.endpoint, b"-1", stolen, server))
                self.expected[agent.id].append(CLAIM_REFUSED)
        for sock in claimers:
            for message in frames:
                send(sock, message)
        send(dealer(ctx, agent.endpoint, None), [b"\x00garbage\xff"])

    @property
    def folder_keys(self) -> Path:
        assert self.folder is not None
        return self.folder / "keys"

    def log_of(self, agent_id: int) -> str:
        assert self.folder is not None
        with contextlib.suppress(OSError):
            return (self.folder / f"agent-{agent_id}.log").read_text(errors="replace")
        return ""

    def unrefused(self) -> list[int]:
        """Agents whose log does not (yet) show every refusal expected of it."""
        return [
            a for a, texts in self.expected.items() if not all(t in self.log_of(a) for t in texts)
        ]

    def finish(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer.join()


class SelfConnect(RunHooks):
    """Asks agent ``victim`` to connect to its own endpoint (see the module docstring):
    ``setup`` through a stranger's hello for a late neighbour, ``peers`` through its peers.json."""

    def __init__(self, plan: Plan, problem: Problem) -> None:
        super().__init__()
        self.plan = plan
        self.problem = problem
        names = list(problem.variables)
        adjacency = problem.neighbours()
        # setup: the late agent is the planned one (or the next with a neighbour); the victim,
        # one of its neighbours. peers: the victim is the planned one.
        order = [(plan.victim + k) % problem.n for k in range(problem.n)]
        self.late = next((a for a in order if adjacency[names[a]]), plan.victim)
        around = sorted(names.index(v) for v in adjacency[names[self.late]])
        self.victim = around[plan.victim % len(around)] if around else plan.victim
        if plan.variant == "peers":
            self.victim = plan.victim
        self.variable = names[self.victim]
        self.thread: threading.Thread | None = None
        self.done = threading.Event()
        self.hello_at: float | None = None

    def agent_argv(self, agent_id: int, argv: list[str]) -> list[str] | None:
        argv = super().agent_argv(agent_id, argv) or argv
        if self.plan.variant == "peers" and agent_id == self.victim:
            return self.own_endpoint_peers(argv)
        if self.plan.variant == "setup":
            if self.thread is None:
                self.thread = threading.Thread(target=self.hijack, daemon=True)
                self.thread.start()
            if agent_id == self.late:
                return ["sh", "-c", f'sleep {LATE_AGENT_S:g}; exec "$@"', "late-agent", *argv]
        return argv

    def own_endpoint_peers(self, argv: list[str]) -> list[str]:
        """The victim's argv with a peers.json that gives it the coordinator's endpoint (by the
        name localhost) as its own."""
        assert self.folder is not None
        doc = json.loads((self.folder / "peers.json").read_text())
        port = doc["coordinator"].rsplit(":", 1)[1]
        for entry in doc["agents"]:
            if entry["id"] == self.victim:
                entry["endpoint"] = f"tcp://localhost:{port}"
        own = self.folder / f"peers-agent-{self.victim}.json"
        own.write_text(json.dumps(doc, indent=1))
        k = argv.index("--peers") + 1
        return [*argv[:k], str(own), *argv[k + 1 :]]

    def victim_port(self, limit_s: float) -> int | None:
        """The port the victim agent listens on, once it does (found by its process title)."""
        assert self.folder is not None
        wanted = ["dcop-agent", "--id", str(self.victim)]
        end = time.monotonic() + limit_s
        while time.monotonic() < end and not self.done.is_set():
            for proc in psutil.process_iter(["pid", "cmdline"]):
                line = proc.info["cmdline"] or []
                if line[:3] == wanted and any(str(self.folder) in part for part in line):
                    port = listening_port(proc.info["pid"])
                    if port is not None:
                        return port
            time.sleep(0.02)
        return None

    def hijack(self) -> None:
        """Say hello to the coordinator as the late agent, at the victim's endpoint."""
        ctx: zmq.Context[Any] = zmq.Context()
        try:
            assert self.folder is not None
            port = self.victim_port(LATE_AGENT_S * 5)
            if port is None:
                if not self.done.is_set():
                    self.failure = f"agent {self.victim} was not found listening"
                return
            peers = load_peers(self.folder / "peers.json")
            keys = zmq.curve_keypair() if self.plan.secure else None
            sock = dealer(
                ctx, peers.coordinator, str(self.late).encode(), keys, peers.coordinator_public_key
            )
            late_variable = str(peers.agent(self.late).variable)
            hello = Hello(
                late_variable, os.getpid(), socket.gethostname(), f"tcp://127.0.0.1:{port}"
            )
            send(sock, encode(self.late, COORDINATOR_ID, hello))
            self.hello_at = time.monotonic()
            self.done.wait()  # hold the connection: for the coordinator it is the late agent's
        except Exception as exc:
            self.failure = f"the stranger's hello failed: {type(exc).__name__}: {exc}"
        finally:
            ctx.destroy(linger=0)

    def finish(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()


# ---- one run ----------------------------------------------------------------------------------
def names_agent(message: str, agent_id: int, variable: str) -> bool:
    return bool(
        re.search(rf"\bagent {agent_id}\b", message)
        or re.search(rf"(?<![\w.]){re.escape(variable)}(?![\w.])", message)
    )


def one_run(
    index: int, rng: np.random.Generator, args: argparse.Namespace, baseline: dict[str, Any]
) -> dict[str, Any]:
    problem, params = make_instance(rng, index, args.max_n)
    algo = "dpop" if rng.random() < 0.5 else "adpop"
    z = int(rng.integers(1, 5)) if algo == "adpop" else None
    plan = draw_plan(index, rng, args, problem)
    record: dict[str, Any] = {"run": index, **params, "algo": algo, "z": z}
    record.update(fault=plan.fault, variant=plan.variant, killed=False)
    record["secure"] = plan.secure and plan.fault in ("forge", "self-connect")
    # "kill" keeps the old records' field: the kill's moment, or None
    record["kill"] = plan.variant if plan.fault == "kill" else None
    if plan.fault == "kill":
        record.update(victim=plan.victim, victim_variable=list(problem.variables)[plan.victim])
    if plan.variant == "solve":
        record[f"{plan.fault}_delay_s"] = round(plan.delay_s, 4)

    be = solve_be(problem)
    optimum = be.lower_bound
    record["be_optimum"] = optimum if math.isfinite(optimum) else None
    if plan.fault == "sigterm":
        problems = sigterm_run(index, problem, algo, z, plan, args, record)
        problems += check_leaks(None, baseline, record)
    else:
        problems = local_run(problem, algo, z, optimum, plan, args, baseline, record)
    record["problems"] = problems
    record["ok"] = not problems
    return record


def local_run(
    problem: Problem,
    algo: str,
    z: int | None,
    optimum: float,
    plan: Plan,
    args: argparse.Namespace,
    baseline: dict[str, Any],
    record: dict[str, Any],
) -> list[str]:
    """A ``run_local`` run: plain, or with a kill, forged frames or a self-connect attempt."""
    hooks: RunHooks
    workdir: Path | None = None
    if plan.fault == "kill":
        hooks = Killer(plan)
    elif plan.fault == "forge":
        hooks = Forger(plan, problem)
    elif plan.fault == "self-connect":
        hooks = SelfConnect(plan, problem)
        record["victim"], record["victim_variable"] = hooks.victim, hooks.variable
        if plan.variant == "setup":
            record["late_agent"] = hooks.late
    else:
        hooks = RunHooks()
    if plan.fault in ("forge", "self-connect"):
        workdir = _WORK / f"run-{record['run']}"  # keeps the agents' logs for the checks
    hung = threading.Event()

    def on_hang() -> None:
        hung.set()
        hooks.kill_everything()

    coordinator_log = LogLines()
    transport_log = logging.getLogger("dcop.protocol.zmq")
    transport_log.addHandler(coordinator_log)
    watchdog = threading.Timer(args.timeout + args.grace, on_hang)
    watchdog.daemon = True
    watchdog.start()
    t0 = time.monotonic()
    result: RunResult | None = None
    error: str | None = None
    ended = t0
    try:
        result = run_local(
            problem,
            RunSpec(algo, z),
            timeout=args.timeout,
            secure=record["secure"],
            workdir=workdir,
            agent_argv=hooks.agent_argv,
            before_start=hooks.before_start,
        )
    except DcopError as exc:
        error = str(exc)
    except Exception as exc:  # anything else from run_local is a bug: record it, carry on
        error = f"UNEXPECTED {type(exc).__name__}: {exc}"
        record["unexpected_exception"] = True
    finally:
        ended = time.monotonic()
        watchdog.cancel()
        watchdog.join()  # a cancelled Timer's thread still needs a moment to end
        hooks.finish()
        transport_log.removeHandler(coordinator_log)
    record["wall_s"] = round(ended - t0, 3)
    record["hang"] = hung.is_set()
    if hooks.procs is not None:
        # 3 = stopped by the coordinator ("aborted"), -9 = the SIGKILL, -15 = needed a SIGTERM.
        record["exit_codes"] = sorted(set(map(str, hooks.procs.exit_codes().values())))
    problems: list[str] = []
    if record["hang"]:
        problems.append(f"hang: still running {args.timeout + args.grace:g} s after start")
    if hooks.failure is not None:
        problems.append(f"harness: {hooks.failure}")
    if result is not None:
        record["outcome"] = "solved"
        problems += check_answer(result, algo, optimum, record)
    else:
        record["outcome"] = "error"
        record["error"] = error
        if ended - t0 > args.timeout:
            problems.append(f"error after {ended - t0:.1f} s, beyond the {args.timeout} s")
    if isinstance(hooks, Killer):
        problems += judge_kill(hooks, result, error, ended, record)
    elif isinstance(hooks, Forger):
        problems += judge_forge(hooks, result, error, record)
    elif isinstance(hooks, SelfConnect):
        problems += judge_self_connect(hooks, result, error, ended, coordinator_log, record)
    elif result is None:
        problems.append(f"spurious failure: {error}")
    problems += check_leaks(hooks, baseline, record)
    if workdir is not None:
        shutil.rmtree(workdir, ignore_errors=True)
    return problems


def judge_kill(
    killer: Killer, result: RunResult | None, error: str | None, ended: float, rec: dict[str, Any]
) -> list[str]:
    killed = killer.killed_at is not None
    rec["killed"] = killed
    if result is not None:
        if killed:
            rec["kill_too_late"] = True  # the kill landed after the agent had done its part
        return []
    if not killed:
        return [f"spurious failure: {error}"]
    assert killer.killed_at is not None
    rec["error_latency_s"] = round(ended - killer.killed_at, 3)
    if not names_agent(error or "", killer.plan.victim, rec["victim_variable"]):
        return [f"error does not name killed agent {killer.plan.victim}: {error}"]
    return []


def judge_forge(
    forger: Forger, result: RunResult | None, error: str | None, rec: dict[str, Any]
) -> list[str]:
    if result is None:
        return [f"forge: forged frames broke the run (spurious failure): {error}"]
    out = []
    codes = result.processes["exit_codes"] if result.processes else {}
    if set(codes.values()) - {0}:
        out.append(f"forge: agents exited with codes {sorted(set(codes.values()))}, not all 0")
    unrefused = forger.unrefused()
    rec["forge_targets"] = len(forger.expected)
    rec["forge_refusals_logged"] = len(forger.expected) - len(unrefused)
    if unrefused and forger.plan.variant == "ready":
        out.append(f"forge: no refusal in the logs of agents {unrefused[:5]}")
    return out


def judge_self_connect(
    hooks: SelfConnect,
    result: RunResult | None,
    error: str | None,
    ended: float,
    coordinator_log: LogLines,
    rec: dict[str, Any],
) -> list[str]:
    secure_setup = hooks.plan.variant == "setup" and hooks.plan.secure
    rec["stranger_hello_sent"] = hooks.hello_at is not None
    if secure_setup:
        refused = any(CURVE_REFUSED in line for line in coordinator_log.lines)
        rec["coordinator_refused_stranger"] = refused
        if result is None:
            return [f"self-connect: spurious failure in secure mode: {error}"]
        return [] if refused else ["self-connect: the coordinator logged no CURVE refusal"]
    if result is not None:
        if hooks.plan.variant == "setup":
            rec["stranger_too_late"] = True  # the late agent spoke first: the stranger was refused
            return []
        return ["self-connect: not refused: the run solved with an agent at its own endpoint"]
    if hooks.hello_at is not None:
        rec["error_latency_s"] = round(ended - hooks.hello_at, 3)
    message = error or ""
    if not (names_agent(message, hooks.victim, hooks.variable) and OWN_ENDPOINT in message):
        return [f"self-connect: error does not name agent {hooks.victim} and its own endpoint: "
                f"{message}"]  # fmt: skip
    rec["refused_clearly"] = True
    return []


def check_answer(result: RunResult, algo: str, optimum: float, rec: dict[str, Any]) -> list[str]:
    rec["solve_wall_s"] = round(result.metrics["solve_wall_s"], 4)
    rec["messages"] = result.metrics["total_messages"]
    return check_bounds(algo, result.internal_cost, result.bound, optimum, rec)


def check_bounds(
    algo: str, cost: float, lower: float, optimum: float, rec: dict[str, Any]
) -> list[str]:
    rec.update(
        cost=cost if math.isfinite(cost) else None,
        lower_bound=lower if math.isfinite(lower) else None,
    )
    if algo == "dpop":
        if cost != optimum or lower != optimum:
            return [f"wrong answer: DPOP cost {cost}, bound {lower}, BE optimum {optimum}"]
        return []
    tolerance = 1e-9 * max(1.0, abs(optimum)) if math.isfinite(optimum) else 0.0
    if not (lower <= optimum + tolerance and optimum <= cost + tolerance):
        return [f"wrong answer: ADPOP bounds [{lower}, {cost}] miss the BE optimum {optimum}"]
    return []


def check_leaks(hooks: RunHooks | None, baseline: dict[str, Any], rec: dict[str, Any]) -> list[str]:
    out: list[str] = []
    # Processes exit asynchronously after a kill; run_local promises they are gone on return.
    folder = hooks.folder if hooks is not None else None
    left = processes_mentioning(f"{folder}/") if folder is not None else []
    kids = live_children()
    fds, sockets, threads, tmp = fd_count(), socket_count(), threading.active_count(), tmp_listing()
    rec.update(fds=fds, sockets=sockets, threads=threads)
    if left:
        out.append(f"leak: agent processes still running: {left}")
    if kids:
        out.append(f"leak: child processes still running: {kids}")
    if fds > baseline["fds"]:
        out.append(f"leak: {fds} open fds, {baseline['fds']} after the warm-up run")
    if sockets > baseline["sockets"]:
        out.append(f"leak: {sockets} sockets, {baseline['sockets']} after the warm-up run")
    if threads > baseline["threads"]:
        out.append(f"leak: {threads} threads, {baseline['threads']} after the warm-up run")
    if tmp:
        out.append(f"leak: temporary files left: {tmp[:5]}")
        for name in tmp:  # so that the next runs are judged on their own
            shutil.rmtree(Path(_PRIVATE_TMP) / name, ignore_errors=True)
    return out


# ---- SIGTERM to a whole `dcop run` ------------------------------------------------------------
def peers_ready(tmp: Path) -> bool:
    """Whether the run in ``tmp`` has rewritten its peers.json with every agent's bound port
    (run_local does that once every agent is ready, before the DFS starts)."""
    for path in tmp.glob("dcop-runs/run-*/peers.json"):  # coordinator.launch.runs_folder()
        try:
            agents = json.loads(path.read_text())["agents"]
        except (OSError, ValueError, KeyError):
            return False  # being written
        return all(not str(a["endpoint"]).endswith(":*") for a in agents)
    return False


def sigterm_run(
    index: int,
    problem: Problem,
    algo: str,
    z: int | None,
    plan: Plan,
    args: argparse.Namespace,
    rec: dict[str, Any],
) -> list[str]:
    """Solve with ``dcop run`` in a subprocess and SIGTERM it at the planned moment."""
    folder = _WORK / f"run-{index}"
    folder.mkdir()
    tmp = Path(_PRIVATE_TMP) / f"sigterm-{index}"  # the run's TMPDIR: must end up empty
    tmp.mkdir()
    problem_file, out = folder / "problem.wcsp", folder / "result.json"
    write_problem(problem, problem_file)
    optimum = solve_be(read_problem(problem_file)).lower_bound  # what dcop run reads
    argv = [sys.executable, "-m", "dcop", "run", str(problem_file), "--json", str(out), "-q",
            "--timeout", f"{args.timeout:g}", "--algo", algo, *(["--z", str(z)] if z else [])]  # fmt: skip
    problems: list[str] = []
    rec["outcome"] = "no document"
    seen: dict[int, psutil.Process] = {}  # every descendant: the template and the agents
    agent_pids: set[int] = set()
    signalled_at: float | None = None
    ready_at: float | None = None
    with open(folder / "stderr.txt", "wb") as err:
        t0 = time.monotonic()
        run = subprocess.Popen(
            argv,
            env={**os.environ, "TMPDIR": str(tmp)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,  # its own process group: the watchdog can end all of it
        )
        deadline = t0 + args.timeout + args.grace
        while run.poll() is None and time.monotonic() < deadline:
            for proc in descendants(run.pid):
                seen.setdefault(proc.pid, proc)
                if proc.pid not in agent_pids and title(proc).startswith("dcop-agent "):
                    agent_pids.add(proc.pid)
            now = time.monotonic()
            if signalled_at is None:
                if ready_at is None and plan.variant != "hello" and peers_ready(tmp):
                    ready_at = now
                due = {
                    "hello": len(agent_pids) >= problem.n,
                    "ready": ready_at is not None,
                    "solve": ready_at is not None and now >= ready_at + plan.delay_s,
                }
                if due[str(plan.variant)]:
                    run.send_signal(signal.SIGTERM)
                    signalled_at = time.monotonic()
            # a run of a few agents is ready ~50 ms before it ends: look often until signalled
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.wait(0.002 if signalled_at is None else 0.02)
        exited_at = time.monotonic()
        hung = run.poll() is None
        if hung:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(run.pid, signal.SIGKILL)
            for proc in seen.values():
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            run.wait()
    rec["wall_s"] = round(exited_at - t0, 3)
    rec["hang"] = hung
    rec["exit_code"] = run.returncode
    rec["signalled"] = signalled_at is not None
    rec["agents_seen"] = len(agent_pids)
    stderr_tail = (folder / "stderr.txt").read_text(errors="replace").strip()[-300:]
    if hung:
        problems.append(f"hang: dcop run still running {args.timeout + args.grace:g} s after start")
    if signalled_at is not None:
        rec["exit_delay_s"] = round(exited_at - signalled_at, 3)
        if exited_at - signalled_at > args.sigterm_limit:
            problems.append(
                f"sigterm: exited {exited_at - signalled_at:.1f} s after SIGTERM, more than "
                f"{args.sigterm_limit:g} s"
            )
    try:
        doc = json.loads(out.read_text())
    except (OSError, ValueError) as exc:
        doc = None
        problems.append(f"sigterm: no result document ({exc}); stderr: {stderr_tail}")
    if doc is not None:
        status = doc.get("status")
        rec["status"] = status
        if status == "interrupted":
            rec["outcome"] = "interrupted"
            if signalled_at is None:
                problems.append("sigterm: interrupted, but no signal was sent")
            if run.returncode != 130:
                problems.append(f"sigterm: status interrupted, exit code {run.returncode}")
            if "SIGTERM" not in str(doc.get("message")):
                problems.append(f"sigterm: interrupted document says {doc.get('message')!r}")
            if doc.get("cost") is not None:  # the signal came after the answer: it is kept
                problems += check_bounds(
                    algo, _num(doc["cost"]), _num(doc["lower_bound"]), optimum, rec
                )
        elif status in ("ok", "infeasible", "no_solution"):  # no_solution: ADPOP's cost inf
            rec["outcome"] = "solved"  # it finished before the signal (or the signal came late)
            problems += check_bounds(
                algo, _num(doc["cost"]), _num(doc["lower_bound"]), optimum, rec
            )
        else:
            rec["outcome"] = "error"
            rec["error"] = doc.get("message")
            problems.append(f"sigterm: status {status}: {doc.get('message')}")
    # What the run started must be gone (the template may take a moment after the run).
    end = time.monotonic() + 5.0
    while time.monotonic() < end and any(alive(p) for p in seen.values()):
        time.sleep(0.05)
    left = sorted({p.pid for p in seen.values() if alive(p)} | set(processes_mentioning(f"{tmp}/")))
    if left:
        problems.append(f"leak: processes of the dcop run still running: {left}")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    left_files = sorted(str(f.relative_to(tmp)) for f in tmp.rglob("*"))
    if left_files:
        problems.append(f"leak: dcop run left temporary files: {left_files[:8]}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(folder, ignore_errors=True)
    return problems


def _num(value: Any) -> float:
    """A result document's number (infinities are written as strings)."""
    return float(value) if value is not None else math.nan


# ---- the soak ---------------------------------------------------------------------------------
def _spread(values: list[float]) -> dict[str, float | None]:
    return {
        "median": float(np.median(values)) if values else None,
        "max": max(values, default=None),
    }


def summarize(
    records: list[dict[str, Any]], started: float, args: argparse.Namespace
) -> dict[str, Any]:
    solved = [r for r in records if r["outcome"] == "solved"]
    killed = [r for r in records if r.get("killed")]
    killed_errors = [r for r in killed if r["outcome"] == "error"]
    walls = [r["wall_s"] for r in records]
    of = {mode: [r for r in records if r["fault"] == mode] for mode in VARIANTS}

    def count(prefix: str, among: list[dict[str, Any]] = records) -> int:
        return sum(1 for r in among if any(p.startswith(prefix) for p in r["problems"]))

    def variants(mode: str) -> dict[str, int]:
        return {v: sum(r["variant"] == v for r in of[mode]) for v in VARIANTS[mode]}

    sigterm, forge, self_connect = of["sigterm"], of["forge"], of["self-connect"]
    setup_open = [r for r in self_connect if r["variant"] == "setup" and not r["secure"]]
    return {
        "runs": len(records),
        "dpop_runs": sum(r["algo"] == "dpop" for r in records),
        "adpop_runs": sum(r["algo"] == "adpop" for r in records),
        "plain_runs": sum(r["fault"] is None for r in records),
        "kills_planned": len(of["kill"]),
        "kills": len(killed),
        "kills_ready_phase": sum(r["kill"] == "ready" for r in killed),
        "kills_solve_phase": sum(r["kill"] == "solve" for r in killed),
        "killed_runs_with_clear_error": sum(
            1 for r in killed_errors if not any("does not name" in p for p in r["problems"])
        ),
        "kills_too_late_run_still_right": sum(
            1 for r in killed if r["outcome"] == "solved" and r["ok"]
        ),
        "error_latency_s": _spread([r["error_latency_s"] for r in killed_errors]),
        "sigterm": {
            "runs": len(sigterm),
            "moments": variants("sigterm"),
            "signalled": sum(r["signalled"] for r in sigterm),
            "interrupted_with_document": sum(
                r.get("outcome") == "interrupted" and r["ok"] for r in sigterm
            ),
            "finished_first_answer_right": sum(
                r.get("outcome") == "solved" and r["ok"] for r in sigterm
            ),
            "exit_delay_s": _spread([r["exit_delay_s"] for r in sigterm if "exit_delay_s" in r]),
            # of runs that finished first: 0, or -15 when the signal came after the document was
            # written (Python's own handlers are gone while the interpreter exits)
            "exit_codes": {
                str(code): sum(r["exit_code"] == code for r in sigterm)
                for code in sorted({r["exit_code"] for r in sigterm})
            },
            "failures": count("sigterm", sigterm),
        },
        "forge": {
            "runs": len(forge),
            "secure_runs": sum(r["secure"] for r in forge),
            "moments": variants("forge"),
            "runs_ok_and_right": sum(r["outcome"] == "solved" and r["ok"] for r in forge),
            "agents_attacked": sum(r.get("forge_targets", 0) for r in forge),
            "agents_that_logged_the_refusal": sum(r.get("forge_refusals_logged", 0) for r in forge),
            "failures": count("forge", forge),
        },
        "self_connect": {
            "runs": len(self_connect),
            "variants": {
                "setup_open": len(setup_open),
                "setup_secure": sum(r["variant"] == "setup" and r["secure"] for r in self_connect),
                "peers": sum(r["variant"] == "peers" for r in self_connect),
            },
            "refused_with_clear_error": sum(bool(r.get("refused_clearly")) for r in self_connect),
            "secure_stranger_refused_run_right": sum(
                bool(r.get("coordinator_refused_stranger")) and r["ok"] for r in self_connect
            ),
            "stranger_too_late_run_right": sum(
                bool(r.get("stranger_too_late")) and r["ok"] for r in self_connect
            ),
            "error_after_stranger_hello_s": _spread(
                [r["error_latency_s"] for r in setup_open if "error_latency_s" in r]
            ),
            "failures": count("self-connect", self_connect),
        },
        # run_local stops agents with a stop message, then SIGTERM after 3 s, then SIGKILL.
        "runs_where_an_agent_needed_sigterm": sum(
            "-15" in r.get("exit_codes", ()) for r in records if r["fault"] != "self-connect"
        ),
        "completed_runs": len(solved),
        "completed_runs_checked_against_be": len(solved),
        "infeasible_instances": sum(r["be_optimum"] is None for r in records),
        "wrong_answers": count("wrong answer"),
        "hangs": count("hang"),
        "spurious_failures": count("spurious failure"),
        "unclear_errors": count("error does not name"),
        "errors_after_timeout": count("error after"),
        "leaks": count("leak"),
        "harness_failures": count("harness"),
        "failed_runs": sum(not r["ok"] for r in records),
        "run_wall_s": {"max": max(walls), "median": float(np.median(walls))},
        "run_timeout_s": args.timeout,
        "n_range": [min(r["n"] for r in records), max(r["n"] for r in records)],
        "d_range": [min(r["d"] for r in records), max(r["d"] for r in records)],
        "topologies": {t: sum(r["topology"] == t for r in records) for t in TOPOLOGIES},
        "total_s": round(time.monotonic() - started, 1),
    }


def markdown(summary: dict[str, Any], records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    s, st, fo, sc = summary, summary["sigterm"], summary["forge"], summary["self_connect"]
    lines = [
        "# Soak: consecutive distributed DPOP/ADPOP runs with kills, SIGTERM, forged frames "
        "and self-connect attempts",
        "",
        f"Command: `{meta['command']}` on {meta['machine']}, {meta['date']}.",
        *([meta["note"]] if meta["note"] else []),
        "",
        "Every run: a fresh random instance, one agent process per variable (ZeroMQ on loopback),",
        "checked against centralized BE. After run 0 (a plain warm-up) each run draws a fault",
        "mode by its share: `kill` (one agent SIGKILLed when all have said hello or 0-30 ms into the",
        "solve), `sigterm` (a real `dcop run FILE --json OUT` gets SIGTERM once its agents exist,",
        "once they have said hello, or 0-150 ms into the solve), `forge` (a stranger sends every agent",
        "a Setup, Go and Stop as the coordinator, plus garbage; open or CurveZMQ), `self-connect`",
        "(`setup`: a stranger's hello for a late agent makes the coordinator give a neighbour its",
        "own endpoint; `peers`: an agent's peers.json names its own endpoint as the",
        "coordinator's). See the docstring of `tests/soak/soak.py`. After every run: no process",
        "of the run, no child, no fd/socket/thread beyond the warm-up baseline, and an empty",
        "private temporary folder (TMPDIR for this process, every agent and every `dcop run`).",
        "",
        "| measure | value |",
        "|---|---|",
        f"| runs (DPOP / ADPOP) | {s['runs']} ({s['dpop_runs']} / {s['adpop_runs']}) |",
        f"| runs by fault: plain / kill / sigterm / forge / self-connect | {s['plain_runs']} / "
        f"{s['kills_planned']} / {st['runs']} / {fo['runs']} / {sc['runs']} |",
        f"| n range, d range | {s['n_range'][0]}..{s['n_range'][1]}, "
        f"{s['d_range'][0]}..{s['d_range'][1]} |",
        f"| topologies | {', '.join(f'{k} {v}' for k, v in s['topologies'].items())} |",
        f"| kills (ready phase / solve phase) | {s['kills']} ({s['kills_ready_phase']} / "
        f"{s['kills_solve_phase']}) |",
        f"| killed runs ended by a RunError naming the agent | "
        f"{s['killed_runs_with_clear_error']} |",
        f"| kills that landed after the agent's part was done (run still right) | "
        f"{s['kills_too_late_run_still_right']} |",
        f"| kill -> error delay, median / max (s) | {_fmt(s['error_latency_s']['median'])} / "
        f"{_fmt(s['error_latency_s']['max'])} (run timeout {s['run_timeout_s']:g} s) |",
        f"| SIGTERM runs (agents exist / ready / solve) | {st['runs']} "
        f"({' / '.join(str(v) for v in st['moments'].values())}) |",
        f"| SIGTERM: exit 130 with an `interrupted` document | {st['interrupted_with_document']} |",
        f"| SIGTERM: run finished first, answer right | {st['finished_first_answer_right']} |",
        f"| SIGTERM: exit codes (runs) | "
        f"{', '.join(f'{c}: {k}' for c, k in st['exit_codes'].items()) or '-'} |",
        f"| SIGTERM -> exit delay, median / max (s) | {_fmt(st['exit_delay_s']['median'])} / "
        f"{_fmt(st['exit_delay_s']['max'])} |",
        f"| forge runs (open / secure; ready / solve) | {fo['runs']} "
        f"({fo['runs'] - fo['secure_runs']} / {fo['secure_runs']}; "
        f"{' / '.join(str(v) for v in fo['moments'].values())}) |",
        f"| forge runs ended ok with the right answer | {fo['runs_ok_and_right']} |",
        f"| attacked agents that logged the refusal | {fo['agents_that_logged_the_refusal']} of "
        f"{fo['agents_attacked']} |",
        f"| self-connect runs (setup open / setup secure / peers) | {sc['runs']} "
        f"({' / '.join(str(v) for v in sc['variants'].values())}) |",
        f"| self-connect refused with an error naming the agent and its own endpoint | "
        f"{sc['refused_with_clear_error']} |",
        f"| secure: the stranger refused by CURVE, run right | "
        f"{sc['secure_stranger_refused_run_right']} |",
        f"| open: the late agent spoke first, stranger refused, run right | "
        f"{sc['stranger_too_late_run_right']} |",
        f"| stranger's hello -> error, median / max (s) | "
        f"{_fmt(sc['error_after_stranger_hello_s']['median'])} / "
        f"{_fmt(sc['error_after_stranger_hello_s']['max'])} |",
        f"| runs where an agent ignored the stop message for 3 s and got SIGTERM | "
        f"{s['runs_where_an_agent_needed_sigterm']} |",
        f"| completed runs checked against BE | {s['completed_runs_checked_against_be']} "
        f"({s['infeasible_instances']} instances infeasible) |",
        f"| **wrong answers** | **{s['wrong_answers']}** |",
        f"| **hangs** | **{s['hangs']}** |",
        f"| **leaks** (processes, fds, sockets, threads, temp files) | **{s['leaks']}** |",
        f"| spurious failures (no fault, or a refused attack, still an error) | "
        f"{s['spurious_failures']} |",
        f"| errors not naming the killed agent | {s['unclear_errors']} |",
        f"| SIGTERM / forge / self-connect check failures | {st['failures']} / {fo['failures']} "
        f"/ {sc['failures']} |",
        f"| harness failures (the soak could not make its attack) | {s['harness_failures']} |",
        f"| **failed runs** | **{s['failed_runs']}** |",
        f"| run wall time, median / max (s) | {_fmt(s['run_wall_s']['median'])} / "
        f"{_fmt(s['run_wall_s']['max'])} |",
        f"| total time (s) | {s['total_s']} |",
        "",
    ]
    failed = [r for r in records if not r["ok"]]
    if failed:
        lines += ["## Failed runs", ""]
        for r in failed:
            lines.append(
                f"- run {r['run']} ({r['topology']} n={r['n']} d={r['d']} {r['algo']}, "
                f"{_fault(r)}): " + "; ".join(r["problems"])
            )
        lines.append("")
    examples = [r for r in records if r.get("killed") and r["outcome"] == "error"][:2]
    examples += [r for r in records if r.get("refused_clearly")][:3]
    if examples:
        lines += ["## Example errors", ""]
        lines += [f"- run {r['run']} ({_fault(r)}): `{r['error']}`" for r in examples]
        lines.append("")
    lines += ["Per-run records: `soak.json`.", ""]
    return "\n".join(lines)


def command_line(argv: list[str]) -> str:
    """The soak's command as run, without the report's ``--note`` (it is printed on its own)."""
    kept = []
    skip = False
    for arg in argv:
        if skip or arg == "--note" or arg.startswith("--note="):
            skip = arg == "--note"
            continue
        kept.append(arg)
    return shlex.join(["python", "tests/soak/soak.py", *kept])


def _fault(r: dict[str, Any]) -> str:
    if r["fault"] is None:
        return "plain"
    return ":".join([r["fault"], str(r["variant"])] + (["secure"] if r.get("secure") else []))


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--kill-share", type=float, default=0.2)
    ap.add_argument("--sigterm-share", type=float, default=0.1)
    ap.add_argument("--forge-share", type=float, default=0.1)
    ap.add_argument("--self-connect-share", type=float, default=0.1)
    ap.add_argument(
        "--secure-share", type=float, default=0.5, help="of forge and self-connect runs"
    )
    ap.add_argument("--modes", type=parse_modes, default=[], help="fixed faults, in turn")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per run (run_local)")
    ap.add_argument("--grace", type=float, default=30.0, help="seconds past it = a hang")
    ap.add_argument("--sigterm-limit", type=float, default=10.0, help="seconds to exit after it")
    ap.add_argument("--max-n", type=int, default=20, help="largest instance (variables)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--note", default="", help="a line for the report (e.g. the commit)")
    args = ap.parse_args(argv)
    shares = [args.kill_share, args.sigterm_share, args.forge_share, args.self_connect_share]
    if min(shares) < 0 or sum(shares) > 1 + 1e-9 or args.max_n < 4:
        ap.error("the shares must be >= 0 and sum to at most 1; --max-n at least 4")

    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    records: list[dict[str, Any]] = []
    baseline: dict[str, Any] = {"fds": 10**9, "sockets": 10**9, "threads": 10**9}
    fds_at_start = fd_count()
    for index in range(args.runs):
        rec = one_run(index, rng, args, baseline)
        if index == 0:
            # Warm-up: the ZeroMQ context and the thread pools stay open after the first run.
            baseline = {"fds": rec["fds"], "sockets": rec["sockets"], "threads": rec["threads"]}
        records.append(rec)
        status = "ok" if rec["ok"] else "FAIL " + "; ".join(rec["problems"])
        print(
            f"[{index + 1:3d}/{args.runs}] {rec['topology']:9s} n={rec['n']:2d} d={rec['d']} "
            f"{rec['algo']:5s} {_fault(rec)} -> {rec['outcome']} {rec['wall_s']:.1f}s {status}",
            flush=True,
        )
    summary = summarize(records, started, args)
    summary["fds"] = {
        "before_first_run": fds_at_start,
        "baseline": baseline["fds"],
        "after_last_run": fd_count(),
    }
    meta = {
        "command": command_line(sys.argv[1:]),
        "machine": f"{platform.machine()} Linux ({os.cpu_count()} cores, "
        f"Python {platform.python_version()})",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seed": args.seed,
        "shares": dict(zip(VARIANTS, shares, strict=True)) | {"secure": args.secure_share},
        "dcop_package": package_place(Path(dcop.__file__).resolve().parent),
        "note": args.note,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "summary": summary, "runs": records}
    args.out.with_suffix(".json").write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")
    args.out.with_suffix(".md").write_text(markdown(summary, records, meta))
    print(json.dumps(summary, indent=1))
    with contextlib.suppress(OSError):
        os.rmdir(_PRIVATE_TMP)  # empty unless something leaked
    with contextlib.suppress(OSError):
        os.rmdir(_WORK)
    return 0 if summary["failed_runs"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
