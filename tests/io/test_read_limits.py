"""Reading a file within a run's deadline and memory (security round 4, finding 2): declared
counts are checked against the memory a read may take before anything is built, the deadline is
looked at as the file streams in, and a stream that never ends (``/dev/zero``) is refused within
one chunk."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dcop.errors import InputError, RunTimeout, TableTooLarge
from dcop.io import ReadLimits, read_problem


def _many_variables(path: Path, n: int) -> Path:
    path.write_text(f"many {n} 1 0 10\n" + "1 " * n + "\n")
    return path


@pytest.mark.parametrize("fmt", ["wcsp", "uai"])
def test_declared_variables_over_the_memory_room_are_refused_before_they_are_built(
    tmp_path: Path, fmt: str
) -> None:
    n = 1_000_000
    if fmt == "wcsp":
        path = _many_variables(tmp_path / "v.wcsp", n)
    else:
        path = tmp_path / "v.uai"
        path.write_text(f"MARKOV\n{n}\n" + "1 " * n + "\n0\n")
    limits = ReadLimits(room_bytes=100e6, memory_text="--max-memory 100M")
    with pytest.raises(TableTooLarge, match=r"declares 1000000 variables.*--max-memory 100M"):
        read_problem(path, limits=limits)


def test_a_file_within_the_room_reads_as_before(tmp_path: Path) -> None:
    path = _many_variables(tmp_path / "v.wcsp", 1000)
    problem = read_problem(path, limits=ReadLimits(room_bytes=100e6))
    assert problem.n == 1000


def test_table_values_count_against_the_room(tmp_path: Path) -> None:
    # one dense table of 2**20 entries: 8 MiB of values, in a read that may take 4 MiB
    path = tmp_path / "t.uai"
    path.write_text("MARKOV\n20\n" + "2 " * 20 + "\n1\n20 " + " ".join(map(str, range(20))) + "\n")
    with pytest.raises(TableTooLarge, match="table values"):
        read_problem(path, limits=ReadLimits(room_bytes=4 << 20))


def test_reading_past_the_deadline_is_a_timeout(tmp_path: Path) -> None:
    path = _many_variables(tmp_path / "v.wcsp", 200_000)
    with pytest.raises(RunTimeout, match="reading the file took longer than --timeout 1 s"):
        read_problem(
            path, limits=ReadLimits(deadline=time.monotonic() - 1, timeout_text="--timeout 1 s")
        )


def test_evaluating_a_yaml_intention_past_the_deadline_is_a_timeout(tmp_path: Path) -> None:
    names = ", ".join(f"v{i}" for i in range(12))
    path = tmp_path / "slow.yaml"
    path.write_text(
        "name: slow\nobjective: min\ndomains:\n  d: {values: [0, 1]}\nvariables:\n"
        + "".join(f"  v{i}: {{domain: d}}\n" for i in range(12))
        + f"constraints:\n  c:\n    type: intention\n    function: min({names})\n"
    )
    with pytest.raises(RunTimeout):
        read_problem(path, limits=ReadLimits(deadline=time.monotonic() - 1))
    assert read_problem(path).n == 12  # without a deadline it reads


_READ = """
import sys
from dcop.errors import InputError
from dcop.io import read_problem
try:
    read_problem(sys.argv[1], sys.argv[2])
except InputError as exc:
    print(exc)
"""


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize("fmt", ["wcsp", "uai", "yaml", "xml"])
def test_an_endless_device_is_refused_in_one_line(device: str, fmt: str) -> None:
    """Before, each grew by about 300 MiB/s without a message (a subprocess: the old reader
    never returned)."""
    done = subprocess.run(
        [sys.executable, "-c", _READ, device, fmt], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(device) and len(done.stdout.strip().splitlines()) == 1
    assert "NUL byte" in done.stdout or "not a UTF-8" in done.stdout


def test_a_pipe_is_read_whole(tmp_path: Path) -> None:
    fifo = tmp_path / "in.wcsp"
    os.mkfifo(fifo)
    text = "p 2 2 1 10\n2 2\n2 0 1 0 1\n0 0 5\n"

    def write() -> None:
        with open(fifo, "w") as fh:
            fh.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        problem = read_problem(fifo, "wcsp")
    finally:
        writer.join(60)
    assert problem.n == 2 and len(problem.tables) == 1


def test_a_pipe_over_the_size_limit_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dcop.io._common as common

    monkeypatch.setattr(common, "STREAM_CHUNK", 1024)
    fifo = tmp_path / "in.xml"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as fh, contextlib.suppress(BrokenPipeError):
            fh.write("<instance>" + " " * 80_000)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with pytest.raises(InputError, match="more than the limit of 65536 bytes"):
            common.read_text(fifo, 1 << 16)
    finally:
        writer.join(60)
