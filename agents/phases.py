"""Where a forked agent's CPU and page faults go, phase by phase (a measuring hook, off by default).

With ``DCOP_AGENT_PHASES`` set to a folder, each agent a template forks (:mod:`dcop.agents.forked`)
reads the kernel's account of itself at the edges of its phases and writes the differences to
``<folder>/agent-<pid>.json`` as it leaves: per phase, the CPU of all its threads (user and
system: ZeroMQ's I/O thread and the page faults' kernel time included), its main thread's, and
its minor page faults (each first write of a page it shares with its template is one: the copy
on write). The phases:

* ``fork`` - from the fork to the child's first line (CPython's after-fork work, the kernel's);
* ``start-up`` - descriptors, title, logging, options, the transport's sockets, the agent's config;
* ``hello`` - the hello to the coordinator;
* ``msg:TYPE`` - decoding and handling one message of that type, with what it sends back (the
  UTIL's join and eliminate runs inside ``msg:util``, or in ``job`` when it went to the worker);
* ``job`` - the loop picking up a worker's finished job;
* ``loop`` - everything between: liveness checks, the next wake's time;
* ``exit`` - from the loop's end to the file's writing (the kernel's teardown of the process
  comes after: the run's own account of each exited agent holds it).

Steps inside them are phases of their own, named ``PHASE:STEP``: the start-up's logging,
backend, transport (its context, ZAP handler, coordinator link and monitor), transport open (the
ROUTER) and agent; the loop's recv (polls, monitor events, reading frames, and the I/O thread's
work while it waits) and lost_peers; the setup's adopt, connect_peer, session and begin. A
phase's count is how often it came (its steps' edges are not counted).

``benchmarks/agent_phases.py`` adds the files of a run up. Reading ``getrusage`` twice costs
about 2 us: a few dozen reads per agent change nothing it measures.
"""

from __future__ import annotations

import functools
import json
import os
import resource
from collections.abc import Callable
from typing import Any

#: The environment variable that turns the hook on (a folder for the agents' files).
PHASES_ENV = "DCOP_AGENT_PHASES"

Reading = tuple[float, float, int]


def _read() -> Reading:
    """CPU seconds of all threads, of this thread, and minor page faults so far."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    thread = resource.getrusage(resource.RUSAGE_THREAD)
    return me.ru_utime + me.ru_stime, thread.ru_utime + thread.ru_stime, me.ru_minflt


class PhaseClock:
    """Adds the kernel's account since the last mark to the phase each mark names."""

    def __init__(self) -> None:
        self.last: Reading = (0.0, 0.0, 0)  # a child's account starts at zero at its fork
        #: phase -> [CPU s of all threads, CPU s of the main thread, minor faults, marks]
        self.spent: dict[str, list[float]] = {}
        #: the type of the message being handled (set by the decoder's wrapper)
        self.current = "?"

    def mark(self, phase: str, count: bool = True) -> None:
        """Charge what was used since the last mark to ``phase``, and count one more of it
        (``count``; not where the mark only ends what ran between two steps)."""
        now = _read()
        row = self.spent.setdefault(phase, [0.0, 0.0, 0.0, 0.0])
        row[0] += now[0] - self.last[0]
        row[1] += now[1] - self.last[1]
        row[2] += now[2] - self.last[2]
        row[3] += count
        self.last = now

    def dump(self, folder: str) -> None:
        """Write the phases to ``<folder>/agent-<pid>.json``, with the private dirty kB now."""
        self.mark("exit")
        doc: dict[str, Any] = {"phases": self.spent, "private_dirty_kb": _private_dirty_kb()}
        with open(os.path.join(folder, f"agent-{os.getpid()}.json"), "w") as f:
            json.dump(doc, f)


def _private_dirty_kb() -> int | None:
    try:
        with open("/proc/self/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Private_Dirty:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _around(
    clock: PhaseClock, before: str, after: Callable[[], str], fn: Any, counted: bool = False
) -> Any:
    """``fn`` charging what ran before it to ``before`` (counted or not) and itself to
    ``after()``."""

    @functools.wraps(fn)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        clock.mark(before, counted)
        try:
            return fn(*args, **kwargs)
        finally:
            clock.mark(after())

    return wrapped


def _named(step: str) -> Callable[[], str]:
    return lambda: step


def install(folder: str) -> Callable[[], None]:
    """Wrap the agent's phase edges (in this process only: a forked child's own copy of the
    classes) and return the function that writes the file; also called on a clean exit."""
    from dcop.agents import agent as agent_module
    from dcop.agents import run as agent_run

    clock = PhaseClock()
    clock.mark("fork")
    names = vars(agent_module)  # the agent's module calls its decode by this name
    decode = names["decode"]

    def decoding(*args: Any, **kwargs: Any) -> Any:
        env = decode(*args, **kwargs)
        clock.current = env.type
        return env

    names["decode"] = decoding
    cls = agent_module.Agent
    cls.run = _around(clock, "start-up", lambda: "loop", cls.run, counted=True)  # type: ignore[method-assign]
    cls._hello = _around(clock, "loop", lambda: "hello", cls._hello)  # type: ignore[method-assign]
    cls.on_frames = _around(  # type: ignore[method-assign]
        clock, "loop", lambda: "msg:" + clock.current, cls.on_frames
    )
    cls._finish_job = _around(clock, "loop", lambda: "job", cls._finish_job)  # type: ignore[method-assign]

    # steps inside the start-up, the loop and the setup: named ``PHASE:STEP``; what runs
    # between them stays the phase's own
    from dcop.agents import session as session_module
    from dcop.protocol import zmqlink

    transport = zmqlink.ZmqAgentTransport
    steps: list[tuple[Any, str, str]] = [
        (agent_run, "agent_logging", "start-up:logging"),
        (agent_run, "agent_backend", "start-up:backend"),
        (transport, "__init__", "start-up:transport"),
        (transport, "open", "start-up:transport open"),
        (cls, "__init__", "start-up:agent"),
        (transport, "recv", "loop:recv"),
        (transport, "lost_peers", "loop:lost_peers"),
        (agent_module, "adopt_setup", "msg:setup:adopt"),
        (transport, "connect_peer", "msg:setup:connect_peer"),
        (session_module.Session, "__init__", "msg:setup:session"),
        (session_module.Session, "begin", "msg:setup:begin"),
    ]
    for owner, name, step in steps:
        setattr(
            owner, name, _around(clock, step.rsplit(":", 1)[0], _named(step), getattr(owner, name))
        )

    def dump() -> None:
        clock.dump(folder)

    agent_run.BEFORE_LEAVING.append(dump)
    return dump
