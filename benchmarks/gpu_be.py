"""BE and MBE(z) end to end, CPU (NumPy backend) vs GPU (CuPy backend), on the paper's networks.

Series (5 seeds each, p2 = 0.5, integer costs in [0, 100], min-fill order, float32 as chosen by
``dcop.inference.choose_dtype``): random networks n = 10..20 at d = 10, p1 = 0.3; d = 5..100 at
n = 10; p1 = 0.2..0.9 at n = 10, d = 10; scale-free n = 10..20 and d = 5..100; grids side 5..15 and
d = 5..100 at side 10; and MBE(z), z = 2..10, on random n = 20, d = 25, p1 = 0.3.

Per instance: ``solve()`` wall time on the GPU cold (first call: kernels compiled or loaded from
CuPy's cache) and warm (the number reported, as the paper's kernels were compiled ahead), a third
GPU run instrumented with CUDA events (kernel time) and synchronised host timers (uploads of the
cost tables, downloads), and the CPU time. Both backends must agree on the bound. A bucket table
over ``--gpu-max-gib`` (or the CPU's limit) is reported as ``oom`` as in the paper; the CPU is
skipped for the rest of a series once one run took more than ``--cpu-limit`` seconds.

Writes ``benchmarks/results/gpu_be.{json,md}`` and ``gpu_be_speedup.png`` (speedup vs induced width).

With ``--devices 1,2[,4]`` it runs ``benchmarks/gpu_multi.py``'s BE parts instead: BE with large
buckets split over several GPUs, and one table larger than a device (``gpu_multi.{json,md}``).

Running it on the device machine: from the repository root,
``python3 -m pip install -q --no-deps --no-build-isolation -e .`` (maps ``gpu/`` to ``dcop.gpu``),
then ``python3 benchmarks/gpu_be.py``; matplotlib is in the ``bench`` extra (and on the device).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcop.errors import TableTooLarge
from dcop.generators import generate
from dcop.inference import solve

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(RESULTS.parent))
from compare.machine import machine_info  # noqa: E402  (benchmarks/compare)

P2 = 0.5

# (series, topology, [(n, d, p1)], scale-free links per new node)
SERIES: list[tuple[str, str, list[tuple[int, int, float]], int]] = [
    ("random n", "random", [(n, 10, 0.3) for n in range(10, 21)], 2),
    ("random d", "random", [(10, d, 0.3) for d in (5, 10, 25, 50, 100)], 2),
    ("random p1", "random", [(10, 10, p / 10) for p in range(2, 10)], 2),
    ("scale-free n", "scalefree", [(n, 10, 0.0) for n in range(10, 21)], 2),
    ("scale-free d", "scalefree", [(10, d, 0.0) for d in (5, 10, 25, 50, 100)], 2),
    ("scale-free-m5 n", "scalefree", [(n, 10, 0.0) for n in range(10, 21)], 5),
    ("scale-free-m5 d", "scalefree", [(10, d, 0.0) for d in (5, 10, 25, 50, 100)], 5),
    ("grid side", "grid", [(s * s, 10, 0.0) for s in range(5, 16)], 2),
    ("grid d", "grid", [(100, d, 0.0) for d in (5, 10, 25, 50, 100)], 2),
]

# The paper's BE columns (w*, CPU s, GPU s, speedup; None = oom), GeForce GTX TITAN vs Opteron.
PAPER: dict[
    tuple[str, int, int, float], tuple[float, float | None, float | None, float | None]
] = {}
for _n, _row in zip(
    range(10, 21),
    [
        (2.9, 0.019, 0.002, 10.5), (3.2, 0.031, 0.002, 13.6), (3.6, 0.069, 0.003, 25.7),
        (4.3, 0.413, 0.005, 79.4), (4.4, 0.631, 0.006, 98.6), (5.3, 4.190, 0.026, 158),
        (5.8, 32.29, 0.189, 171), (6.4, 65.41, 0.328, 200), (7.5, 206.1, 0.944, 218),
        (8.0, 602.1, 2.541, 237), (8.5, 675.3, 3.145, 215),
    ],
    strict=True,
):  # fmt: skip
    PAPER[("random", _n, 10, 0.3)] = _row
for _d, _row in zip(
    (5, 25, 50, 100),
    [(3.0, 0.001, 0.002, 0.56), (2.8, 0.227, 0.004, 55.4), (2.9, 24.81, 0.095, 262),
     (2.9, 67.59, 0.220, 308)],
    strict=True,
):  # fmt: skip
    PAPER[("random", 10, _d, 0.3)] = _row
for _p, _row in zip(
    (0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
    [(2.0, 0.001, 0.001, 0.62), (3.8, 0.094, 0.002, 40.7), (4.5, 0.525, 0.005, 105),
     (5.4, 3.378, 0.019, 176), (5.9, 14.86, 0.072, 205), (6.7, 56.23, 0.246, 228),
     (7.6, 72.32, 0.312, 232)],
    strict=True,
):  # fmt: skip
    PAPER[("random", 10, 10, _p)] = _row
for _n, _row in zip(
    range(10, 21),
    [(6.3, 22.99, 0.111, 207), (6.0, 25.57, 0.120, 212), (6.0, 27.96, 0.132, 212),
     (5.9, 80.14, 0.370, 217), (6.9, 78.36, 0.339, 231), (8.2, 189.4, 0.887, 213),
     (9.2, None, None, None), (9.5, None, None, None), (10, None, None, None),
     (11, None, None, None), (12, None, None, None)],
    strict=True,
):  # fmt: skip
    PAPER[("scalefree", _n, 10, 0.0)] = _row
for _d, _row in zip(
    (5, 25, 50, 100),
    [(6.8, 0.322, 0.004, 74.8), (6.6, 242.5, 0.888, 273), (6.4, None, None, None),
     (6.4, None, None, None)],
    strict=True,
):  # fmt: skip
    PAPER[("scalefree", 10, _d, 0.0)] = _row
for _s, _row in zip(
    range(5, 16),
    [(3.3, 0.259, 0.005, 44.7), (3.7, 0.267, 0.008, 33.4), (3.7, 0.515, 0.012, 42.9),
     (3.6, 0.848, 0.018, 47.1), (3.9, 1.460, 0.028, 52.0), (4.0, 1.881, 0.035, 34.4),
     (3.7, 1.934, 0.040, 48.3), (3.8, 2.174, 0.042, 48.4), (3.9, 2.430, 0.045, 42.2),
     (4.0, 2.996, 0.055, 54.5), (4.0, 3.785, 0.071, 53.3)],
    strict=True,
):  # fmt: skip
    PAPER[("grid", _s * _s, 10, 0.0)] = _row
for _d, _row in zip(
    (5, 25, 50, 100),
    [(3.7, 0.043, 0.020, 2.21), (3.9, 97.29, 0.388, 251), (4.0, None, None, None),
     (4.0, None, None, None)],
    strict=True,
):  # fmt: skip
    PAPER[("grid", 100, _d, 0.0)] = _row


def timed_backend(base: Any) -> Any:
    """A CupyBackend that records kernel time with CUDA events and upload/download time."""
    import cupy

    class Timed(base):  # type: ignore[misc, valid-type]
        def reset(self) -> None:
            self.events: list[tuple[Any, Any]] = []
            self.upload_s = 0.0
            self.download_s = 0.0

        def table(self, scope: Any, array: Any, dtype: Any = np.float64) -> Any:
            self.stream.synchronize()  # time the copy alone, not queued kernels
            t0 = time.perf_counter()
            out = super().table(scope, array, dtype)
            self.stream.synchronize()
            self.upload_s += time.perf_counter() - t0
            return out

        def run(self, plan: Any, out: Any = None) -> Any:
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record(self.stream)
            table = super().run(plan, out)
            stop.record(self.stream)
            self.events.append((start, stop))
            return table

        def to_numpy(self, array: Any) -> np.ndarray:
            self.stream.synchronize()
            t0 = time.perf_counter()
            out = super().to_numpy(array)
            self.download_s += time.perf_counter() - t0
            return out

        def kernel_s(self) -> float:
            self.synchronize()
            return sum(cupy.cuda.get_elapsed_time(a, b) for a, b in self.events) / 1e3

    return Timed


def one(
    problem: Any, backend: Any, max_bytes: float, **kw: Any
) -> tuple[float, Any | None, str | None]:
    """Wall seconds of solve() (synchronised), its result, and 'oom' if a table was too large."""
    t0 = time.perf_counter()
    try:
        result = solve(problem, backend=backend, max_bytes=max_bytes, **kw)
    except TableTooLarge:
        return time.perf_counter() - t0, None, "oom"
    if hasattr(backend, "synchronize"):
        backend.synchronize()
    return time.perf_counter() - t0, result, None


def bench_instance(
    problem: Any, gpu: Any, timed: Any, run_cpu: bool, args: argparse.Namespace, **kw: Any
) -> dict[str, Any]:
    gmax, cmax = args.gpu_max_gib * 2**30, args.cpu_max_gib * 2**30
    rec: dict[str, Any] = {"problem": problem.name}
    cold, res, err = one(problem, gpu, gmax, **kw)
    rec["gpu_cold_s"] = cold
    if err:
        rec["gpu"] = err
    else:
        assert res is not None
        warm = [one(problem, gpu, gmax, **kw)[0] for _ in range(args.repeats)]
        rec["gpu_s"] = statistics.median(warm)
        rec["w"] = res.induced_width
        rec["largest_table"] = res.largest_table
        rec["lower"] = res.lower_bound
        rec["upper"] = res.upper_bound
        rec["dtype"] = res.dtype
        timed.reset()
        one(problem, timed, gmax, **kw)
        rec["kernel_s"] = timed.kernel_s()
        rec["upload_s"] = timed.upload_s
        rec["download_s"] = timed.download_s
    if run_cpu and err:
        rec["cpu"] = "not run (GPU oom)"  # the CPU's table limit is lower still
    elif run_cpu:
        cpu_s, cres, cerr = one(problem, "numpy", cmax, **kw)
        if cerr:
            rec["cpu"] = cerr
        else:
            rec["cpu_s"] = cpu_s
        if cres is not None:
            rec.setdefault("w", cres.induced_width)
            if "lower" in rec:
                same = math.isclose(rec["lower"], cres.lower_bound, rel_tol=1e-9, abs_tol=1e-9)
                same = same or (math.isinf(rec["lower"]) and math.isinf(cres.lower_bound))
                rec["same_bound"] = same
                if "gpu_s" in rec:
                    rec["speedup"] = cpu_s / rec["gpu_s"]
    return rec


def ordering_for(topology: str, choice: str) -> str:
    """``paper``: the CPU suites' order (DFS pseudo-tree, min-fill on grids); else the name."""
    if choice != "paper":
        return choice
    return "minfill" if topology == "grid" else "pseudotree"


