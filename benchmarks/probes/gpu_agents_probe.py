"""Device probe for GPU agents: what a DPOP agent pays to use a GPU, part by part.

(a) ``setup``: in fresh processes, ``import cupy``, ``CupyBackend()`` (driver, CUDA context,
    streams) and ``warm_up()`` (pools, generic kernels, first launches), with an empty kernel
    cache and again with the cache the first run filled; and, for comparison, today's path: the
    first join+eliminate of a fresh backend without warm-up.
(b) ``compile``: ``prepare_bucket`` of buckets that get a generated kernel (DPOP buckets of random
    d = 10 problems, 4e6 to 1e9 joined entries), in a fresh process with an empty cache and in
    another with the cache filled (what a restarted agent with a mounted cache pays).
(c) ``crossover``: one bucket (eliminated x, d = 10, separators of 1 to 8 variables: 1e2 to 1e9
    joined entries) on the CPU (``NumpyBackend``, all threads and one thread) and on the GPU as an
    agent pays it (inputs uploaded from the host, output downloaded), with the upload, kernel and
    download apart, and device-resident (inputs already there, output left there). It recommends
    the placement threshold ``DCOP_GPU_MIN_ENTRIES`` (``dcop.placement``).
(d) ``transfers``: a 100 MB and a 1 GB UTIL table uploaded from pageable memory, and through a
    pinned staging buffer (allocation and host copy counted apart), and downloaded both ways.
(e) ``agents``: the buckets of whole random problems (n = 12, 16, 18, d = 10, p1 = 0.3, p2 = 0.5,
    DFS pseudo-tree order, as DPOP's agents have them): per-bucket times on the CPU, all on the
    GPU, and placed by the recommended threshold; the sum, and the critical path along the
    pseudo-tree (what the simulated runtime adds up, without messages).

Each part has its own time budget (``--budget`` seconds in all, 230 by default) and its own
try/except: a missing feature or a failure is recorded, never fatal. The JSON is rewritten after
every part, so a run cut short keeps what it measured.

It imports only NumPy, CuPy and dcop's core (no pyzmq, msgpack or networkx) and runs from any
folder: ``cd /tmp && python3 REPO/benchmarks/probes/gpu_agents_probe.py --out DIR`` writes
``DIR/gpu_agents_probe.json``. ``dcop`` comes from an install, else from this repository (its
``gpu/`` folder mapped to ``dcop.gpu`` as ``pyproject.toml`` does).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

#: What this probe found (NVIDIA H100, CuPy 14.2, 2026-11-23; results are not kept): a GPU
#: agent's set-up is ~0.2 s (CuPy import and context) plus a 0.03 s warm-up; a generated kernel
#: compiles in ~0.16 s cold and 0.4 ms from the cache; uploads of 100 MB run at 52 GB/s pinned
#: against 7.6 GB/s pageable (dcop.gpu.backend.PINNED_DOWNLOAD_BYTES); one bucket's CPU/GPU
#: crossover as an agent pays it lies near 1e5 joined entries (see gpu_bucket_context.py).
CONCLUSION = "GPU agents: 0.2 s set-up, pinned transfers 7x pageable, crossover ~1e5-3e5 entries"

REPO = Path(__file__).resolve().parents[2]
RESULT_NAME = "gpu_agents_probe.json"
D = 10
#: Seconds of repeated calls a timing aims at (after its warm-up call).
MIN_TOTAL_S = 0.25
#: Seconds per part (scaled down when --budget is smaller than their sum).
PART_BUDGETS = {
    "setup": 45.0,
    "compile": 40.0,
    "crossover": 85.0,
    "transfers": 25.0,
    "agents": 35.0,
}


# ---- imports ------------------------------------------------------------------------------------
def import_dcop() -> str:
    """Make ``dcop`` and ``dcop.gpu`` importable; say where they came from."""
    try:
        import dcop.gpu

        return "installed"
    except ImportError:
        pass
    for name in [m for m in sys.modules if m == "dcop" or m.startswith("dcop.")]:
        del sys.modules[name]
    sys.path.insert(0, str(REPO))
    import dcop

    # the repository's top-level folders (gpu/, ...) are subpackages of dcop, as pyproject maps them
    if str(REPO) not in list(dcop.__path__):
        dcop.__path__.append(str(REPO))
    import dcop.gpu

    return "repository"


# ---- small helpers ------------------------------------------------------------------------------
class Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.perf_counter() + seconds

    def left(self) -> float:
        return self.end - time.perf_counter()


def repeat(fn: Callable[[], Any], budget: Budget, reps: int = 15) -> dict:
    """Median seconds of ``fn`` after one warm-up call (the first call is reported apart): at
    least 3 calls and MIN_TOTAL_S seconds, at most ``reps``; one call only when it takes over half
    a second."""
    min_total = MIN_TOTAL_S
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    if first > 0.5 or budget.left() < 5 * first:
        return {"median_s": first, "first_s": first, "reps": 1}
    times: list[float] = []
    while len(times) < reps and (sum(times) < min_total or len(times) < 3):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if budget.left() < 1.0:
            break
    return {"median_s": statistics.median(times), "first_s": first, "reps": len(times)}


def failure(exc: BaseException) -> dict:
    return {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}


def bucket_shapes(seps: list[int]) -> tuple[list[tuple[str, ...]], list[tuple[int, ...]], str]:
    """Scopes and shapes of a DPOP bucket of agent x (domain 10) whose separator has the given
    domain sizes: binary constraints with up to three separator variables, a child's UTIL over
    all of the separator but its first variable (and x), and, from three separator variables on,
    a second child's UTIL over (x, last, first). Joined entries: 10 * prod(seps)."""
    names = [f"s{i}" for i in range(len(seps))]
    size = dict(zip(names, seps, strict=True))
    size["x"] = D
    scopes: list[tuple[str, ...]] = [("x", v) for v in names[:3]]
    scopes.append((*names[1:], "x"))
    if len(names) >= 3:
        scopes.append(("x", names[-1], names[0]))
    return scopes, [tuple(size[v] for v in scope) for scope in scopes], "x"


