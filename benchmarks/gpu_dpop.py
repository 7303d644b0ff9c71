"""GPU agents against CPU agents: distributed DPOP/ADPOP on the paper's random networks.

Run on a machine with CuPy and a CUDA device (the device tool), from outside the repository::

    source benchmarks/device_env.sh .whl && cd /tmp && \\
        python3 $DCOP_REPO/benchmarks/gpu_dpop.py --out $OUT --budget 400

For every row (random networks, d = 10, p1 = 0.3, p2 = 0.5, n = 10..20, ``--seeds`` seeds) the
same instance is solved twice in one run on one host: with CPU agents (NumPy) and with GPU agents
(``dcop run --gpu``: every agent warms up its CUDA context and kernels before it says hello, runs
the buckets large enough on its own stream and the small ones on the CPU, and compiles a bucket's
kernel as soon as the pseudo-tree is known). Both must find the same cost. Reported: the paper's
simulated runtime (the message-carried logical clock: compute along the critical path) and the
solve wall time of each, the GPU agents' set-up time (not part of the solve), how many buckets ran
on the device, and the paper's GpuDBE simulated time beside them. ADPOP(z) rows do the same with
mini-buckets. Writes ``gpu_dpop.json`` and ``gpu_dpop.md`` (``meta.gpu``, ``meta.date``).

With ``--devices 1,2[,4]`` it runs ``benchmarks/gpu_multi.py``'s DPOP part instead: GPU agents over
several GPUs of the host, round-robin and balanced (``gpu_multi.{json,md}``).

Rows whose simulated times are a few milliseconds (n up to ``--reps-n-max``, and the ADPOP rows)
vary by 10-20% from run to run on one host, more than the GPU agents' difference to the CPU
agents where both keep every bucket on the CPU; ``--reps`` repeats their pairs, the CPU agents
first in every other one, and the Markdown gives the median GPU/CPU ratio of the pairs with its
range beside the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from compare.machine import cpu_model, machine_info  # noqa: E402  (benchmarks/compare, beside this file)

#: The paper's GpuDBE (GPU DPOP) simulated seconds on random networks, d = 10, p1 = 0.3.
PAPER_GPU_DPOP = {10: 0.001, 11: 0.001, 12: 0.001, 13: 0.002, 14: 0.002, 15: 0.009,
                  16: 0.049, 17: 0.138, 18: 0.483, 19: 2.019, 20: 2.160}  # fmt: skip
#: The paper's CPU DPOP simulated seconds on the same rows.
PAPER_CPU_DPOP = {10: 0.007, 11: 0.013, 12: 0.028, 13: 0.210, 14: 0.214, 15: 1.609,
                  16: 9.848, 17: 28.14, 18: 103.0, 19: 470.2, 20: 508.9}  # fmt: skip


def one(problem: Any, spec: Any, gpu: bool, timeout: float) -> dict[str, Any]:
    """One distributed run; the figures this benchmark reports."""
    from dcop.coordinator import run_local
    from dcop.errors import DcopError

    t0 = time.perf_counter()
    try:
        run = run_local(problem, spec, gpu=0 if gpu else None, timeout=timeout)
    except DcopError as exc:  # a failed run is a row, not the end of the benchmark
        return {"error": str(exc)[:300], "wall_s": time.perf_counter() - t0}
    m = run.metrics
    agents = run.agents.values()
    backend: dict[str, float] = {}
    for result in run.agents.values():
        for key, value in result.get("backend", {}).items():
            backend[key] = backend.get(key, 0.0) + value
    return {
        "status": run.status,
        "cost": run.internal_cost if math.isfinite(run.internal_cost) else None,
        "bound": run.bound if math.isfinite(run.bound) else None,
        "algo": run.ran.algo,
        "z": run.ran.z,
        "sim_s": m["simulated_runtime_s"],
        "solve_wall_s": m["solve_wall_s"],
        "wall_s": m["wall_s"],
        "compute_s_total": m["compute_s_total"],
        "largest_util_entries": m["largest_util_entries"],
        "largest_util_bytes": m["largest_util_bytes"],
        "network_util_bytes": m["bytes"].get("util", 0),
        "ipc_bytes": m.get("ipc_bytes", 0),
        "ipc_tables": m.get("ipc_tables", 0),
        "setup_s_max": max((a.get("setup_s", 0.0) for a in agents), default=0.0),
        "backend": backend,
    }


def device_name() -> str:
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # reported, the benchmark needs the device anyway
        return f"unknown ({exc})"


def main() -> None:
    if "--devices" in sys.argv[1:]:
        # several GPUs of one host: benchmarks/gpu_multi.py's dpop part(s), one report
        # (gpu_multi.{json,md}) for every device count of --devices 1,2[,4]
        import gpu_multi

        gpu_multi.main(["--parts", "dpop", *sys.argv[1:]])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--n-min", type=int, default=10)
    ap.add_argument("--n-max", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--adpop", default="4,6", help="ADPOP z values for the n >= 16 rows")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for the whole benchmark")
    ap.add_argument("--reps", type=int, default=1, help="pairs per seed on the short rows")
    ap.add_argument(
        "--reps-n-max", type=int, default=16, help="DPOP rows up to this n repeat (ADPOP: all)"
    )
    ap.add_argument("--name", default="gpu_dpop")
    ap.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        help="re-summarise device runs' JSON (no GPU needed); several: one table of their rows "
        "(runs of one machine, e.g. the DPOP rows and the ADPOP rows in two calls)",
    )
    args = ap.parse_args()
    if args.from_json is not None:
        parts = [json.loads(path.read_text()) for path in args.from_json]
        meta = dict(parts[0]["meta"])
        if len(parts) > 1:
            # each part's own machine and date: the device lends a host per session
            meta["parts"] = [p["meta"] for p in parts]
            meta["gpu"] = " / ".join(dict.fromkeys(p["meta"]["gpu"] for p in parts))
            meta["seconds"] = sum(p["meta"].get("seconds", 0.0) for p in parts)
        rows = [r for p in parts for r in p["rows"]]
        write(args, rows, [s for p in parts for s in p["skipped"]], time.monotonic(), meta)
        return
    from dcop.generators import random_network
    from dcop.protocol import RunSpec

    started = time.monotonic()
    spec = RunSpec(max_message_bytes=4095 * 2**20)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    cpu_too_slow = False
    plan = [(n, None) for n in range(args.n_min, args.n_max + 1)]
    plan += [(n, int(z)) for z in args.adpop.split(",") if z for n in (16, 18, 20)]
    for n, z in plan:
        reps = args.reps if z is not None or n <= args.reps_n_max else 1
        for seed, rep in ((s, k) for s in range(1, args.seeds + 1) for k in range(reps)):
            if time.monotonic() - started > args.budget:
                skipped.append(f"n={n} z={z} seed={seed} pair={rep}: time budget")
                continue
            problem = random_network(n, 10, 0.3, 0.5, seed)
            run_spec = spec if z is None else RunSpec("adpop", z, spec.max_message_bytes)
            cpu_first = rep % 2 == 1  # every other pair: the CPU agents first
            cpu: dict[str, Any] = {"error": "skipped: the CPU agents took too long on a smaller n"}
            for side in ("cpu", "gpu") if cpu_first else ("gpu", "cpu"):
                if side == "gpu":
                    gpu = one(problem, run_spec, True, args.timeout)
                elif not (cpu_too_slow and z is None):
                    cpu = one(problem, run_spec, False, args.timeout)
                    if z is None and cpu.get("solve_wall_s", args.timeout) > args.timeout / 3:
                        cpu_too_slow = True
            same = (
                "cost" in gpu
                and "cost" in cpu
                and gpu["cost"] == cpu["cost"]
                and gpu.get("bound") == cpu.get("bound")
            )
            rows.append({"n": n, "d": 10, "p1": 0.3, "p2": 0.5, "seed": seed, "pair": rep,
                         "cpu_first": cpu_first, "z": z, "gpu": gpu, "cpu": cpu,
                         "same": same})  # fmt: skip
            print(
                f"n={n} z={z} seed={seed} pair={rep}: GPU sim {gpu.get('sim_s')} wall "
                f"{gpu.get('solve_wall_s')} | CPU sim {cpu.get('sim_s')} wall "
                f"{cpu.get('solve_wall_s')} | same {same}",
                flush=True,
            )
            write(args, rows, skipped, started)
    write(args, rows, skipped, started)


def _mb(nbytes: float | None) -> float | None:
    return None if nbytes is None else nbytes / 1e6


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def summary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Medians per (n, z) over the seeds where both sides ran (``paired``), so that a ratio
    never sets a CPU median of some seeds against a GPU median of others."""
    out = []
    for key in sorted({(r["n"], r["z"] or 0) for r in rows}):
        n, z = key
        group = [r for r in rows if (r["n"], r["z"] or 0) == key]
        paired = [r for r in group if "sim_s" in r["gpu"] and "sim_s" in r["cpu"]]
        ratios = [r["gpu"]["sim_s"] / r["cpu"]["sim_s"] for r in paired if r["cpu"]["sim_s"] > 0]

        def med(side: str, field: str, among: list[dict[str, Any]] = paired) -> float | None:
            return _median([r[side][field] for r in among if field in r[side]])

        out.append(
            {
                "n": n,
                "d": 10,
                "z": z or None,
                "seeds": len({r["seed"] for r in group}),
                "runs": len(group),
                "paired_seeds": len({r["seed"] for r in paired}),
                "pairs": len(paired),
                "gpu_over_cpu_pairs": _median(ratios),
                "gpu_over_cpu_min": min(ratios, default=None),
                "gpu_over_cpu_max": max(ratios, default=None),
                "dpop_sim_s": med("gpu", "sim_s"),
                "cpu_dpop_sim_s": med("cpu", "sim_s"),
                "gpu_sim_s_all_seeds": med("gpu", "sim_s", group),
                "gpu_solve_wall_s": med("gpu", "solve_wall_s"),
                "cpu_solve_wall_s": med("cpu", "solve_wall_s"),
                "gpu_setup_s": med("gpu", "setup_s_max", group),
                "gpu_ipc_mb": _mb(med("gpu", "ipc_bytes", group)),
                "paper_gpudbe_sim_s": PAPER_GPU_DPOP.get(n) if not z else None,
                "paper_cpu_sim_s": PAPER_CPU_DPOP.get(n) if not z else None,
                "all_same": all(r["same"] for r in paired) if paired else None,
                "gpu_buckets": sum(
                    r["gpu"].get("backend", {}).get("buckets_gpu", 0) for r in group
                ),
                "cpu_buckets": sum(
                    r["gpu"].get("backend", {}).get("buckets_cpu", 0) for r in group
                ),
                "errors": [r[s]["error"] for r in group for s in ("gpu", "cpu") if "error" in r[s]],
            }
        )
    return out


