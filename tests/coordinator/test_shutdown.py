"""Ending a run from outside: SIGTERM and SIGHUP end ``dcop run`` as Ctrl-C does."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from dcop.generators import random_network
from dcop.io import write_problem


def _agents_of(folder: Path) -> list[int]:
    """Pids of agent processes whose command line names ``folder`` (their peers.json)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "dcop-agent" in cmdline and str(folder) in cmdline:
            pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_every_agent_and_leaves_a_result(tmp_path: Path, sig: int) -> None:
    problem_file = tmp_path / "p.wcsp"
    # dense enough that the agents are still at work when the signal comes
    write_problem(random_network(12, 8, 0.6, 0.1, seed=2), problem_file)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "result.json"
    env = {**os.environ, "TMPDIR": str(private_tmp)}
    run = subprocess.Popen(
        [sys.executable, "-m", "dcop", "run", str(problem_file), "--json", str(out), "-q",
         "--timeout", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    end = time.monotonic() + 60
    while time.monotonic() < end and len(_agents_of(private_tmp)) < 12 and run.poll() is None:
        time.sleep(0.05)
    assert run.poll() is None, run.communicate()
    run.send_signal(sig)
    _, err = run.communicate(timeout=30)
    assert run.returncode == 130, err
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted" and doc["cost"] is None
    assert signal.Signals(sig).name in doc["message"]
    end = time.monotonic() + 10
    while time.monotonic() < end and _agents_of(private_tmp):
        time.sleep(0.1)
    assert _agents_of(private_tmp) == []
    assert list(private_tmp.iterdir()) == []  # the run's temporary folder is gone


def test_the_agent_template_leaves_quietly_when_its_run_is_gone() -> None:
    """``dcop run`` ended by a signal while its prestarted template still imports: the template
    finds its output closed when it says ready. It used to die with a BrokenPipeError traceback
    on the terminal after the command had returned; it now just leaves (found by the soak's
    SIGTERM probes)."""
    template = subprocess.Popen(
        [sys.executable, "-m", "dcop.agents.forked"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert template.stdin and template.stdout and template.stderr
    template.stdout.close()  # the run is gone: nobody reads
    template.stdin.close()  # and nobody asks for agents
    err = template.stderr.read()
    template.stderr.close()
    assert template.wait(timeout=60) == 0, err
    assert err == b""


def test_an_interrupt_while_the_run_folder_is_removed_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (a KeyboardInterrupt in ``dcop run``) that lands while run_local removes its
    temporary folder: the folder is still removed. TemporaryDirectory gave up at the interrupt
    and left the agents' logs and peers.json behind (found by the soak's SIGTERM runs)."""
    from dcop.coordinator import run_local
    from dcop.protocol import RunSpec

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    real_rmtree = shutil.rmtree
    interrupted: list[str] = []

    def interrupted_once(path: Any, *args: Any, **kwargs: Any) -> None:
        if not interrupted and Path(path).name.startswith("dcop-run-"):
            interrupted.append(str(path))
            (Path(path) / "peers.json").unlink()  # part of the folder is gone...
            raise KeyboardInterrupt("signal SIGTERM")  # ...when the signal lands
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        run_local(random_network(4, 2, 0.5, 0.1, seed=1), RunSpec(), timeout=60)
    assert interrupted
    assert list(tmp_path.iterdir()) == []
