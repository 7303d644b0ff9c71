"""NumPy BE on the paper's random-network rows, and fused vs naive join+eliminate.

Usage: python benchmarks/cpu_be.py [--seeds 5] [--n-max 20] [--time-limit 300]

Part 1 runs BE (NumPy backend, the paper's DFS pseudo-tree order, and min-fill beside it) on
random networks n = 10..20, d = 10, p1 = 0.3, p2 = 0.5, each instance in its own subprocess under
a time limit (``oot`` past it), and puts the mean times beside the paper's CPU column (Table 1).
Part 2 measures one large bucket both ways: the naive join (materialise the joined table, then
min over the eliminated axis) and the fused join+eliminate, with their peak memory (tracemalloc,
which sees NumPy's allocations) and time, checked equal.

Writes benchmarks/results/cpu_be.json and cpu_be.md.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from compare.machine import describe, machine_info

from dcop.backends.numpy import NumpyBackend
from dcop.generators import random_network
from dcop.inference import solve
from dcop.orders.greedy import elimination_order, induced_width
from dcop.tables import Table

RESULTS = Path(__file__).resolve().parent / "results"

#: The paper's Table 1 (random networks, d=10, p1=0.3): n -> (w*, BE CPU seconds, BE GPU seconds)
PAPER_RANDOM = {
    10: (2.9, 0.019, 0.002),
    11: (3.2, 0.031, 0.002),
    12: (3.6, 0.069, 0.003),
    13: (4.3, 0.413, 0.005),
    14: (4.4, 0.631, 0.006),
    15: (5.3, 4.190, 0.026),
    16: (5.8, 32.29, 0.189),
    17: (6.4, 65.41, 0.328),
    18: (7.5, 206.1, 0.944),
    19: (8.0, 602.1, 2.541),
    20: (8.5, 675.3, 3.145),
}


def _solve_one(n: int, seed: int, ordering: str, queue: mp.Queue) -> None:
    problem = random_network(n, 10, 0.3, 0.5, seed)
    t0 = time.perf_counter()
    result = solve(problem, "be", ordering=ordering)
    seconds = time.perf_counter() - t0
    assert result.upper_bound == result.lower_bound or not np.isfinite(result.lower_bound)
    queue.put(
        {
            "seconds": seconds,
            "w": result.induced_width,
            "cost": result.lower_bound,
            "largest_table": result.largest_table,
        }
    )


def timed_solve(n: int, seed: int, ordering: str, limit: float) -> dict[str, object]:
    """One BE solve in a subprocess; ``{"status": "oot"}`` past the limit."""
    ctx = mp.get_context("fork")
    queue: mp.Queue = ctx.Queue()
    proc = ctx.Process(target=_solve_one, args=(n, seed, ordering, queue))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"status": "oot"}
    if proc.exitcode != 0 or queue.empty():
        return {"status": "oom" if proc.exitcode == -9 else "error"}
    return {"status": "ok", **queue.get()}


def width(n: int, seed: int, ordering: str) -> int:
    """Induced width of one instance along an ordering (cheap: no tables are built)."""
    adjacency = random_network(n, 10, 0.3, 0.5, seed).neighbours()
    return induced_width(adjacency, elimination_order(ordering, adjacency))


def random_rows(seeds: int, n_max: int, limit: float) -> list[dict[str, object]]:
    rows = []
    for n in range(10, n_max + 1):
        row: dict[str, object] = {"n": n, "d": 10, "p1": 0.3, "p2": 0.5}
        for ordering in ("pseudotree", "minfill"):
            runs = [timed_solve(n, s, ordering, limit) for s in range(seeds)]
            ok = [r for r in runs if r["status"] == "ok"]
            row[f"{ordering}_runs"] = runs
            row[f"{ordering}_w"] = statistics.mean(width(n, s, ordering) for s in range(seeds))
            # mean over the seeds that finished; the others are counted as oot
            row[f"{ordering}_seconds"] = statistics.mean(r["seconds"] for r in ok) if ok else "oot"
            row[f"{ordering}_unfinished"] = len(runs) - len(ok)
        row["orders_agree"] = True  # both orders must find the same optimum on every seed
        for s in range(seeds):
            a, b = row["pseudotree_runs"][s], row["minfill_runs"][s]
            if a["status"] == b["status"] == "ok" and a["cost"] != b["cost"]:
                row["orders_agree"] = False
        paper = PAPER_RANDOM.get(n)
        if paper:
            row["paper_w"], row["paper_cpu_seconds"], row["paper_gpu_seconds"] = paper
        rows.append(row)
        print(
            f"n={n}: pseudotree w*={row['pseudotree_w']} {row['pseudotree_seconds']} s, "
            f"minfill w*={row['minfill_w']} {row['minfill_seconds']} s",
            flush=True,
        )
    return rows


def bucket_tables(d: int, n_out: int, n_tables: int, seed: int) -> list[Table]:
    """A bucket like BE's largest ones: ``n_tables`` binary/ternary tables over ``n_out`` output
    variables plus the eliminated one ``x`` (every table holds x)."""
    rng = np.random.default_rng(seed)
    names = [f"y{i}" for i in range(n_out)]
    tables = []
    for k in range(n_tables):
        others = [names[k % n_out]]
        if k % 3 == 2:
            others.append(names[(k * 7 + 1) % n_out])
        scope = (*dict.fromkeys(others), "x")
        costs = rng.integers(0, 101, size=(d,) * len(scope)).astype(np.float32)
        costs[rng.random(costs.shape) < 0.5] = np.inf
        tables.append(Table(scope, costs))
    return tables


def fused_vs_naive(d: int = 10, n_out: int = 7, n_tables: int = 12) -> dict[str, object]:
    tables = bucket_tables(d, n_out, n_tables, seed=0)
    backend = NumpyBackend()
    joined_entries = d ** (n_out + 1)

    def measure(fn):  # type: ignore[no-untyped-def]
        tracemalloc.start()
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return out, seconds, peak

    naive, naive_s, naive_peak = measure(lambda: backend.eliminate(backend.join(tables), "x"))
    fused, fused_s, fused_peak = measure(lambda: backend.join_eliminate(tables, "x"))
    perm = [naive.scope.index(v) for v in fused.scope]
    assert np.array_equal(np.transpose(naive.data, perm), fused.data)
    out_bytes = fused.data.nbytes
    return {
        "d": d,
        "tables": n_tables,
        "output_entries": int(fused.data.size),
        "joined_entries": joined_entries,
        "naive_seconds": naive_s,
        "fused_seconds": fused_s,
        "speedup": naive_s / fused_s,
        "naive_peak_bytes": naive_peak,
        "fused_peak_bytes": fused_peak,
        "output_bytes": out_bytes,
        "memory_ratio": naive_peak / fused_peak,
        "fused_joined_entries_per_s": joined_entries / fused_s,
    }


def _old_machine(m: dict[str, object]) -> str:
    """The machine of a results file written before the shared block."""
    return (
        f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, NumPy {m['numpy']}, "
        f"load average at start {m.get('load_average_at_start')}"
    )


def markdown(data: dict[str, object]) -> str:
    m = data["machine"]
    lines = [
        "# NumPy BE on the paper's random networks (CPU)",
        "",
        f"Machine: {describe(m) if isinstance(m, str) or 'commit' in m else _old_machine(m)}. "
        f"Command: `{data['command']}`. Mean over {data['seeds']} seeds; time limit "
        f"{data['time_limit_s']} s per instance (`oot` past it); a mean is over the seeds that "
        "finished, with the others counted as `oot`. w* is over all seeds (computed in-process).",
        "",
        "| n | d | p1 | w* (DFS) | BE CPU s (DFS order) | w* (min-fill) | BE CPU s (min-fill) "
        "| paper w* | paper BE CPU s | paper / ours (DFS) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in data["random"]:
        ours = row["pseudotree_seconds"]
        ratio = (
            f"{row['paper_cpu_seconds'] / ours:.0f}x"
            if isinstance(ours, float)
            and ours > 0
            and "paper_cpu_seconds" in row
            and not row["pseudotree_unfinished"]
            else "-"
        )

        def fmt(x: object, unfinished: int = 0) -> str:
            text = f"{x:.4f}" if isinstance(x, float) else str(x)
            return f"{text} ({unfinished} oot)" if unfinished and isinstance(x, float) else text

        lines.append(
            f"| {row['n']} | 10 | 0.3 | {row['pseudotree_w']:.1f} | "
            f"{fmt(ours, row['pseudotree_unfinished'])} | {row['minfill_w']:.1f} | "
            f"{fmt(row['minfill_seconds'], row['minfill_unfinished'])} | {row.get('paper_w', '-')} | "
            f"{row.get('paper_cpu_seconds', '-')} | {ratio} |"
        )
    f = data["fused_vs_naive"]
    lines += [
        "",
        "## Fused join+eliminate vs the naive join (one bucket)",
        "",
        f"Bucket: {f['tables']} tables, d = {f['d']}, {f['joined_entries']:.3g} joined entries, "
        f"{f['output_entries']:.3g} output entries (float32).",
        "",
        "| path | time (s) | peak memory (MiB) |",
        "|---|---|---|",
        f"| naive: join, then min | {f['naive_seconds']:.3f} | {f['naive_peak_bytes'] / 2**20:.1f} |",
        f"| fused join+eliminate | {f['fused_seconds']:.3f} | {f['fused_peak_bytes'] / 2**20:.1f} |",
        "",
        f"Fused is {f['speedup']:.2f}x faster and uses {f['memory_ratio']:.1f}x less peak memory "
        f"(output alone: {f['output_bytes'] / 2**20:.1f} MiB); "
        f"{f['fused_joined_entries_per_s']:.3g} joined entries/s.",
        "",
        "The paper's CPU column was measured on an AMD Opteron 6276 (2.3 GHz) with its own C++ code; "
        "ours is NumPy on this machine, so the ratio compares implementations and machines together.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--n-max", type=int, default=20)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--rerender", action="store_true", help="rewrite cpu_be.md from the JSON")
    args = parser.parse_args()
    from keep import write_results

    if args.rerender:  # the kept rows, written again (and stamped again) with today's report
        data = json.loads((RESULTS / "cpu_be.json").read_text())
        write_results(RESULTS, "cpu_be", data, markdown(data))
        return
    data: dict[str, object] = {
        "machine": machine_info(),
        "command": f"python benchmarks/cpu_be.py --seeds {args.seeds} --n-max {args.n_max} "
        f"--time-limit {args.time_limit:g}",
        "seeds": args.seeds,
        "time_limit_s": args.time_limit,
    }
    data["fused_vs_naive"] = fused_vs_naive()
    print("fused vs naive:", data["fused_vs_naive"], flush=True)
    data["random"] = random_rows(args.seeds, args.n_max, args.time_limit)
    write_results(RESULTS, "cpu_be", data, markdown(data))
    print(f"wrote {RESULTS / 'cpu_be.json'} and cpu_be.md")


if __name__ == "__main__":
    main()
