"""Distributed PR and MAR (one agent process per variable) beside the centralized solver.

For each model of ``benchmarks/pr.py`` with at most ``--max-agents`` variables: centralized
``infer`` (PR and MAR, NumPy) and ``run_local`` with ``RunSpec(task="pr")`` and ``"mar"``, in
one run. Recorded: ln Z of both and whether they agree (1e-9 relative), the largest marginal
difference, wall / solve / simulated seconds, UTIL and down messages and bytes, the largest UTIL
and the pseudo-tree's width beside the centralized order's. A run the coordinator refuses
(a UTIL over the message limit) is recorded as such.

    python benchmarks/pr_distributed.py [--max-agents 70] [--only NAME ...] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare.machine import describe, machine_info  # noqa: E402  (benchmarks/compare)
from pr import build_problem, instances  # noqa: E402  (benchmarks/ is not a package)

AGREE_REL = 1e-9


def measure(spec: dict[str, Any], timeout: float, max_message_mib: int) -> dict[str, Any]:
    from dcop.coordinator import run_local
    from dcop.errors import DcopError
    from dcop.inference.partition import infer
    from dcop.protocol import RunSpec

    problem = build_problem(spec)
    row: dict[str, Any] = {"instance": spec["name"], "n": problem.n, "d": problem.max_domain()}
    t0 = time.perf_counter()
    central = infer(problem, "mar")
    row["central_mar_s"] = time.perf_counter() - t0
    row["central_ln_z"] = central.ln_partition
    row["central_width"] = central.induced_width
    for task in ("pr", "mar"):
        spec_run = RunSpec(max_message_bytes=max_message_mib << 20, task=task)  # type: ignore[arg-type]
        try:
            run = run_local(problem, spec_run, timeout=timeout)
        except DcopError as exc:
            row[task] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            continue
        m = run.metrics
        assert run.partition is not None
        out = {
            "status": run.status,
            "ln_z": run.partition.ln_partition,
            "wall_s": m["wall_s"],
            "solve_s": m["solve_wall_s"],
            "simulated_s": m["simulated_runtime_s"],
            "util_messages": m["messages"].get("util", 0),
            "util_bytes": m["bytes"].get("util", 0),
            "down_messages": m["messages"].get("down", 0),
            "down_bytes": m["bytes"].get("down", 0),
            "largest_util_entries": m["largest_util_entries"],
            "max_separator": m["theory"]["max_separator"],
            "checks": m["checks"],
        }
        ln_z, ref = out["ln_z"], central.ln_partition
        out["agrees"] = ln_z == ref or (
            ln_z is not None
            and ref is not None
            and abs(ln_z - ref) <= AGREE_REL * max(1.0, abs(ref))
        )
        if task == "mar" and run.partition.marginals is not None and central.marginals is not None:
            out["max_marginal_diff"] = max(
                float(abs(run.partition.marginals[v] - central.marginals[v]).max())
                for v in central.marginals
            )
        row[task] = out
    return row


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    lines = [
        "# Distributed PR / MAR (one process per agent) beside the centralized solver",
        "",
        f"`{meta['command']}` on {meta['date']}, {describe(meta['machine'])}; load average at the start "
        f"{meta['load_average']}. Models of `benchmarks/pr.py` with at most {meta['max_agents']} "
        'variables. `central` = `infer(problem, "mar")` (NumPy, auto order); the distributed '
        "runs are `run_local` with `RunSpec(task=...)`: wall = launch to the last result, solve = "
        "start to the last result, simulated = critical path of the message-carried clocks. "
        "`agree`: ln Z within 1e-9 relative of the centralized one; `marg. diff`: the largest "
        "difference of a marginal probability. `width`: the kept pseudo-tree's largest separator "
        "beside the centralized order's induced width.",
        "",
        "| model | n | d | ln Z | width (tree / central) | central MAR s | PR wall / solve / sim s "
        "| MAR wall / solve / sim s | UTIL msgs (bytes) | down msgs (bytes) | agree | marg. diff |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        pr, mar = r.get("pr", {}), r.get("mar", {})
        if "error" in pr or "error" in mar:
            why = pr.get("error") or mar.get("error")
            lines.append(
                f"| {r['instance']} | {r['n']} | {r['d']} | {r['central_ln_z']:.10g} | - / "
                f"{r['central_width']} | {r['central_mar_s']:.3g} | {why} | | | | | |"
            )
            continue

        def times(x: dict[str, Any]) -> str:
            return f"{x['wall_s']:.3g} / {x['solve_s']:.3g} / {x['simulated_s']:.3g}"

        lines.append(
            f"| {r['instance']} | {r['n']} | {r['d']} | {pr['ln_z']:.10g} | "
            f"{pr['max_separator']} / {r['central_width']} | {r['central_mar_s']:.3g} | "
            f"{times(pr)} | {times(mar)} | {pr['util_messages']} ({pr['util_bytes']}) | "
            f"{mar['down_messages']} ({mar['down_bytes']}) | "
            f"{'yes' if pr['agrees'] and mar['agrees'] else 'NO'} | "
            f"{mar.get('max_marginal_diff', float('nan')):.2g} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max-agents", type=int, default=70)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--max-message-mib", type=int, default=256)
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument("--name", default="pr_distributed")
    args = ap.parse_args()

    rows = []
    for spec in instances(args.only, False):
        problem = build_problem(spec)
        if problem.n > args.max_agents:
            continue
        row = measure(spec, args.timeout, args.max_message_mib)
        print(json.dumps(row)[:300], file=sys.stderr)
        rows.append(row)
    command = "python benchmarks/pr_distributed.py " + " ".join(sys.argv[1:]).replace(
        str(args.out), "OUT"
    )
    data = {
        "meta": {
            "command": command.strip(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine_info(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "max_agents": args.max_agents,
        },
        "rows": rows,
    }
    from keep import write_results

    write_results(args.out, args.name, data, markdown(data))


if __name__ == "__main__":
    main()
