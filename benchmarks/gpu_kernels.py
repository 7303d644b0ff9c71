"""Kernel benchmark: one bucket join+eliminate on the GPU, four ways, checked equal.

For buckets of about 1e6 ... 1e10 joined entries (domain d = 4, 10, 25; 5 to 16 input tables of
arity 2 to 4; the eliminated variable last) it times, with CUDA events (median of repeats, after a
warm-up that includes compilation):

* ``fused``: ``CupyBackend`` with a kernel generated for the bucket (dcop_join_elim_*),
* ``generic``: the fused kernel with strides read at run time (what small buckets use),
* ``naive``: CuPy broadcasting, the sum of broadcast tables and then ``.min(axis=-1)``,
* ``paper``: the paper's two kernels, aggregation (dcop_aggregate) then elimination,
* ``numpy``: ``NumpyBackend.join_eliminate`` on the CPU (up to 1e8 joined entries),

and reports joined entries per second and output GB/s. Costs are integers in [0, 100] with 10%
+inf, in float32 (sums stay below 2**24, so all paths must agree exactly); every path is compared
with the fused one on the whole output, and the fused one with a NumPy evaluation of 2000 random
output rows (and the whole NumPy result where it ran).

Writes ``benchmarks/results/gpu_kernels.{json,md}``.

Running it on the device machine (CuPy there, but ``dcop`` must be importable with its package
mapping, ``gpu/`` -> ``dcop.gpu``): from the repository root,
``python3 -m pip install -q --no-deps --no-build-isolation -e .`` (the editable install maps the
folders), then ``python3 benchmarks/gpu_kernels.py``. If pip cannot build there,
``ln -s ../gpu dcop/gpu`` in the (throw-away) copy of the tree makes ``dcop.gpu`` a plain subpackage.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcop.backends.numpy import NumpyBackend
from dcop.tables import Table

RESULTS = Path(__file__).resolve().parent / "results"
sys.path.insert(0, str(RESULTS.parent))
from compare.machine import machine_info  # noqa: E402  (benchmarks/compare)

SIZES = (1e6, 1e7, 1e8, 1e9, 1e10)
DOMAINS = (4, 10, 25)
#: (label, number of tables, arities cycled over, share of tables holding the eliminated variable)
CONFIGS = (
    ("15 binary", 15, (2,), 3),
    ("5 ternary", 5, (3,), 2),
    ("16 mixed 2-4", 16, (2, 3, 4), 3),
)
CPU_MAX_JOINED = 1.2e8
GENERIC_MAX_JOINED = 2e9


def make_bucket(
    d: int, target: float, n_tables: int, arities: tuple[int, ...], every: int, seed: int
) -> tuple[list[Table], str, tuple[str, ...]]:
    """Tables over k variables with d^k close to ``target``; every ``every``-th table holds the
    eliminated variable ``x``; the others cycle over the output variables so that all appear."""
    rng = np.random.default_rng(seed)
    slots = (
        sum(arities[i % len(arities)] for i in range(n_tables)) - (n_tables + every - 1) // every
    )
    k = max(2, min(round(math.log(target) / math.log(d)), slots + 1))
    out_vars = [f"y{i}" for i in range(k - 1)]
    perm = list(rng.permutation(k - 1))
    tables, pos = [], 0
    for i in range(n_tables):
        arity = min(arities[i % len(arities)], k)
        has_x = i % every == 0
        chosen: list[str] = []
        while len(chosen) < min(arity - has_x, k - 1):
            v = out_vars[perm[pos % (k - 1)]]
            pos += 1
            if v not in chosen:
                chosen.append(v)
        scope = [*chosen, "x"] if has_x else chosen
        rng.shuffle(scope)  # arbitrary axis order: the kernels handle any layout
        costs = rng.integers(0, 101, size=(d,) * len(scope)).astype(np.float32)
        costs[rng.random(costs.shape) < 0.1] = np.inf
        tables.append(Table(tuple(scope), costs))
    used = {v for t in tables for v in t.scope}
    out_scope = tuple(v for v in out_vars if v in used)
    return tables, "x", out_scope


def sample_check(
    tables: list[Table], var: str, out_scope: tuple[str, ...], got: Any, n: int, seed: int
) -> bool:
    """Recompute ``n`` random output rows (``got`` is on the device) with NumPy and compare."""
    rng = np.random.default_rng(seed)
    shape = tuple(got.shape)
    flat = rng.integers(0, got.size, size=n)
    picked = got.reshape(-1)[flat].get()
    digits = np.unravel_index(flat, shape) if shape else ()
    sizes = {v: s for t in tables for v, s in zip(t.scope, t.shape, strict=True)}
    xs = np.arange(sizes[var])
    total = np.zeros((n, sizes[var]), dtype=np.float32)
    for t in tables:
        index = []
        for v in t.scope:
            if v == var:
                index.append(xs[None, :])
            else:
                index.append(np.asarray(digits[out_scope.index(v)])[:, None])
        total = total + t.data[tuple(index)]
    want = total.min(axis=1)
    return bool(np.array_equal(want, picked))


def time_events(
    cupy: Any, stream: Any, fn: Any, budget_s: float = 0.3, max_reps: int = 20
) -> float:
    """Median milliseconds of ``fn`` on ``stream`` measured with CUDA events (one warm-up)."""
    fn()
    stream.synchronize()
    times: list[float] = []
    t_end = time.perf_counter() + budget_s
    while len(times) < 3 or (time.perf_counter() < t_end and len(times) < max_reps):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        fn()
        stop.record(stream)
        stop.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, stop))
    return float(statistics.median(times))


def naive(
    cupy: Any, tables: list[Any], scopes: list[tuple[str, ...]], full: tuple[str, ...]
) -> Any:
    total = None
    for data, scope in zip(tables, scopes, strict=True):
        order = sorted(scope, key=full.index)
        view = cupy.transpose(data, [scope.index(v) for v in order])
        shape = tuple(data.shape[scope.index(v)] if v in scope else 1 for v in full)
        view = view.reshape(shape)
        total = view if total is None else total + view
    return total.min(axis=-1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import cupy

    from dcop.gpu import CupyBackend

    gpu = CupyBackend(specialize_entries=0)
    generic = CupyBackend(specialize_entries=1 << 62, stream=gpu.stream)
    unstaged = CupyBackend(specialize_entries=0, stage_output=False, stream=gpu.stream)
    cpu = NumpyBackend()
    stream = gpu.stream
    pool = cupy.get_default_memory_pool()
    rows: list[dict[str, Any]] = []
    seen: set[tuple[int, int, str]] = set()
    sizes = [s for s in SIZES if s <= args.max_size]
    for d in args.domains:
        for target in sizes:
            for label, n_tables, arities, every in CONFIGS:
                if args.quick and not (label == "15 binary" or target <= 1e8):
                    continue
                tables, var, out_scope = make_bucket(d, target, n_tables, arities, every, seed=d)
                full = (*out_scope, var)
                if (d, len(full), label) in seen:
                    continue  # the same bucket as a smaller target (few tables, or coarse d)
                seen.add((d, len(full), label))
                joined = math.prod([d] * len(full))
                out_bytes = joined // d * 4
                row: dict[str, Any] = {
                    "d": d,
                    "target": target,
                    "tables": label,
                    "n_tables": n_tables,
                    "variables": len(full),
                    "joined": joined,
                    "output_bytes": out_bytes,
                    "holding_x": sum(var in t.scope for t in tables),
                }
                free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
                if out_bytes * 1.3 > free:
                    row["skipped"] = "output does not fit on the device"
                    rows.append(row)
                    continue
                dev = [gpu.table(t.scope, t.data, np.float32) for t in tables]
                t0 = time.perf_counter()
                plan = gpu.prepare(dev, var, "min", scope=out_scope)
                row["prepare_s"] = time.perf_counter() - t0  # includes NVRTC compile (cold cache)
                out = cupy.empty(plan.out_shape, np.float32)
                ms = time_events(cupy, stream, lambda plan=plan, out=out: gpu.run(plan, out))
                row["fused_ms"] = ms
                row["fused_joined_per_s"] = joined / (ms / 1e3)
                row["fused_output_GBps"] = out_bytes / (ms / 1e3) / 1e9
                stream.synchronize()
                ref = out
                row["check_sampled_rows"] = sample_check(tables, var, out_scope, ref, 2000, seed=d)
                checks = [row["check_sampled_rows"]]
                if args.variants or (d == 10 and label == "15 binary"):
                    uplan = unstaged.prepare(dev, var, "min", scope=out_scope)
                    out2 = cupy.empty(plan.out_shape, np.float32)
                    ms2 = time_events(cupy, stream, lambda p=uplan, o=out2: unstaged.run(p, o))
                    row["fused_unstaged_ms"] = ms2
                    checks.append(bool(cupy.array_equal(out2, ref)))
                    del out2
                if joined <= GENERIC_MAX_JOINED:
                    gplan = generic.prepare(dev, var, "min", scope=out_scope)
                    out3 = cupy.empty(plan.out_shape, np.float32)
                    ms3 = time_events(cupy, stream, lambda p=gplan, o=out3: generic.run(p, o))
                    row["generic_ms"] = ms3
                    checks.append(bool(cupy.array_equal(out3, ref)))
                    del out3
                pool.free_all_blocks()
                free = cupy.cuda.runtime.memGetInfo()[0] + pool.free_bytes()
                joined_bytes = joined * 4
                if 3.2 * joined_bytes < free:
                    with gpu.stream_context():
                        scopes = [t.scope for t in dev]
                        datas = [t.data for t in dev]
                        result: dict[str, Any] = {}

                        def go(
                            result: dict[str, Any] = result,
                            datas: list[Any] = datas,
                            scopes: list[tuple[str, ...]] = scopes,
                            full: tuple[str, ...] = full,
                        ) -> None:
                            result["out"] = naive(cupy, datas, scopes, full)

                        ms4 = time_events(cupy, stream, go, max_reps=10)
                        row["naive_ms"] = ms4
                        checks.append(bool(cupy.array_equal(result["out"], ref)))
                        result.clear()
                    pool.free_all_blocks()
                else:
                    row["naive_ms"] = None
                if 1.3 * joined_bytes + out_bytes < free:
                    result2: dict[str, Any] = {}

                    def paper(
                        result: dict[str, Any] = result2,
                        dev: list[Table] = dev,
                        full: tuple[str, ...] = full,
                        var: str = var,
                    ) -> None:
                        joined_t = gpu.join(dev, full)
                        result["out"] = gpu.eliminate(joined_t, var, "min").data

                    ms5 = time_events(cupy, stream, paper, max_reps=10)
                    row["paper_ms"] = ms5
                    checks.append(bool(cupy.array_equal(result2["out"], ref)))
                    result2.clear()
                    pool.free_all_blocks()
                else:
                    row["paper_ms"] = None
                if joined <= CPU_MAX_JOINED:
                    t0 = time.perf_counter()
                    want = cpu.join_eliminate(tables, var, "min", scope=out_scope)
                    row["numpy_ms"] = (time.perf_counter() - t0) * 1e3
                    checks.append(bool(np.array_equal(want.data, gpu.to_numpy(ref))))
                else:
                    row["numpy_ms"] = None
                row["all_equal"] = all(checks)
                for key in ("naive", "paper", "numpy", "generic"):
                    base = row.get(f"{key}_ms")
                    row[f"speedup_vs_{key}"] = base / ms if base else None
                rows.append(row)
                print(_line(row), flush=True)
                del dev, plan, out, ref
                pool.free_all_blocks()
    if args.out is not None:  # keep the rows even if the op section fails
        from keep import write_results

        write_results(args.out, f"{args.name}.rows", rows)
    ops = headline_ops(cupy, gpu, cpu) if not args.quick else []
    return {"rows": rows, "ops": ops}


def headline_ops(cupy: Any, gpu: Any, cpu: Any) -> list[dict[str, Any]]:
    """The d = 10, 15-binary-table, 1e9 bucket with every op, in float32 and float64."""
    out = []
    tables, var, out_scope = make_bucket(10, 1e9, 15, (2,), 3, seed=10)
    joined = 10 ** (len(out_scope) + 1)
    for dtype in (np.float32, np.float64):
        dev = [gpu.table(t.scope, t.data, dtype) for t in tables]
        for op in ("min", "max", "sum", "logsumexp"):
            plan = gpu.prepare(dev, var, op, scope=out_scope)
            res = cupy.empty(plan.out_shape, dtype)
            ms = time_events(cupy, gpu.stream, lambda plan=plan, res=res: gpu.run(plan, res))
            # check the slice with the first two output variables at 0 against NumPy
            fixed = {out_scope[0]: 0, out_scope[1]: 0}
            sub = []
            for t in tables:
                index = tuple(fixed.get(v, slice(None)) for v in t.scope)
                rest = tuple(v for v in t.scope if v not in fixed)
                sub.append(Table(rest, np.asarray(t.data[index], dtype=dtype)))
            want = cpu.join_eliminate(sub, var, op, scope=out_scope[2:])
            got = gpu.to_numpy(res[0, 0])
            ok = bool(np.allclose(got, want.data, rtol=1e-5, atol=1e-5, equal_nan=True))
            out.append(
                {
                    "dtype": np.dtype(dtype).name,
                    "op": op,
                    "ms": ms,
                    "joined_per_s": joined / (ms / 1e3),
                    "equal_to_numpy_on_first_slice": ok,
                }
            )
            print(
                f"ops {np.dtype(dtype).name:8s} {op:10s} {ms:8.3f} ms {joined / ms / 1e9:.3g}e12/s {ok}"
            )
            del res, plan
        del dev
        cupy.get_default_memory_pool().free_all_blocks()
    return out


def chunked(cupy: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The host-bound path: output to pinned host memory in chunks, two streams overlapping the
    kernel of chunk i+1 with the copy of chunk i, against kernel-then-copy in sequence."""
    from dcop.gpu import CupyBackend
    from dcop.gpu.backend import pinned_empty

    rows = []
    for d, target, op, dtype in ((10, 1e9, "min", np.float32), (10, 1e9, "logsumexp", np.float64)):
        tables, var, out_scope = make_bucket(d, target, 15, (2,), 3, seed=d)
        for chunk_mb in (16, 64, 256):
            gpu = CupyBackend(specialize_entries=0, chunk_bytes=chunk_mb << 20)
            dev = [gpu.table(t.scope, t.data, dtype) for t in tables]
            plan = gpu.prepare(dev, var, op, scope=out_scope)
            out = cupy.empty(plan.out_shape, dtype)
            kernel_ms = time_events(cupy, gpu.stream, lambda p=plan, o=out, g=gpu: g.run(p, o))

            host = pinned_empty(cupy, plan.out_shape, np.dtype(dtype))
            times = []
            for _ in range(3):
                gpu.synchronize()
                t0 = time.perf_counter()
                gpu.run(plan, out)
                out.get(stream=gpu.stream, out=host)  # kernel, then one copy
                times.append(time.perf_counter() - t0)
            sequential_ms = statistics.median(times) * 1e3
            times = []
            equal = True
            for _ in range(4):
                gpu.synchronize()
                t0 = time.perf_counter()
                got = gpu.join_eliminate_host(dev, var, op, scope=out_scope)
                times.append(time.perf_counter() - t0)
                equal = equal and bool(np.array_equal(got.data, host, equal_nan=True))
                del got  # back to CuPy's pinned pool: the next call reuses it
            first_ms = times[0] * 1e3  # may include page-locking a new host buffer
            overlapped_ms = statistics.median(times[1:]) * 1e3
            out_bytes = host.nbytes
            row = {
                "d": d,
                "op": op,
                "dtype": np.dtype(dtype).name,
                "output_bytes": out_bytes,
                "chunk_MiB": chunk_mb,
                "chunks": -(-out_bytes // (chunk_mb << 20)),
                "kernel_ms": kernel_ms,
                "kernel_then_copy_ms": sequential_ms,
                "chunked_overlapped_ms": overlapped_ms,
                "chunked_first_call_ms": first_ms,
                "host_GBps": out_bytes / (overlapped_ms / 1e3) / 1e9,
                "pinned": _is_pinned(cupy, host),
                "equal": equal,
            }
            rows.append(row)
            print(row, flush=True)
            del dev, plan, out, host
            cupy.get_default_memory_pool().free_all_blocks()
    return {"rows": rows}


def _is_pinned(cupy: Any, array: np.ndarray) -> bool:
    try:
        attrs = cupy.cuda.runtime.pointerGetAttributes(array.ctypes.data)
        return bool(attrs.type == cupy.cuda.runtime.memoryTypeHost)
    except Exception:
        return False


def chunked_markdown(meta: dict[str, Any], result: dict[str, Any]) -> str:
    lines = [
        f"# Chunked output to pinned host memory ({meta['gpu']})",
        "",
        f"`{meta['command']}` on {meta['date']}. The d = 10, 15-binary-table bucket (1e9 joined "
        "entries, 1e8 output entries). `kernel` = the fused kernel alone (CUDA events); "
        "`kernel then copy` = kernel, then one device-to-host copy of the whole output into "
        "pinned memory; `chunked` = `CupyBackend.join_eliminate_host`: chunks computed into two "
        "device buffers on the compute stream while the previous chunk is copied on a second "
        "stream (host wall clock, median of 3 calls after a first one; `first` = that first call, "
        "which may include page-locking a new host buffer: later calls reuse CuPy's pinned pool).",
        "",
        "| op | dtype | output MB | chunk MiB | chunks | kernel ms | kernel then copy ms | "
        "chunked ms | first ms | host GB/s | pinned | equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['op']} | {r['dtype']} | {r['output_bytes'] / 1e6:.0f} | {r['chunk_MiB']} | "
            f"{r['chunks']} | {_fmt(r['kernel_ms'])} | {_fmt(r['kernel_then_copy_ms'])} | "
            f"{_fmt(r['chunked_overlapped_ms'])} | {_fmt(r['chunked_first_call_ms'])} | "
            f"{_fmt(r['host_GBps'])} | "
            f"{'yes' if r['pinned'] else 'no'} | {'yes' if r['equal'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def _fmt(x: float | None, unit: str = "") -> str:
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.0f}{unit}"
    if x >= 1:
        return f"{x:.2f}{unit}"
    return f"{x:.3g}{unit}"


def _line(r: dict[str, Any]) -> str:
    return (
        f"d={r['d']:3d} {r['tables']:13s} joined={r['joined']:.2e} fused={_fmt(r.get('fused_ms'))}ms "
        f"({r.get('fused_joined_per_s', 0):.3g}/s) naive={_fmt(r.get('naive_ms'))} "
        f"paper={_fmt(r.get('paper_ms'))} generic={_fmt(r.get('generic_ms'))} "
        f"numpy={_fmt(r.get('numpy_ms'))} equal={r.get('all_equal')}"
    )


def markdown(meta: dict[str, Any], result: dict[str, Any]) -> str:
    lines = [
        f"# GPU kernel benchmark: one bucket join+eliminate ({meta['gpu']})",
        "",
        f"`{meta['command']}` on {meta['date']}; CuPy {meta['cupy']}, CUDA runtime {meta['cuda']}. "
        "Times are medians of CUDA-event timings after a warm-up (ms); float32 costs, op min; "
        "joined = entries of the (never built) joined table; speedups are time ratios against the "
        "fused kernel. `numpy` is NumpyBackend.join_eliminate on one CPU core of the device host.",
        "",
        "| d | tables | vars | joined | fused ms | joined/s | out GB/s | generic ms | naive ms | "
        "paper 2-kernel ms | numpy ms | x naive | x paper | x numpy | equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if "skipped" in r:
            lines.append(
                f"| {r['d']} | {r['tables']} | {r['variables']} | {r['joined']:.2e} | "
                f"{r['skipped']} |||||||||||"
            )
            continue
        lines.append(
            f"| {r['d']} | {r['tables']} | {r['variables']} | {r['joined']:.2e} | "
            f"{_fmt(r['fused_ms'])} | {r['fused_joined_per_s']:.3g} | {_fmt(r['fused_output_GBps'])} | "
            f"{_fmt(r.get('generic_ms'))} | {_fmt(r.get('naive_ms'))} | {_fmt(r.get('paper_ms'))} | "
            f"{_fmt(r.get('numpy_ms'))} | {_fmt(r.get('speedup_vs_naive'))} | "
            f"{_fmt(r.get('speedup_vs_paper'))} | {_fmt(r.get('speedup_vs_numpy'))} | "
            f"{'yes' if r['all_equal'] else 'NO'} |"
        )
    if result["ops"]:
        lines += [
            "",
            "## Every op on the d = 10, 15-binary-table bucket",
            "",
            "| dtype | op | fused ms | joined/s | equal to NumPy (first slice) |",
            "|---|---|---|---|---|",
        ]
        for o in result["ops"]:
            lines.append(
                f"| {o['dtype']} | {o['op']} | {_fmt(o['ms'])} | {o['joined_per_s']:.3g} | "
                f"{'yes' if o['equal_to_numpy_on_first_slice'] else 'NO'} |"
            )
    staged = [r for r in result["rows"] if r.get("fused_unstaged_ms")]
    if staged:
        lines += ["", "## Output staging (coalesced stores) on vs off", ""]
        lines += ["| d | tables | joined | staged ms | unstaged ms |", "|---|---|---|---|---|"]
        for r in staged:
            lines.append(
                f"| {r['d']} | {r['tables']} | {r['joined']:.2e} | {_fmt(r['fused_ms'])} | "
                f"{_fmt(r['fused_unstaged_ms'])} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="15-binary buckets and <= 1e8 only")
    parser.add_argument("--max-size", type=float, default=1e10)
    parser.add_argument("--domains", type=int, nargs="+", default=list(DOMAINS))
    parser.add_argument("--variants", action="store_true", help="also time unstaged output")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="gpu_kernels")
    parser.add_argument(
        "--chunked", action="store_true", help="only the chunked host-output path (_chunked files)"
    )
    args = parser.parse_args()
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    meta = {
        "gpu": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
        "cupy": cupy.__version__,
        "cuda": cupy.cuda.runtime.runtimeGetVersion(),
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python3 benchmarks/gpu_kernels.py " + " ".join(sys.argv[1:]),
    }
    from keep import write_results

    args.out.mkdir(parents=True, exist_ok=True)
    if args.chunked:
        res = chunked(cupy, args)
        name = f"{args.name}_chunked"
        write_results(args.out, name, {"meta": meta, **res}, chunked_markdown(meta, res))
        print(chunked_markdown(meta, res))
        return
    t0 = time.perf_counter()
    result = run(args)
    meta["seconds"] = time.perf_counter() - t0
    write_results(args.out, args.name, {"meta": meta, **result}, markdown(meta, result))
    print(markdown(meta, result))


if __name__ == "__main__":
    main()