def bucket_tables(seps: list[int], dtype: Any = np.float32, seed: int = 0) -> tuple[list, str]:
    """The tables of :func:`bucket_shapes`, integer costs in [0, 100)."""
    from dcop.tables import Table

    rng = np.random.default_rng(seed)
    scopes, shapes, var = bucket_shapes(seps)
    tables = [
        Table(scope, rng.integers(0, 100, size=shape).astype(dtype))
        for scope, shape in zip(scopes, shapes, strict=True)
    ]
    return tables, var


def write(out_dir: Path, result: dict) -> None:
    path = out_dir / RESULT_NAME
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1, default=str))
    tmp.replace(path)


# ---- child processes (parts a and b) ------------------------------------------------------------
def child(kind: str, args: argparse.Namespace) -> dict:
    """Run in a fresh process; the parent passes DCOP_KERNEL_CACHE."""
    out: dict[str, Any] = {"kind": kind, "cache": os.environ.get("DCOP_KERNEL_CACHE")}
    t0 = time.perf_counter()
    import cupy

    out["import_cupy_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    out["import_dcop"] = import_dcop()
    from dcop.backends.base import BucketShape
    from dcop.gpu import CupyBackend
    from dcop.gpu.plan import AHEAD_SPECIALIZE_ENTRIES

    out["import_dcop_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    gpu = CupyBackend(specialize_entries=AHEAD_SPECIALIZE_ENTRIES)  # as an agent's
    out["init_wall_s"] = time.perf_counter() - t0
    out["init_s"] = gpu.setup.init_s
    dtype = np.dtype(args.dtype)
    tiny, var = bucket_tables([D], dtype)

    def first_bucket() -> float:
        t0 = time.perf_counter()
        gpu.to_numpy(gpu.join_eliminate(tiny, var).data)
        gpu.synchronize()
        return time.perf_counter() - t0

    if kind == "first_bucket":  # today's path: nothing warmed before the first bucket
        out["first_bucket_s"] = first_bucket()
        out["second_bucket_s"] = first_bucket()
        out["solve_compile_s"] = gpu.setup.solve_compile_s
    elif kind == "setup":
        out["warm_up"] = gpu.warm_up(dtypes=(dtype.name,), ops=("min",))
        out["first_bucket_after_warm_up_s"] = first_bucket()
        out["solve_compiles"] = gpu.setup.solve_compiles
    elif kind == "compile":
        out["warm_up"] = gpu.warm_up(dtypes=(dtype.name,), ops=("min",))
        rows = []
        for seps in ([D] * 5 + [5], [D] * 6, [D] * 7, [D] * 8, [D] * 5 + [3, 3]):
            scopes, shapes, var = bucket_shapes(seps)
            plan = gpu._plan(scopes, shapes, dtype, var, "min", None)
            spent = gpu.prepare_bucket(BucketShape(scopes, shapes, var, "min", dtype))
            again = gpu.prepare_bucket(BucketShape(scopes, shapes, var, "min", dtype))
            rows.append(
                {
                    "joined": plan.joined,
                    "generated": plan.generated,
                    "kernel": plan.kernel_name,
                    "prepare_s": spent,
                    "prepare_again_s": again,
                }
            )
        out["buckets"] = rows
    out["device"] = gpu.device_name
    out["cupy"] = cupy.__version__
    return out


def run_child(kind: str, cache: str, args: argparse.Namespace, timeout: float) -> dict:
    env = dict(os.environ)
    env["DCOP_KERNEL_CACHE"] = cache
    env.pop("CUPY_CACHE_DIR", None)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--dtype", args.dtype]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=max(1.0, timeout), check=False
        )
    except subprocess.TimeoutExpired:
        return {"kind": kind, "error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"kind": kind, "error": f"exit {proc.returncode}", "stderr": proc.stderr[-2000:]}
    data: dict = json.loads(lines[-1])
    data["process_wall_s"] = wall
    return data


def part_setup(args: argparse.Namespace, budget: Budget) -> dict:
    out: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory(prefix="dcop-kc-") as a,
        tempfile.TemporaryDirectory(prefix="dcop-kc-") as b,
    ):
        for label, kind, cache in (
            ("warm_up_cold_cache", "setup", a),
            ("warm_up_warm_cache", "setup", a),
            ("no_warm_up_cold_cache", "first_bucket", b),
            ("no_warm_up_warm_cache", "first_bucket", b),
        ):
            if budget.left() < 3:
                out[label] = {"skipped": "time budget"}
                continue
            out[label] = run_child(kind, cache, args, min(60.0, budget.left()))
    return out


def part_compile(args: argparse.Namespace, budget: Budget) -> dict:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dcop-kc-") as cache:
        for label in ("cold_cache", "warm_cache"):
            if budget.left() < 3:
                out[label] = {"skipped": "time budget"}
                continue
            out[label] = run_child("compile", cache, args, min(90.0, budget.left()))
    return out


# ---- part c: crossover --------------------------------------------------------------------------
def crossover_sizes(max_joined: float) -> list[list[int]]:
    """Separator domain lists giving 1e2, 3e2, 1e3, ... joined entries up to ``max_joined`` (x has
    10 values)."""
    out = []
    for n10 in range(1, 9):
        out.append([D] * n10)
        out.append([D] * n10 + [3])
    return sorted((s for s in out if D * math.prod(s) <= max_joined), key=math.prod)


def part_crossover(args: argparse.Namespace, budget: Budget, gpu: Any, cupy: Any) -> dict:
    from dcop.backends.numpy import NumpyBackend

    cpus = {"cpu_all": NumpyBackend(), "cpu_one": NumpyBackend(threads=1)}
    rows: list[dict] = []
    out: dict[str, Any] = {"threads_all": cpus["cpu_all"].threads, "rows": rows}
    last: dict[str, tuple[int, float]] = {}
    for seps in crossover_sizes(args.max_joined):
        if budget.left() < 4:
            out["stopped"] = "time budget"
            break
        row: dict[str, Any] = {"joined": D * math.prod(seps), "separator": seps}
        rows.append(row)
        try:
            crossover_row(row, seps, cpus, last, args.cpu_cap_s, budget, gpu, cupy)
        except Exception as exc:  # a failed size is recorded; the next one may still run
            row["error"] = failure(exc)
        gpu.xp.get_default_memory_pool().free_all_blocks()
    out["recommended_gpu_min_entries"] = recommend(rows, "cpu_all")
    out["crossover_one_thread"] = recommend(rows, "cpu_one")
    out["crossover_resident"] = recommend(rows, "cpu_all", "gpu_resident")
    return out


def crossover_row(
    row: dict,
    seps: list[int],
    cpus: dict[str, Any],
    last: dict[str, tuple[int, float]],
    cap_s: float,
    budget: Budget,
    gpu: Any,
    cupy: Any,
) -> None:
    """Fill ``row`` with one bucket size's CPU and GPU timings."""
    tables, var = bucket_tables(seps)
    joined = row["joined"]
    scopes = [t.scope for t in tables]
    shapes = [t.shape for t in tables]
    plan = gpu._plan(scopes, shapes, np.float32, var, "min", None)
    row.update(
        out_entries=plan.n_out,
        input_entries=sum(t.size for t in tables),
        kernel="generated" if plan.generated else "generic",
    )
    from dcop.backends.base import BucketShape

    row["prepare_s"] = gpu.prepare_bucket(BucketShape(scopes, shapes, var, "min", np.float32))
    for key, cpu in cpus.items():
        if key in last:  # skip what the previous size predicts to be too long
            guess = last[key][1] * joined / last[key][0]
            if guess > min(cap_s, budget.left() / 4):
                row[key] = {"skipped": f"predicted {guess:.1f} s"}
                continue
        row[key] = repeat(lambda c=cpu: c.join_eliminate(tables, var), budget)
        last[key] = (joined, row[key]["median_s"])

    def agent_path() -> None:  # inputs from the host, output back to the host
        gpu.to_numpy(gpu.join_eliminate(tables, var).data)
        gpu.synchronize()

    def upload() -> list:
        dev = [gpu.table(t.scope, t.data, np.float32) for t in tables]
        gpu.synchronize()
        return dev

    row["gpu_agent"] = repeat(agent_path, budget)
    row["gpu_upload"] = repeat(upload, budget)
    dev = upload()

    def resident() -> None:  # inputs on the device, output left there
        gpu.join_eliminate(dev, var)
        gpu.synchronize()

    row["gpu_resident"] = repeat(resident, budget)
    bound = gpu.prepare(dev, var)
    if bound.out_bytes > gpu._device_budget():
        return
    res = cupy.empty(bound.out_shape, np.float32)
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    kernel_ms = []
    for _ in range(5):
        start.record(gpu.stream)
        gpu.run(bound, res)
        stop.record(gpu.stream)
        stop.synchronize()
        kernel_ms.append(cupy.cuda.get_elapsed_time(start, stop))
    row["gpu_kernel_s"] = statistics.median(kernel_ms) / 1e3

    def download() -> None:
        res.get(stream=gpu.stream)
        gpu.synchronize()

    row["gpu_download"] = repeat(download, budget)


def recommend(rows: list[dict], cpu_key: str, gpu_key: str = "gpu_agent") -> int | None:
    """The smallest measured size from which the GPU path beats the CPU at every larger size
    measured on both (None when the CPU wins at the largest)."""
    pairs = [
        (r["joined"], r[cpu_key]["median_s"], r[gpu_key]["median_s"])
        for r in rows
        if "median_s" in r.get(cpu_key, {}) and "median_s" in r.get(gpu_key, {})
    ]
    if not pairs:
        return None
    best = None
    for joined, cpu_s, gpu_s in sorted(pairs, reverse=True):
        if gpu_s < cpu_s:
            best = joined
        else:
            break
    return best


# ---- part d: transfers --------------------------------------------------------------------------
def part_transfers(args: argparse.Namespace, budget: Budget, gpu: Any, cupy: Any) -> dict:
    out: dict[str, Any] = {}
    for nbytes in args.transfer_bytes:
        label = f"{nbytes / 1e6:g}MB"
        if budget.left() < 4:
            out[label] = {"skipped": "time budget"}
            continue
        row: dict[str, Any] = {"bytes": nbytes}
        out[label] = row
        try:
            transfer_row(row, nbytes, budget, gpu, cupy)
        except Exception as exc:
            row["error"] = failure(exc)
        gpu.xp.get_default_memory_pool().free_all_blocks()
    return out


def transfer_row(row: dict, nbytes: int, budget: Budget, gpu: Any, cupy: Any) -> None:
    """Upload and download ``nbytes`` of float32 from pageable and from pinned host memory."""
    from dcop.gpu.backend import pinned_empty

    n = nbytes // 4
    host = np.ones(n, np.float32)
    with gpu.device:
        dev = cupy.empty(n, np.float32)

    def pageable_up() -> None:
        dev.set(host, stream=gpu.stream)
        gpu.synchronize()

    def backend_table() -> None:  # what an agent does with a received UTIL table
        gpu.asarray(host, np.float32)
        gpu.synchronize()

    row["pageable_h2d"] = repeat(pageable_up, budget, reps=3)
    row["backend_asarray_h2d"] = repeat(backend_table, budget, reps=3)
    t0 = time.perf_counter()
    pinned = pinned_empty(cupy, (n,), np.dtype(np.float32))
    row["pinned_alloc_s"] = time.perf_counter() - t0
    row["pinned_is_pinned"] = not pinned.flags.owndata  # the np.empty fallback owns its data
    row["stage_copy"] = repeat(lambda: np.copyto(pinned, host), budget, reps=3)

    def pinned_up() -> None:
        dev.set(pinned, stream=gpu.stream)
        gpu.synchronize()

    def pageable_down() -> None:
        dev.get(stream=gpu.stream)

    def pinned_down() -> None:
        dev.get(stream=gpu.stream, out=pinned)
        gpu.synchronize()

    row["pinned_h2d"] = repeat(pinned_up, budget, reps=3)
    row["pageable_d2h"] = repeat(pageable_down, budget, reps=3)
    row["pinned_d2h"] = repeat(pinned_down, budget, reps=3)
    for key in ("pageable_h2d", "pinned_h2d", "pageable_d2h", "pinned_d2h"):
        row[key]["GB_per_s"] = nbytes / row[key]["median_s"] / 1e9


# ---- part e: whole problems ---------------------------------------------------------------------
def random_problem(n: int, seed: int) -> Any:
    """The paper's random network (dcop.generators when networkx is there; else the same model:
    a connected graph with floor(p1 n (n-1) / 2) edges by rejection, d x d integer costs in
    [0, 100], +inf with probability p2)."""
    try:
        from dcop.generators import generate

        return generate("random", n, D, p1=0.3, p2=0.5, seed=seed)
    except ImportError:
        pass
    from dcop.model import CostTable, Problem, Variable

    rng = np.random.default_rng(seed)
    m = math.floor(0.3 * n * (n - 1) / 2 + 1e-9)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    while True:
        edges = [pairs[k] for k in sorted(rng.choice(len(pairs), size=m, replace=False))]
        seen, todo = {0}, [0]
        while todo:
            u = todo.pop()
            for i, j in edges:
                for a, b in ((i, j), (j, i)):
                    if a == u and b not in seen:
                        seen.add(b)
                        todo.append(b)
        if len(seen) == n:
            break
    variables = [Variable(f"x{i}", tuple(range(D)), agent=f"a{i}") for i in range(n)]
    tables = []
    for i, j in edges:
        costs = rng.integers(0, 101, size=(D, D)).astype(np.float64)
        costs[rng.random((D, D)) < 0.5] = np.inf
        tables.append(CostTable((f"x{i}", f"x{j}"), costs, name=f"c_{i}_{j}"))
    return Problem.build(variables, tables, name=f"random_n{n}_d{D}_s{seed}")


class Timed:
    """A backend that times each join+eliminate as an agent pays it (inputs from the host, the
    output back to the host) and records the eliminated variable, joined size and seconds."""

    def __init__(self, inner: Any) -> None:
        from dcop.backends.base import BackendInfo

        self.inner = inner
        self.name = inner.name
        self.xp = np  # its tables come back to the host
        self.info = BackendInfo()  # the memory plan models no work of its own
        self.out_of_memory_errors = getattr(inner, "out_of_memory_errors", ())
        self.rows: list[tuple[str, int, float]] = []

    def table(self, scope: Any, array: Any, dtype: Any = np.float64) -> Any:
        from dcop.tables import Table

        return Table(tuple(scope), np.ascontiguousarray(array, dtype=dtype))

    def join_eliminate(self, tables: Any, var: str, op: Any = "min", scope: Any = None) -> Any:
        from dcop.tables import Table, domain_sizes

        self.inner.synchronize()
        t0 = time.perf_counter()
        out = self.inner.join_eliminate(tables, var, op, scope)
        host = self.inner.to_numpy(out.data)
        self.inner.synchronize()
        self.rows.append((var, math.prod(domain_sizes(tables).values()), time.perf_counter() - t0))
        return Table(out.scope, np.asarray(host))

    def to_numpy(self, array: Any) -> np.ndarray:
        return np.asarray(array)

    def synchronize(self) -> None:
        self.inner.synchronize()

    def best_value(self, tables: Any, var: str, assignment: Any, op: Any = "min") -> Any:
        return self.inner.best_value(tables, var, assignment, op)


def critical_path(tree: Any, seconds: dict[str, float]) -> float:
    """Longest root-to-leaf sum of bucket seconds (children finish before their parent)."""
    done: dict[str, float] = {}
    for v in reversed(tree.order):
        done[v] = seconds.get(v, 0.0) + max((done[c] for c in tree.children[v]), default=0.0)
    return max((done[r] for r in tree.roots), default=0.0)


def part_agents(args: argparse.Namespace, budget: Budget, gpu: Any, threshold: int | None) -> dict:
    from dcop.backends.numpy import NumpyBackend
    from dcop.backends.placed import PlacedBackend
    from dcop.inference import solve
    from dcop.placement import DEFAULT_GPU_MIN_ENTRIES
    from dcop.trees.pseudotree import dfs_pseudo_tree

    min_entries = threshold if threshold is not None else DEFAULT_GPU_MIN_ENTRIES
    out: dict[str, Any] = {"placed_min_entries": min_entries, "problems": []}
    for n in args.agents_n:
        if budget.left() < 5:
            out["stopped"] = "time budget"
            break
        rec: dict[str, Any] = {"n": n, "seed": 0}
        out["problems"].append(rec)
        try:
            problem = random_problem(n, 0)
            tree = dfs_pseudo_tree(problem.neighbours())
            costs = {}
            for label, make in (
                ("gpu", lambda: gpu),
                ("placed", lambda: PlacedBackend(NumpyBackend(), gpu, min_entries)),
                ("cpu", NumpyBackend),
            ):
                if budget.left() < 3:
                    rec[label] = {"skipped": "time budget"}
                    continue
                largest = max((r[1] for r in rec.get("gpu", {}).get("buckets", [])), default=0)
                if label == "cpu" and largest > 5e8:
                    rec[label] = {"skipped": f"largest bucket {largest:.2g} joined entries"}
                    continue
                timed = Timed(make())
                if label != "cpu":  # kernels ready first, as prepare_bucket makes them
                    solve(problem, ordering="pseudotree", backend=Timed(make()))
                result = solve(problem, ordering="pseudotree", backend=timed)
                costs[label] = result.upper_bound
                per_var = {v: s for v, _, s in timed.rows}
                rec[label] = {
                    "sum_s": sum(per_var.values()),
                    "critical_path_s": critical_path(tree, per_var),
                    "largest_bucket_s": max(per_var.values(), default=0.0),
                    "buckets": [[v, j, s] for v, j, s in timed.rows],
                }
            rec["same_cost"] = len(set(costs.values())) <= 1
        except Exception as exc:
            rec["error"] = failure(exc)
    return out


# ---- main ---------------------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("."), help="directory for the JSON")
    p.add_argument("--budget", type=float, default=230.0, help="seconds for all parts together")
    p.add_argument("--parts", default="setup,compile,crossover,transfers,agents")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--cpu-cap-s", type=float, default=4.0, help="skip CPU runs predicted longer")
    p.add_argument("--max-joined", type=float, default=1e9, help="largest crossover bucket")
    p.add_argument("--transfer-bytes", type=_ints, default=[10**8, 10**9], help="e.g. 1e8,1e9")
    p.add_argument("--agents-n", type=_ints, default=[12, 16, 18], help="problem sizes of (e)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    return p


def _ints(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.child:
        try:
            print(json.dumps(child(args.child, args), default=str))
        except Exception as exc:
            print(json.dumps({"kind": args.child, **failure(exc)}))
        return 0

    args.out.mkdir(parents=True, exist_ok=True)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    scale = min(1.0, args.budget / sum(PART_BUDGETS[x] for x in parts if x in PART_BUDGETS))
    started = time.perf_counter()
    result: dict[str, Any] = {
        "command": "python3 benchmarks/probes/gpu_agents_probe.py "
        + " ".join(argv or sys.argv[1:]),
        "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
    }
    try:
        result["import_dcop"] = import_dcop()
        import cupy

        result["cupy"] = cupy.__version__
        result["cuda_runtime"] = int(cupy.cuda.runtime.runtimeGetVersion())
    except Exception as exc:
        result["error"] = failure(exc)
        write(args.out, result)
        print(f"no GPU probe: {result['error']['error']}")
        return 0
    write(args.out, result)

    gpu = None
    main_cache = tempfile.TemporaryDirectory(prefix="dcop-kc-main-")
    for part in parts:
        if part not in PART_BUDGETS:
            result[part] = {"error": "unknown part"}
            continue
        budget = Budget(PART_BUDGETS[part] * scale)
        t0 = time.perf_counter()
        try:
            if part in ("crossover", "transfers", "agents") and gpu is None:
                from dcop.gpu import CupyBackend
                from dcop.gpu.plan import AHEAD_SPECIALIZE_ENTRIES

                gpu = CupyBackend(
                    kernel_cache=main_cache.name, specialize_entries=AHEAD_SPECIALIZE_ENTRIES
                )
                result["device"] = gpu.device_name
                result["main_warm_up"] = gpu.warm_up(dtypes=("float32", "float64"))
            if part == "setup":
                result[part] = part_setup(args, budget)
            elif part == "compile":
                result[part] = part_compile(args, budget)
            elif part == "crossover":
                result[part] = part_crossover(args, budget, gpu, cupy)
            elif part == "transfers":
                result[part] = part_transfers(args, budget, gpu, cupy)
            elif part == "agents":
                threshold = result.get("crossover", {}).get("recommended_gpu_min_entries")
                result[part] = part_agents(args, budget, gpu, threshold)
        except Exception as exc:
            result[part] = failure(exc)
        result.setdefault("part_seconds", {})[part] = time.perf_counter() - t0
        write(args.out, result)
    result["total_s"] = time.perf_counter() - started
    write(args.out, result)
    main_cache.cleanup()
    print(summary(result))
    return 0


def summary(result: dict) -> str:
    """A few lines for the log; the JSON has everything."""
    lines = [f"device: {result.get('device')}, CuPy {result.get('cupy')}"]
    setup = result.get("setup", {})
    for label in ("warm_up_cold_cache", "warm_up_warm_cache"):
        rec = setup.get(label, {})
        if "warm_up" in rec:
            lines.append(
                f"{label}: import cupy {rec['import_cupy_s']:.2f} s, init {rec['init_s']:.2f} s, "
                f"warm_up {rec['warm_up']['total_s']:.2f} s, first bucket after "
                f"{rec['first_bucket_after_warm_up_s'] * 1e3:.2f} ms"
            )
    for label in ("no_warm_up_cold_cache", "no_warm_up_warm_cache"):
        rec = setup.get(label, {})
        if "first_bucket_s" in rec:
            lines.append(f"{label}: first bucket {rec['first_bucket_s']:.3f} s")
    for label in ("cold_cache", "warm_cache"):
        rec = result.get("compile", {}).get(label, {})
        if "buckets" in rec:
            total = sum(b["prepare_s"] for b in rec["buckets"])
            lines.append(f"compile {label}: {len(rec['buckets'])} buckets, {total:.3f} s")
    cross = result.get("crossover", {})
    for row in cross.get("rows", []):
        cells = [f"{row['joined']:.0e}"]
        for key in ("cpu_all", "cpu_one", "gpu_agent", "gpu_resident"):
            cell = row.get(key, {})
            cells.append(f"{key} {cell['median_s'] * 1e3:.3f} ms" if "median_s" in cell else "-")
        lines.append("  " + ", ".join(cells))
    if cross:
        lines.append(
            f"recommended DCOP_GPU_MIN_ENTRIES: {cross.get('recommended_gpu_min_entries')}"
        )
    for label, rec in result.get("transfers", {}).items():
        if "pinned_h2d" in rec:
            lines.append(
                f"{label}: pageable {rec['pageable_h2d']['GB_per_s']:.1f} GB/s, pinned "
                f"{rec['pinned_h2d']['GB_per_s']:.1f} GB/s (+ alloc {rec['pinned_alloc_s']:.3f} s,"
                f" staging {rec['stage_copy']['median_s']:.3f} s)"
            )
    for rec in result.get("agents", {}).get("problems", []):
        cells = [f"n={rec['n']}"]
        for label in ("cpu", "gpu", "placed"):
            cell = rec.get(label, {})
            if "critical_path_s" in cell:
                cells.append(f"{label} path {cell['critical_path_s']:.4f} s")
        lines.append("  " + ", ".join(cells))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
