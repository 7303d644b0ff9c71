"""Calibrate the anytime solver's work model: joined entries per second of BE/MBE(z) on this
machine (the rate behind ``dcop.inference.anytime.DEFAULT_ENTRIES_PER_S``).

For each instance and z, the plan's work (``MemoryPlan.total_work``: the joined entries of
every mini-bucket) and the elimination's measured seconds give a rate; the table keeps, per
size of work, the median rate over the instances. Small steps are dominated by the per-bucket
overhead (``BUCKET_OVERHEAD_S``); the rate that matters for predictions is that of the large
ones, which is what the default should be at most.

    python benchmarks/work_rate.py [--quick] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from dcop.backends import get_backend
from dcop.generators import random_network
from dcop.inference import solve
from dcop.inference.anytime import BUCKET_OVERHEAD_S, DEFAULT_ENTRIES_PER_S
from dcop.orders.greedy import elimination_order
from dcop.plan.bucket_plan import plan_memory
from dcop.plan.memory import work_model_of
from dcop.tables import choose_dtype

ROOT = Path(__file__).resolve().parents[1]


def measure(n: int, d: int, seed: int, zs: list[int]) -> list[dict[str, float]]:
    """Work and seconds of MBE(z) for each z on one random network (p1 0.3, p2 0.3)."""
    problem = random_network(n, d, 0.3, 0.3, seed)
    order = elimination_order("minfill", problem.neighbours())
    rows = []
    for z in zs:
        plan = plan_memory(
            [t.scope for t in problem.tables],
            problem.domain_sizes(),
            order,
            z,
            np.dtype(choose_dtype(problem)).itemsize,
            resident=0,
            work=work_model_of(get_backend("numpy")),
        )
        result = solve(problem, "mbe", z=z)
        seconds = result.times["eliminate"]
        busy = max(seconds - len(plan.buckets) * BUCKET_OVERHEAD_S, seconds / 2, 1e-9)
        rows.append(
            {"n": n, "d": d, "seed": seed, "z": z, "work": plan.total_work,
             "seconds": seconds, "entries_per_s": plan.total_work / busy}
        )  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run (tiny sizes)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    sizes = [(10, 4, [2, 3])] if args.quick else [(20, 10, [5, 6, 7]), (40, 5, [8, 9, 10])]
    seeds = [1] if args.quick else [1, 2, 3]
    rows = [r for n, d, zs in sizes for s in seeds for r in measure(n, d, s, zs)]
    large = [r["entries_per_s"] for r in rows if r["seconds"] >= 0.2]
    from keep import machine_block

    doc = {
        "command": "python benchmarks/work_rate.py" + (" --quick" if args.quick else ""),
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": os.getloadavg(),
        "machine": machine_block(),
        "default_entries_per_s": DEFAULT_ENTRIES_PER_S,
        "median_rate_of_steps_over_0.2s": statistics.median(large) if large else None,
        "rows": rows,
    }
    name = "work_rate_quick" if args.quick else "work_rate"
    lines = [
        "## Work model: joined entries per second (NumPy, one process)",
        "",
        f"{doc['when']}, load average {doc['load_average'][0]:.2f} (machine shared with other "
        f"jobs). Default rate of the anytime solver: {DEFAULT_ENTRIES_PER_S:.3g}/s; median of "
        f"the steps over 0.2 s here: {doc['median_rate_of_steps_over_0.2s'] or 0:.3g}/s.",
        "",
        "| n | d | seed | z | joined entries | seconds | entries/s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['n']} | {r['d']} | {r['seed']} | {r['z']} | {r['work']:.3g} | "
        f"{r['seconds']:.3g} | {r['entries_per_s']:.3g} |"
        for r in rows
    ]
    from keep import write_results

    write_results(args.out, name, doc, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
