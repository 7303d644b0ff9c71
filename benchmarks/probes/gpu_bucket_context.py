"""Device probe: why one GPU bucket costs more inside a DPOP agent than in a timing loop.

``gpu_agents_probe.py`` times a bucket's agent path (inputs uploaded from the host, join+eliminate,
output downloaded) back to back in the main thread: 0.44 ms at 1e5 joined entries on an H100. In
GPU agents the same buckets cost ~2 ms each. An agent differs from that loop in three ways, and
this probe times the same path under each, on the CPU (NumPy) and on the GPU (CuPy):

* ``loop``: back to back in the main thread (the old probe's condition);
* ``thread``: each call on a fresh thread, as an agent's UTIL job runs (``dcop.agents.jobs``);
* ``idle``: each call after 0.1 s without work (an agent waits for its children's UTILs);
* ``thread_idle``: both;
* ``crowd``: ``thread_idle`` while other processes, each with its own CUDA context on the same
  GPU, run the same path now and then (the other agents of the run).

Writes ``OUT/gpu_bucket_context.json``: per joined size and condition, the median and the first
call, in seconds. Run from outside the repository: ``python3 REPO/benchmarks/probes/gpu_bucket_context.py
--out DIR``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_agents_probe import bucket_tables, import_dcop

#: What this probe found (NVIDIA H100, 2026-11-25, 15 repetitions; results are not kept): as an
#: agent pays it (a fresh thread per bucket after 0.1 s idle, 15 other CUDA contexts busy) the GPU
#: path costs 1.2-1.6 ms from 1e4 to 1e6 joined entries, NumPy 0.74-0.91 ms at 1e5 and 2.4-2.5
#: ms at 1e6; back to back in one thread the crossover is 1e5. Hence
#: dcop.placement.DEFAULT_GPU_MIN_ENTRIES = 3e5 (docs/GPU.md).
CONCLUSION = "inside an agent the CPU/GPU crossover of one bucket is ~3e5 joined entries"

#: Separator domain sizes per bucket: joined entries 10 * prod = 1e4 ... 1e7.
SIZES = {1e4: [10, 10, 10], 1e5: [10, 10, 10, 10], 1e6: [10] * 5, 1e7: [10] * 6}
IDLE_S = 0.1


def timed(fn: Callable[[], Any], fresh_thread: bool) -> float:
    """Seconds of one call of ``fn``, on this thread or on a fresh one."""
    if not fresh_thread:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    spent: list[float] = []

    def work() -> None:
        t0 = time.perf_counter()
        fn()
        spent.append(time.perf_counter() - t0)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    return spent[0]


def condition(fn: Callable[[], Any], fresh_thread: bool, idle: bool, reps: int) -> dict:
    fn()  # warm: kernels loaded, pools filled
    times = []
    for _ in range(reps):
        if idle:
            time.sleep(IDLE_S)
        times.append(timed(fn, fresh_thread))
    return {"median_s": statistics.median(times), "first_s": times[0], "max_s": max(times)}


def paths(gpu: Any, cpu: Any, seps: list[int]) -> dict[str, Callable[[], Any]]:
    tables, var = bucket_tables(seps)

    def gpu_path() -> None:  # as a GPU agent pays it: host inputs, host output
        gpu.to_numpy(gpu.join_eliminate(tables, var).data)
        gpu.synchronize()

    return {"gpu": gpu_path, "cpu": lambda: cpu.join_eliminate(tables, var)}


def crowd_member(stop: Any, ready: Any) -> None:
    """Another agent: its own CUDA context, a small bucket every 5 ms until told to stop."""
    import_dcop()
    from dcop.gpu import CupyBackend

    gpu = CupyBackend()
    gpu.warm_up(dtypes=("float32",), ops=("min",))
    tables, var = bucket_tables(SIZES[1e5])
    ready.release()
    while not stop.is_set():
        gpu.to_numpy(gpu.join_eliminate(tables, var).data)
        gpu.synchronize()
        time.sleep(0.005)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--crowd", type=int, default=15, help="other processes with a CUDA context")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import_dcop()
    import cupy

    from dcop.backends.numpy import NumpyBackend
    from dcop.gpu import CupyBackend

    gpu = CupyBackend()
    gpu.warm_up(dtypes=("float32",), ops=("min",))
    cpu = NumpyBackend()
    result: dict[str, Any] = {
        "meta": {
            "gpu": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python3 benchmarks/probes/gpu_bucket_context.py --out OUT",
            "idle_s": IDLE_S,
            "reps": args.reps,
        },
        "rows": [],
    }
    plain = [
        ("loop", False, False),
        ("thread", True, False),
        ("idle", False, True),
        ("thread_idle", True, True),
    ]
    for joined, seps in SIZES.items():
        for kind, fn in paths(gpu, cpu, seps).items():
            row: dict[str, Any] = {"joined": joined, "backend": kind}
            for label, thread, idle in plain:
                row[label] = condition(fn, thread, idle, args.reps)
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
    ctx = mp.get_context("spawn")
    stop, ready = ctx.Event(), ctx.Semaphore(0)
    crowd = [ctx.Process(target=crowd_member, args=(stop, ready)) for _ in range(args.crowd)]
    for p in crowd:
        p.start()
    for _ in crowd:
        ready.acquire(timeout=120)
    try:
        for row in result["rows"]:
            fn = paths(gpu, cpu, SIZES[row["joined"]])[row["backend"]]
            row["crowd"] = condition(fn, True, True, args.reps)
            print(json.dumps({k: row[k] for k in ("joined", "backend", "crowd")}), flush=True)
    finally:
        stop.set()
        for p in crowd:
            p.join(10)
    (args.out / "gpu_bucket_context.json").write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
