"""Faults during the launch of many agents (issue 49): an agent killed before its hello, while
the others are still being forked from templates in parallel, is named, and every process the
run started has exited when it returns, the templates included."""

from __future__ import annotations

import signal
import sys
from typing import Any, ClassVar

import pytest

from dcop.coordinator import launch, run_local
from dcop.coordinator.processes import AgentProcesses
from dcop.errors import RunError
from dcop.generators import scale_free_network
from dcop.protocol import RunSpec

#: a hundred processes at once: alone under xdist
pytestmark = pytest.mark.serial

N = 100
KILLED = 57
#: the command of an agent process that is killed (SIGKILL) as soon as it starts
KILLED_AT_START = [
    sys.executable,
    "-c",
    "import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
]


class _Recorded(AgentProcesses):
    """AgentProcesses that the test can look at once the run has failed."""

    made: ClassVar[list[AgentProcesses]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _Recorded.made.append(self)


def test_an_agent_killed_during_the_launch_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = scale_free_network(N, 3, 0.3, seed=1, m=1)
    monkeypatch.setattr(launch, "AgentProcesses", _Recorded)
    _Recorded.made.clear()
    reached: list[bool] = []

    def argv(agent: int, command: list[str]) -> list[str]:
        return KILLED_AT_START if agent == KILLED else command

    with pytest.raises(
        RunError, match=rf"agent {KILLED} \(x{KILLED}\) exited with code -9 during hello"
    ):
        run_local(
            problem,
            RunSpec(),
            timeout=120,
            agent_argv=argv,
            before_start=lambda _: reached.append(True),
        )
    assert reached == []  # the launch never finished: no start went out
    [procs] = _Recorded.made
    assert len(procs.procs) == N and procs.templates  # the others were forked
    assert all(p.poll() is not None for p in procs.procs.values())  # no agent left
    assert all(t.popen.poll() is not None for t in procs.templates)  # nor a template
    assert procs.exit_codes()[KILLED] == -signal.SIGKILL
