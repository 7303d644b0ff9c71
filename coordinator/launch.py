"""Making peers.json, and running a whole distributed solve on this machine (``run_local``).

``run_local`` writes peers.json for 127.0.0.1 with free ports, starts one ``dcop-agent`` process
per variable (``python -m dcop.agents``, the same program as the console script), drives the run
with :class:`~dcop.coordinator.driver.Coordinator` and always stops every process it started:
politely with a stop message, then SIGTERM, then SIGKILL. No orphans, even on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from dcop.coordinator.driver import Coordinator
from dcop.errors import InputError, RunError
from dcop.model import Problem
from dcop.protocol import COORDINATOR_ID, MAX_FRAME_BYTES, PEER_TIMEOUT_S, peer_timeout_for
from dcop.protocol.curve import CurveConfig, generate_keys, load_keypair
from dcop.protocol.peers import AgentEntry, Peers

DEFAULT_BASE_PORT = 47000
#: Lowest port ``free_ports`` picks (above the usual fixed service ports).
MIN_PORT = 20000


def _ephemeral_low() -> int:
    """First port of the kernel's ephemeral range (outgoing connections take ports from it)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct TCP ports that are free right now (all held open while choosing).

    They are picked at random below the ephemeral range: a port from that range can be taken by
    any outgoing connection (an agent connecting to a neighbour, another program) between being
    chosen here and the agent binding it, which failed about one run in 200 in the soak."""
    held: list[socket.socket] = []
    low = _ephemeral_low()
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


def make_peers(
    problem: Problem,
    hosts: Sequence[str] = ("127.0.0.1",),
    ports: Sequence[int] | None = None,
    base_port: int = DEFAULT_BASE_PORT,
    coordinator_host: str | None = None,
    public_keys: dict[int, str] | None = None,
    problem_ref: str = "",
) -> Peers:
    """Assign agents (one per variable, ids in the problem's variable order) round-robin to
    ``hosts``. Ports: ``ports`` (coordinator first, then agents), or ``base_port`` for the
    coordinator and ``base_port + 1 + k`` for the k-th agent on each host."""
    if not hosts:
        raise InputError("at least one host is needed")
    names = list(problem.variables)
    ident = {v: i for i, v in enumerate(names)}
    adjacency = problem.neighbours()
    per_host: dict[str, int] = {}
    agents = []
    for i, var in enumerate(names):
        host = hosts[i % len(hosts)]
        if ports is not None:
            port = ports[1 + i]
        else:
            per_host[host] = per_host.get(host, 0) + 1
            port = base_port + per_host[host]
        neighbours = tuple(sorted(ident[u] for u in adjacency[var]))
        key = public_keys.get(i) if public_keys else None
        agents.append(AgentEntry(i, var, _endpoint(host, port), neighbours, key))
    chost = coordinator_host or hosts[0]
    cport = ports[0] if ports is not None else base_port
    ckey = public_keys.get(COORDINATOR_ID) if public_keys else None
    return Peers(problem_ref or problem.name, _endpoint(chost, cport), tuple(agents), ckey)


def _endpoint(host: str, port: int) -> str:
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def coordinator_curve(peers: Peers, keys: str | Path) -> CurveConfig:
    """The coordinator's CURVE settings: its own key pair; every agent's key is allowed."""
    public, secret = load_keypair(keys, COORDINATOR_ID)
    if peers.coordinator_public_key is not None and public.decode() != peers.coordinator_public_key:
        raise InputError(f"the coordinator key in {keys} is not the one in peers.json")
    allowed = frozenset(str(a.public_key).encode() for a in peers.agents)
    return CurveConfig(public, secret, {}, allowed)


def agent_command(
    agent_id: int,
    peers_file: str | Path,
    *,
    timeout: float,
    peer_timeout: float = PEER_TIMEOUT_S,
    gpu: int | None = None,
    keys: str | Path | None = None,
    problem_file: str | Path | None = None,
    log_level: str = "WARNING",
    max_frame_bytes: int = MAX_FRAME_BYTES,
) -> list[str]:
    """The argv that starts one agent process."""
    argv = [
        sys.executable,
        "-m",
        "dcop.agents",
        "--id",
        str(agent_id),
        "--peers",
        str(peers_file),
        "--timeout",
        f"{timeout:g}",
        "--peer-timeout",
        f"{peer_timeout:g}",
        "--log-level",
        log_level,
    ]
    if gpu is not None:
        argv += ["--gpu", str(gpu)]
    if keys is not None:
        argv += ["--secure", "--keys", str(keys)]
    if problem_file is not None:
        argv += ["--problem", str(problem_file)]
    if max_frame_bytes != MAX_FRAME_BYTES:
        argv += ["--max-frame-bytes", str(max_frame_bytes)]
    return argv


class AgentProcesses:
    """The agent processes of one run; ``stop()`` makes sure every one has exited."""

    def __init__(self) -> None:
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.logs: dict[int, Path] = {}

    def start(self, agent_id: int, argv: list[str], log_file: Path) -> None:
        self.logs[agent_id] = log_file
        with open(log_file, "wb") as err:
            self.procs[agent_id] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # a Ctrl-C at the terminal reaches us, not every agent
            )

    def dead(self) -> list[tuple[int, int]]:
        return [(i, p.returncode) for i, p in self.procs.items() if p.poll() is not None]

    def exit_codes(self) -> dict[int, int | None]:
        return {i: p.poll() for i, p in self.procs.items()}

    def log_tail(self, agent_id: int, lines: int = 3) -> str:
        try:
            text = self.logs[agent_id].read_text(errors="replace").strip().splitlines()
        except (OSError, KeyError):
            return ""
        return " | ".join(text[-lines:])

    def stop(self, grace_s: float = 3.0) -> None:
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.0, deadline - time.monotonic()))
        for sig, wait_s in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                return
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)  # the agent is its own session leader
            end = time.monotonic() + wait_s
            for p in alive:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.0, end - time.monotonic()))


def run_local(
    problem: Problem,
    algo: str = "dpop",
    z: int | None = None,
    gpu: int | None = None,
    timeout: float = 120.0,
    *,
    secure: bool = False,
    problem_file: str | Path | None = None,
    hello_timeout: float | None = None,
    peer_timeout: float | None = None,
    workdir: str | Path | None = None,
    agent_argv: Callable[[int, list[str]], list[str] | None] | None = None,
    before_start: Callable[[AgentProcesses], None] | None = None,
    log_level: str = "WARNING",
    max_frame_bytes: int = MAX_FRAME_BYTES,
) -> dict[str, Any]:
    """Solve ``problem`` with one agent process per variable on this machine.

    ``algo`` is "dpop" or "adpop" (needs ``z``); ``gpu`` a CUDA device for every agent's CuPy
    backend; ``timeout`` bounds the whole run (seconds). ``secure`` generates CURVE keys and runs
    every socket with CurveZMQ. With ``problem_file`` each agent reads its part from that file
    instead of receiving it. ``workdir`` keeps peers.json and the agents' logs (default: a
    temporary folder, removed afterwards). Test hooks: ``agent_argv(id, argv)`` may change an
    agent's command line or return None to not start it; ``before_start(processes)`` runs once
    every agent is ready, before the DFS starts. ``max_frame_bytes`` is the largest message any
    process of the run sends or accepts (a UTIL table above it fails the run with a clear error);
    ``peer_timeout`` defaults to what such a frame may need (``peer_timeout_for``).

    Returns the result dict (see :mod:`dcop.coordinator.metrics`); raises RunError naming the
    agent on any fault. Every started process has exited when this returns or raises.
    """
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    # refuse bad arguments before any process starts
    if algo not in ("dpop", "adpop"):
        raise RunError(f"unknown distributed algorithm {algo!r}; use dpop or adpop")
    if algo == "adpop" and (z is None or z < 1):
        raise RunError("ADPOP needs a mini-bucket size z >= 1 (--z)")

    if peer_timeout is None:
        peer_timeout = peer_timeout_for(max_frame_bytes)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dcop-run-")))
        else:
            folder = Path(workdir)
            folder.mkdir(parents=True, exist_ok=True)
        keys_dir = folder / "keys" if secure else None
        publics = generate_keys(keys_dir, range(problem.n)) if keys_dir is not None else None
        peers = make_peers(problem, ports=free_ports(problem.n + 1), public_keys=publics)
        peers_file = folder / "peers.json"
        peers.write(peers_file)
        curve = coordinator_curve(peers, keys_dir) if keys_dir is not None else None
        transport = ZmqCoordinatorTransport(peers.coordinator, curve, max_frame_bytes)
        stack.callback(transport.close)
        procs = AgentProcesses()
        stack.callback(procs.stop)
        for a in peers.agents:
            argv = agent_command(
                a.id,
                peers_file,
                timeout=timeout + 10,
                peer_timeout=peer_timeout,
                gpu=gpu,
                keys=keys_dir,
                problem_file=problem_file,
                log_level=log_level,
                max_frame_bytes=max_frame_bytes,
            )
            if agent_argv is not None:
                changed = agent_argv(a.id, argv)
                if changed is None:
                    continue
                argv = changed
            procs.start(a.id, argv, folder / f"agent-{a.id}.log")
        coordinator = Coordinator(
            problem,
            peers,
            transport,
            algo=algo,
            z=z,
            timeout=timeout,
            hello_timeout=hello_timeout,
            peer_timeout=peer_timeout,
            monitor=procs.dead,
            before_start=(lambda: before_start(procs)) if before_start is not None else None,
            max_frame_bytes=max_frame_bytes,
        )
        started = time.monotonic()
        try:
            result = coordinator.run()
        except RunError as exc:
            raise RunError(_with_log(str(exc), procs)) from None
        finally:
            procs.stop()
        result["processes"] = {
            "agents": len(procs.procs),
            "exit_codes": {str(i): c for i, c in procs.exit_codes().items()},
            "secure": secure,
            "gpu": gpu,
            "total_s": time.monotonic() - started,
        }
        return result


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
    """The result as JSON (no NaN/Infinity: infinite costs are already null)."""
    Path(path).write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")


def hosts_list(text: str) -> list[str]:
    """``h1,h2,...`` -> hosts (InputError when empty)."""
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise InputError("--hosts needs at least one host name or address")
    return hosts
