"""A description of the machine a benchmark ran on, written into every results file.

The one machine block of every registered suite: ``machine_info()`` in the JSON, ``describe()``
in the Markdown. (Probes, in ``benchmarks/probes/``, keep no results.)
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or what the platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError):
        pass
    return None


def _gpus() -> list[str]:
    """GPU names from nvidia-smi (empty where there is none)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.splitlines() if line.strip()]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_commit() -> str | None:
    """The commit the code is at: ``DCOP_COMMIT`` where set (a copy of the tree on another
    machine can carry a stale ``.git``: the device tool's reported its session's first commit),
    else git's HEAD, with ``+changes`` where tracked files differ from it."""
    given = os.environ.get("DCOP_COMMIT")
    if given:
        return given
    head = _git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    changed = _git("status", "--porcelain", "--untracked-files=no")
    return f"{head}+changes" if changed else head


def machine_info() -> dict[str, Any]:
    """CPU model, cores, RAM, GPUs, OS, Python and NumPy versions, and the repository commit."""
    try:
        import numpy

        numpy_version = numpy.__version__
    except ImportError:  # pragma: no cover - numpy is a core dependency
        numpy_version = None
    gpus = _gpus()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        load = None
    return {
        # other jobs on the machine (1, 5, 15 min load average when the suite started)
        "load_average": load,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": _ram_gib(),
        "gpu": gpus or None,
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "numpy": numpy_version,
        "commit": _git_commit(),
    }


def describe(info: dict[str, Any] | str) -> str:
    """One line for Markdown reports (a results file written before the shared block holds a
    line of its own: kept as it is)."""
    if isinstance(info, str):
        return info
    gpu = ", ".join(info["gpu"]) if info.get("gpu") else "no GPU"
    return (
        f"{info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB RAM, {gpu}; "
        f"{info['os']}, Python {info['python']}, NumPy {info['numpy']}, commit {info['commit']}"
        f"; load average at start {info.get('load_average') or 'not recorded'}"
    )
