"""Agent processes on this machine: started, watched and always stopped.

:class:`AgentProcesses` starts each agent either forked from a template process that has already
imported dcop, NumPy and ZeroMQ (:mod:`dcop.agents.forked`: a few milliseconds per agent) or, for
a command line that is not plain ``python -m dcop.agents ...`` (``ip netns exec``, another
interpreter), as a fresh process. ``stop()`` makes sure every one has exited: it waits for them to
leave after their stop message, then sends SIGTERM, then SIGKILL, to each agent's process group,
and ends the template. No orphans.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol

from dcop.errors import RunError

if TYPE_CHECKING:  # this module loads before anything heavy (dcop run's first import)
    from dcop.protocol.agent_options import AgentOptions

AGENT_MODULE = ("-m", "dcop.agents")
#: Seconds the template may take to import dcop, NumPy and ZeroMQ before it forks agents.
TEMPLATE_START_S = 60.0


class _Handle(Protocol):
    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float) -> None: ...

    def send_signal(self, sig: int) -> None: ...


class Template:
    """The template process that forks agents; it ends when its input closes and its children
    have exited (see :mod:`dcop.agents.forked`)."""

    def __init__(self) -> None:
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "dcop.agents.forked"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        self.pids: dict[int, int] = {}
        self.codes: dict[int, int] = {}
        #: what each exited agent used: CPU seconds (user and system) and page faults
        self.usage: dict[int, tuple[float, int]] = {}
        #: the template's own CPU seconds, once it has ended
        self.cpu_s: float | None = None
        self.changed = threading.Condition()
        self.ready = False
        self._reader = threading.Thread(target=self._read, daemon=True, name="dcop-template")
        self._reader.start()

    def _read(self) -> None:
        out: IO[bytes] | None = self.popen.stdout
        assert out is not None
        for line in out:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self.changed:
                if "ready" in message:
                    self.ready = True
                elif "started" in message:
                    self.pids[int(message["started"])] = int(message["pid"])
                elif "exit" in message:
                    ident = int(message["exit"])
                    self.codes[ident] = int(message["code"])
                    if "cpu_s" in message:
                        self.usage[ident] = (float(message["cpu_s"]), int(message["faults"]))
                elif "done" in message:
                    self.cpu_s = float(message["done"])
                self.changed.notify_all()
        with self.changed:  # the template is gone: every agent not yet reported is lost
            self.changed.notify_all()

    def fork(
        self, agent_id: int, argv: list[str], log_file: Path, options: AgentOptions | None = None
    ) -> None:
        """Ask for agent ``agent_id`` (``dcop-agent ARGV``, its output in ``log_file``; run from
        ``options`` when given, which must say what ``argv`` says)."""
        request: dict[str, object] = {"id": agent_id, "argv": argv, "log": str(log_file)}
        if options is not None:
            request["options"] = dataclasses.asdict(options)
        assert self.popen.stdin is not None
        self.popen.stdin.write((json.dumps(request) + "\n").encode())
        self.popen.stdin.flush()

    def pid(self, agent_id: int, timeout: float = TEMPLATE_START_S) -> int:
        """The pid of a forked agent (waits until the template has forked it)."""
        with self.changed:
            if (
                not self.changed.wait_for(
                    lambda: agent_id in self.pids or self.popen.poll() is not None, timeout
                )
                or agent_id not in self.pids
            ):
                raise RunError(f"the agent template did not start agent {agent_id}")
            return self.pids[agent_id]

    def close(self) -> None:
        """No more agents: the template exits once its children have."""
        with contextlib.suppress(OSError, ValueError):
            if self.popen.stdin is not None:
                self.popen.stdin.close()

    def wait(self, timeout: float) -> None:
        # the reader sees the end of the template's output when it exits: waiting on that thread
        # wakes at once, where Popen.wait(timeout) sleeps in steps of up to 50 ms
        self._reader.join(timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(0.5 if not self._reader.is_alive() else 0.0)
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self._reader.join(1.0)
        if self.popen.stdout is not None:
            self.popen.stdout.close()


_PRESTARTED: list[Template] = []


def prestart_template() -> None:
    """Start a template now, for the next :class:`AgentProcesses` to use: its imports then run
    while the caller still reads its problem (``dcop run`` calls this first thing)."""
    if not _PRESTARTED:
        _PRESTARTED.append(Template())


def _take_template() -> Template:
    return _PRESTARTED.pop() if _PRESTARTED else Template()


class _Forked:
    """A forked agent, with Popen's poll/wait/send_signal."""

    def __init__(self, template: Template, agent_id: int) -> None:
        self.template = template
        self.agent_id = agent_id

    @property
    def pid(self) -> int:
        return self.template.pid(self.agent_id)

    def poll(self) -> int | None:
        code = self.template.codes.get(self.agent_id)
        if code is None and self.template.popen.poll() is not None:
            return -int(signal.SIGKILL)  # the template died: its children went with it
        return code

    def wait(self, timeout: float) -> None:
        with self.template.changed:
            self.template.changed.wait_for(lambda: self.poll() is not None, max(0.0, timeout))

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


