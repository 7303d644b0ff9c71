"""Device probe: what one MB-DPOP chunk costs a GPU agent, phase by phase, beside a CPU agent.

A cluster member's chunk (``agents/session.py``'s ``_start_chunk`` and ``_chunk_compute``): its
child's chunk table (CTX, then ``rest`` variables of d = 10) put on the backend from page-locked
host memory, its own tables (binary, d = 10; ``cut_own`` of them hold a cut variable), then
:func:`dcop.conditioned.chunk_util`, the transpose to (CTX, ...) and the download. Each phase is
timed with a device synchronize after it, on the agent's own backend (``agent_backend``: the
placed backend on device 0, or NumPy), for chunks of 1, 13 and 100 contexts. Prints a table and
writes ``OUT/mbdpop_chunk_cost.json``.

    cd /tmp && python3 REPO/benchmarks/probes/mbdpop_chunk_cost.py --out DIR
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcop.agents.run import agent_backend
from dcop.backends.base import PinnedHost, capable
from dcop.conditioned import CTX, chunk_util, contexts
from dcop.tables import Table


def case(backend: Any, chunk: int, rest: int, cut_own: int, own: int, reps: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    cut = ["c0", "c1"]
    var = "x"
    sep = [f"s{k}" for k in range(rest)]
    tables = []
    for k in range(own):
        other = cut[k % 2] if k < cut_own else sep[k % rest]
        tables.append(Table((var, other), rng.random((10, 10))))
    child_scope = (CTX, var, *sep[: rest - 1])
    shape = (chunk, *([10] * (len(child_scope) - 1)))
    pinned = capable(backend, PinnedHost)
    host = backend.host_empty(shape, np.float64) if pinned else np.empty(shape)
    host[...] = rng.random(shape)
    ctx = contexts([10, 10], 0, chunk)
    phases: dict[str, list[float]] = {"upload": [], "chunk_util": [], "download": [], "all": []}
    for _ in range(reps):
        t0 = time.perf_counter()
        received = backend.table(child_scope, host, host.dtype)
        backend.synchronize()
        t1 = time.perf_counter()
        util = chunk_util(backend, [*tables, received], var, cut, ctx)
        backend.synchronize()
        t2 = time.perf_counter()
        scope = (CTX, *(v for v in util.scope if v != CTX))
        data = backend.to_numpy(backend.transpose(util, scope).data)
        backend.synchronize()
        t3 = time.perf_counter()
        phases["upload"].append(t1 - t0)
        phases["chunk_util"].append(t2 - t1)
        phases["download"].append(t3 - t2)
        phases["all"].append(t3 - t0)
    out = {k: statistics.median(v[1:]) for k, v in phases.items()}
    out |= {"chunk": chunk, "rest": rest, "out_entries": int(data.size)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--reps", type=int, default=12)
    args = ap.parse_args()
    rows = []
    for label, gpu in (("cpu", None), ("gpu", args.gpu)):
        backend = agent_backend(gpu)[0]
        for rest in (4, 5, 6):
            for chunk in (1, 13, 100):
                r = case(backend, chunk, rest, cut_own=2, own=4, reps=args.reps)
                r["side"] = label
                rows.append(r)
                print(
                    f"{label} rest={rest} chunk={chunk:3d} out={r['out_entries']:>9} "
                    + " ".join(
                        f"{k}={r[k] * 1e3:.3f}ms"
                        for k in ("upload", "chunk_util", "download", "all")
                    )
                )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "mbdpop_chunk_cost.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
