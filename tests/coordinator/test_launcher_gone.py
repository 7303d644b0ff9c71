"""Agents that ``dcop run`` launched leave once it is gone, even before it has spoken to them
(security round 4, finding 3: ``kill -9`` during launch left them up for their whole timeout,
about 130 s, since a lost coordinator counted only once it had been heard from)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dcop.agents.agent import process_alive
from dcop.generators import random_network
from dcop.io import write_problem


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid:
            out.append(int(entry))
    return out


def test_agents_leave_when_dcop_run_is_killed_during_launch(tmp_path: Path) -> None:
    path = tmp_path / "r24.wcsp"
    write_problem(random_network(24, 5, 0.3, 0.05, seed=3), path)
    run = subprocess.Popen(
        [sys.executable, "-m", "dcop", "run", str(path), "--timeout", "120"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    templates: list[int] = []
    agents: list[int] = []
    try:
        end = time.monotonic() + 120
        while not agents:  # the first agents forked: none has heard from the coordinator yet
            assert run.poll() is None, "dcop run ended before it launched an agent"
            assert time.monotonic() < end, "no agent was launched"
            templates = _children(run.pid)
            agents = [a for t in templates for a in _children(t)]
            time.sleep(0.01)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    # the template forks what it was asked for, then waits for its agents and exits with them
    end = time.monotonic() + 90  # the agents' own timeout is 130 s
    while any(process_alive(p) for p in (*templates, *agents)):
        assert time.monotonic() < end, "agents outlived the dcop run that launched them"
        time.sleep(0.2)


def test_process_alive() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid)
