"""Agent processes on this machine: started, watched and always stopped.

:class:`AgentProcesses` starts each agent either forked from a template process that has already
imported dcop, NumPy and ZeroMQ (:mod:`dcop.agents.forked`: a few milliseconds per agent) or, for
a command line that is not plain ``python -m dcop.agents ...`` (``ip netns exec``, another
interpreter), as a fresh process. A run of many agents forks them from several templates at once
(``templates``): the requests wait in one queue, and each template takes the next one whenever it
has few left to fork, so a template still importing, or one the scheduler starves, takes less.
Asking never blocks: the coordinator answers the first agents' hellos while the last ones are
still being forked (a 1000-agent run used to write every request into the template's pipe, and
wait on it, before it read any hello). ``stop()`` makes sure every one has exited: it waits for
them to leave after their stop message, then sends SIGTERM, then SIGKILL, to each agent's process
group, and ends the templates. No orphans.
"""

from __future__ import annotations

import collections
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
#: Requests a template holds that it has not yet forked: few, so that the others take the rest,
#: but enough that it forks them in batches (``forked._fork_batch``): at n = 1000 a window of 4
#: left the template 104 page faults per agent, 16 left 60 (211 one by one).
TEMPLATE_WINDOW = 16
#: Agents per template in a large run (one template for fewer; at most one per core).
AGENTS_PER_TEMPLATE = 100
#: The templates' environment: one malloc arena per process. An agent's ZeroMQ and worker
#: threads otherwise each open a glibc arena of their own (about 0.1 MB of private pages per
#: agent measured at n = 250; the threads allocate little, so the shared arena costs no time).
TEMPLATE_ENV = {"MALLOC_ARENA_MAX": "1"}


