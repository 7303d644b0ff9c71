"""Where a forked agent's CPU and page faults go, phase by phase, in a `dcop run` of a tree.

    .venv/bin/python benchmarks/agent_phases.py                  # trees of 250 and 1000 agents
    .venv/bin/python benchmarks/agent_phases.py --sizes 200 --out /tmp/x

For each size it runs ``dcop run FILE --algo dpop`` on the scale series' tree (``dcop generate
scalefree --links 1``, d = 10, p2 = 0.5, seed 1) with ``DCOP_AGENT_PHASES`` set: every forked
agent reads the kernel's account of itself at the edges of its phases (:mod:`dcop.agents.phases`
names them: the fork, start-up, the hello, each message type handled, the loop between them,
the exit) and writes the differences as it leaves. Per phase, over the agents: the mean CPU of
all the agent's threads (user and system, ZeroMQ's I/O thread and the kernel's page-fault work
included), the mean CPU of its main thread, the mean minor page faults (a first write to a page
shared with the template is one), and how often the phase came per agent. The run's own
figures beside them: every agent's CPU from the kernel's account at its exit, and its faults.
Writes benchmarks/results/agent_phases.json and .md.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale import DCOP, report_top  # noqa: E402


def _run(file: Path, out: Path, phases: Path) -> tuple[dict[str, Any], float]:
    env = {**os.environ, "DCOP_AGENT_PHASES": str(phases)}
    argv = [DCOP, "run", str(file), "--algo", "dpop", "-q", "--json", str(out)]
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - t0
    return (json.loads(out.read_text()) if out.exists() else {}), wall


def add_up(folder: Path) -> dict[str, Any]:
    """The agents' phase files in ``folder``, added up per phase (means over the agents)."""
    docs = [json.loads(Path(p).read_text()) for p in sorted(glob.glob(str(folder / "*.json")))]
    agents = len(docs)
    phases: dict[str, list[float]] = {}
    for doc in docs:
        for name, row in doc["phases"].items():
            total = phases.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            for k in range(4):
                total[k] += row[k]
    rows = [
        {
            "phase": name,
            "cpu_ms": total[0] / agents * 1e3,
            "main_cpu_ms": total[1] / agents * 1e3,
            "faults": total[2] / agents,
            "per_agent": total[3] / agents,
        }
        for name, total in phases.items()
    ]
    rows.sort(key=lambda r: -r["cpu_ms"])
    dirty = [d["private_dirty_kb"] for d in docs if d.get("private_dirty_kb") is not None]
    return {
        "agents": agents,
        "rows": rows,
        "cpu_ms": sum(r["cpu_ms"] for r in rows),
        "faults": sum(r["faults"] for r in rows),
        "private_dirty_kb_median": statistics.median(dirty) if dirty else None,
    }


def measure(n: int) -> dict[str, Any]:
    """The n-agent tree's run with every agent's phases (see the module docstring)."""
    from dcop.generators import scale_free_network
    from dcop.io import write_problem

    with tempfile.TemporaryDirectory(prefix="dcop-agent-phases-") as tmp:
        file = Path(tmp) / f"tree_n{n}.wcsp"
        write_problem(scale_free_network(n, 10, 0.5, 1, m=1), file)
        phases = Path(tmp) / "phases"
        phases.mkdir()
        doc, wall = _run(file, Path(tmp) / "run.json", phases)
        summed = add_up(phases)
    procs = doc.get("processes") or {}
    cpu = list((procs.get("agent_cpu_s") or {}).values())
    faults = list((procs.get("agent_page_faults") or {}).values())
    return {
        "n": n,
        "status": doc.get("status"),
        "wall_s": round(wall, 3),
        "agent_cpu_ms_mean": round(statistics.mean(cpu) * 1e3, 2) if cpu else None,
        "agent_page_faults_mean": round(statistics.mean(faults), 1) if faults else None,
        # the templates' forks and the coordinator's work, per agent
        "template_cpu_ms": round((procs.get("template_cpu_s") or 0.0) / n * 1e3, 2),
        "coordinator_cpu_ms": round((procs.get("coordinator_cpu_s") or 0.0) / n * 1e3, 2),
        "phases": summed,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        *report_top(
            "Where a forked agent's CPU and page faults go, phase by phase",
            report,
            "Phases as `dcop.agents.phases` names them; means over the agents that wrote their "
            "file. CPU: all threads, user and system (the kernel's page-fault work included); "
            "main: the agent's main thread alone; faults: minor page faults.",
        ),
    ]
    for r in report["rows"]:
        p = r["phases"]
        lines += [
            "",
            f"**n = {r['n']}** ({r['status']}, {r['wall_s']:.2f} s; {p['agents']} agents wrote "
            f"their phases): {p['cpu_ms']:.1f} ms of CPU and {p['faults']:.0f} page faults per "
            f"agent in all (the run's own account at each exit: {r['agent_cpu_ms_mean']} ms, "
            f"{r['agent_page_faults_mean']} faults); private dirty at the exit "
            f"{p['private_dirty_kb_median']} kB (median). Per agent beside it: the templates "
            f"{r['template_cpu_ms']} ms, the coordinator {r['coordinator_cpu_ms']} ms.",
            "",
            "| phase | per agent | CPU ms | main thread ms | page faults |",
            "|---|---|---|---|---|",
        ]
        for row in p["rows"]:
            lines.append(
                f"| {row['phase']} | {row['per_agent']:.1f} | {row['cpu_ms']:.2f} | "
                f"{row['main_cpu_ms']:.2f} | {row['faults']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    from scale import sized_bench_main

    sized_bench_main("agent_phases.py", "agent_phases", measure, markdown, __doc__)


if __name__ == "__main__":
    main()
