"""Agents forked from a template process that has imported dcop, NumPy and ZeroMQ once.

Starting a fresh interpreter per agent costs a few tenths of a second of imports each (and on two
cores, dozens of them queue); forking a template that has done those imports costs a few
milliseconds. The template runs :func:`serve` (``python -m dcop.agents.forked``): it imports
:data:`PRELOAD`, says ``ready``, then reads one JSON request per line on stdin -
``{"id": 3, "argv": [...], "log": "agent-3.log"}``, with ``"options"`` (the fields of
:class:`~dcop.protocol.agent_options.AgentOptions`) when the launcher has them, which then spares
the child parsing ``argv`` - and forks a child per request. It answers
``{"started": 3, "pid": ...}`` and, when a child ends, ``{"exit": 3, "code": ..., "cpu_s": ...,
"faults": ..., "switches": ..., "preempted": ...}`` (a negative code is the signal that ended it;
the child's CPU seconds, user and system, all its threads, its page faults, its context switches
and how many of them were preemptions, from the kernel's account of the exited process),
one JSON line each on stdout. When stdin closes it waits for its children, says ``{"done": ...}``
with its own CPU seconds, and exits: the template lives exactly as long as the run that started it.
Where that run is gone (killed: the template has another parent), it stops its children with
SIGTERM at once, so that they need not check their launcher often themselves
(:data:`~dcop.agents.agent.WATCHED_IDLE_WAKE_S`).

A child becomes its own session leader (a Ctrl-C at the terminal reaches the coordinator, not
every agent), sends its output to its log file, takes the process title ``dcop-agent --id N ...``
(so ``ps`` shows what it is) and runs :func:`dcop.agents.run.run_agent` on its options, as
``dcop-agent`` does once it has parsed its command line (the template imports no command-line
parser; a command line without options, which only a test hook makes, is parsed in the child).
Each agent stays a separate process with its own sockets. The template reads the run's
peers.json once, before its first fork, and each child starts with it read (a child reading and
checking it again cost 0.65 ms of CPU per agent); one it cannot read, each child reads itself,
and reports.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import selectors
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dcop.agents.pauses import freeze_heap
from dcop.agents.phases import PHASES_ENV
from dcop.blas import one_blas_thread

if TYPE_CHECKING:  # loaded by PRELOAD, after one_blas_thread (they import NumPy)
    from dcop.protocol.peers import Peers

#: Modules the template imports before it forks agents (the expensive ones come with them).
PRELOAD = ("numpy", "zmq", "dcop.agents.run", "dcop.protocol.zmqlink")


def set_title(title: str) -> None:
    """Show ``title`` as this process's command line in ``ps`` (when setproctitle is there)."""
    try:
        import setproctitle
    except ImportError:  # an optional nicety: ps then shows the template's command line
        return
    setproctitle.setproctitle(title)


class ChildStreams:
    """The line-buffered stdout and stderr of every agent a template forks, made once by the
    template on its descriptors 1 and 2 (which it never writes through them): a child points
    those descriptors at its log file, and the streams write there. Made per child, they cost
    each agent its own buffers and objects (pages of its own)."""

    def __init__(self) -> None:
        self.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        self.stderr = os.fdopen(2, "w", buffering=1, closefd=False)


_STREAMS: ChildStreams | None = None


def child_streams() -> ChildStreams:
    """The streams a child takes: its template's (:func:`prepare_template`), else new ones."""
    return _STREAMS if _STREAMS is not None else ChildStreams()


def run_child(
    argv: list[str],
    log_path: str,
    options: dict[str, Any] | None = None,
    peers: Peers | None = None,
) -> int:
    """The body of a forked agent: ``dcop-agent ARGV`` with stdout and stderr in ``log_path``
    (run from ``options``, the same as data, when given, with ``peers`` the peers.json they name
    when the template has read it)."""
    dump: Callable[[], None] | None = None
    if PHASES_ENV in os.environ:  # a measuring hook, from the child's first line
        from dcop.agents.phases import install

        dump = install(os.environ[PHASES_ENV])
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    streams = child_streams()
    sys.stdout, sys.stderr = streams.stdout, streams.stderr
    set_title("dcop-agent " + " ".join(argv))
    sys.argv = ["dcop-agent", *argv]
    try:
        if options is not None:
            from dcop.agents.agent import WATCHED_IDLE_WAKE_S
            from dcop.agents.run import run_agent
            from dcop.protocol.agent_options import AgentOptions

            # the template watches the launcher for it (serve): the loop's own check is a fallback
            if PROFILE_ENV in os.environ:
                _profiled(run_agent, AgentOptions(**options), peers, WATCHED_IDLE_WAKE_S)
            else:
                run_agent(AgentOptions(**options), peers, WATCHED_IDLE_WAKE_S)
        else:  # a command line a test hook changed: parsed here (typer is imported here too)
            from dcop.agents.cli import main

            main(argv)
    except SystemExit as exc:
        if dump is not None:  # an exit other than leave_now's (which wrote it)
            dump()
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:  # a SIGTERM while it closed: stopped (never unwind into the loop)
        return 3
    return 0


