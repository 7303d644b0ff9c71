"""What every suite gets: limits, paths, the progress bar, and isolated task execution."""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compare.limits import Outcome, run_limited
from compare.machine import machine_info

HERE = Path(__file__).resolve().parent
RUNNER = HERE.parent / "run.py"
ROOT = HERE.parents[1]
SHARED = ROOT.parent / "shared"
#: The shared instances; DCOP_INSTANCES points elsewhere (a device machine's carried copy)
INSTANCES = Path(os.environ.get("DCOP_INSTANCES", SHARED / "instances"))


@dataclass
class Context:
    """Suite options (from the command line) and helpers shared by all suites."""

    out_dir: Path
    seeds: int = 5
    time_limit: float = 60.0
    mem_gb: float = 8.0
    pydcop: Path | None = None
    frodo: Path | None = None
    quick: bool = False
    command: str = ""
    progress: Any = None  # rich.progress.Progress or None
    task_id: Any = None
    work_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="dcop-bench-")))
    _machine: dict[str, Any] | None = None

    @property
    def machine(self) -> dict[str, Any]:
        if self._machine is None:
            self._machine = machine_info()
        return self._machine

    def meta(self, **extra: Any) -> dict[str, Any]:
        """The header every results file carries."""
        return {
            "machine": self.machine,
            "command": self.command,
            "limits": f"{self.time_limit:g} s wall clock, {self.mem_gb:g} GiB address space",
            "time_limit_s": self.time_limit,
            "mem_limit_gib": self.mem_gb,
            "seeds": self.seeds,
            **extra,
        }

    # -- progress -------------------------------------------------------------------------------
    def start(self, total: int, what: str) -> None:
        if self.progress is not None:
            self.task_id = self.progress.add_task(what, total=total)

    def step(self, label: str = "") -> None:
        if self.progress is not None and self.task_id is not None:
            self.progress.update(self.task_id, advance=1, description=label or None)

    def log(self, message: str) -> None:
        if self.progress is not None:
            self.progress.console.log(message)
        else:
            print(message, file=sys.stderr)

    # -- isolated execution -----------------------------------------------------------------------
    def run_task(self, task: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Run a task of ``compare.tasks`` in a fresh worker process under the limits.

        Returns the worker's dict, or ``{"status": "oot"|"oom"|"error", ...}`` when it did not
        finish; ``wall_s`` and ``max_rss_mb`` are always added.
        """
        fd, task_path = tempfile.mkstemp(suffix=".json", dir=self.work_dir)
        os.close(fd)
        result_path = task_path.replace(".json", ".out.json")
        Path(task_path).write_text(json.dumps(task))
        limit = self.time_limit if timeout is None else timeout
        env = dict(os.environ)
        # one BLAS thread: the measured code is ours, and both tools then get the same cores
        env.setdefault("OMP_NUM_THREADS", "1")
        outcome = run_limited(
            [sys.executable, str(RUNNER), "--worker", task_path, "--result", result_path],
            timeout_s=limit,
            mem_gb=self.mem_gb,
            env=env,
        )
        result: dict[str, Any]
        if (outcome.ok and Path(result_path).exists()) or (
            Path(result_path).exists() and outcome.status in ("oom", "error")
        ):
            result = json.loads(Path(result_path).read_text())
        else:
            result = failure(outcome)
        result["wall_s"] = outcome.wall_s
        result["max_rss_mb"] = outcome.max_rss_mb
        for p in (task_path, result_path):
            Path(p).unlink(missing_ok=True)
        return result

    def run_command(self, cmd: list[str], timeout: float | None = None, **kwargs: Any) -> Outcome:
        """An external command under the same limits."""
        limit = self.time_limit if timeout is None else timeout
        return run_limited(cmd, timeout_s=limit, mem_gb=self.mem_gb, **kwargs)


def failure(outcome: Outcome) -> dict[str, Any]:
    """The row fields of a run that produced no result."""
    out: dict[str, Any] = {"status": outcome.status}
    if outcome.status == "error":
        out["error"] = outcome.reason()
    return out


def shell_join(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
