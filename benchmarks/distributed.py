"""Distributed DPOP / ADPOP(z) with one process per agent: start-up, solve and wall time,
simulated time, messages and bytes (heartbeats apart) against n, UTIL message size against
separator size beside the theory d^|sep|, and what a user sees: ``dcop run FILE`` beside
``dcop solve FILE`` (wall clock of each command, same file, same run of this script).

    .venv/bin/python benchmarks/distributed.py                       # n = 10..30, 3 seeds
    .venv/bin/python benchmarks/distributed.py --sizes 10,20 --z 2,3 --seeds 2
    .venv/bin/python benchmarks/distributed.py --other pydcop.json   # add results run elsewhere

Writes benchmarks/results/distributed.json, distributed.md and distributed_util_size.png, and the
instances as pyDCOP YAML under benchmarks/instances/distributed/ so that another solver
(pyDCOP's DPOP, run by the evaluation scripts) can solve the same ones. ``--other FILE`` takes a
JSON list of ``{"instance": name, "solver": label, "wall_s": float, "finished": bool,
"cost": float|null}`` and puts it beside our rows (wall-time ratio, whether each finished).

In process (``run_local``): start-up = wall - solve, where wall runs from launching the agents to
the last result and solve from ``start`` to the last result. As a command: ``dcop run FILE -q
--json OUT`` and ``dcop solve FILE -q --json OUT`` each timed as a subprocess (interpreter start,
reading the file, every agent process and writing the result included), ``--repeat`` times in
turn, median kept. The run/solve ratio per n is the mean over seeds of the per-seed ratios.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dcop.coordinator import run_local
from dcop.generators import random_network, scale_free_network
from dcop.inference import solve_be
from dcop.io import write_problem
from dcop.protocol import RunSpec

RESULTS = Path(__file__).resolve().parent / "results"
INSTANCES = RESULTS.parent / "instances" / "distributed"
sys.path.insert(0, str(RESULTS.parent))
from compare.machine import describe, machine_info  # noqa: E402  (benchmarks/compare, beside this file)

DCOP = str(Path(sys.executable).with_name("dcop"))
#: the issue's target: a 30-agent local DPOP run costs at most this many times ``dcop solve``
TARGET_RATIO = 2.0


def make_instance(topology: str, n: int, d: int, seed: int) -> Any:
    if topology == "scalefree":
        return scale_free_network(n, d, 0.3, seed=seed)
    return random_network(n, d, 4.0 / (n - 1), 0.3, seed=seed)  # about 2n edges


def one_run(
    problem: Any, algo: str, z: int | None, timeout: float, gpu: int | None = None
) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        run = run_local(problem, RunSpec(algo, z), gpu=gpu, timeout=timeout)  # type: ignore[arg-type]
    except Exception as exc:  # a failed run is a data point, not the end of the benchmark
        return {"finished": False, "error": str(exc), "wall_s": time.perf_counter() - t0}
    result = run.to_json()
    m = run.metrics
    hb = m["messages"].get("heartbeat", 0)
    used = run.processes or {}
    agent_cpu = list(used.get("agent_cpu_s", {}).values())
    faults = list(used.get("agent_page_faults", {}).values())
    return {
        "finished": True,
        "cost": run.internal_cost if math.isfinite(run.internal_cost) else None,
        "lower_bound": run.bound if math.isfinite(run.bound) else None,
        "assignment": run.assignment,
        "wall_s": m["wall_s"],
        "solve_wall_s": m["solve_wall_s"],
        "startup_s": m["wall_s"] - m["solve_wall_s"],
        "simulated_s": m["simulated_runtime_s"],
        "compute_s_total": m["compute_s_total"],
        "messages": m["total_messages"],
        "bytes": m["total_bytes"],
        "algorithm_messages": m["algorithm_messages"],
        "algorithm_bytes": m["algorithm_bytes"],
        "heartbeat_messages": hb,
        "heartbeat_bytes": m["bytes"].get("heartbeat", 0),
        "messages_by_type": m["messages"],
        "bytes_by_type": m["bytes"],
        "util_messages": m["messages"].get("util", 0),
        "value_messages": m["messages"].get("value", 0),
        "theory_util_messages": m["theory"]["util_messages"],
        "largest_util_bytes": m["largest_util_bytes"],
        "largest_util_entries": m["largest_util_entries"],
        "max_separator": m["theory"]["max_separator"],
        "checks": m["checks"],
        # CPU seconds of every process of the run (the kernel's account): where the wall goes
        "agents_cpu_s": sum(agent_cpu) if agent_cpu else None,
        "agent_cpu_ms": 1000 * statistics.mean(agent_cpu) if agent_cpu else None,
        "agent_page_faults": statistics.mean(faults) if faults else None,
        "template_cpu_s": used.get("template_cpu_s"),
        "coordinator_cpu_s": used.get("coordinator_cpu_s"),
        "per_agent": [
            {
                "separator": len(a["separator"]),
                "util_entries": a["util_entries"],
                "util_bytes": a["util_bytes"],
                "util_tables": a["util_tables"],
                "theory_entries": a["theory_entries"],
            }
            for a in result["agents"].values()
            if a["parent"] is not None
        ],
    }


def timed_command(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run a command to its end and time it with the wall clock (a user's view)."""
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.perf_counter() - t0, "exit": None, "error": "timed out"}
    out: dict[str, Any] = {"wall_s": time.perf_counter() - t0, "exit": proc.returncode}
    if proc.returncode != 0:
        out["error"] = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1][:300]
    return out


