"""One agent process from its options: reads peers.json, opens its sockets, runs :class:`Agent`.

What ``dcop-agent`` runs once :mod:`dcop.agents.cli` has parsed its command line, and what an
agent forked from the template (:mod:`dcop.agents.forked`) runs from the launcher's options
as they are. Nothing here parses a command line, so the template does not import typer (20 ms
of every distributed run's start on the 2-core VM).

Exit codes: 0 stopped after delivering a result; 1 failed (reported to the coordinator when it
could be reached); 2 bad arguments or input; 3 stopped before finishing (another agent failed).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO, cast

from dcop.agents.agent import FAULTS, IDLE_WAKE_S, Agent, AgentConfig
from dcop.agents.jobs import Worker
from dcop.agents.pauses import freeze_heap
from dcop.agents.rehearsal import rehearse_unless_inherited
from dcop.errors import DcopError, InputError
from dcop.model import CostTable
from dcop.protocol import COORDINATOR_ID, Error, encode
from dcop.protocol.agent_options import AgentOptions
from dcop.protocol.curve import CurveConfig, load_keypair
from dcop.protocol.endpoints import is_loopback

if TYPE_CHECKING:
    from collections.abc import Callable
from dcop.backends.base import TableBackend
from dcop.protocol.peers import AgentEntry, Peers, load_peers
from dcop.protocol.runspec import link_timeout, message_limit, peer_timeout_for

log = logging.getLogger("dcop.agents")


def curve_config(peers: Peers, entry: AgentEntry, keys: str | None) -> CurveConfig:
    """This agent's CURVE settings: own keys from ``keys``, peers' public keys from peers.json.

    Any agent of peers.json may become a neighbour (a serving agent learns its neighbours per
    problem), so every other agent's key is known as a server and accepted as a client; the
    transport still takes frames only from the neighbours of the current problem."""
    if keys is None:
        raise InputError("--secure needs --keys DIR")
    if not peers.secure or peers.coordinator_public_key is None:
        raise InputError("--secure needs public keys in peers.json")
    public, secret = load_keypair(keys, entry.id)
    if entry.public_key is not None and public.decode() != entry.public_key:
        raise InputError(f"the key in {keys} is not agent {entry.id}'s key in peers.json")
    others = {a.id: str(a.public_key).encode() for a in peers.agents if a.id != entry.id}
    server_keys = {**others, COORDINATOR_ID: peers.coordinator_public_key.encode()}
    return CurveConfig(public, secret, server_keys, others)


def agent_backend(
    gpu: int | None, spec_min_entries: int | None = None, split: tuple[int, ...] = ()
) -> tuple[TableBackend, float, str, str]:
    """NumPy, or for a GPU agent the placed backend (buckets large enough run on device ``gpu``,
    on the agent's own stream), warmed up: its CUDA context, memory pools and generic kernels
    are ready before the agent says hello; ``split``: devices its large buckets are split over
    (their contexts are made by the warm-up too). Returns the backend,
    the seconds set-up took, the device's name and the agent's CUDA IPC domain
    (:func:`dcop.gpu.ipc.ipc_domain`)."""
    from dcop.backends import get_backend

    if gpu is None:
        return get_backend("numpy"), 0.0, "", ""
    from dcop.backends.placed import PlacedBackend
    from dcop.gpu.plan import AHEAD_SPECIALIZE_ENTRIES

    t0 = time.perf_counter()
    # an agent compiles its buckets' kernels in the background before their data arrive
    # (prepare_bucket): a generated kernel pays from a smaller bucket than in a solve's path
    backend = cast(
        PlacedBackend,
        get_backend(
            "placed",
            gpu,
            devices=split or None,
            min_entries=spec_min_entries,
            specialize_entries=AHEAD_SPECIALIZE_ENTRIES,
        ),
    )
    backend.warm_up(dtypes=("float32", "float64"), ops=("min",))
    domain = backend.ipc_domain
    return backend, time.perf_counter() - t0, str(backend.gpu.device_name), domain


def local_part(
    path: str, entry: AgentEntry, peers: Peers, timeout_s: float | None = None
) -> tuple[list[CostTable], int]:
    """This agent's tables and domain size from the problem file, checked against peers.json
    (read within ``timeout_s``, the agent's own ``--timeout``)."""
    from dcop.io import ReadLimits, read_problem

    if entry.variable is None:
        raise InputError(
            "--problem needs a problem-specific peers.json (one that gives each agent its "
            "variable); serving agents receive their part from the coordinator"
        )
    limits = None
    if timeout_s is not None:
        limits = ReadLimits(time.monotonic() + timeout_s, None, f"--timeout {timeout_s:g} s")
    problem = read_problem(path, limits=limits)
    var = problem.variables.get(entry.variable)
    if var is None:
        raise InputError(
            f"peers.json gives agent {entry.id} variable {entry.variable!r}, "
            f"which the problem does not have",
            path,
        )
    table = peers.by_id()
    listed = {table[n].variable for n in entry.neighbours}
    actual = problem.neighbours()[entry.variable]
    if listed != actual:
        raise InputError(
            f"agent {entry.id} ({entry.variable}): peers.json neighbours "
            f"{sorted(str(v) for v in listed)} differ from the problem's {sorted(actual)}",
            path,
        )
    return problem.tables_of(entry.variable), var.size


def _refuse_open_serving(endpoint: str, coordinator: str) -> None:
    """A serving agent in open mode takes problems and --shutdown from whoever reaches it: only
    on this host's loopback, unless --insecure says that is meant."""
    for where in (endpoint, coordinator):
        if not is_loopback(where):
            raise InputError(
                f"--serve without --secure on {where}, which other hosts can reach: anyone who "
                "can reach it could submit problems or shut the agents down; use --secure "
                "--keys DIR, or --insecure to accept that"
            )


def run_agent(
    options: AgentOptions, peers: Peers | None = None, idle_wake_s: float = IDLE_WAKE_S
) -> NoReturn:
    """Run the agent ``options`` describe, then exit with its code (see the module docstring).
    ``peers``: the peers.json they name, already read (a forked agent's template reads it once);
    ``idle_wake_s``: the loop's longest sleep with nothing due (longer where the template
    watches the launcher, see AgentConfig)."""
    ident = options.ident
    agent_logging(ident, options.log_level)
    try:
        if options.fault is not None and options.fault not in FAULTS:
            raise InputError(f"--fault must be one of {', '.join(FAULTS)}")
        max_bytes = message_limit(options.max_message_mib)
        if peers is None:
            peers = load_peers(Path(options.peers_file))
        entry = peers.agent(ident)
        if options.serve and not options.secure and not options.insecure:
            _refuse_open_serving(entry.endpoint, peers.coordinator)
        curve = curve_config(peers, entry, options.keys) if options.secure else None
        device, split = gpu_device(options.gpu, ident)
    except DcopError as exc:
        print(f"dcop-agent: error: {exc}", file=sys.stderr)
        sys.exit(2)
    from dcop.protocol.zmqlink import LINGER_MS, ZmqAgentTransport

    table = peers.index  # shared with the template: looked up, never walked (see Peers.index)
    try:
        transport = ZmqAgentTransport(
            entry.id,
            entry.endpoint,
            {},
            peers.coordinator,
            curve,
            max_bytes,
            candidates=table.keys(),  # (the transport never takes its own id for a candidate)
            heartbeat_timeout_s=link_timeout(max_bytes, options.peer_timeout),
        )
    except DcopError as exc:  # peers.json names this agent's own endpoint as the coordinator's
        print(f"dcop-agent: error: {exc}", file=sys.stderr)
        sys.exit(2)
    code = 1
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _stop_signal)
    try:
        transport.open()
        local = (
            local_part(options.problem, entry, peers, options.timeout)
            if options.problem is not None
            else None
        )
        backend, setup_s, device_name, ipc = agent_backend(device, split=split)
        worker = Worker("dcop-jobs")
        # first-call costs paid here, not in the solve: on this thread, which runs the short
        # buckets (dcop.agents.jobs); the long ones do not notice them (a forked NumPy agent's
        # template paid them for it)
        setup_s += rehearse_unless_inherited(backend)
        freeze_heap()  # what set-up left alive is not walked again by the solve's collections
        config = AgentConfig(
            entry.id,
            entry.variable,
            {n: str(table[n].variable) for n in entry.neighbours}
            if entry.variable is not None
            else None,
            timeout_s=options.timeout,
            peer_timeout_s=peer_timeout_for(max_bytes)
            if options.peer_timeout is None
            else options.peer_timeout,
            max_message_bytes=max_bytes,
            host=socket.gethostname(),
            serving=options.serve,
            setup_s=setup_s,
            gpu=device_name,
            ipc=ipc,
            fault=options.fault,
            launcher_pid=options.launcher_pid,
            idle_wake_s=idle_wake_s,
        )
        log.info("ready at %s (set-up %.3f s)", transport.endpoint, setup_s)
        code = Agent(config, transport, backend, local, worker=worker).run()
    except DcopError as exc:
        reason = f"agent {entry.id} ({entry.variable or 'no variable yet'}): {exc}"
        log.error("%s", reason)
        transport.send(COORDINATOR_ID, encode(entry.id, COORDINATOR_ID, Error(reason)))
        code = 1
    finally:
        if code == 0:
            leave_now()
        transport.close(LINGER_MS)  # a failure report may still be on its way out
    sys.exit(code)


class AgentFormatter(logging.Formatter):
    """An agent's log lines: ``dcop-agent ID: time LEVEL message``. The prefix is a field, set
    once the id is known: a template makes the handler and its formatter, and each forked agent
    only names itself (a basicConfig per agent cost each 0.3 MB of private pages)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")
        self.prefix = "dcop-agent: "

    def format(self, record: logging.LogRecord) -> str:
        return self.prefix + super().format(record)


def prepare_logging(stream: TextIO) -> None:
    """Give the root logger the agents' handler on ``stream`` (a template, before it forks)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(AgentFormatter())
    logging.root.addHandler(handler)


def agent_logging(ident: int, level: str) -> None:
    """Log as agent ``ident`` at ``level`` to stderr: through the handler a template prepared
    (:func:`prepare_logging`), or a new one."""
    ours = [h.formatter for h in logging.root.handlers if isinstance(h.formatter, AgentFormatter)]
    if not ours:
        prepare_logging(sys.stderr)
        ours = [cast(AgentFormatter, logging.root.handlers[-1].formatter)]
    for formatter in ours:
        formatter.prefix = f"dcop-agent {ident}: "
    logging.root.setLevel(level)


#: Called by :func:`leave_now` before the process ends (a profiled agent writes its profile).
BEFORE_LEAVING: list[Callable[[], None]] = []


def leave_now() -> NoReturn:
    """End the process after a clean stop, at once: nothing is left to send, and the kernel
    closes the sockets. Closing ZeroMQ's sockets, monitors and threads one by one first, and
    then the interpreter's teardown, cost each agent of a 30-agent run about 2 ms of CPU and
    the run 35 ms at its end on the 2-core VM (every agent's exit is waited for)."""
    for hook in BEFORE_LEAVING:
        hook()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


def _stop_signal(signum: int, _frame: object) -> None:
    """SIGTERM (docker stop, compose down), SIGHUP and Ctrl-C end the agent's loop cleanly."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def gpu_device(gpu: str | None, agent_id: int) -> tuple[int | None, tuple[int, ...]]:
    """The CUDA device of ``--gpu`` and the devices the agent's large buckets are split over:
    a number, ``all`` or a list like ``0,2`` (agent ``k`` takes the ``k mod len``-th device of
    it: agents round robin over the GPUs), or ``D/LIST`` (device ``D``, split over ``LIST``)."""
    if gpu is None:
        return None, ()
    from dcop.backends import gpu_count
    from dcop.placement import agent_gpu

    return agent_gpu(gpu, agent_id, gpu_count() if "all" in gpu else None)
