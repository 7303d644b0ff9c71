"""A whole distributed solve on this machine (``run_local``), and the agents' command line.

``run_local`` binds the coordinator on a port the system picks, writes peers.json for 127.0.0.1
(:mod:`dcop.coordinator.topology` makes it; the agents' ports are wildcards: each agent binds
its own and reports it), starts one agent process per variable (:mod:`dcop.coordinator.processes`:
forked from a pre-imported template), drives the run with
:class:`~dcop.coordinator.driver.Coordinator` and always stops every process it started. No
orphans, even on failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from dcop.coordinator.driver import Coordinator, Progress
from dcop.coordinator.keys import coordinator_curve
from dcop.coordinator.plan import RunPlan
from dcop.coordinator.processes import AGENT_MODULE, AgentProcesses, templates_for
from dcop.coordinator.topology import peers_for
from dcop.errors import DcopError, InputError
from dcop.model import Problem
from dcop.protocol import RunSpec
from dcop.protocol.agent_options import AgentOptions
from dcop.protocol.curve import generate_keys
from dcop.protocol.endpoints import ephemeral_range
from dcop.protocol.runspec import MIB, link_timeout, peer_timeout_at_scale
from dcop.results.run import RunResult

#: Lowest port ``free_ports`` picks (above the usual fixed service ports).
MIN_PORT = 20000


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that are free right now (all held open while choosing).

    They are picked at random below the ephemeral range: a port from that range can be taken by
    any outgoing connection (an agent connecting to a neighbour, another program) between being
    chosen here and the agent binding it, which failed about one run in 200 in the soak."""
    held: list[socket.socket] = []
    low = ephemeral_range()[0]
    rng = random.SystemRandom()
    try:
        tries = 0
        while len(held) < count:
            tries += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # Fall back to a kernel-chosen port when the range below is tiny or crowded.
            port = (
                rng.randrange(MIN_PORT, low)
                if low - MIN_PORT > 4 * count and tries < 50 * count
                else 0
            )
            try:
                s.bind((host, port))
            except OSError:
                s.close()
                if port == 0:
                    raise
                continue
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def agent_options(
    agent_id: int,
    peers_file: str | Path,
    *,
    timeout: float,
    spec: RunSpec,
    gpu: int | str | None = None,
    keys: str | Path | None = None,
    problem_file: str | Path | None = None,
    log_level: str = "WARNING",
    launcher_pid: int | None = None,
) -> AgentOptions:
    """The options of one agent process for a run of ``spec`` (``launcher_pid``: the
    coordinator's process, when it launches the agent: the agent leaves once it is gone)."""
    return AgentOptions(
        agent_id,
        str(peers_file),
        problem=str(problem_file) if problem_file is not None else None,
        gpu=str(gpu) if gpu is not None else None,
        timeout=float(timeout),
        peer_timeout=float(spec.peer_timeout),
        max_message_mib=spec.max_message_bytes / MIB,
        secure=keys is not None,
        keys=str(keys) if keys is not None else None,
        log_level=log_level,
        launcher_pid=launcher_pid,
    )


def command_line(options: AgentOptions) -> list[str]:
    """The argv that starts the agent process ``options`` describe."""
    return [sys.executable, *AGENT_MODULE, *options.argv()]


def agent_command(agent_id: int, peers_file: str | Path, **options: Any) -> list[str]:
    """The argv that starts one agent process: :func:`agent_options` as a command line."""
    return command_line(agent_options(agent_id, peers_file, **options))


