"""The agents' template reads a run's peers.json once for all its children."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dcop.agents import forked
from dcop.coordinator import peers_for, round_robin
from tests.conftest import random_problem


def _write_peers(path: Path, n: int) -> None:
    peers = peers_for(
        random_problem(1, n=n), *round_robin(["127.0.0.1"], 0, list(range(21000, 21000 + n + 1)))
    )
    peers.write(path)


def test_peers_are_read_once_and_again_when_the_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dcop.protocol import peers as peers_module

    path = tmp_path / "peers.json"
    _write_peers(path, 4)
    reads: list[str] = []
    load = peers_module.load_peers
    monkeypatch.setattr(peers_module, "load_peers", lambda p: reads.append(p) or load(p))
    files = forked.PeersFiles()
    first = files.get(str(path))
    assert first is not None and len(first.agents) == 4
    assert files.get(str(path)) is first and len(reads) == 1  # the children share one read
    _write_peers(path, 5)  # rewritten (the launcher's second write, another run's file)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    second = files.get(str(path))
    assert second is not None and len(second.agents) == 5 and len(reads) == 2


def test_a_peers_file_the_template_cannot_read_is_left_to_each_child(tmp_path: Path) -> None:
    files = forked.PeersFiles()
    assert files.get(str(tmp_path / "missing.json")) is None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"agents": "not a list"}))
    assert files.get(str(bad)) is None  # no exception in the template: the child reports it


def test_the_template_reports_what_each_child_and_itself_used(tmp_path: Path) -> None:
    # a child that fails at once (an unknown option): its exit line still says what it used
    import subprocess
    import sys

    request = {"id": 7, "argv": ["--no-such-option"], "log": str(tmp_path / "agent-7.log")}
    done = subprocess.run(
        [sys.executable, "-m", "dcop.agents.forked"],
        input=(json.dumps(request) + "\n").encode(),
        capture_output=True,
        timeout=60,
        check=True,
    )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    exits = [m for m in lines if "exit" in m]
    assert len(exits) == 1 and exits[0]["exit"] == 7 and exits[0]["code"] == 2
    assert exits[0]["cpu_s"] > 0 and exits[0]["faults"] > 0
    assert "no-such-option" in (tmp_path / "agent-7.log").read_text()
    assert "done" in lines[-1] and lines[-1]["done"] > 0  # its own CPU, once its children ended


def test_requests_that_come_together_are_forked_as_one_batch_each_reported(
    tmp_path: Path,
) -> None:
    # three lines in one write, the last one cut in two: the template forks each child once,
    # reports each start with its own pid, and waits for a line's end before forking it
    import subprocess
    import sys
    import time

    requests = [
        {"id": k, "argv": ["--no-such-option"], "log": str(tmp_path / f"agent-{k}.log")}
        for k in (3, 4, 5)
    ]
    text = "".join(json.dumps(r) + "\n" for r in requests).encode()
    template = subprocess.Popen(
        [sys.executable, "-m", "dcop.agents.forked"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert template.stdin is not None
    template.stdin.write(text[:-10])
    template.stdin.flush()
    time.sleep(0.5)  # the template has read the two whole lines and the piece by now
    template.stdin.write(text[-10:])
    template.stdin.close()
    assert template.stdout is not None
    out = template.stdout.read()  # until the template exits, its children reaped
    assert template.wait(timeout=60) == 0
    lines = [json.loads(line) for line in out.decode().splitlines()]
    started = {m["started"]: m["pid"] for m in lines if "started" in m}
    assert sorted(started) == [3, 4, 5] and len(set(started.values())) == 3
    exits = sorted((m["exit"], m["code"]) for m in lines if "exit" in m)
    assert exits == [(3, 2), (4, 2), (5, 2)]
    assert all("no-such-option" in (tmp_path / f"agent-{k}.log").read_text() for k in (3, 4, 5))
