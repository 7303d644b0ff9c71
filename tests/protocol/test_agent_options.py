"""An agent's options as data (:mod:`dcop.protocol.agent_options`): the command line they write parses
back to them, and a forked agent gets them only when its command line still says them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from dcop.agents import cli
from dcop.coordinator import processes
from dcop.coordinator.processes import AgentProcesses
from dcop.protocol.agent_options import AgentOptions

EXAMPLES = [
    AgentOptions(3, "peers.json"),
    AgentOptions(
        7,
        "/run/peers.json",
        problem="problem.yaml",
        serve=True,
        gpu="all",
        timeout=12.345678901,
        peer_timeout=0.1 + 0.2,  # not a short decimal: written exactly all the same
        max_message_mib=3.5,
        secure=True,
        keys="/run/keys",
        log_level="DEBUG",
        fault="crash-at-util",
        launcher_pid=4242,
    ),
]


@pytest.mark.parametrize("options", EXAMPLES)
def test_the_command_line_of_options_parses_back_to_them(
    options: AgentOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    got: list[AgentOptions] = []
    monkeypatch.setattr(cli, "run_agent", got.append)
    try:  # a success returns (dcop.usage.run_program); an explicit exit must say success
        cli.main(options.argv())
    except SystemExit as stop:
        assert stop.code in (0, None)
    assert got == [options]


class _Recorder:
    """A template that records what it is asked to fork."""

    def __init__(self) -> None:
        self.forked: list[tuple[int, list[str], AgentOptions | None]] = []

    def fork(
        self, agent_id: int, argv: list[str], log_file: Path, options: AgentOptions | None = None
    ) -> None:
        self.forked.append((agent_id, argv, options))

    def serve(self, pool: Any) -> None:
        self.pool = pool

    def take_all(self) -> None:
        """Fork every request waiting in the pool (a real template takes them as it forks)."""
        while self.pool.queue:
            self.fork(*self.pool.take(self))


def test_a_forked_agent_gets_the_options_only_where_its_command_line_says_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    recorder: Any = _Recorder()
    monkeypatch.setattr(processes, "_take_template", lambda: recorder)
    options = EXAMPLES[0]
    argv = [sys.executable, "-m", "dcop.agents", *options.argv()]
    procs = AgentProcesses()
    procs.start(0, argv, tmp_path / "0.log", options)
    procs.start(1, [*argv, "--fault", "crash-at-util"], tmp_path / "1.log", options)  # a hook's
    procs.start(2, argv, tmp_path / "2.log")
    recorder.take_all()
    assert [(i, o) for i, _, o in recorder.forked] == [(0, options), (1, None), (2, None)]
    assert recorder.forked[1][1][-2:] == ["--fault", "crash-at-util"]