def templates_for(agents: int) -> int:
    """How many templates fork ``agents`` agents: one per ``AGENTS_PER_TEMPLATE``, at most one
    per core (each template is a process of its own, ~20 MB, that imports for ~0.3 s)."""
    return max(1, min(os.cpu_count() or 1, -(-agents // AGENTS_PER_TEMPLATE)))


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
            env={**os.environ, **TEMPLATE_ENV},
        )
        self.pids: dict[int, int] = {}
        self.codes: dict[int, int] = {}
        #: what each exited agent used: CPU seconds (user and system), page faults, context
        #: switches (its threads' wakes) and of those the preemptions
        self.usage: dict[int, tuple[float, int, int, int]] = {}
        #: the template's own CPU seconds, once it has ended
        self.cpu_s: float | None = None
        self.changed = threading.Condition()
        self.ready = False
        #: requests written to the template (its share of the pool's queue)
        self.asked = 0
        self.closing = False
        self._reader = threading.Thread(target=self._read, daemon=True, name="dcop-template")
        self._reader.start()
        self._writer: threading.Thread | None = None

    def serve(self, pool: _Requests) -> None:
        """Take requests from ``pool`` while this template has fewer than ``TEMPLATE_WINDOW``
        unforked ones (a thread of its own; ends when the pool closes or the template exits)."""
        writer = threading.Thread(
            target=self._serve, args=(pool,), daemon=True, name="dcop-template-writer"
        )
        writer.start()
        # kept once started: a signal during start() (an early SIGINT) left close() joining a
        # thread never started, a RuntimeError and exit 1 instead of the interrupted document
        self._writer = writer

    def _serve(self, pool: _Requests) -> None:
        while True:
            with self.changed:
                self.changed.wait_for(
                    lambda: (
                        self.closing
                        or self.popen.poll() is not None
                        or (self.ready and self.asked - len(self.pids) < TEMPLATE_WINDOW)
                    )
                )
                if self.closing or self.popen.poll() is not None:
                    return
            request = pool.take(self)
            if request is None:
                return
            self.asked += 1
            try:
                self.fork(*request)
            except (OSError, ValueError):  # the template is gone: its handles report it
                return

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
                        self.usage[ident] = (
                            float(message["cpu_s"]),
                            int(message["faults"]),
                            int(message["switches"]),
                            int(message["preempted"]),
                        )
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
        with self.changed:
            self.closing = True
            self.changed.notify_all()
        if self._writer is not None:
            self._writer.join(5.0)  # it stops at once, or after the request it is writing
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


Request = tuple[int, list[str], Path, "AgentOptions | None"]


class _Requests:
    """The agents still to fork, in order, taken by whichever template is ready for more."""

    def __init__(self) -> None:
        self.queue: collections.deque[Request] = collections.deque()
        #: agent id -> the template that took it
        self.taken: dict[int, Template] = {}
        self.closed = False
        self.lock = threading.Condition()

    def put(self, request: Request) -> None:
        with self.lock:
            self.queue.append(request)
            self.lock.notify_all()

    def take(self, template: Template) -> Request | None:
        """The next request for ``template`` (None once closed: no more agents)."""
        with self.lock:
            self.lock.wait_for(lambda: self.closed or bool(self.queue))
            if not self.queue:
                return None
            request = self.queue.popleft()
            self.taken[request[0]] = template
            self.lock.notify_all()
            return request

    def close(self) -> None:
        """No more agents: requests no template took are dropped (those agents never start)."""
        with self.lock:
            self.closed = True
            self.queue.clear()
            self.lock.notify_all()


class _Forked:
    """A forked agent, with Popen's poll/wait/send_signal (its template is whichever took it)."""

    def __init__(self, requests: _Requests, agent_id: int) -> None:
        self.requests = requests
        self.agent_id = agent_id

    def _template(self, timeout: float) -> Template:
        requests = self.requests
        with requests.lock:
            requests.lock.wait_for(
                lambda: self.agent_id in requests.taken or requests.closed, timeout
            )
            template = requests.taken.get(self.agent_id)
        if template is None:
            raise RunError(f"no agent template started agent {self.agent_id}")
        return template

    @property
    def pid(self) -> int:
        return self._template(TEMPLATE_START_S).pid(self.agent_id)

    def poll(self) -> int | None:
        return self.code(None)

    def code(self, ended: set[Template] | None) -> int | None:
        """The exit code (None: alive, or not forked yet); ``ended``: the templates known to
        have exited (None: ask this agent's own, one waitpid)."""
        template = self.requests.taken.get(self.agent_id)
        if template is None:  # not taken yet, or dropped by a stop before any template took it
            return -int(signal.SIGKILL) if self.requests.closed else None
        code = template.codes.get(self.agent_id)
        if code is None and (
            template in ended if ended is not None else template.popen.poll() is not None
        ):
            return -int(signal.SIGKILL)  # the template died: its children went with it
        return code

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + max(0.0, timeout)
        try:
            template = self._template(timeout)
        except RunError:
            return
        with template.changed:
            template.changed.wait_for(
                lambda: self.poll() is not None, max(0.0, deadline - time.monotonic())
            )

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
    """The agent processes of one run (``fork=False`` spawns every one fresh; ``templates``:
    how many template processes fork them, :func:`templates_for` the run's size)."""

    def __init__(self, fork: bool = True, templates: int = 1) -> None:
        self.fork = fork
        self.templates_wanted = max(1, templates)
        self.templates: list[Template] = []
        self.requests = _Requests()
        self.procs: dict[int, _Handle] = {}
        self.logs: dict[int, Path] = {}

    @property
    def template(self) -> Template | None:
        """The first template (None before any agent was forked)."""
        return self.templates[0] if self.templates else None

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
            if not self.templates:
                self.templates.append(_take_template())
                self.templates += [Template() for _ in range(self.templates_wanted - 1)]
                for template in self.templates:
                    template.serve(self.requests)
            same = options is not None and argv[3:] == options.argv()
            self.requests.put((agent_id, argv[3:], log_file, options if same else None))
            self.procs[agent_id] = _Forked(self.requests, agent_id)
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
        """Agents whose process has ended, as ``(id, exit code)``. Each template is asked once
        (a waitpid per forked agent, at every check of the coordinator's, was 1 s of its CPU
        in a 2000-agent run: quadratic in n, as the checks grow with the launch)."""
        ended = {t for t in self.templates if t.popen.poll() is not None}
        return [
            (i, code)
            for i, p in self.procs.items()
            if (code := p.code(ended) if isinstance(p, _Forked) else p.poll()) is not None
        ]

    def exit_codes(self) -> dict[int, int | None]:
        return {i: p.poll() for i, p in self.procs.items()}

    def usage(self) -> dict[str, Any]:
        """What the processes used, for a run's record: each forked agent's CPU seconds, page
        faults, context switches and preemptions (from the kernel's account of it once it
        exited) and the template's CPU seconds
        (its imports and forks); empty where none was forked."""
        if not self.templates:
            return {}
        used = {i: u for t in self.templates for i, u in t.usage.items()}
        spent = [t.cpu_s for t in self.templates]
        return {
            "agent_cpu_s": {str(i): round(used[i][0], 6) for i in sorted(used)},
            "agent_page_faults": {str(i): used[i][1] for i in sorted(used)},
            "agent_context_switches": {str(i): used[i][2] for i in sorted(used)},
            "agent_preemptions": {str(i): used[i][3] for i in sorted(used)},
            "template_cpu_s": None if None in spent else sum(s for s in spent if s is not None),
            "templates": len(self.templates),
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
        self.requests.close()  # no more agents: the templates leave once their children have
        for template in self.templates:
            template.close()
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
        for template in self.templates:
            template.wait(5.0)
