"""Where a forked agent's CPU goes during a `dcop run`: the run's CPU by role, and the agents'
Python functions added up.

    .venv/bin/python benchmarks/agent_cpu.py                   # trees of 250 and 1000 agents
    .venv/bin/python benchmarks/agent_cpu.py --sizes 50 --out /tmp/x

For each size it runs ``dcop run FILE --algo dpop`` on the scale series' tree (``dcop generate
scalefree --links 1``, d = 10, p2 = 0.5, seed 1) twice:

1. plain: the result document's CPU seconds by role (the agents, all their threads and their
   kernel time, from the kernel's account of each exited process; the templates that forked
   them; the coordinator) and the agents' page faults: per agent, that is the run's cost;
2. profiled: every forked agent runs its main thread under cProfile, timed by that thread's CPU
   (``DCOP_AGENT_PROFILE``, see dcop.agents.forked), and the profiles are added up: the
   functions with the most CPU of their own, and the most with what they call, per agent.

The profiled run is slower (cProfile costs about as much again); its figures are shares, the
plain run's are the costs. Writes benchmarks/results/agent_cpu.json and .md.
"""

from __future__ import annotations

import glob
import json
import os
import pstats
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

ROOT = HERE.parent
TOP = 25


def _run(file: Path, out: Path, profile_dir: Path | None) -> tuple[dict[str, Any], float]:
    env = dict(os.environ)
    if profile_dir is not None:
        env["DCOP_AGENT_PROFILE"] = str(profile_dir)
    argv = [DCOP, "run", str(file), "--algo", "dpop", "-q", "--json", str(out)]
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - t0
    return (json.loads(out.read_text()) if out.exists() else {}), wall


def _where(key: tuple[str, int, str]) -> str:
    file, line, name = key
    try:
        file = str(Path(file).resolve().relative_to(ROOT))
    except ValueError:
        file = Path(file).name if file != "~" else ""
    return f"{file}:{line}({name})" if file else name


def _functions(profile_dir: Path, agents: int) -> dict[str, list[dict[str, Any]]]:
    files = sorted(glob.glob(str(profile_dir / "agent-*.prof")))
    if not files:
        return {"own": [], "with_callees": []}
    stats = pstats.Stats(*files)
    rows = [
        {"function": _where(key), "calls": nc / agents, "own_ms": tt / agents * 1e3,
         "with_callees_ms": ct / agents * 1e3}
        for key, (_cc, nc, tt, ct, _callers) in stats.stats.items()  # type: ignore[attr-defined]
    ]  # fmt: skip
    return {
        "profiles": len(files),  # type: ignore[dict-item]
        "main_thread_ms": sum(r["own_ms"] for r in rows),  # type: ignore[dict-item]
        "own": sorted(rows, key=lambda r: -r["own_ms"])[:TOP],
        "with_callees": sorted(rows, key=lambda r: -r["with_callees_ms"])[:TOP],
    }


def measure(n: int) -> dict[str, Any]:
    """The plain and the profiled run of the n-agent tree (see the module docstring)."""
    from dcop.generators import scale_free_network
    from dcop.io import write_problem

    with tempfile.TemporaryDirectory(prefix="dcop-agent-cpu-") as tmp:
        file = Path(tmp) / f"tree_n{n}.wcsp"
        write_problem(scale_free_network(n, 10, 0.5, 1, m=1), file)
        doc, wall = _run(file, Path(tmp) / "plain.json", None)
        profiles = Path(tmp) / "profiles"
        profiles.mkdir()
        profiled, _ = _run(file, Path(tmp) / "profiled.json", profiles)
        functions = _functions(profiles, n)
    procs = doc.get("processes") or {}
    agent_cpu = list((procs.get("agent_cpu_s") or {}).values())
    faults = list((procs.get("agent_page_faults") or {}).values())
    return {
        "n": n,
        "status": doc.get("status"),
        "profiled_status": profiled.get("status"),
        "wall_s": round(wall, 3),
        "times": doc.get("times"),
        "agent_cpu_ms_median": round(statistics.median(agent_cpu) * 1e3, 2) if agent_cpu else None,
        "agent_cpu_s_sum": round(sum(agent_cpu), 3),
        "template_cpu_s": procs.get("template_cpu_s"),
        "coordinator_cpu_s": procs.get("coordinator_cpu_s"),
        "agent_page_faults_median": statistics.median(faults) if faults else None,
        "functions": functions,
    }


def markdown(report: dict[str, Any]) -> str:
    lines = [
        *report_top(
            "Where a forked agent's CPU goes",
            report,
            "CPU from the plain run's document (the kernel's account of each exited process, "
            "all threads, user and system); per agent = over n.",
        ),
        "",
        "| n | status | run s | agents' CPU s | CPU ms / agent (median) | templates' CPU s | "
        "coordinator CPU s | all CPU ms / agent | page faults / agent |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        total = r["agent_cpu_s_sum"] + (r["template_cpu_s"] or 0) + (r["coordinator_cpu_s"] or 0)
        lines.append(
            f"| {r['n']} | {r['status']} | {r['wall_s']:.2f} | {r['agent_cpu_s_sum']:.2f} | "
            f"{r['agent_cpu_ms_median']} | {r['template_cpu_s']:.2f} | "
            f"{r['coordinator_cpu_s']:.2f} | {total / r['n'] * 1e3:.1f} | "
            f"{r['agent_page_faults_median']} |"
        )
    for r in report["rows"]:
        f = r["functions"]
        if not f.get("own"):
            continue
        lines += [
            "",
            f"The {r['n']}-agent run under cProfile ({f['profiles']} agents profiled; their main "
            f"thread's CPU as cProfile counts it, its own cost included: "
            f"{f['main_thread_ms']:.1f} ms per agent). Per agent:",
            "",
            "| function | calls | own ms | with callees ms |",
            "|---|---|---|---|",
        ]
        seen = set()
        for row in [*f["own"][:15], *f["with_callees"][:15]]:
            if row["function"] in seen:
                continue
            seen.add(row["function"])
            lines.append(
                f"| `{row['function']}` | {row['calls']:.1f} | {row['own_ms']:.3f} | "
                f"{row['with_callees_ms']:.3f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    from scale import sized_bench_main

    sized_bench_main("agent_cpu.py", "agent_cpu", measure, markdown, __doc__)


if __name__ == "__main__":
    main()
