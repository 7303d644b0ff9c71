"""Several GPUs of one host: distributed DPOP agents and centralized BE on 1, 2 (or 4) devices.

Run on the device machine (``nvidia-h100-x2``), from outside the repository::

    source benchmarks/device_env.sh .whl && cd /tmp && \\
        python3 $DCOP_REPO/benchmarks/gpu_multi.py --out $OUT --devices 1,2 --budget 300

Four parts (``--parts``, run in the order given), each row solved with every device count of
``--devices`` on one host in one run; CuPy's pools are emptied between rows:

- ``threshold``: one bucket of growing size (d = 10, 10**(k+1) joined entries for k in
  ``--threshold-k``) on one device and split over the most devices, median of 5 warm runs: where
  the split starts to pay (``split_min_entries``).
- ``dpop``: GPU agents (``dcop run --gpu``, every bucket of at least the default threshold on a
  device) on the paper's random networks n = ``--n-min``..``--n-max`` (d = 10, p1 = 0.3,
  p2 = 0.5) and ``--dpop-rows`` (n:d:seed), one device, then several with the agents
  ``round-robin``, ``balanced`` (whole subtrees per device) and ``split`` (round robin, each
  agent's large buckets split over every device). Reported: cost and bound (they must equal the
  one-device run's), the simulated runtime and solve wall time, and how the UTILs went to their
  parents (tables by path: ``ipc`` on one device, ``p2p`` between devices, ``host`` through host
  memory). The one-device run goes first and again last (kernels compiled by the first); the
  second is the baseline.
- ``be``: BE (float32) on the same networks from ``--be-n-min`` up, while the largest bucket
  output fits ``--be-max-gib``, then the ``--be-rows`` (larger domains, 5e11-1e12 joined
  entries: seconds on one GPU): one device, then every large bucket split over the devices
  (``dcop solve --backend cupy --device 0,1``). A first, untimed solve compiles. Reported with
  the input bytes moved to the devices for the splits.
- ``big``: a table larger than one device's memory (``--big-gib``, default 1.15 x a device's): a
  clique of binary variables (and one ternary) whose first elimination makes it. Its producer is
  split over the devices and streams to pinned host memory; the next bucket, whose joined table
  is that size and whose output (a third of it) fits a device, reads it there: the first device
  in place, the others their slices. One solve, on the most devices (``--big-all``: on every
  count), compiles included (pinning the host buffer alone takes a while). The optimum is known
  in closed form (only the tables of the first variable cost anything) and checked. Skipped
  where it would take over 0.6 x the host's RAM.

Writes ``NAME.json`` and ``NAME.md`` (``meta.gpu``, ``meta.date``, ``meta.devices``).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from compare.machine import cpu_model, describe, machine_info  # noqa: E402  (beside this file)

PATHS = ("ipc", "p2p", "host", "net")


# ---- distributed DPOP -------------------------------------------------------------------------
def dpop_run(
    problem: Any, spec: Any, devices: int, placement: str, timeout: float
) -> dict[str, Any]:
    """One ``dcop run --gpu`` over the first ``devices`` GPUs; the figures reported."""
    from dcop.coordinator import run_local
    from dcop.errors import DcopError

    gpu = ",".join(str(d) for d in range(devices))
    t0 = time.perf_counter()
    try:
        run = run_local(problem, spec, gpu=gpu, gpu_placement=placement, timeout=timeout)
    except DcopError as exc:  # a failed run is a row, not the end of the benchmark
        return {"error": str(exc)[:300], "wall_s": time.perf_counter() - t0}
    paths = dict.fromkeys(PATHS, 0)
    used: set[int] = set()
    split_buckets, split_s = 0, 0.0  # an agent's large buckets split over the devices
    for result in run.agents.values():
        figures = result.get("backend", {})
        for path in PATHS:
            paths[path] += int(figures.get(f"handover_{path}_tables", 0))
        if "device" in figures:
            used.add(int(figures["device"]))
        split_buckets += int(figures.get("split_buckets", 0))
        split_s += float(figures.get("split_s", 0.0))
    m = run.metrics
    return {
        "cost": run.cost if math.isfinite(run.cost) else None,
        "bound": run.bound if math.isfinite(run.bound) else None,
        "sim_s": m["simulated_runtime_s"],
        "solve_wall_s": m["solve_wall_s"],
        "wall_s": m["wall_s"],
        "largest_util_bytes": m["largest_util_bytes"],
        "handover_tables": paths,
        "devices_used": sorted(used),
        **({"split_buckets": split_buckets, "split_s": split_s} if split_buckets else {}),
    }


def dpop_part(args: argparse.Namespace, over: Any, rows: list[dict[str, Any]], save: Any) -> None:
    from dcop.generators import random_network
    from dcop.protocol import RunSpec

    spec = RunSpec(max_message_bytes=4095 * 2**20)
    multi = [k for k in args.devices if k > 1]
    cases = [(n, 10, seed) for n in range(args.n_min, args.n_max + 1)
             for seed in range(1, args.seeds + 1)]  # fmt: skip
    cases += args.dpop_rows
    for n, d, seed in cases:
        if True:
            if over():
                rows.append({"part": "dpop", "n": n, "d": d, "seed": seed,
                             "skipped": "time budget"})  # fmt: skip
                continue
            problem = random_network(n, d, 0.3, 0.5, seed)
            runs: list[tuple[int, str, str]] = [(1, "round-robin", "cold")]
            for k in multi:
                runs += [(k, p, "") for p in args.placements if p != "split"]
                if "split" in args.placements:
                    # a split bucket's kernels are made for its slices' shapes, new to this
                    # run's first solve (the others reuse the one-device run's): a cold run first
                    runs += [(k, "split", "cold"), (k, "split", "")]
            runs += [(1, "round-robin", "")]
            for k, placement, note in runs:
                got = dpop_run(problem, spec, k, placement, args.timeout)
                row = {"part": "dpop", "n": n, "d": d, "seed": seed, "devices": k,
                       "placement": placement, "note": note, **got}  # fmt: skip
                rows.append(row)
                save()
                print(f"dpop n={n} d={d} seed={seed} devices={k} {placement} {note}: {got}",
                      flush=True)  # fmt: skip
            mine = [r for r in rows if r.get("part") == "dpop"
                    and (r["n"], r.get("d", 10), r["seed"]) == (n, d, seed)]  # fmt: skip
            base = mine[-1]  # the one-device run after the others: kernels compiled
            for r in mine:
                r["same"] = _same(r, base)


# ---- centralized BE ---------------------------------------------------------------------------
def largest_output_bytes(problem: Any, itemsize: int = 4) -> int:
    """Bytes of the largest bucket output of BE with min-fill (before running it)."""
    from dcop.orders.greedy import min_fill_order
    from dcop.trees.induced import induced_scopes

    adjacency = problem.neighbours()
    sizes = problem.domain_sizes()
    scopes = induced_scopes(adjacency, min_fill_order(adjacency))
    return itemsize * max((math.prod(sizes[u] for u in s) for s in scopes.values()), default=1)


def be_backend(devices: int, split_min_entries: int | None) -> Any:
    from dcop.backends import get_backend

    if devices == 1:
        return get_backend("cupy", 0)
    options = {} if split_min_entries is None else {"split_min_entries": split_min_entries}
    return get_backend("cupy", devices=range(devices), **options)


def be_solve(
    problem: Any, backend: Any, max_bytes: float | None, warm: bool = True
) -> dict[str, Any]:
    """One BE solve on ``backend`` along the min-fill order (the order the sizes reported were
    planned with; the same buckets on every device count): bound, times, splits. ``warm``: after
    a first, untimed one (kernels compiled or loaded); else the one solve, compiles included
    (``cold_s`` None)."""
    from dcop.errors import TableTooLarge
    from dcop.inference import solve

    t0 = time.perf_counter()
    cold = None
    try:
        if warm:
            solve(problem, ordering="minfill", backend=backend, max_bytes=max_bytes)
            cold = time.perf_counter() - t0
            splits = getattr(backend, "splits", None)
            if splits is not None:
                splits.clear()
            t0 = time.perf_counter()
        result = solve(problem, ordering="minfill", backend=backend, max_bytes=max_bytes)
    except TableTooLarge as exc:
        return {"error": f"oom: {str(exc)[:240]}", "wall_s": time.perf_counter() - t0}
    wall = time.perf_counter() - t0
    out: dict[str, Any] = {
        "cost": result.upper_bound if math.isfinite(result.upper_bound) else None,
        "bound": result.lower_bound if math.isfinite(result.lower_bound) else None,
        "wall_s": wall,
        "cold_s": cold,
        "induced_width": result.induced_width,
    }
    metrics = getattr(backend, "split_metrics", None)
    if metrics is not None:
        out["splits"] = metrics()
    return out


def be_part(args: argparse.Namespace, over: Any, rows: list[dict[str, Any]], save: Any) -> None:
    """The d = 10 sweep from ``--be-n-min`` while the largest output fits ``--be-max-gib``, then
    the ``--be-rows`` (larger domains: one device takes seconds)."""
    limit = args.be_max_gib * 2**30
    for n in range(args.be_n_min, args.be_n_max + 1):
        if not be_row(args, n, 10, 1, limit, over, rows, save):
            break  # the d = 10 sweep stops at the first output over the limit
    for n, d, seed in args.be_rows:
        be_row(args, n, d, seed, limit, over, rows, save)


def be_row(
    args: argparse.Namespace,
    n: int,
    d: int,
    seed: int,
    limit: float,
    over: Any,
    rows: list[dict[str, Any]],
    save: Any,
) -> bool:
    """One BE instance on every device count; False when its largest output is over ``limit``."""
    from dcop.generators import random_network

    problem = random_network(n, d, 0.3, 0.5, seed)
    out_bytes = largest_output_bytes(problem)
    head = {"part": "be", "n": n, "d": d, "seed": seed}
    if out_bytes > limit:
        rows.append({**head, "skipped": f"largest output {out_bytes} B"})
        return False
    if over():
        rows.append({**head, "skipped": "time budget"})
        return True
    base: dict[str, Any] | None = None
    for k in args.devices:
        free_pools()
        got = be_solve(problem, be_backend(k, args.split_min_entries), None)
        row = {**head, "devices": k, "largest_output_bytes": out_bytes, **got}
        base = base or row
        row["same"] = _same(row, base)
        rows.append(row)
        save()
        print(f"be n={n} d={d} seed={seed} devices={k}: {got}", flush=True)
    return True


def free_pools() -> None:
    """Give the memory CuPy's pools keep (device and pinned host) back between rows: a freed
    100 GB pinned output kept in the pool counts as this process's memory in the next plan."""
    with contextlib.suppress(Exception):
        import cupy

        for device in range(cupy.cuda.runtime.getDeviceCount()):
            with cupy.cuda.Device(device):
                cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()
    import gc

    gc.collect()