#: Set to a folder, each forked agent profiles its main thread's CPU time (cProfile) into
#: ``<folder>/agent-<pid>.prof``: what benchmarks/agent_cpu.py adds up over a run's agents.
PROFILE_ENV = "DCOP_AGENT_PROFILE"


def _profiled(run: Any, *args: Any) -> None:
    import cProfile
    import time

    from dcop.agents import run as agent_run

    profile = cProfile.Profile(time.thread_time)  # CPU, not the wall of a loaded machine
    path = os.path.join(os.environ[PROFILE_ENV], f"agent-{os.getpid()}.prof")

    def dump() -> None:
        profile.disable()
        profile.dump_stats(path)

    agent_run.BEFORE_LEAVING.append(dump)  # a clean stop ends the process at once
    try:
        profile.runcall(run, *args)
    finally:
        dump()


def _say(message: dict[str, int | float]) -> None:
    # The run that reads us may be gone (``dcop run`` ended by a signal while we imported): then
    # no one is left to tell, and the loop still ends once stdin closes and the children are reaped.
    with contextlib.suppress(BrokenPipeError):
        os.write(1, (json.dumps(message) + "\n").encode())


def prepare_template() -> None:
    """What a template does once before it forks: imports :data:`PRELOAD`, rehearses the
    solving path and the links, makes the children's streams and log handler, freezes the
    heap."""
    one_blas_thread()  # before PRELOAD imports NumPy (see dcop.blas)
    for name in PRELOAD:
        importlib.import_module(name)
    from dcop.agents.link_rehearsal import rehearse_links
    from dcop.agents.rehearsal import rehearse
    from dcop.agents.run import prepare_logging
    from dcop.backends import get_backend

    rehearse(get_backend("numpy"))  # what a first call initialises, initialised once for all
    rehearse_links()  # pyzmq's and the transport's first calls too (see agents.link_rehearsal)
    global _STREAMS
    _STREAMS = ChildStreams()
    prepare_logging(_STREAMS.stderr)  # each child only names itself (agents.run.agent_logging)
    freeze_heap()  # the imports stay out of every agent's collections (and their pages shared)


def serve() -> None:
    """The template's loop (see the module docstring)."""
    prepare_template()
    set_title("dcop-agent-template")
    # SIGCHLD writes a byte to a pipe the selector watches: an agent's exit is reported the
    # moment it happens (a 10 ms poll here cost every run tens of milliseconds at its end)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}  # pid -> agent id
    launcher = os.getppid()  # the run that started this template (see _launcher_gone)
    stopped = False
    peers_files = PeersFiles()
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    pending = b""
    open_input = True
    _say({"ready": os.getpid()})
    while open_input or children:
        for pid, status, usage in _reaped():
            ident = children.pop(pid, None)
            if ident is not None:
                _say(
                    {
                        "exit": ident,
                        "code": os.waitstatus_to_exitcode(status),
                        "cpu_s": _cpu_s(usage),
                        "faults": usage.ru_minflt + usage.ru_majflt,
                        # every wake of any of its threads (ZeroMQ's I/O thread's too), and
                        # of those the preemptions (more runnable processes: more of them)
                        "switches": usage.ru_nvcsw + usage.ru_nivcsw,
                        "preempted": usage.ru_nivcsw,
                    }
                )
        if not open_input and not children:
            break
        if not open_input and not stopped and _launcher_gone(launcher):
            _stop(children)
            stopped = True
        for key, _ in selector.select(1.0):  # the timeout bounds a missed wake-up, and the
            # launcher's check once its pipe is closed
            if key.fd == wake_read:
                os.read(wake_read, 4096)
                continue
            chunk = os.read(0, 65536)
            if not chunk:
                open_input = False
                selector.unregister(0)
                continue
            pending += chunk
            lines = pending.split(b"\n")
            pending = lines.pop()  # an incomplete last line waits for the rest
            batch = [json.loads(line) for line in lines if line]
            peers = [
                peers_files.get(r["options"]["peers_file"]) if r.get("options") else None
                for r in batch
            ]
            # what the template made since its last fork (the run's peers, 3 objects per
            # agent) joins the frozen heap: a child's collections never walk it. Walked, its
            # headers were written, and copied, in every child: at n = 1000 0.3 MB and
            # 0.6 ms of CPU per agent, at n = 2000 0.5 MB and 0.9 ms (O(n) per agent).
            # O(1): the collector's lists are spliced.
            gc.freeze()
            pids = _fork_batch(batch, peers, selector, wake_read, wake_write)
            started = [(int(r["id"]), pid) for r, pid in zip(batch, pids, strict=True)]
            children.update((pid, ident) for ident, pid in started)
            _say_all([{"started": ident, "pid": pid} for ident, pid in started])
    _say({"done": _cpu_s(resource.getrusage(resource.RUSAGE_SELF))})