def gpu_dpop(problem: Any, rec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """DPOP with one OS process per variable, each agent on CuPy (its own stream): simulated and
    wall time; its cost must equal the GPU BE optimum."""
    from dcop.coordinator import run_local
    from dcop.errors import DcopError
    from dcop.protocol import RunSpec

    t0 = time.perf_counter()
    try:
        res = run_local(
            problem,
            RunSpec(max_message_bytes=4095 * 2**20),
            gpu=0,
            timeout=args.dpop_timeout,
        )
    except (DcopError, OSError) as exc:  # reported in the row, never the end of the benchmark
        return {"dpop": f"error: {exc}"[:200], "dpop_wall_s": time.perf_counter() - t0}
    opt = rec.get("lower")
    same = opt is not None and math.isclose(res.internal_cost, opt, abs_tol=1e-6)
    return {
        "dpop_sim_s": res.metrics["simulated_runtime_s"],
        "dpop_wall_s": time.perf_counter() - t0,
        "dpop_cost": res.internal_cost if math.isfinite(res.internal_cost) else None,
        "dpop_same": bool(same),
    }


def mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarise(recs: list[dict[str, Any]]) -> dict[str, Any]:
    def pick(key: str) -> list[float]:
        return [r[key] for r in recs if isinstance(r.get(key), (int, float))]

    return {
        "seeds": len(recs),
        "w": mean(pick("w")),
        "cpu_s": mean(pick("cpu_s")) if all("cpu_s" in r for r in recs) else None,
        "gpu_s": mean(pick("gpu_s")) if all("gpu_s" in r for r in recs) else None,
        "gpu_cold_s": mean(pick("gpu_cold_s")),
        "kernel_s": mean(pick("kernel_s")),
        "transfer_s": mean([r["upload_s"] + r["download_s"] for r in recs if "upload_s" in r]),
        "speedup": mean(pick("speedup")) if all("speedup" in r for r in recs) else None,
        "oom_gpu": sum(r.get("gpu") == "oom" for r in recs),
        "oom_cpu": sum(r.get("cpu") == "oom" for r in recs),
        "cpu_runs": sum("cpu_s" in r for r in recs),
        "all_same": all(r.get("same_bound", True) for r in recs)
        and all(r.get("dpop_same", True) for r in recs),
        "dpop_sim_s": mean(pick("dpop_sim_s")) if all("dpop_sim_s" in r for r in recs) else None,
        "dpop_wall_s": mean(pick("dpop_wall_s")) if all("dpop_sim_s" in r for r in recs) else None,
        "dpop_runs": sum("dpop_sim_s" in r for r in recs),
        "lower": mean(pick("lower")),
        "upper": mean([u for u in pick("upper") if math.isfinite(u)]),
        "feasible": sum(math.isfinite(r.get("upper", math.inf)) for r in recs),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    from dcop.gpu import CupyBackend

    gpu = CupyBackend()
    timed = timed_backend(CupyBackend)(stream=gpu.stream)
    timed.reset()
    deadline = time.perf_counter() + args.budget
    out: dict[str, Any] = {"series": [], "mbe": [], "skipped": []}
    if not args.only or "mbe" in args.only:
        cpu_ok = True
        all_oom = False
        for z in range(2, 11):
            if time.perf_counter() > deadline or all_oom:
                why = "oom (a smaller z was)" if all_oom else "time budget"
                out["skipped"].append(f"mbe z={z}: {why}")
                continue
            recs = []
            for seed in range(args.seeds):
                problem = generate("random", 20, 25, p1=0.3, p2=P2, seed=seed)
                rec = bench_instance(problem, gpu, timed, cpu_ok, args, algo="mbe", z=z)
                recs.append(rec)
                if rec.get("cpu_s", 0) > args.cpu_limit:
                    cpu_ok = False
            s = summarise(recs)
            all_oom = s["oom_gpu"] == len(recs)
            s.update(series="mbe", topology="random", n=20, d=25, p1=0.3, z=z, runs=recs)
            out["mbe"].append(s)
            print(_line(s), flush=True)
    for series, topology, configs, links in SERIES:
        if args.only and series not in args.only:
            continue
        kw = {"ordering": ordering_for(topology, args.ordering)}
        cpu_ok = True
        all_oom = False
        for n, d, p1 in configs:
            if n < args.n_min:
                continue
            if time.perf_counter() > deadline:
                out["skipped"].append(f"{series} n={n} d={d} p1={p1}: time budget")
                continue
            if all_oom:
                out["skipped"].append(f"{series} n={n} d={d}: oom (a smaller one was)")
                continue
            recs = []
            for seed in range(args.seeds):
                problem = generate(topology, n, d, p1=p1 or 0.3, p2=P2, seed=seed, links=links)
                rec = bench_instance(problem, gpu, timed, cpu_ok, args, **kw)
                if series in (args.dpop or ()) and rec.get("gpu") != "oom":
                    rec.update(gpu_dpop(problem, rec, args))
                recs.append(rec)
                if rec.get("cpu_s", 0) > args.cpu_limit:
                    cpu_ok = False
            s = summarise(recs)
            all_oom = s["oom_gpu"] == len(recs)
            s.update(series=series, topology=topology, n=n, d=d, p1=p1, links=links, runs=recs)
            s.update(kw)
            paper = PAPER.get((topology, n, d, p1))
            if paper is None and (topology, n, d) == ("random", 10, 10):
                paper = PAPER[("random", 10, 10, 0.3)] if p1 == 0.3 else None
            if paper is None and n == 10 and d == 10 and topology == "scalefree":
                paper = PAPER[("scalefree", 10, 10, 0.0)]
            if paper is None and n == 100 and d == 10 and topology == "grid":
                paper = PAPER[("grid", 100, 10, 0.0)]
            s["paper"] = paper
            out["series"].append(s)
            print(_line(s), flush=True)
    return out


def _f(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def _line(s: dict[str, Any]) -> str:
    z = f" z={s['z']}" if "z" in s else ""
    return (
        f"{s['series']:12s} n={s['n']:3d} d={s['d']:3d} p1={s['p1']:.1f}{z} w={_f(s['w'])} "
        f"cpu={_f(s['cpu_s'])} gpu={_f(s['gpu_s'])} cold={_f(s['gpu_cold_s'])} "
        f"kernel={_f(s['kernel_s'])} xfer={_f(s['transfer_s'])} speedup={_f(s['speedup'])} "
        f"oom={s['oom_gpu']} same={s['all_same']}"
    )


def markdown(meta: dict[str, Any], out: dict[str, Any]) -> str:
    lines = [
        f"# BE / MBE end to end: NumPy CPU vs CuPy GPU ({meta['gpu']})",
        "",
        f"`{meta['command']}` on {meta['date']}; {meta['seeds']} seeds per row, times in seconds "
        "(means over seeds). `GPU` is the warm `solve()` wall time (ordering, uploads, kernels, "
        "assignment, evaluation: end to end); `cold` is the first call (kernel compilation or "
        "CuPy cache load); `kernel` is the CUDA-event time of the join+eliminate kernels and "
        "`transfer` the synchronised upload/download time, both from a separate instrumented run. "
        "CPU = NumpyBackend on one core of the device host. `same` = both backends found the same "
        "bound on every seed where both ran (and GPU DPOP's cost equals it). Elimination order: "
        f"`{meta.get('ordering', 'minfill')}` (`paper` = DFS pseudo-tree, min-fill on grids). "
        "DPOP GPU: `run_local(gpu=0)`, one OS process per variable each with its own CuPy "
        "stream; simulated = the paper's message-carried clock, wall = the whole run including "
        "process and CUDA start-up. Paper: BE on a GeForce GTX TITAN vs an Opteron CPU "
        "(Tables 2-4). `oom` = a bucket table over "
        f"{meta['gpu_max_gib']} GiB (GPU) or {meta['cpu_max_gib']} GiB (CPU); `-` = not run "
        f"(the CPU is skipped for the rest of a series after a run over {meta['cpu_limit']} s).",
        "",
        "| series | n | d | p1 | w* | CPU | GPU | speedup | cold | kernel | transfer | same | "
        "paper w* | paper CPU | paper GPU | paper speedup | DPOP GPU simulated | DPOP GPU wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in out["series"]:
        p = s["paper"] or (None, None, None, None)
        gpu = _f(s["gpu_s"]) if not s["oom_gpu"] else f"oom ({s['oom_gpu']}/{s['seeds']})"
        pgpu = "oom" if s["paper"] and p[2] is None else _f(p[2])
        p1 = f"{s['p1']:.1f}" if s["topology"] == "random" else "-"
        cpu = "oom" if s["oom_cpu"] == s["seeds"] else _f(s["cpu_s"])
        lines.append(
            f"| {s['series']} | {s['n']} | {s['d']} | {p1} | {_f(s['w'], 2)} | {cpu} | "
            f"{gpu} | {_f(s['speedup'])} | {_f(s['gpu_cold_s'])} | {_f(s['kernel_s'])} | "
            f"{_f(s['transfer_s'])} | {'yes' if s['all_same'] else 'NO'} | {_f(p[0], 2)} | "
            f"{_f(p[1])} | {pgpu} | {_f(p[3])} | {_f(s.get('dpop_sim_s'))} | "
            f"{_f(s.get('dpop_wall_s'))} |"
        )
    if out["mbe"]:
        lines += [
            "",
            "## MBE(z) on random networks n = 20, d = 25, p1 = 0.3",
            "",
            "Lower bound = the mini-bucket bound (mean over seeds); upper bound = the true cost of "
            "the decoded assignment (mean over the seeds where it is feasible; how many are in "
            "brackets; p2 = 0.5 makes many decoded assignments infeasible at small z).",
            "",
            "| z | CPU | GPU | speedup | cold | kernel | transfer | lower | upper | same |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in out["mbe"]:
            gpu = _f(s["gpu_s"]) if not s["oom_gpu"] else f"oom ({s['oom_gpu']}/{s['seeds']})"
            cpu = "oom" if s["oom_cpu"] == s["seeds"] else _f(s["cpu_s"])
            lines.append(
                f"| {s['z']} | {cpu} | {gpu} | {_f(s['speedup'])} | "
                f"{_f(s['gpu_cold_s'])} | {_f(s['kernel_s'])} | {_f(s['transfer_s'])} | "
                f"{_f(s['lower'], 6)} | {_f(s['upper'], 6)} ({s['feasible']}/{s['seeds']}) | "
                f"{'yes' if s['all_same'] else 'NO'} |"
            )
    if out["skipped"]:
        lines += ["", "Not run: " + "; ".join(out["skipped"])]
    return "\n".join(lines) + "\n"


def plot(out: dict[str, Any], path: Path, gpu_name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for topology, marker in (("random", "o"), ("scalefree", "s"), ("grid", "^")):
        ws, sp = [], []
        for s in out["series"]:
            if s["topology"] != topology:
                continue
            for r in s["runs"]:
                if "speedup" in r:
                    ws.append(r["w"])
                    sp.append(r["speedup"])
        if ws:
            ax.scatter(ws, sp, marker=marker, label=topology, alpha=0.7)
    mbe = [(r["w"], r["speedup"]) for s in out["mbe"] for r in s["runs"] if "speedup" in r]
    if mbe:
        ax.scatter([m[0] for m in mbe], [m[1] for m in mbe], marker="x", label="MBE (n=20, d=25)")
    ax.set_yscale("log")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("induced width w* (min-fill)")
    ax.set_ylabel("speedup (CPU time / GPU time, end to end)")
    ax.set_title(f"BE: NumPy CPU vs CuPy GPU ({gpu_name})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def finite(x: Any) -> Any:
    """JSON has no infinity: write it as the strings "inf" / "-inf"."""
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x


def main() -> None:
    if "--devices" in sys.argv[1:]:
        # several GPUs of one host: benchmarks/gpu_multi.py's be,big part(s), one report
        # (gpu_multi.{json,md}) for every device count of --devices 1,2[,4]
        import gpu_multi

        gpu_multi.main(["--parts", "be,big", *sys.argv[1:]])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="warm GPU runs per instance")
    parser.add_argument("--only", nargs="*", help="series names to run (and/or 'mbe')")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds before skipping")
    parser.add_argument("--cpu-limit", type=float, default=10.0)
    parser.add_argument("--gpu-max-gib", type=float, default=8.0)
    parser.add_argument("--cpu-max-gib", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="gpu_be")
    parser.add_argument(
        "--ordering",
        default="minfill",
        help="elimination order: minfill, pseudotree, ... or 'paper' (pseudotree, grids minfill)",
    )
    parser.add_argument("--dpop", nargs="*", help="series whose instances also run GPU DPOP")
    parser.add_argument("--dpop-timeout", type=float, default=120.0)
    parser.add_argument("--n-min", type=int, default=0, help="skip rows with fewer variables")
    args = parser.parse_args()
    # every timed call plans afresh, as a fresh process does (dcop.plan.reuse would keep the
    # first call's plan for the later ones, and the best of them would leave planning out)
    os.environ.setdefault("DCOP_PLAN_REUSE", "0")
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    meta = {
        "gpu": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        "cupy": cupy.__version__,
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python3 benchmarks/gpu_be.py " + " ".join(sys.argv[1:]),
        "seeds": args.seeds,
        "gpu_max_gib": args.gpu_max_gib,
        "cpu_max_gib": args.cpu_max_gib,
        "cpu_limit": args.cpu_limit,
        "ordering": args.ordering,
    }
    t0 = time.perf_counter()
    out = run(args)
    meta["seconds"] = time.perf_counter() - t0
    from keep import write_results

    write_results(args.out, args.name, finite({"meta": meta, **out}), markdown(meta, out))
    plot(out, args.out / f"{args.name}_speedup.png", meta["gpu"])
    print(markdown(meta, out))


if __name__ == "__main__":
    main()