class _Spawned:
    """A fresh agent process."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout)

    def send_signal(self, sig: int) -> None:
        self.popen.send_signal(sig)


class AgentProcesses:
    """The agent processes of one run (``fork=False`` spawns every one fresh)."""

    def __init__(self, fork: bool = True) -> None:
        self.fork = fork
        self.template: Template | None = None
        self.procs: dict[int, _Handle] = {}
        self.logs: dict[int, Path] = {}

    def start(
        self,
        agent_id: int,
        argv: list[str],
        log_file: Path,
        options: AgentOptions | None = None,
    ) -> None:
        """Start agent ``agent_id`` with the command line ``argv``, its output in ``log_file``.
        ``options``: the same as data (the launcher's), handed to a forked agent when ``argv``
        is still exactly what they say (a test hook may have changed it)."""
        self.logs[agent_id] = log_file
        if self.fork and argv[:3] == [sys.executable, *AGENT_MODULE]:
            if self.template is None:
                self.template = _take_template()
            same = options is not None and argv[3:] == options.argv()
            self.template.fork(agent_id, argv[3:], log_file, options if same else None)
            self.procs[agent_id] = _Forked(self.template, agent_id)
            return
        with open(log_file, "wb") as err:
            self.procs[agent_id] = _Spawned(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                    start_new_session=True,  # a Ctrl-C at the terminal reaches us, not each agent
                )
            )

    def dead(self) -> list[tuple[int, int]]:
        """Agents whose process has ended, as ``(id, exit code)``."""
        return [(i, code) for i, p in self.procs.items() if (code := p.poll()) is not None]

    def exit_codes(self) -> dict[int, int | None]:
        return {i: p.poll() for i, p in self.procs.items()}

    def usage(self) -> dict[str, Any]:
        """What the processes used, for a run's record: each forked agent's CPU seconds and page
        faults (from the kernel's account of it once it exited) and the template's CPU seconds
        (its imports and forks); empty where none was forked."""
        if self.template is None:
            return {}
        used = self.template.usage
        return {
            "agent_cpu_s": {str(i): round(used[i][0], 6) for i in sorted(used)},
            "agent_page_faults": {str(i): used[i][1] for i in sorted(used)},
            "template_cpu_s": self.template.cpu_s,
        }

    def log_tail(self, agent_id: int, lines: int = 3) -> str:
        """The last lines an agent logged, on one line."""
        try:
            text = self.logs[agent_id].read_text(errors="replace").strip().splitlines()
        except (OSError, KeyError):
            return ""
        return " | ".join(text[-lines:])

    def stop(self, grace_s: float = 3.0, term_s: float = 2.0) -> None:
        """Wait up to ``grace_s`` for every agent to leave, then SIGTERM (and SIGCONT, for a
        stopped one) and ``term_s`` more, then SIGKILL; end the template."""
        if self.template is not None:
            self.template.close()  # no more agents; it leaves once its children have
        deadline = time.monotonic() + grace_s
        for p in self.procs.values():
            p.wait(max(0.0, deadline - time.monotonic()))
        for signals, wait_s in (
            ((signal.SIGTERM, signal.SIGCONT), term_s),
            ((signal.SIGKILL,), 5.0),
        ):
            alive = [p for p in self.procs.values() if p.poll() is None]
            if not alive:
                break
            for p in alive:
                for sig in signals:
                    with contextlib.suppress(ProcessLookupError, PermissionError, RunError):
                        os.killpg(p.pid, sig)  # the agent is its own session leader...
                    with contextlib.suppress(ProcessLookupError, PermissionError, RunError):
                        os.kill(p.pid, sig)  # ...unless it was stopped before it became one
            end = time.monotonic() + wait_s
            for p in alive:
                p.wait(max(0.0, end - time.monotonic()))
        if self.template is not None:
            self.template.wait(5.0)