def _fork_batch(
    batch: list[dict[str, Any]],
    peers: list[Peers | None],
    selector: selectors.BaseSelector,
    wake_read: int,
    wake_write: int,
) -> list[int]:
    """Fork a child for each request of ``batch`` (all the lines that came in one read), one
    right after the other, with nothing done in between; their pids. Every page the template
    writes after a fork is copied (a fault in the template), and the child keeps the old copy
    as a page of its own: the template's work per request (parsing it, reporting the child)
    wrote about 210 pages between two forks at n = 1000, 0.8 MB of private pages in every
    child. Parsed before the first fork and reported after the last, that work's pages are
    shared by the batch's children."""
    pids = [0] * len(batch)
    for k in range(len(batch)):
        pid = os.fork()
        if pid == 0:
            selector.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_read)
            os.close(wake_write)
            request = batch[k]
            options = request.get("options")
            os._exit(run_child(list(request["argv"]), str(request["log"]), options, peers[k]))
        pids[k] = pid
    return pids


def _say_all(messages: list[dict[str, int]]) -> None:
    """:func:`_say` several messages in one write."""
    if messages:
        with contextlib.suppress(BrokenPipeError):
            os.write(1, "".join(json.dumps(m) + "\n" for m in messages).encode())


class PeersFiles:
    """peers.json files read once for every child, each again only when it changes on disk."""

    def __init__(self) -> None:
        self.read: dict[str, tuple[tuple[int, int, int], Peers]] = {}

    def get(self, path: str) -> Peers | None:
        """The peers of ``path``; None when it cannot be read (the child then reports why)."""
        from dcop.errors import DcopError
        from dcop.protocol.peers import load_peers

        try:
            info = os.stat(path)
        except OSError:
            return None
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        known = self.read.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            peers = load_peers(path)
        except DcopError:
            return None
        peers.index  # noqa: B018  # built here once, not in every child (see Peers.index)
        self.read[path] = (stamp, peers)
        return peers


def _launcher_gone(launcher: int) -> bool:
    """Whether the process that started this template has ended: then the template has a new
    parent (init or a subreaper). Asked once its pipe is closed, which a run does only after its
    agents have left - unless it was killed, when its agents would wait for the coordinator
    until they noticed (each agent's loop checked its launcher every IDLE_WAKE_S, a wake that
    cost every idle agent CPU; see agents.agent.WATCHED_IDLE_WAKE_S)."""
    return os.getppid() != launcher


def _stop(children: dict[int, int]) -> None:
    """SIGTERM to every agent still running: each ends its loop cleanly (exit code 3)."""
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)


def _reaped() -> list[tuple[int, int, resource.struct_rusage]]:
    """Children that have ended: pid, wait status and what they used (``wait4``)."""
    out: list[tuple[int, int, resource.struct_rusage]] = []
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out.append((pid, status, usage))


def _cpu_s(usage: resource.struct_rusage) -> float:
    """CPU seconds in ``usage``: user and system."""
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    serve()
    os._exit(0)  # the template's work is done: skip tearing down what it imported