def run_local(
    problem: Problem,
    spec: RunSpec | None = None,
    *,
    gpu: int | str | None = None,
    gpu_placement: str = "round-robin",
    timeout: float = 120.0,
    secure: bool = False,
    problem_file: str | Path | None = None,
    hello_timeout: float | None = None,
    workdir: str | Path | None = None,
    agent_argv: Callable[[int, list[str]], list[str] | None] | None = None,
    before_start: Callable[[AgentProcesses], None] | None = None,
    log_level: str = "WARNING",
    on_status: Callable[[Progress], None] | None = None,
    fork: bool = True,
    on_answer: Callable[[RunResult], None] | None = None,
    started: float | None = None,
    tree: str = "auto",
    order_time: float | None = None,
) -> RunResult:
    """Solve ``problem`` with one agent process per variable on this machine.

    ``spec`` says how (default: DPOP); ``gpu`` a CUDA device for every agent's backend (buckets
    big enough run there; ``"all"`` or ``"0,2"``: agents spread over those devices, round robin
    or as ``gpu_placement`` says: :mod:`dcop.coordinator.gpus`);
    ``timeout`` bounds the whole run (seconds), counted from ``started`` (a monotonic time: the
    command's start, :func:`dcop.clock.process_started`; default: this call), so that the launch
    counts; ``times.launch`` is when every agent had said hello. ``secure`` generates CURVE keys and runs every
    socket with CurveZMQ. With ``problem_file`` each agent reads its part
    from that file and checks it against the coordinator's. ``workdir`` keeps peers.json and the
    agents' logs (default: a temporary folder, removed afterwards); two runs cannot share one.
    Agents are forked from a pre-imported template (``fork=False``: a fresh interpreter each),
    bind ports the system picks and report them in their hello. Test hooks: ``agent_argv(id,
    argv)`` may change an agent's command line or return None to not start it;
    ``before_start(processes)`` runs once every agent has said hello, before the go goes out
    (agents may be building their candidate trees by then: each start rides on its setup).
    ``on_answer(result)`` gets the answer as soon as the coordinator has it, while the agents exit
    (its ``processes`` not yet filled in): ``dcop run`` prints its summary then. ``tree`` and
    ``order_time``: how the pseudo-tree is chosen and the ordering engine's budget
    (:data:`dcop.coordinator.choice.TREE_POLICIES`).

    Returns the typed result; raises a DcopError naming the agent on any fault. Every started
    process has exited when this returns or raises.
    """
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    origin = started if started is not None else time.monotonic()
    # thousands of agents on one host: a derived peer timeout grows with n (see the function)
    spec = peer_timeout_at_scale(spec if spec is not None else RunSpec(), problem.n)
    cpu_at_start = time.process_time()
    # the run decided once: a problem the wire cannot carry, or a model without a partition
    # function, is refused here, before any agent; the trees are simulated when first asked
    plan = RunPlan(
        problem, None, spec, tree=tree, order_time=order_time, gpu=gpu, gpu_placement=gpu_placement
    )
    devices = plan.devices  # each agent its device, fixed at its start
    with contextlib.ExitStack() as stack:
        if workdir is None:
            sweep_leftovers(runs_folder())
            folder = new_run_folder()
            stack.callback(remove_run_folder, folder)
            stack.enter_context(workdir_lock(folder))  # a later run knows this one is alive
        else:
            folder = Path(workdir)
            folder.mkdir(parents=True, exist_ok=True)
            stack.enter_context(workdir_lock(folder))
        keys_dir = folder / "keys" if secure else None
        publics = generate_keys(keys_dir, range(problem.n)) if keys_dir is not None else None
        peers = peers_for(problem, "tcp://127.0.0.1:*", lambda i, v: "tcp://127.0.0.1:*", publics)
        curve = coordinator_curve(peers, keys_dir) if keys_dir is not None else None
        transport = ZmqCoordinatorTransport(
            peers.coordinator,
            curve,
            spec.max_message_bytes,
            heartbeat_timeout_s=link_timeout(spec.max_message_bytes, spec.peer_timeout),
            agents=range(problem.n),
        )
        stack.callback(transport.close)
        # the coordinator bound a port the system picked: that is where agents connect
        peers = dataclasses.replace(peers, coordinator=transport.endpoint)
        peers_file = folder / "peers.json"
        peers.write(peers_file)
        procs = AgentProcesses(fork=fork, templates=templates_for(problem.n))
        stack.callback(procs.stop)
        started = time.monotonic()  # the agents' lifetime: the first start to the last exit
        for a in peers.agents:
            options = agent_options(
                a.id,
                peers_file,
                timeout=timeout + 10,
                spec=spec,
                gpu=None if devices is None else devices[a.id],
                keys=keys_dir,
                problem_file=problem_file,
                log_level=log_level,
                launcher_pid=os.getpid(),
            )
            argv = command_line(options)
            if agent_argv is not None:
                changed = agent_argv(a.id, argv)
                if changed is None:
                    continue
                argv = changed
            procs.start(a.id, argv, folder / f"agent-{a.id}.log", options)
        coordinator: Coordinator

        def ready() -> None:
            # peers.json now says where every agent listens (the ports the system picked)
            bound = {i: h.endpoint for i, h in coordinator.hellos.items()}
            agents = tuple(dataclasses.replace(a, endpoint=bound[a.id]) for a in peers.agents)
            dataclasses.replace(peers, agents=agents).write(peers_file)
            if before_start is not None:
                before_start(procs)

        coordinator = Coordinator(
            problem,
            peers,
            transport,
            spec,
            timeout=timeout,
            hello_timeout=hello_timeout,
            monitor=procs.dead,
            before_start=ready,
            on_status=on_status,
            host_memory=free_memory(),
            origin=origin,
            plan=plan,
        )
        try:
            result = coordinator.run()
        except DcopError as exc:  # the same kind of error, with the named agent's last log line
            procs.stop(grace_s=0.3, term_s=0.5)  # a failed run ends within a second
            raise type(exc)(_with_log(str(exc), procs)) from None
        except BaseException:
            procs.stop(grace_s=0.3, term_s=0.5)
            raise
        if on_answer is not None:
            on_answer(result)  # a raise here still stops every agent (the stack's callback)
        procs.stop()
        return dataclasses.replace(
            result,
            processes={
                "agents": len(procs.procs),
                "exit_codes": {str(i): c for i, c in procs.exit_codes().items()},
                "forked": fork,
                "secure": secure,
                "gpu": gpu,
                **(
                    {"gpu_placement": gpu_placement}
                    if devices is not None and len({d.split("/")[0] for d in devices.values()}) > 1
                    else {}
                ),
                "total_s": time.monotonic() - started,
                # when each agent said hello, from the command's start: the launch per agent
                "hello_s": launch_profile(coordinator.hello_at.values(), started - origin),
                # this process's CPU (all its threads) from the call to the agents' exits
                "coordinator_cpu_s": round(time.process_time() - cpu_at_start, 6),
                **procs.usage(),
            },
            file=str(problem_file) if problem_file is not None else None,
        )


