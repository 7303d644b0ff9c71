"""A warm cluster against cold runs: ``dcop coordinator`` on serving agents that stay up, beside
``dcop run`` (every process started for the problem) and FRODO's DPOP, on the small FRODO-suite
instances (where FRODO's one JVM beats dcop's cold start) and a 30-variable random network.

    .venv/bin/python benchmarks/serving.py [--reps 5] [--out DIR]

Starts one serving agent per variable of the largest instance once (a problem-independent
peers.json, agents forked by the local launcher, ``--serve``), then, instance after instance and
``--reps`` times in turn: ``dcop coordinator --peers P --problem FILE -q --json OUT`` (the whole
command: its interpreter, imports, reading the file, setting the agents up, DFS, UTIL/VALUE) and
``dcop run FILE -q --json OUT``. Medians are kept; every cost is checked against BE. FRODO's wall
time comes from ``dpop_vs_frodo.json`` (same file names; not re-run here). Writes
``serving.json`` and ``serving.md``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dcop.coordinator import AgentProcesses, free_ports
from dcop.generators import random_network
from dcop.inference import solve_be
from dcop.io import read_problem, write_problem
from dcop.protocol.peers import AgentEntry, Peers

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(RESULTS.parent))
from compare.machine import machine_info  # noqa: E402  (benchmarks/compare, beside this file)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "instances" / "frodo"
DCOP = [sys.executable, "-m", "dcop"]


def instances(folder: Path) -> list[Path]:
    """The FRODO suite's small files (two of FRODO's own, random n = 8-12, seeds 1-3, written
    as the suite writes them) and the distributed benchmark's n = 30 network."""
    files = [SHARED / "graph_coloring_14.xml", SHARED / "max_discsp_12_5.xml"]
    for n in (8, 10, 12):
        for seed in (1, 2, 3):
            path = folder / f"random_n{n}_d10_p0.3_t0.5_s{seed}.xml"
            write_problem(random_network(n, 10, 0.3, 0.5, seed), path)
            files.append(path)
    files.append(RESULTS.parent / "instances" / "distributed" / "random_n30_d3_s0.yaml")
    return [f for f in files if f.exists()]


def timed(argv: list[str], out: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one command and its result document."""
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - start
    if not out.exists():
        raise RuntimeError(f"{' '.join(argv[2:4])}: no result ({run.stderr.strip()[-300:]})")
    return wall, json.loads(out.read_text())


def frodo_walls() -> dict[str, float]:
    path = RESULTS / "dpop_vs_frodo.json"
    if not path.exists():
        return {}
    rows = json.loads(path.read_text())["rows"]
    return {r["instance"]: r["frodo"]["wall_s"] for r in rows if r["frodo"].get("wall_s")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    frodo = frodo_walls()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dcop-serving-") as tmp:
        folder = Path(tmp)
        files = instances(folder)
        problems = {f: read_problem(f) for f in files}
        agents = max(p.n for p in problems.values())
        peers_file = folder / "peers.json"
        Peers(
            "",
            f"tcp://127.0.0.1:{free_ports(1)[0]}",
            tuple(AgentEntry(i, None, "tcp://127.0.0.1:*") for i in range(agents)),
        ).write(peers_file)
        procs = AgentProcesses()
        try:
            for i in range(agents):
                argv = [*DCOP[:1], "-m", "dcop.agents", "--id", str(i), "--peers",
                        str(peers_file), "--serve", "--timeout", "600"]  # fmt: skip
                procs.start(i, argv, folder / f"agent-{i}.log")
            out = folder / "out.json"
            for file, problem in problems.items():
                best = solve_be(problem).upper_bound
                warm: list[float] = []
                cold: list[float] = []
                costs: set[float] = set()
                for _ in range(args.reps):
                    wall, doc = timed(
                        [*DCOP, "coordinator", "--peers", str(peers_file), "--problem", str(file),
                         "-q", "--json", str(out), "--hello-timeout", "30"], out)  # fmt: skip
                    warm.append(wall)
                    costs.add(doc["cost"])
                    wall, doc = timed([*DCOP, "run", str(file), "-q", "--json", str(out)], out)
                    cold.append(wall)
                    costs.add(doc["cost"])
                row = {
                    "instance": file.name,
                    "n": problem.n,
                    "be_cost": best,
                    "costs": sorted(costs),
                    "same": costs == {best},
                    "warm_coordinator_s": statistics.median(warm),
                    "cold_run_s": statistics.median(cold),
                    "frodo_wall_s": frodo.get(file.name),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
            subprocess.run(
                [*DCOP, "coordinator", "--peers", str(peers_file), "--shutdown", "-q"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        finally:
            procs.stop()
    report = {
        "meta": {
            "command": "python benchmarks/serving.py " + " ".join(sys.argv[1:]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": machine_info(),
            "reps": args.reps,
            "agents": agents,
        },
        "rows": rows,
    }
    from keep import write_results

    write_results(args.out, "serving", report, markdown(report))
    print(f"wrote {args.out / 'serving.md'}")


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def markdown(report: dict[str, Any]) -> str:
    meta = report["meta"]
    lines = [
        "# A warm cluster (serving agents) against cold runs and FRODO",
        "",
        f"`{meta['command']}` on {meta['date']}; {meta['machine'].get('cpu', '')}, "
        f"{meta['machine'].get('cores', '')} cores. {meta['agents']} serving agents started once; "
        f"medians of {meta['reps']} runs in turn. warm = `dcop coordinator --peers P --problem "
        "FILE -q` against the serving agents (the whole command); cold = `dcop run FILE -q` (the "
        "coordinator, the template and every agent started for the problem); FRODO = its DPOP's "
        "wall time from `dpop_vs_frodo.json` (one JVM, started for the problem). `same`: every "
        "run's cost equals BE's. FRODO / warm > 1: the warm cluster is faster.",
        "",
        "| instance | n | warm s | cold s | FRODO s | FRODO / warm | same |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        ratio = f"{r['frodo_wall_s'] / r['warm_coordinator_s']:.2f}x" if r["frodo_wall_s"] else "-"
        lines.append(
            f"| {r['instance']} | {r['n']} | {_s(r['warm_coordinator_s'])} | "
            f"{_s(r['cold_run_s'])} | {_s(r['frodo_wall_s'])} | {ratio} | "
            f"{'yes' if r['same'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