# ---- where a split starts to pay ---------------------------------------------------------------
def star_bucket(d: int, k: int, seed: int = 1) -> tuple[list[Any], str]:
    """One bucket: ``x`` (domain ``d``) tied to ``k`` others by binary tables, and a chain of
    binary tables among them: ``d ** (k + 1)`` joined entries, an output of ``d ** k``."""
    from dcop.tables import Table

    rng = np.random.default_rng(seed)
    outs = [f"v{i}" for i in range(k)]
    tables = [Table(("x", u), rng.integers(0, 100, (d, d)).astype(np.float32)) for u in outs]
    tables += [
        Table((u, w), rng.integers(0, 100, (d, d)).astype(np.float32))
        for u, w in itertools.pairwise(outs)
    ]
    return tables, "x"


def threshold_part(
    args: argparse.Namespace, over: Any, rows: list[dict[str, Any]], save: Any
) -> None:
    """One bucket of growing size (``--threshold-k``: d = 10, 10**(k+1) joined entries) on one
    device and split over the most devices (every bucket split): the median of 5 warm runs,
    output on the first device. Where the split's ratio drops under 1 is the threshold."""
    from dcop.backends import get_backend

    most = max(args.devices)
    if most < 2:
        return
    for k in args.threshold_k:
        if over():
            rows.append({"part": "threshold", "k": k, "skipped": "time budget"})
            continue
        tables, var = star_bucket(10, k)
        row: dict[str, Any] = {"part": "threshold", "k": k, "joined": 10 ** (k + 1),
                               "out_bytes": 4 * 10**k, "devices": most}  # fmt: skip
        free_pools()
        one = get_backend("cupy", 0)
        multi = get_backend("cupy", devices=range(most), split_min_entries=0)
        results = []
        for name, backend in (("one_s", one), ("split_s", multi)):
            placed = [backend.table(t.scope, t.data, np.float32) for t in tables]
            times = []
            for _ in range(6):  # the first compiles
                t0 = time.perf_counter()
                out = backend.join_eliminate(placed, var)
                backend.synchronize()
                times.append(time.perf_counter() - t0)
            row[name] = float(np.median(times[1:]))
            results.append(backend.to_numpy(out.data))
            del out, placed
        row["same"] = bool(np.array_equal(results[0], results[1]))
        row["ratio"] = row["split_s"] / row["one_s"]
        rows.append(row)
        save()
        print(f"threshold k={k}: {row}", flush=True)