def _doc_fields(path: Path) -> dict[str, Any]:
    """Status, cost and (for ``dcop run``) the wire figures of a result document."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    out: dict[str, Any] = {"status": doc.get("status"), "cost": doc.get("cost")}
    m = doc.get("metrics") or {}
    if "solve_wall_s" in m:
        out.update(
            run_wall_s=m["wall_s"],
            run_solve_wall_s=m["solve_wall_s"],
            heartbeat_messages=m["messages"].get("heartbeat", 0),
            heartbeat_bytes=m["bytes"].get("heartbeat", 0),
        )
    path.unlink()
    return out


def cli_pair(file: Path, timeout: float, repeat: int) -> dict[str, Any]:
    """``dcop run FILE -q --json OUT`` and ``dcop solve FILE -q --json OUT``, one after the other,
    ``repeat`` times; medians of the wall clocks of the runs that answered."""
    runs: list[dict[str, Any]] = []
    solves: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dcop-bench-cli-") as tmp:
        out = Path(tmp) / "result.json"
        for _ in range(repeat):
            r = timed_command([DCOP, "run", str(file), "-q", "--json", str(out)], timeout)
            runs.append(r | _doc_fields(out))
            s = timed_command([DCOP, "solve", str(file), "-q", "--json", str(out)], timeout)
            solves.append(s | _doc_fields(out))
    return cli_summary(runs, solves)


#: statuses of a command that answered (an optimum, or a proof that there is none)
ANSWERED = ("ok", "infeasible")


def cli_summary(runs: list[dict[str, Any]], solves: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the wall clocks of the commands that answered, their ratio, and whether every
    answer was the same (cost, or infeasible)."""
    run_ok = [r["wall_s"] for r in runs if r.get("status") in ANSWERED]
    solve_ok = [s["wall_s"] for s in solves if s.get("status") in ANSWERED]
    run_s = statistics.median(run_ok) if run_ok else None
    solve_s = statistics.median(solve_ok) if solve_ok else None
    answers = {(x.get("status"), x.get("cost")) for x in runs + solves}
    return {
        "run_wall_s": run_s,
        "solve_wall_s": solve_s,
        "ratio": run_s / solve_s if run_s and solve_s else None,
        "same_answer": len(answers) == 1,
        "runs": runs,
        "solves": solves,
    }


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def by_n(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """DPOP per n: means over the seeds that finished (in process and as commands)."""
    table = []
    for n in sorted({r["n"] for r in rows if r["algo"] == "dpop"}):
        rs = [r for r in rows if r["algo"] == "dpop" and r["n"] == n]
        ok = [r["run"] for r in rs if r["run"]["finished"]]
        cli = [r["cli"] for r in rs if r.get("cli") and r["cli"]["ratio"] is not None]

        def mean(key: str, runs: list[dict[str, Any]] = ok) -> float | None:
            return _mean([float(x[key]) for x in runs if x.get(key) is not None])

        table.append(
            {
                "n": n,
                "seeds": len(rs),
                "finished": len(ok),
                "startup_s": mean("startup_s"),
                "solve_wall_s": mean("solve_wall_s"),
                "wall_s": mean("wall_s"),
                "simulated_s": mean("simulated_s"),
                "cli_seeds": len(cli),
                "cli_run_wall_s": mean("run_wall_s", cli),
                "cli_solve_wall_s": mean("solve_wall_s", cli),
                "cli_ratio": mean("ratio", cli),
                "cli_ratio_max": max((c["ratio"] for c in cli), default=None),
                "heartbeat_messages": mean("heartbeat_messages"),
                "heartbeat_bytes": mean("heartbeat_bytes"),
                "algorithm_messages": mean("algorithm_messages"),
                "algorithm_bytes": mean("algorithm_bytes"),
                "util_messages": mean("util_messages"),
                "messages": mean("messages"),
                "bytes": mean("bytes"),
                "agent_cpu_ms": mean("agent_cpu_ms"),
                "agent_page_faults": mean("agent_page_faults"),
                "agents_cpu_s": mean("agents_cpu_s"),
                "template_cpu_s": mean("template_cpu_s"),
                "coordinator_cpu_s": mean("coordinator_cpu_s"),
            }
        )
    return table


def target_line(table: list[dict[str, Any]]) -> str:
    """Whether the largest n meets ``dcop run`` <= TARGET_RATIO x ``dcop solve``."""
    rows = [r for r in table if r["cli_ratio"] is not None]
    if not rows:
        return "Target not measured (no `dcop run` / `dcop solve` pair answered)."
    top = max(rows, key=lambda r: r["n"])
    met = top["cli_ratio_max"] <= TARGET_RATIO
    return (
        f"Target: a {top['n']}-agent local DPOP run costs at most {TARGET_RATIO:g}x `dcop solve` "
        f"of the same file. Measured at n = {top['n']}: `dcop run` {top['cli_run_wall_s']:.2f} s, "
        f"`dcop solve` {top['cli_solve_wall_s']:.2f} s, ratio {top['cli_ratio']:.2f}x (mean over "
        f"{top['cli_seeds']} seeds; worst seed {top['cli_ratio_max']:.2f}x): "
        + ("**met**." if met else "**not met**.")
    )


def markdown_by_n(report: dict[str, Any]) -> list[str]:
    table = report.get("by_n") or []
    if not table:
        return []
    lines = [
        "## DPOP per n: start-up, solve and wall time; `dcop run` beside `dcop solve`",
        "",
        "Means over the seeds. In process (`run_local`): wall = launch of the agents to the last "
        "result, solve = `start` to the last result, start-up = wall - solve. Commands (wall "
        f"clock of the subprocess, median of {report.get('repeat', 1)} in turn per seed): "
        "`dcop run FILE -q --json OUT` and `dcop solve FILE -q --json OUT` (BE, min-fill) on the "
        "same YAML file; run / solve is the mean of the per-seed ratios. Heartbeats: agent -> "
        "coordinator application heartbeats counted by the agents up to their result (ZeroMQ's "
        "own ZMTP pings are below the application and not counted). alg. = degree + DFS token "
        "+ UTIL + VALUE.",
        "",
        "| n | ok | start-up s | solve s | wall s | `dcop run` s | `dcop solve` s | run / solve "
        "| heartbeats | heartbeat B | alg. msgs | alg. B | UTIL | all msgs | all B |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['n']} | {r['finished']}/{r['seeds']} | {_f(r['startup_s'])} | "
            f"{_f(r['solve_wall_s'])} | {_f(r['wall_s'])} | {_f(r['cli_run_wall_s'])} | "
            f"{_f(r['cli_solve_wall_s'])} | {_ratio(r['cli_ratio'])} | "
            f"{_i(r['heartbeat_messages'])} | {_i(r['heartbeat_bytes'])} | "
            f"{_i(r['algorithm_messages'])} | {_i(r['algorithm_bytes'])} | "
            f"{_i(r['util_messages'])} | {_i(r['messages'])} | {_i(r['bytes'])} |"
        )
    lines += [
        "",
        target_line(table),
        "",
        "### Where the CPU goes (in process, means over the seeds)",
        "",
        "CPU seconds (user + system, all threads) of each process of a run, from the kernel's "
        "account: each forked agent from its fork to its exit, the template (its imports, "
        f"paid once per run, and its forks) and the coordinator from the call to the agents' exits. "
        f"This machine has {os.cpu_count()} cores: when the total exceeds cores x wall, the run "
        "waits for CPU, not for messages.",
        "",
        "| n | CPU per agent ms | page faults per agent | all agents s | template s | coordinator s "
        "| total s | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        parts = [r["agents_cpu_s"], r["template_cpu_s"], r["coordinator_cpu_s"]]
        total = sum(parts) if all(x is not None for x in parts) else None  # type: ignore[misc]
        lines.append(
            f"| {r['n']} | {_f(r['agent_cpu_ms'])} | {_i(r['agent_page_faults'])} | "
            f"{_f(r['agents_cpu_s'])} | {_f(r['template_cpu_s'])} | "
            f"{_f(r['coordinator_cpu_s'])} | {_f(total)} | {_f(r['wall_s'])} |"
        )
    return [*lines, ""]


def _i(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}x"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# Distributed DPOP / ADPOP(z): one OS process per agent over ZeroMQ",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {describe(report['machine'])}; {report['date']}.  ",
        f"Load average (1, 5, 15 min) at the start: {report.get('load_average_start', '?')}, at "
        f"the end: {report.get('load_average_end', '?')}.  ",
        f"Instances: {report['topology']} networks, d = {report['d']}, "
        "integer costs in [0, 100], tightness 0.3 (random: p1 = 4/(n-1), about 2n edges); seeds "
        f"{report['seeds']}. Every DPOP cost is checked against centralized BE.",
        "",
        "wall = coordinator's wall clock from launch to last result (process start-up included); "
        "solve = from `start` to last result; simulated = largest logical clock (each message "
        "carries its sender's clock; receiver = max(own, message) + compute). Messages/bytes: "
        "everything on the wire, control and heartbeats included; alg. = degree + DFS token + "
        "UTIL + VALUE only.",
        "",
        *markdown_by_n(report),
        "## Every run (in process)",
        "",
        "| algo | n | seed | ok | cost (BE) | LB | wall s | solve s | simulated s | messages "
        "| bytes | alg. msgs | alg. bytes | UTIL/theory | VALUE | largest UTIL B | max sep |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        r = row["run"]
        if not r["finished"]:
            lines.append(
                f"| {row['algo']} | {row['n']} | {row['seed']} | no: {r['error'][:60]} "
                + "| " * 13
                + "|"
            )
            continue
        lines.append(
            f"| {row['algo']} | {row['n']} | {row['seed']} | "
            f"{'yes' if row['correct'] else 'WRONG'}{_vs_cpu(r)} | "
            f"{_cost(r['cost'])} ({_cost(row['be_cost'])}) | "
            f"{_f(r['lower_bound'])} | {r['wall_s']:.2f} | {r['solve_wall_s']:.3f} | "
            f"{r['simulated_s']:.4f} | {r['messages']} | {r['bytes']} | "
            f"{r['algorithm_messages']} | {r['algorithm_bytes']} | "
            f"{r['util_messages']}/{r['theory_util_messages']} | {r['value_messages']} | "
            f"{r['largest_util_bytes']} | {r['max_separator']} |"
        )
    if report.get("other"):
        lines += [
            "",
            "## Beside results from elsewhere (`--other`)",
            "",
            "| instance | solver | finished | wall s | ours (DPOP) wall s | ratio other/ours |",
            "|---|---|---|---|---|---|",
        ]
        ours = {row["instance"]: row["run"] for row in report["rows"] if row["algo"] == "dpop"}
        for o in report["other"]:
            mine = ours.get(o.get("instance"))
            mine_s = mine["wall_s"] if mine and mine["finished"] else None
            ratio = (o["wall_s"] / mine_s) if mine_s and o.get("wall_s") else None
            lines.append(
                f"| {o.get('instance')} | {o.get('solver', '?')} | "
                f"{o.get('finished')} | {_f(o.get('wall_s'))} | {_f(mine_s)} | "
                f"{_f(ratio)} |"
            )
    lines += [
        "",
        f"Times and bytes against n: `{report.get('stem', 'distributed')}_vs_n.png`.  ",
        f"UTIL message size against separator size: `{report.get('stem', 'distributed')}_util_size.png` "
        "(every non-root DPOP agent: measured frame bytes and table entries; line: d^|sep| "
        "entries, 8 bytes each).",
        "",
    ]
    if report.get("notes"):
        lines += ["## Notes", "", report["notes"], ""]
    return "\n".join(lines)


def _cost(x: Any) -> str:
    return "inf" if x is None else _f(x)  # null cost = infeasible assignment


def _vs_cpu(run: dict[str, Any]) -> str:
    if "same_as_cpu" not in run:
        return ""
    return ", = CPU" if run["same_as_cpu"] else ", differs from CPU"


def _f(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.4g}" if math.isfinite(x) else "inf"
    return str(x)


def plot(report: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install matplotlib (no plot written)", file=sys.stderr)
        return False
    d = report["d"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for algo, marker in (("dpop", "o"), ("adpop", "x")):
        pts = [
            (a["separator"], a["util_bytes"], a["util_entries"])
            for row in report["rows"]
            if row["algo"].startswith(algo) and row["run"]["finished"]
            for a in row["run"]["per_agent"]
        ]
        if not pts:
            continue
        ax.scatter(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker=marker,
            alpha=0.5,
            label=f"{algo.upper()} UTIL frame bytes (measured)",
        )
        if algo == "dpop":
            ax.scatter(
                [p[0] for p in pts],
                [p[2] for p in pts],
                marker=".",
                alpha=0.5,
                label="DPOP UTIL entries (measured)",
            )
    top = max(
        (
            a["separator"]
            for row in report["rows"]
            if row["run"]["finished"]
            for a in row["run"]["per_agent"]
        ),
        default=1,
    )
    xs = list(range(0, top + 1))
    ax.plot(xs, [d**s for s in xs], "k--", label=f"theory: d^|sep| entries (d={d})")
    ax.plot(xs, [8 * d**s for s in xs], "k:", label="theory: 8·d^|sep| bytes (float64)")
    ax.set_yscale("log")
    ax.set_xlabel("|separator| of the sending agent")
    ax.set_ylabel("UTIL message size")
    ax.set_title("UTIL message size vs separator size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_vs_n(report: dict[str, Any], path: Path) -> bool:
    """Wall, solve and simulated time, and algorithm bytes, against n (means over seeds)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for row in report["rows"]:
        if row["run"]["finished"]:
            series.setdefault(row["algo"], {}).setdefault(row["n"], []).append(row["run"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for algo, by_n in sorted(series.items()):
        ns = sorted(by_n)

        def mean(key: str, ns: list[int] = ns, by_n: dict[int, Any] = by_n) -> list[float]:
            return [sum(r[key] for r in by_n[n]) / len(by_n[n]) for n in ns]

        line = left.plot(ns, mean("wall_s"), "-o", label=f"{algo} wall")[0]
        left.plot(ns, mean("simulated_s"), "--x", color=line.get_color(), label=f"{algo} simulated")
        right.plot(
            ns,
            mean("algorithm_bytes"),
            "-o",
            color=line.get_color(),
            label=f"{algo} bytes (degree+token+UTIL+VALUE)",
        )
    table = [r for r in report.get("by_n") or [] if r.get("cli_ratio") is not None]
    if table:
        ns = [r["n"] for r in table]
        left.plot(ns, [r["cli_run_wall_s"] for r in table], "-s", label="`dcop run` command")
        left.plot(ns, [r["cli_solve_wall_s"] for r in table], "-^", label="`dcop solve` command")
        left.plot(ns, [r["startup_s"] for r in table], ":", label="dpop start-up")
    left.set_yscale("log")
    left.set_xlabel("n (agents)")
    left.set_ylabel("seconds")
    left.set_title("wall (processes included) and simulated time")
    left.legend(fontsize=7)
    right.set_yscale("log")
    right.set_xlabel("n (agents)")
    right.set_ylabel("bytes on the wire")
    right.set_title("algorithm bytes")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_outputs(report: dict[str, Any], out: Path) -> None:
    """JSON, Markdown and the two plots, named after ``report["stem"]``."""
    from keep import write_results

    stem = report.get("stem", "distributed")
    write_results(out, stem, report, markdown(report))
    plot(report, out / f"{stem}_util_size.png")
    plotted = plot_vs_n(report, out / f"{stem}_vs_n.png")
    print(f"wrote {out / (stem + '.md')}" + (" and the plots" if plotted else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,15,20,25,30")
    ap.add_argument("--z", default="2", help="ADPOP mini-bucket sizes, comma-separated")
    ap.add_argument("--d", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--repeat", type=int, default=3, help="`dcop run` / `dcop solve` pairs per instance"
    )
    ap.add_argument(
        "--no-cli", action="store_true", help="skip the `dcop run` / `dcop solve` commands"
    )
    ap.add_argument("--topology", choices=["random", "scalefree"], default="random")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--other", type=Path, help="JSON results of another solver (e.g. pyDCOP)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--gpu",
        type=int,
        metavar="DEVICE",
        help="also run every algorithm with CuPy agents on this device",
    )
    ap.add_argument("--tag", default="", help="suffix of the output file names")
    ap.add_argument(
        "--from-json",
        type=Path,
        help="only re-render Markdown and plots from a "
        "results JSON written earlier (with --other, add those results)",
    )
    args = ap.parse_args()
    if args.from_json is not None:
        report = json.loads(args.from_json.read_text())
        if args.other:
            report["other"] = json.loads(args.other.read_text())
        report.setdefault("stem", f"distributed{args.tag}")
        for row in report["rows"]:  # summaries again from the commands' own records
            if row.get("cli"):
                row["cli"] = cli_summary(row["cli"]["runs"], row["cli"]["solves"])
        report["by_n"] = by_n(report["rows"])
        write_outputs(report, args.out)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    zs = [int(z) for z in args.z.split(",") if z]
    args.out.mkdir(parents=True, exist_ok=True)
    # inputs, never results: the kept run's beside the other instances
    inst_dir = INSTANCES if args.out == RESULTS else args.out / "instances"
    inst_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    load_start = [round(x, 2) for x in os.getloadavg()]
    print(f"load average at the start: {load_start}", file=sys.stderr)
    for n in sizes:
        for seed in range(args.seeds):
            problem = make_instance(args.topology, n, args.d, seed)
            name = f"{args.topology}_n{n}_d{args.d}_s{seed}"
            file = inst_dir / f"{name}.yaml"
            write_problem(problem, file)
            be = solve_be(problem).upper_bound
            plan = [("dpop", None, None), *[("adpop", z, None) for z in zs]]
            if args.gpu is not None:
                plan += [(a, z, args.gpu) for a, z, _ in plan]
            for algo, z, gpu in plan:
                run = one_run(problem, algo, z, args.timeout, gpu)
                label = (algo if z is None else f"adpop({z})") + ("-gpu" if gpu is not None else "")
                if gpu is not None:
                    cpu = next(
                        r["run"]
                        for r in rows
                        if r["instance"] == name and r["algo"] == label.removesuffix("-gpu")
                    )
                    run["same_as_cpu"] = run.get("assignment") == cpu.get("assignment") and (
                        run.get("cost") == cpu.get("cost")
                    )
                correct = None
                if run["finished"]:
                    cost = run["cost"] if run["cost"] is not None else math.inf
                    lb = run["lower_bound"] if run["lower_bound"] is not None else math.inf
                    correct = (
                        (math.isclose(cost, be) or cost == be)
                        if algo == "dpop"
                        else (lb <= be + 1e-9 <= cost + 1e-9)
                    )
                row: dict[str, Any] = {
                    "instance": name,
                    "algo": label,
                    "n": n,
                    "seed": seed,
                    "be_cost": be if math.isfinite(be) else None,
                    "correct": correct,
                    "run": run,
                }
                status = "ok" if correct else ("FAILED" if not run["finished"] else "WRONG")
                if label == "dpop" and not args.no_cli:
                    row["cli"] = cli_pair(file, args.timeout, args.repeat)
                    c = row["cli"]
                    status += (
                        f"; dcop run {_f(c['run_wall_s'])} s, dcop solve {_f(c['solve_wall_s'])} s"
                    )
                rows.append(row)
                print(f"{name} {label}: {status} wall {run['wall_s']:.2f}s", file=sys.stderr)
    report = {
        "command": " ".join(["benchmarks/distributed.py", *sys.argv[1:]]),
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "topology": args.topology,
        "d": args.d,
        "seeds": args.seeds,
        "repeat": args.repeat,
        "load_average_start": load_start,
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "by_n": by_n(rows),
        "rows": rows,
        "other": json.loads(args.other.read_text()) if args.other else None,
    }
    report["stem"] = f"distributed{args.tag}"
    write_outputs(report, args.out)


if __name__ == "__main__":
    main()
