"""Run one measurement in its own process group under a wall-clock and an address-space limit.

A run never takes the benchmark down: it ends as ``ok``, ``oot`` (past the time limit, the whole
process group is killed), ``oom`` (past the memory limit: MemoryError, bad_alloc, an OOM message,
or a kill that only the limit explains) or ``error`` (with the last line of its stderr).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Messages by which a process says it ran out of memory (Python, numpy, C++, Java, dcop).
OOM_MARKERS = (
    "MemoryError",
    "Unable to allocate",
    "bad_alloc",
    "OutOfMemoryError",
    "Cannot allocate memory",
    "TableTooLarge",
    "table too large",
    "out of memory",
)


@dataclass
class Outcome:
    """How a limited run ended."""

    status: str  # ok | oot | oom | error
    returncode: int | None
    wall_s: float
    max_rss_mb: float | None
    stdout: str = ""
    stderr: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def reason(self) -> str:
        """The last non-empty stderr line (what went wrong, for the report)."""
        for line in reversed(self.stderr.splitlines()):
            if line.strip():
                return line.strip()[:300]
        return f"exit code {self.returncode}"


def classify(returncode: int | None, stderr: str, timed_out: bool) -> str:
    """The status of a finished (or killed) run."""
    if timed_out:
        return "oot"
    if returncode == 0:
        return "ok"
    if any(marker in stderr for marker in OOM_MARKERS):
        return "oom"
    # Killed by SIGKILL/SIGSEGV/SIGABRT without a message: under RLIMIT_AS this is almost always a
    # failed allocation (the kernel OOM killer, or a C library that aborts on a null malloc).
    if (
        returncode is not None
        and returncode < 0
        and -returncode
        in (
            signal.SIGKILL,
            signal.SIGSEGV,
            signal.SIGABRT,
        )
    ):
        return "oom"
    return "error"


def _limit_memory(mem_bytes: int | None) -> None:
    """preexec_fn: cap the child's address space (inherited by its own children)."""
    if mem_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))


def run_limited(
    cmd: Sequence[str],
    timeout_s: float,
    mem_gb: float | None,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    address_space_limit: bool = True,
) -> Outcome:
    """Run ``cmd`` with a time limit (kills its whole process group) and an RLIMIT_AS of ``mem_gb``.

    ``address_space_limit=False`` is for programs that reserve far more address space than they use
    (the JVM): they get their limit their own way (``-Xmx``).
    """
    mem_bytes = int(mem_gb * 2**30) if (mem_gb and address_space_limit) else None
    # Files, not pipes: a chatty child can never block on a full pipe while we wait for it.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=lambda: _limit_memory(mem_bytes),
        )
        timed_out = False
        status_word = 0
        rusage = None
        deadline = start + timeout_s
        while True:
            pid, status_word, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.perf_counter() > deadline:
                timed_out = True
                _kill_group(proc.pid)
                _, status_word, rusage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - start
        # The direct child is gone; end whatever it left behind in its group (agents, JVM threads).
        _kill_group(proc.pid)
        proc.returncode = os.waitstatus_to_exitcode(status_word)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    rss = rusage.ru_maxrss / 1024 if rusage is not None else None
    status = classify(proc.returncode, stderr + stdout[-2000:], timed_out)
    return Outcome(status, proc.returncode, wall, rss, stdout, stderr)


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group we created for one run (only ours: its id is the child's pid)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