# ---- one table larger than a device -----------------------------------------------------------
def big_problem(target_bytes: float, seed: int = 1, t_size: int = 3) -> tuple[Any, float]:
    """A clique of binary variables (the second one, ``t``, of ``t_size`` values) whose first
    elimination makes a float32 table of at least ``target_bytes``, and its optimum. The next
    bucket's output is ``1 / t_size`` of that table. Only the tables of the first
    variable ``a`` cost anything (integers 0..100): the optimum is
    ``min over a of the sum over y of min over y of f_y(a, y)``."""
    from dcop.model import CostTable, Problem, Variable

    m = max(1, math.ceil(math.log2(target_bytes / (4 * t_size))))  # t_size 2**m float32 entries
    names = ["a", "t", *(f"y{i}" for i in range(m))]
    sizes = {"a": 2, "t": t_size, **{f"y{i}": 2 for i in range(m)}}
    rng = np.random.default_rng(seed)
    tables = []
    optimum_terms = np.zeros(2)
    for i, u in enumerate(names):
        for v in names[i + 1 :]:
            shape = (sizes[u], sizes[v])
            if u == "a":
                costs = rng.integers(0, 101, shape).astype(np.float64)
                optimum_terms += costs.min(axis=1)
            else:
                costs = np.zeros(shape)
            tables.append(CostTable((u, v), costs))
    variables = {v: Variable.with_size(v, sizes[v]) for v in names}
    problem = Problem(variables, tables, name=f"clique_{len(names)}")
    return problem, float(optimum_terms.min())


