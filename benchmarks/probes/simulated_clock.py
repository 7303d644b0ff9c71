"""Critical-path simulated runtime beside the busiest agent's own compute, on CPU DPOP agents.

The paper's simulated runtime follows the messages: a receiver's logical clock jumps to the
sender's, so the largest clock at the end is the compute along the critical path. The busiest
agent's own compute (``compute_s_max``) is a lower bound of it; this records how far apart the
two are on the GPU benchmark's instances (random, d = 10, p1 = 0.3, p2 = 0.5), so results that
measured only the lower bound can be read.

    python benchmarks/probes/simulated_clock.py [--n 10 11 ...] [--seeds 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

#: What this probe found (2-core VM, 2026-11-23, random d = 10, n = 10-16, 3 seeds; results are
#: not kept): the simulated runtime (the critical path of message-carried clocks) is 2.4-5.7x the
#: busiest agent's own compute (medians), so the busiest agent is no stand-in for it.
CONCLUSION = "the critical path is 2.4-5.7x the busiest agent's compute on CPU DPOP agents"

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, nargs="+", default=[10, 11, 12, 13, 14, 15, 16])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "probes" / "out")
    ap.add_argument("--name", default="simulated_clock")
    args = ap.parse_args()
    from dcop.coordinator import run_local
    from dcop.generators import random_network
    from dcop.protocol import RunSpec

    rows: list[dict[str, Any]] = []
    for n in args.n:
        for seed in range(1, args.seeds + 1):
            problem = random_network(n, 10, 0.3, 0.5, seed=seed)
            run = run_local(problem, RunSpec(max_message_bytes=2**30), timeout=600)
            m = run.metrics
            rows.append(
                {
                    "n": n,
                    "seed": seed,
                    "simulated_s": m["simulated_runtime_s"],
                    "busiest_agent_compute_s": m["compute_s_max"],
                    "ratio": m["simulated_runtime_s"] / max(m["compute_s_max"], 1e-12),
                    "status": run.status,
                }
            )
            print(rows[-1], file=sys.stderr)
    summary = []
    for n in args.n:
        group = [r for r in rows if r["n"] == n]
        summary.append(
            {
                "n": n,
                "simulated_s": statistics.median(r["simulated_s"] for r in group),
                "busiest_agent_compute_s": statistics.median(
                    r["busiest_agent_compute_s"] for r in group
                ),
                "ratio_median": statistics.median(r["ratio"] for r in group),
                "ratio_max": max(r["ratio"] for r in group),
            }
        )
    meta = {
        "command": "python benchmarks/probes/simulated_clock.py "
        + " ".join(sys.argv[1:]).replace(str(args.out), "OUT"),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}",
        "load_average": list(os.getloadavg()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(
        json.dumps({"meta": meta, "rows": rows, "summary": summary}, indent=1)
    )
    lines = [
        "# Simulated runtime: critical path vs the busiest agent's compute (CPU DPOP agents)",
        "",
        f"`{meta['command'].strip()}` on {meta['date']}, {meta['machine']}. Random networks "
        "d = 10, p1 = 0.3, p2 = 0.5 (the GPU benchmark's instances), medians over "
        f"{args.seeds} seeds. `simulated` = largest message-carried logical clock (the critical "
        "path); `busiest agent` = the largest compute of one agent, a lower bound of it.",
        "",
        "| n | simulated s | busiest agent s | simulated / busiest (median) | (max) |",
        "|---|---|---|---|---|",
    ]
    for s in summary:
        lines.append(
            f"| {s['n']} | {s['simulated_s']:.4g} | {s['busiest_agent_compute_s']:.4g} | "
            f"{s['ratio_median']:.3g} | {s['ratio_max']:.3g} |"
        )
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