#: Where ``dcop run`` keeps each run's folder (peers.json, keys, the agents' logs) while it runs:
#: ``<system temp folder>/dcop-runs/run-*``. A run killed with SIGKILL cannot remove its own; the
#: next run (or ``dcop run --clean``) removes every folder whose lock no live run holds.
RUNS_FOLDER = "dcop-runs"
RUN_PREFIX = "run-"
#: Attempts at a new run's folder while other runs' ends remove the runs' folder under it.
RUN_FOLDER_TRIES = 8
#: A folder without its lock yet is a run that is just starting, unless it is older than this.
UNLOCKED_GRACE_S = 60.0


def runs_folder() -> Path:
    """The folder of ``dcop run``'s run folders (made if missing; mode 0700)."""
    path = Path(tempfile.gettempdir()) / RUNS_FOLDER
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def new_run_folder() -> Path:
    """A new run's folder in :func:`runs_folder`. A run that ends removes the runs' folder once
    it is empty (:func:`remove_run_folder`), which can fall between another run's making of it
    and of its own folder inside: the runs' folder is then made again (two runs of a test suite
    met there, and the later one ended in a traceback without its document)."""
    for _ in range(RUN_FOLDER_TRIES - 1):
        with contextlib.suppress(FileNotFoundError):
            return Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=runs_folder()))
    return Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=runs_folder()))


