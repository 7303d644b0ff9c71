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

from dcop.coordinator.launch import RUN_PREFIX
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
        if not interrupted and Path(path).name.startswith(RUN_PREFIX):
            interrupted.append(str(path))
            (Path(path) / "peers.json").unlink()  # part of the folder is gone...
            raise KeyboardInterrupt("signal SIGTERM")  # ...when the signal lands
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", interrupted_once)
    with pytest.raises(KeyboardInterrupt):
        run_local(random_network(4, 2, 0.5, 0.1, seed=1), RunSpec(), timeout=60)
    assert interrupted
    assert list(tmp_path.iterdir()) == []


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _run(problem_file: Path, out: Path, private_tmp: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dcop", "run", str(problem_file), "--json", str(out), "-q",
         "--timeout", "120"],
        env={**os.environ, "TMPDIR": str(private_tmp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _assert_interrupted_and_clean(
    run: subprocess.Popen[str], out: Path, private_tmp: Path, sig: int
) -> None:
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert "Traceback" not in err, err
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted", doc
    assert signal.Signals(sig).name in doc["message"]
    end = time.monotonic() + 15
    while time.monotonic() < end and _agents_of(private_tmp):
        time.sleep(0.1)
    assert _agents_of(private_tmp) == []
    assert list(private_tmp.iterdir()) == []  # no run folder left


@pytest.mark.parametrize(
    ("sig", "delay_s"),
    [(signal.SIGINT, 0.0), (signal.SIGINT, 0.2), (signal.SIGTERM, 0.0), (signal.SIGTERM, 0.4)],
)
def test_an_early_signal_still_writes_the_interrupted_document(
    tmp_path: Path, sig: int, delay_s: float
) -> None:
    """A signal in the first instants of ``dcop run`` (while Python imports, typer parses, the
    template starts): the document, exit 130, no traceback (SIGINT gave a KeyboardInterrupt
    traceback and exit -2, no document; issue 33 item 11). ``delay_s`` counts from the moment
    the command has started its agents' template (its first lines, before the heavy imports):
    before the interpreter reaches dcop's code a signal ends it as it ends any program. The
    problem has 40 agents, so that the run is still starting at the latest signal (12 agents
    could finish within 0.4 s on a quiet machine)."""
    problem_file = tmp_path / "p.wcsp"
    write_problem(random_network(40, 8, 0.3, 0.1, seed=2), problem_file)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "result.json"
    run = _run(problem_file, out, private_tmp)
    end = time.monotonic() + 30
    while time.monotonic() < end and not _children(run.pid) and run.poll() is None:
        time.sleep(0.002)
    time.sleep(delay_s)
    run.send_signal(sig)
    _assert_interrupted_and_clean(run, out, private_tmp, sig)


def test_sigterm_during_a_stalled_phase_leaves_nothing_behind(tmp_path: Path) -> None:
    """One agent stopped (SIGSTOP) stalls the run; SIGTERM then still writes the document and
    leaves no process (the stopped one included) and no run folder (issue 32, build item 3)."""
    problem_file = tmp_path / "p.wcsp"
    write_problem(random_network(12, 8, 0.6, 0.1, seed=2), problem_file)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "result.json"
    run = _run(problem_file, out, private_tmp)
    end = time.monotonic() + 60
    while time.monotonic() < end and len(_agents_of(private_tmp)) < 12 and run.poll() is None:
        time.sleep(0.05)
    agents = _agents_of(private_tmp)
    assert run.poll() is None and agents, run.communicate()
    os.kill(agents[0], signal.SIGSTOP)
    time.sleep(1.0)
    assert run.poll() is None, run.communicate()
    run.send_signal(signal.SIGTERM)
    _assert_interrupted_and_clean(run, out, private_tmp, signal.SIGTERM)


def test_a_later_run_or_clean_removes_what_a_killed_run_left(tmp_path: Path) -> None:
    """kill -9 of ``dcop run`` leaves its run folder; ``dcop run --clean`` (and every run's
    start) removes it, and never the folder of a run that is alive."""
    from dcop.coordinator.launch import RUNS_FOLDER, workdir_lock

    runs = tmp_path / RUNS_FOLDER
    dead = runs / f"{RUN_PREFIX}dead"
    alive = runs / f"{RUN_PREFIX}alive"
    for folder in (dead, alive):
        folder.mkdir(parents=True)
        (folder / "agent-0.log").write_text("log")
    (dead / ".dcop-run.lock").write_text("pid 1\n")  # its holder is gone: no lock held
    with workdir_lock(alive):
        cleaned = subprocess.run(
            [sys.executable, "-m", "dcop", "run", "--clean"],
            env={**os.environ, "TMPDIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cleaned.returncode == 0, cleaned.stderr
        assert "removed 1 leftover" in cleaned.stderr
        assert not dead.exists() and alive.exists()


def _templates_of(run_pid: int) -> list[int]:
    """The agent templates ``dcop run`` started (its children titled so)."""
    out = []
    for pid in _children(run_pid):
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"dcop-agent-template" in title or b"dcop.agents.forked" in title:
            out.append(pid)
    return out


def test_sigterm_during_the_launch_leaves_nothing_behind(tmp_path: Path) -> None:
    """SIGTERM while a 150-agent tree is still being forked (some agents up, the rest still to
    come, from templates working in parallel): the document, exit 130, and no agent, no
    template and no run folder left (issue 49)."""
    from dcop.generators import scale_free_network

    n = 150
    problem_file = tmp_path / "tree.wcsp"
    write_problem(scale_free_network(n, 3, 0.3, seed=1, m=1), problem_file)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "result.json"
    run = _run(problem_file, out, private_tmp)
    templates: list[int] = []
    end = time.monotonic() + 90
    while time.monotonic() < end and run.poll() is None:
        templates = templates or _templates_of(run.pid)
        if len(_agents_of(private_tmp)) >= 10:
            break
        time.sleep(0.01)
    up = len(_agents_of(private_tmp))
    assert run.poll() is None and up >= 10, run.communicate()
    run.send_signal(signal.SIGTERM)
    _assert_interrupted_and_clean(run, out, private_tmp, signal.SIGTERM)
    end = time.monotonic() + 15
    while time.monotonic() < end and any(_alive(t) for t in templates):
        time.sleep(0.1)
    assert templates and not any(_alive(t) for t in templates)


def _alive(pid: int) -> bool:
    from dcop.agents.agent import process_alive

    return process_alive(pid)