def big_part(args: argparse.Namespace, over: Any, rows: list[dict[str, Any]], save: Any) -> None:
    target = args.big_gib * 2**30 if args.big_gib else 1.15 * device_bytes()
    ram = host_ram_bytes()
    if target > 0.6 * ram:
        rows.append({"part": "big", "skipped": f"{target:.3g} B over 0.6 x the host's RAM"})
        return
    problem, optimum = big_problem(target, t_size=args.big_t)
    out_bytes = largest_output_bytes(problem)
    counts = sorted(args.devices, reverse=True) if args.big_all else [max(args.devices)]
    for k in counts:  # the several-device row first
        if over():
            rows.append({"part": "big", "devices": k, "skipped": "time budget"})
            continue
        free_pools()
        got = be_solve(problem, be_backend(k, args.split_min_entries), 0.9 * ram, warm=False)
        exact = got.get("bound") == optimum and got.get("cost") == optimum
        row = {"part": "big", "devices": k, "variables": problem.n, "optimum": optimum,
               "largest_output_bytes": out_bytes, "device_bytes": device_bytes(),
               "exact": exact, **got}  # fmt: skip
        rows.append(row)
        save()
        print(f"big devices={k}: {row}", flush=True)


# ---- the machine ------------------------------------------------------------------------------
def device_bytes() -> float:
    import cupy

    return float(cupy.cuda.runtime.memGetInfo()[1])


