#!/usr/bin/env python
"""Where the time of a CUDA IPC hand-over goes: one process exports a buffer, another maps it and
takes a table out of it, step by step, against the same steps on memory of its own.

    python benchmarks/probes/gpu_ipc_copy.py [--sizes-mb 8,32,128,512] [--repeat 5]   # on the device

For each size the importer times, best of ``--repeat``, after one warm-up:

* ``open``: ``cudaIpcOpenMemHandle`` (:func:`dcop.gpu.ipc.open_handle`), and ``close``;
* ``first_read``: the first kernel that reads the mapped buffer after its open (a sum);
* ``copy``: ``cudaMemcpyAsync`` mapped -> own new array, and a stream sync;
* ``nan_check``: the backend's NaN kernel on the copy (``cupy_nan_check``: CuPy's
  ``count_nonzero(isnan(x))``, warm);
* ``copy_out``: :func:`dcop.gpu.ipc.copy_tables_out` (copy + check), the agents' path;
* ``mapped_read``: a sum over the mapped buffer (a kernel reading it in place, no copy);
* ``local_copy`` / ``local_read``: the same copy and sum on a buffer of the importer's own.

Writes ``benchmarks/probes/out/gpu_ipc_copy.{json,md}`` (not committed) with ``meta.gpu`` and ``meta.date``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: What this probe found (NVIDIA H100, 2026-11-25, 8/64/512 MB, best of 4; results are not kept):
#: an open costs 0.04-0.12 ms, a close 0.03-0.07 ms, the device copy of 512 MB 0.38 ms, our NaN
#: kernel 0.04-0.26 ms against CuPy's 0.09-0.49 ms; only the first read after an open once took
#: 27 ms. Taking a table over is cheap: the ~50 ms a table seen inside agents was CuPy compiling
#: its NaN reduction for each new shape (dcop.gpu.ipc, docs/RESULTS.md).
CONCLUSION = "CUDA IPC mechanics cost < 1 ms up to 512 MB; per-shape NaN reductions were the cost"

RESULTS = Path(__file__).resolve().parent / "out"  # not committed (benchmarks/probes/.gitignore)


def exporter(nbytes: int) -> None:
    """Child: allocate, fill, export; print the handle; hold the buffer until stdin closes."""
    import cupy

    from dcop.gpu.ipc import offer_buffer

    offered = offer_buffer(cupy, nbytes)
    view = cupy.ndarray((nbytes // 8,), cupy.float64, cupy.cuda.MemoryPointer(offered.memory, 0))
    view[...] = cupy.arange(view.size, dtype=cupy.float64)
    cupy.cuda.runtime.deviceSynchronize()
    print(offered.handle.hex(), flush=True)
    sys.stdin.read()


def best(run: Any, repeat: int) -> float:
    import cupy

    times = []
    for _ in range(repeat):
        cupy.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        run()
        cupy.cuda.runtime.deviceSynchronize()
        times.append(time.perf_counter() - t0)
    return min(times)


def _mapped(cupy: Any, pointer: int, nbytes: int) -> Any:
    """The mapped buffer at ``pointer`` as a float64 array of this process (no copy)."""
    memory = cupy.cuda.UnownedMemory(pointer, nbytes, None, 0)
    return cupy.ndarray((nbytes // 8,), cupy.float64, cupy.cuda.MemoryPointer(memory, 0))


def measure(nbytes: int, repeat: int) -> dict[str, Any]:
    import cupy

    from dcop.gpu import CupyBackend
    from dcop.gpu.ipc import close_handle, copy_tables_out, open_handle

    backend = CupyBackend(0)
    backend.warm_up()

    child = subprocess.Popen(
        [sys.executable, __file__, "--export", str(nbytes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    handle = bytes.fromhex(child.stdout.readline().strip())
    stream = cupy.cuda.Stream(non_blocking=True)
    shape = (nbytes // 8,)
    row: dict[str, Any] = {"mb": nbytes / 2**20}
    try:
        opens, closes, firsts = [], [], []
        for _ in range(repeat):
            t0 = time.perf_counter()
            pointer = open_handle(cupy, handle)
            opens.append(time.perf_counter() - t0)
            mapped = _mapped(cupy, pointer, nbytes)
            t0 = time.perf_counter()
            float(mapped.sum())
            firsts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            close_handle(cupy, pointer)
            closes.append(time.perf_counter() - t0)
        row.update(open_s=min(opens), close_s=min(closes), first_read_s=min(firsts))
        row["first_read_max_s"] = max(firsts)

        pointer = open_handle(cupy, handle)
        mapped = _mapped(cupy, pointer, nbytes)
        float(mapped.sum())
        with stream:
            own = cupy.empty(shape, cupy.float64)

            def copy() -> None:
                own.data.copy_from_device_async(mapped.data, nbytes, stream)
                stream.synchronize()

            row["copy_s"] = best(copy, repeat)
            row["nan_check_s"] = best(lambda: backend.has_nan(own), repeat)
            row["cupy_nan_check_s"] = best(lambda: int(cupy.count_nonzero(cupy.isnan(own))), repeat)
            row["copy_out_s"] = best(
                lambda: copy_tables_out(
                    cupy, pointer, [(0, shape, "float64")], 0, stream, backend.flag_nan
                ),
                repeat,
            )
            row["mapped_read_s"] = best(lambda: float(mapped.sum()), repeat)
            local = cupy.arange(shape[0], dtype=cupy.float64)

            def local_copy() -> None:
                own.data.copy_from_device_async(local.data, nbytes, stream)
                stream.synchronize()

            row["local_copy_s"] = best(local_copy, repeat)
            row["local_read_s"] = best(lambda: float(local.sum()), repeat)
            row["same"] = bool(cupy.array_equal(own, local))
        close_handle(cupy, pointer)
    finally:
        child.stdin.close()
        child.wait(30)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", default="8,32,128,512")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--export", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.export is not None:
        exporter(args.export)
        return
    import cupy

    rows = [measure(int(float(mb) * 2**20), args.repeat) for mb in args.sizes_mb.split(",")]
    props = cupy.cuda.runtime.getDeviceProperties(0)
    data = {
        "meta": {
            "gpu": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cupy": cupy.__version__,
            "command": "python benchmarks/probes/gpu_ipc_copy.py " + " ".join(sys.argv[1:]),
        },
        "rows": rows,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gpu_ipc_copy.json").write_text(json.dumps(data, indent=1) + "\n")
    cols = [
        "mb",
        "open_s",
        "first_read_s",
        "first_read_max_s",
        "close_s",
        "copy_s",
        "nan_check_s",
        "cupy_nan_check_s",
        "copy_out_s",
        "mapped_read_s",
        "local_copy_s",
        "local_read_s",
        "same",
    ]
    lines = [
        "# CUDA IPC hand-over, step by step",
        "",
        f"Command: `{data['meta']['command']}`; GPU: {data['meta']['gpu']}; {data['meta']['date']}",
        "",
        "Seconds, best of the repeats (first_read_max_s: the slowest first read after an open).",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for row in rows:
        cells = [f"{row[c]:.3g}" if isinstance(row[c], float) else str(row[c]) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    (RESULTS / "gpu_ipc_copy.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