def write(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    skipped: list[str],
    t0: float,
    meta: dict[str, Any] | None = None,
) -> None:
    """Write ``NAME.json`` and ``NAME.md`` (``meta``: the device run's, when re-summarising)."""
    meta = meta or {
        "gpu": device_name(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python3 benchmarks/gpu_dpop.py "
        + " ".join(sys.argv[1:]).replace(str(args.out), "OUT"),
        # the device lends a different host per session, and CPU agents' times follow its CPU
        "machine": machine_info(),
        "cpus": __import__("os").cpu_count(),
        "cpu": cpu_model(),
        "seconds": round(time.monotonic() - t0, 1),
    }
    summary = summary_rows(rows)
    doc = {"meta": meta, "rows": rows, "summary": summary, "skipped": skipped}

    def f(x: Any) -> str:
        return "-" if x is None else (f"{x:.4g}" if isinstance(x, float) else str(x))

    runs = [
        f"`{m['command']}` on {m['date']}, {m['gpu']}, {m['cpus']} CPU cores"
        + (f" ({m['cpu']})" if m.get("cpu") else "")
        for m in meta.get("parts", [meta])
    ]
    lines = [
        f"# GPU agents vs CPU agents: distributed DPOP/ADPOP ({meta['gpu']})",
        "",
        f"{'; '.join(runs)}. Random networks "
        "d = 10, p1 = 0.3, p2 = 0.5; medians over the seeds where both sides ran (`paired`; the "
        "CPU agents are skipped once they take over a third of the per-run timeout, and every "
        "seed is listed below). `sim` = the paper's simulated "
        "runtime (message-carried logical clocks: compute along the critical path); `solve wall` "
        "= from the start message to the last result; `set-up` = a GPU agent's CUDA context, pools "
        "and kernels before its hello (not in the solve); `IPC MB` = UTIL megabytes GPU agents handed "
        "to their parents on the device by CUDA IPC (median over the seeds; not network bytes). "
        "Both runs solve the same instance on the "
        "same host in one run; `same` = equal cost and bound. Paper: GpuDBE on a GTX TITAN.",
        "",
        *([f"**Correction:** {meta['correction']}", ""] if meta.get("correction") else []),
        "`GPU/CPU per pair` = the median over the pairs (seed x repeat) of the GPU agents' "
        "simulated time over the CPU agents' in the same pair, with its range.",
        "",
        "| n | z | paired | pairs | GPU sim | CPU sim | CPU/GPU sim | GPU/CPU per pair [range] | "
        "GPU solve wall | CPU solve wall | GPU sim, all seeds | GPU set-up | paper GpuDBE sim | "
        "buckets GPU/CPU | IPC MB | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        ratio = (
            s["cpu_dpop_sim_s"] / s["dpop_sim_s"]
            if s["cpu_dpop_sim_s"] and s["dpop_sim_s"]
            else None
        )
        per_pair = (
            f"{s['gpu_over_cpu_pairs']:.3g} [{s['gpu_over_cpu_min']:.3g}, "
            f"{s['gpu_over_cpu_max']:.3g}]"
            if s.get("gpu_over_cpu_pairs") is not None
            else "-"
        )
        lines.append(
            f"| {s['n']} | {s['z'] or 'DPOP'} | {s['paired_seeds']}/{s['seeds']} | "
            f"{s.get('pairs', '-')} | "
            f"{f(s['dpop_sim_s'])} | {f(s['cpu_dpop_sim_s'])} | {f(ratio)} | {per_pair} | "
            f"{f(s['gpu_solve_wall_s'])} | {f(s['cpu_solve_wall_s'])} | "
            f"{f(s['gpu_sim_s_all_seeds'])} | {f(s['gpu_setup_s'])} | "
            f"{f(s['paper_gpudbe_sim_s'])} | {s['gpu_buckets']}/{s['cpu_buckets']} | "
            f"{f(s.get('gpu_ipc_mb'))} | "
            f"{'-' if s['all_same'] is None else ('yes' if s['all_same'] else 'NO')} |"
        )
    lines += [
        "",
        "Every seed (seconds; `-`: not run):",
        "",
        "| n | z | seed | pair | first | GPU sim | CPU sim | GPU solve wall | CPU solve wall | same |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g, c = r["gpu"], r["cpu"]
        lines.append(
            f"| {r['n']} | {r['z'] or 'DPOP'} | {r['seed']} | {r.get('pair', 0)} | "
            f"{'CPU' if r.get('cpu_first') else 'GPU'} | {f(g.get('sim_s'))} | "
            f"{f(c.get('sim_s'))} | {f(g.get('solve_wall_s'))} | {f(c.get('solve_wall_s'))} | "
            f"{'yes' if r['same'] else ('-' if 'sim_s' not in c else 'NO')} |"
        )
    if skipped:
        lines += ["", "Not run: " + "; ".join(skipped)]
    errors = [e for s in summary for e in s["errors"]]
    if errors:
        lines += ["", "Errors: " + "; ".join(errors[:10])]
    from keep import write_results

    write_results(args.out, args.name, doc, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