def device_name() -> str:
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        count = cupy.cuda.runtime.getDeviceCount()
        text = name.decode() if isinstance(name, bytes) else str(name)
        return f"{count} x {text}"
    except Exception as exc:  # reported, the benchmark needs the device anyway
        return f"unknown ({exc})"


def host_ram_bytes() -> float:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    return 0.0


def _same(row: dict[str, Any], base: dict[str, Any]) -> bool:
    return (
        "error" not in row
        and row.get("cost") == base.get("cost")
        and row.get("bound") == base.get("bound")
    )


# ---- the report -------------------------------------------------------------------------------
def write(args: argparse.Namespace, rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    from keep import write_results

    write_results(args.out, args.name, {"meta": meta, "rows": rows}, markdown(rows, meta))


def _f(x: Any) -> str:
    return "-" if x is None else (f"{x:.4g}" if isinstance(x, float) else str(x))


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        f"# Several GPUs of one host ({meta['gpu']})",
        "",
        f"`{meta['command']}` on {meta['date']}, {meta['gpu']}, devices {meta['devices']}, "
        f"{meta['cpus']} CPU cores ({meta['cpu']}), {meta['seconds']} s. `same`: cost and "
        "bound equal the one-device run's. `x1` = wall time over the one-device run's.",
        "",
        *([f"Machine: {describe(meta['machine'])}.", ""] if meta.get("machine") else []),
        *(f"Not run: {r['skipped']}." for r in rows if r.get("part") == "meta"),
        "",
    ]
    threshold = [r for r in rows if r.get("part") == "threshold"]
    if threshold:
        lines += [
            "## Where a split pays (one bucket, d = 10, output on the first device)",
            "",
            "Median of 5 warm runs; `split/one` under 1: the split is faster. The default "
            "`split_min_entries` should sit where the ratio drops under 1.",
            "",
            "| joined entries | output GB | devices | one device s | split s | split/one | same |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in threshold:
            if "skipped" in r:
                lines.append(f"| 1e{r['k'] + 1} | - | - | skipped: {r['skipped']} ||||")
                continue
            lines.append(
                f"| {r['joined']:.0e} | {r['out_bytes'] / 1e9:.3g} | {r['devices']} | "
                f"{_f(r['one_s'])} | {_f(r['split_s'])} | {_f(r['ratio'])} | "
                f"{'yes' if r['same'] else 'NO'} |"
            )
        lines.append("")
    lines += [
        "## Distributed DPOP (random p1 = 0.3, p2 = 0.5)",
        "",
        "`UTIL paths`: tables handed to parents on one device (ipc), between devices (p2p), "
        "through host memory (host). `split`: buckets split over the devices (seconds in them).",
        "",
        "| n | d | seed | devices | placement | note | sim s | solve wall s | x1 | UTIL paths "
        "ipc/p2p/host | devices used | split | same |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    dpop = [r for r in rows if r.get("part") == "dpop"]
    for r in dpop:
        d = r.get("d", 10)
        if "skipped" in r:
            lines.append(f"| {r['n']} | {d} | {r['seed']} | - | - | skipped: {r['skipped']} "
                         "||||||||")  # fmt: skip
            continue
        base = next(
            (
                b
                for b in reversed(dpop)
                if (b.get("n"), b.get("d", 10), b.get("seed"), b.get("devices"))
                == (r["n"], d, r["seed"], 1)
                and "skipped" not in b
            ),
            None,
        )
        paths = r.get("handover_tables", {})
        ratio = (
            r["solve_wall_s"] / base["solve_wall_s"]
            if base and "solve_wall_s" in r and base.get("solve_wall_s")
            else None
        )
        lines.append(
            f"| {r['n']} | {d} | {r['seed']} | {r['devices']} | {r['placement']} | "
            f"{' '.join(filter(None, (r.get('note'), r.get('error', '')[:60])))} | "
            f"{_f(r.get('sim_s'))} | "
            f"{_f(r.get('solve_wall_s'))} | {_f(ratio)} | "
            f"{paths.get('ipc', '-')}/{paths.get('p2p', '-')}/{paths.get('host', '-')} | "
            f"{r.get('devices_used', '-')} | "
            + (f"{r['split_buckets']} ({_f(r['split_s'])})" if r.get("split_buckets") else "-")
            + f" | {'yes' if r.get('same') else 'NO'} |"
        )
    lines += [
        "",
        "## Centralized BE (random p1 = 0.3, p2 = 0.5; min-fill, float32)",
        "",
        "`moved GB`: input slices sent to the devices for the split buckets.",
        "",
        "| n | d | seed | w* | largest output GB | devices | warm wall s | x1 | buckets split | "
        "of them to host | moved GB | same | error |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    be = [r for r in rows if r.get("part") == "be"]
    for r in be:
        d = r.get("d", 10)
        key = (r["n"], d, r.get("seed", 1))
        if "skipped" in r:
            lines.append(f"| {key[0]} | {d} | {key[2]} | - | - | - | skipped: {r['skipped']} "
                         "||||||")  # fmt: skip
            continue
        base = next(
            (
                b
                for b in be
                if (b["n"], b.get("d", 10), b.get("seed", 1)) == key and b.get("devices") == 1
            ),
            None,
        )
        ratio = r["wall_s"] / base["wall_s"] if base and "cost" in r and "cost" in base else None
        splits = r.get("splits", {})
        moved = splits.get("split_moved_bytes")
        lines.append(
            f"| {key[0]} | {d} | {key[2]} | {_f(r.get('induced_width'))} | "
            f"{r['largest_output_bytes'] / 1e9:.3g} | {r['devices']} | {_f(r.get('wall_s'))} | "
            f"{_f(ratio)} | {splits.get('split_buckets', '-')} | "
            f"{splits.get('split_to_host', '-')} | "
            f"{'-' if moved is None else f'{moved / 1e9:.3g}'} | {'yes' if r.get('same') else 'NO'} | "
            f"{r.get('error', '')[:80]} |"
        )
    lines += [
        "",
        "## One table larger than a device",
        "",
        "| variables | largest output GB | device GB | devices | wall s (one solve, compiles "
        "included) | exact | error |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("part") != "big":
            continue
        if "skipped" in r:
            lines.append(f"| - | - | - | {r.get('devices', '-')} | skipped: {r['skipped']} |||")
            continue
        lines.append(
            f"| {r['variables']} | {r['largest_output_bytes'] / 1e9:.4g} | "
            f"{r['device_bytes'] / 1e9:.4g} | {r['devices']} | {_f(r.get('wall_s'))} | "
            f"{'yes' if r.get('exact') else 'NO'} | "
            f"{r.get('error', '')[:80]} |"
        )
    return "\n".join(lines) + "\n"


def _cases(text: str) -> list[tuple[int, int, int]]:
    """``n:d:seed,...`` -> instances (empty text: none)."""
    out = []
    for item in text.split(","):
        if item.strip():
            n, d, seed = (int(x) for x in item.split(":"))
            out.append((n, d, seed))
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    ap.add_argument("--name", default="gpu_multi")
    ap.add_argument(
        "--devices",
        type=lambda s: sorted({int(x) for x in s.split(",")}),
        default=[1, 2],
        help="device counts, e.g. 1,2 or 1,2,4 (the first devices of the host)",
    )
    ap.add_argument(
        "--parts",
        default="threshold,dpop,be,big",
        help="threshold, dpop, be and/or big, run in this order",
    )
    ap.add_argument("--n-min", type=int, default=18)
    ap.add_argument("--n-max", type=int, default=22)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument(
        "--dpop-rows",
        type=_cases,
        default=_cases("17:25:1"),
        help="more DPOP instances n:d:seed (the most work whose UTILs stay under 4 GB)",
    )
    ap.add_argument(
        "--be-rows",
        type=_cases,
        default=_cases("17:40:1,15:80:1,14:100:3"),
        help="more BE instances n:d:seed (5e11-1e12 joined entries, 13-40 GB outputs)",
    )
    ap.add_argument(
        "--threshold-k",
        type=lambda text: [int(k) for k in text.split(",") if k],
        default=[7, 8, 9],
        help="bucket sizes (10**(k+1) joined entries) of the split threshold part",
    )
    ap.add_argument(
        "--placements",
        type=lambda text: [p for p in text.split(",") if p],
        default=["round-robin", "balanced", "split"],
        help="the DPOP placements run on more than one device",
    )
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per DPOP run")
    ap.add_argument("--be-n-min", type=int, default=18)
    ap.add_argument("--be-n-max", type=int, default=26)
    ap.add_argument("--be-max-gib", type=float, default=30.0, help="largest BE output to run")
    ap.add_argument("--big-gib", type=float, default=0.0, help="0: 1.15 x one device's memory")
    ap.add_argument(
        "--big-t",
        type=int,
        default=3,
        help="values of the big table's second variable (its next output is 1/t of the table)",
    )
    ap.add_argument(
        "--big-all", action="store_true", help="the big table with every device count too"
    )
    ap.add_argument("--split-min-entries", type=int, default=None)
    ap.add_argument("--budget", type=float, default=400.0, help="seconds for the whole run")
    args = ap.parse_args(argv)
    if not args.devices or args.devices[0] < 1 or 1 not in args.devices:
        ap.error("--devices must list counts >= 1, 1 among them (the baseline)")
    from dcop.placement import PLACEMENTS

    if not args.placements or set(args.placements) - set(PLACEMENTS):
        ap.error(f"--placements: a comma list of {', '.join(PLACEMENTS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # every timed call plans afresh, as a fresh process does (dcop.plan.reuse would keep the
    # first call's plan for the later ones, and the best of them would leave planning out)
    os.environ.setdefault("DCOP_PLAN_REUSE", "0")
    started = time.monotonic()

    def over() -> bool:
        return time.monotonic() - started > args.budget

    rows: list[dict[str, Any]] = []
    parts = list(dict.fromkeys(p.strip() for p in args.parts.split(",") if p.strip()))
    steps = {"threshold": threshold_part, "be": be_part, "big": big_part, "dpop": dpop_part}
    unknown = [p for p in parts if p not in steps]
    if unknown:
        raise SystemExit(f"gpu_multi: unknown part(s) {unknown}; use {', '.join(steps)}")
    from dcop.backends import gpu_count

    visible = gpu_count()
    missing = [k for k in args.devices if k > visible]
    if missing:  # an x2 machine asked for 4: the rows it can run, and a line saying so
        rows.append({"part": "meta", "skipped": f"device counts {missing}: {visible} visible"})
        args.devices = [k for k in args.devices if k <= visible]
    if not args.devices:
        raise SystemExit(f"gpu_multi: no GPU visible (asked for {missing})")

    machine = machine_info()  # the one machine block of every results file

    def meta() -> dict[str, Any]:
        return {
            "machine": machine,
            "gpu": device_name(),
            "devices": args.devices,
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python3 benchmarks/gpu_multi.py "
            + " ".join(sys.argv[1:] if argv is None else argv).replace(str(args.out), "OUT"),
            "host": platform.node() and "device machine",
            "cpus": __import__("os").cpu_count(),
            "cpu": cpu_model(),
            "seconds": round(time.monotonic() - started, 1),
        }

    def save() -> None:  # after every row: a run cut short keeps what it measured
        write(args, rows, meta())

    for name in parts:  # in the order given: what matters most first, within --budget
        steps[name](args, over, rows, save)
    save()


if __name__ == "__main__":
    main()
