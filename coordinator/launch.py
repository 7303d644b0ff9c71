"""Agent processes on this machine, and a whole distributed solve with them (``run_local``).

``run_local`` writes peers.json for 127.0.0.1 with free ports (:mod:`dcop.coordinator.topology`
makes it), starts one ``dcop-agent`` process per variable (``python -m dcop.agents``, the same
program as the console script), drives the run with
:class:`~dcop.coordinator.driver.Coordinator` and always stops every process it started:
politely with a stop message, then SIGTERM, then SIGKILL. No orphans, even on failure.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dcop.coordinator.driver import Coordinator
from dcop.coordinator.keys import coordinator_curve
from dcop.coordinator.result import RunResult
from dcop.coordinator.topology import peers_for, round_robin
from dcop.errors import DcopError, InputError
from dcop.model import Problem
from dcop.protocol import DEFAULT_MAX_MESSAGE_BYTES, RunSpec
from dcop.protocol.curve import generate_keys
from dcop.protocol.runspec import MIB

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


def agent_command(
    agent_id: int,
    peers_file: str | Path,
    *,
    timeout: float,
    spec: RunSpec,
    gpu: int | None = None,
    keys: str | Path | None = None,
    problem_file: str | Path | None = None,
    log_level: str = "WARNING",
) -> list[str]:
    """The argv that starts one agent process for a run of ``spec``."""
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
        f"{spec.peer_timeout:g}",
        "--log-level",
        log_level,
    ]
    if gpu is not None:
        argv += ["--gpu", str(gpu)]
    if keys is not None:
        argv += ["--secure", "--keys", str(keys)]
    if problem_file is not None:
        argv += ["--problem", str(problem_file)]
    if spec.max_message_bytes != DEFAULT_MAX_MESSAGE_BYTES:
        argv += ["--max-message-mib", f"{spec.max_message_bytes / MIB:g}"]
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
    spec: RunSpec | None = None,
    *,
    gpu: int | None = None,
    timeout: float = 120.0,
    secure: bool = False,
    problem_file: str | Path | None = None,
    hello_timeout: float | None = None,
    workdir: str | Path | None = None,
    agent_argv: Callable[[int, list[str]], list[str] | None] | None = None,
    before_start: Callable[[AgentProcesses], None] | None = None,
    log_level: str = "WARNING",
) -> RunResult:
    """Solve ``problem`` with one agent process per variable on this machine.

    ``spec`` says how (default: DPOP); ``gpu`` a CUDA device for every agent's CuPy backend;
    ``timeout`` bounds the whole run (seconds). ``secure`` generates CURVE keys and runs every
    socket with CurveZMQ. With ``problem_file`` each agent reads its part from that file and
    checks it against the coordinator's. ``workdir`` keeps peers.json and the agents' logs
    (default: a temporary folder, removed afterwards). Test hooks: ``agent_argv(id, argv)`` may
    change an agent's command line or return None to not start it; ``before_start(processes)``
    runs once every agent is ready, before the DFS starts.

    Returns the typed result; raises RunError naming the agent on any fault. Every started
    process has exited when this returns or raises.
    """
    from dcop.protocol.zmqlink import ZmqCoordinatorTransport

    spec = spec if spec is not None else RunSpec()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dcop-run-")))
        else:
            folder = Path(workdir)
            folder.mkdir(parents=True, exist_ok=True)
        keys_dir = folder / "keys" if secure else None
        publics = generate_keys(keys_dir, range(problem.n)) if keys_dir is not None else None
        coordinator_at, endpoint = round_robin(["127.0.0.1"], 0, free_ports(problem.n + 1))
        peers = peers_for(problem, coordinator_at, endpoint, publics)
        peers_file = folder / "peers.json"
        peers.write(peers_file)
        curve = coordinator_curve(peers, keys_dir) if keys_dir is not None else None
        transport = ZmqCoordinatorTransport(
            peers.coordinator, curve, spec.max_message_bytes, agents=[a.id for a in peers.agents]
        )
        stack.callback(transport.close)
        procs = AgentProcesses()
        stack.callback(procs.stop)
        for a in peers.agents:
            argv = agent_command(
                a.id,
                peers_file,
                timeout=timeout + 10,
                spec=spec,
                gpu=gpu,
                keys=keys_dir,
                problem_file=problem_file,
                log_level=log_level,
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
            spec,
            timeout=timeout,
            hello_timeout=hello_timeout,
            monitor=procs.dead,
            before_start=(lambda: before_start(procs)) if before_start is not None else None,
        )
        started = time.monotonic()
        try:
            result = coordinator.run()
        except DcopError as exc:  # the same kind of error, with the named agent's last log line
            raise type(exc)(_with_log(str(exc), procs)) from None
        finally:
            procs.stop()
        return dataclasses.replace(
            result,
            processes={
                "agents": len(procs.procs),
                "exit_codes": {str(i): c for i, c in procs.exit_codes().items()},
                "secure": secure,
                "gpu": gpu,
                "total_s": time.monotonic() - started,
            },
            file=str(problem_file) if problem_file is not None else None,
        )


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