def sweep_leftovers(runs: Path) -> int:
    """Remove the run folders in ``runs`` that no live run holds (left by killed runs); return
    how many. A live run holds its folder's lock (:func:`workdir_lock`)."""
    removed = 0
    try:
        entries = list(runs.iterdir())
    except OSError:
        return 0
    for folder in entries:
        if not folder.name.startswith(RUN_PREFIX) or not folder.is_dir():
            continue
        lock = folder / ".dcop-run.lock"
        try:
            handle = open(lock, "r+")  # noqa: SIM115  # closed below
        except FileNotFoundError:
            try:
                fresh = time.time() - folder.stat().st_mtime < UNLOCKED_GRACE_S
            except OSError:
                continue
            if not fresh:
                remove_folder(folder)
                removed += 1
            continue
        except OSError:
            continue
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live run
            remove_folder(folder)
            removed += 1
    return removed


def free_memory() -> int | None:
    """Memory free on this host (bytes), which ``dcop run``'s agents share; None if unknown."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def remove_run_folder(folder: Path) -> None:
    """Remove a run's folder, and the runs' folder with it when no other run is left there."""
    try:
        remove_folder(folder)
    finally:
        with contextlib.suppress(OSError):
            folder.parent.rmdir()


def launch_profile(
    hellos: Iterable[float], first_start: float | None = None
) -> dict[str, float] | None:
    """When the agents said hello (seconds from the command's start): the first, the median, the
    last, and the last one's time per agent (the launch's cost per agent, start-up included).
    With ``first_start`` (when the first agent was asked for, on the same clock): ``agents``,
    from then to the last hello (the launch of the agents alone, as the floor bench times its
    forks and hellos), and ``agents_per_agent``, that over n."""
    at = sorted(hellos)
    if not at:
        return None
    profile = {
        "first": round(at[0], 6),
        "median": round(at[len(at) // 2], 6),
        "last": round(at[-1], 6),
        "per_agent": round(at[-1] / len(at), 6),
    }
    if first_start is not None:
        profile["first_start"] = round(first_start, 6)
        profile["agents"] = round(at[-1] - first_start, 6)
        profile["agents_per_agent"] = round((at[-1] - first_start) / len(at), 6)
    return profile


def remove_folder(folder: Path) -> None:
    """Remove a run's temporary folder, even when an interrupt (SIGTERM, Ctrl-C) lands while it
    is being removed: the command then still leaves nothing behind (the soak found half-removed
    folders; TemporaryDirectory gives up at the interrupt)."""
    try:
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def workdir_lock(folder: Path) -> Iterator[None]:
    """Hold ``folder`` for one run: a second run pointed at it gets a clear error instead of
    overwriting the first one's peers.json and logs."""
    path = folder / ".dcop-run.lock"
    handle = open(path, "a+")  # noqa: SIM115  # held open for the run, closed below
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise InputError(
                f"the work folder is in use by another run ({holder}); give each run its own "
                "--workdir",
                str(folder),
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        yield
    finally:
        handle.close()


def _with_log(message: str, procs: AgentProcesses) -> str:
    """Add the last log line of the agent a message names (when it has one)."""
    for ident in procs.procs:
        if message.startswith(f"agent {ident} ") or f" agent {ident} (" in message:
            tail = procs.log_tail(ident, 1)
            if tail and tail not in message and message not in tail:
                return f"{message} [agent {ident} log: {tail}]"
            break
    return message


def write_result(result: dict[str, Any], path: str | Path) -> None:
    """A result document as JSON (no NaN/Infinity: infinities are already strings)."""
    Path(path).write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")


def hosts_list(text: str) -> list[str]:
    """``h1,h2,...`` -> hosts (InputError when empty)."""
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise InputError("--hosts needs at least one host name or address")
    return hosts
