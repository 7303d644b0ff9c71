#!/usr/bin/env python
"""Where a contraction's time goes on a backend: phases and array-module calls, synchronized.

    python benchmarks/probes/contraction_ops.py [--backend cupy] [--task pr|mar] [--top N] MODEL ...

MODEL is a .uai path or ``isingN`` (an N x N grid, as benchmarks/pr.py makes it). Each model is
run once warm (kernels compiled), then once with (1) the phases of
:func:`dcop.contraction.execute.run_tree` timed (upward pass, backward pass with the beliefs,
the final transfer; the backend synchronized at each mark) and (2) every call of the backend's
array module (``backend.xp``: ``matmul``, ``sum``, ``max``, ...) timed between two
synchronizations and grouped by function and caller. Operators on arrays (``a * b``, ``a /= c``,
``reshape``) do not go through the module: their time is in the phases, not in the calls. The
backend's own kernels (``gpu/strided.py``: ``product_sum``, ``peak_divide``, ...) are timed
alike.
Synchronizing at every call slows the run: the second table says where time goes, not how much
the unprofiled run takes (the first line gives that, from a plain run). Prints Markdown.

CONCLUSION (an H100, ``--backend cupy --task mar``, after ``gpu/strided.py``): a fresh process
with an empty kernel cache compiles 5 modules; its first MAR took 1.37 s on Grids_11 (0.11 s
warm: path 0.02 s, contraction 0.08 s), 0.25 s on Pedigree_12 and 0.44 s on Promedus_13, where
CuPy's own kernels had cost 22 s of compiling before the first Grids_11 MAR.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any


class TimedModule:
    """``module``'s functions, each call synchronized before and after and timed."""

    def __init__(self, module: Any, sync: Any, table: dict[tuple[str, str], list[float]]) -> None:
        self._module, self._sync, self._table = module, sync, table

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not callable(value) or isinstance(value, type):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            caller = traceback.extract_stack(limit=2)[0].name
            self._sync()
            t0 = time.perf_counter()
            out = value(*args, **kwargs)
            self._sync()
            row = self._table[(name, caller)]
            row[0] += 1
            row[1] += time.perf_counter() - t0
            return out

        return call


def build(name: str) -> Any:
    from dcop.generators import ising_grid
    from dcop.io import read_problem

    if name.startswith("ising"):
        return ising_grid(int(name[5:].split("x")[0]), 1.0, 0.1, seed=0)
    return read_problem(Path(name))


def profile(name: str, backend_name: str, task: str, top: int) -> str:
    import dcop.contraction.execute as execute
    from dcop.backends import get_backend
    from dcop.inference.partition import infer

    backend = get_backend(backend_name)
    problem = build(name)
    t0 = time.perf_counter()
    infer(problem, task, backend=backend)  # warm: kernels, cuBLAS handles, the pool
    first_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    plain = infer(problem, task, backend=backend)
    plain_s = time.perf_counter() - t0
    execute.PHASES = {}
    table: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
    real = backend.xp
    backend.xp = TimedModule(real, backend.synchronize, table)
    kernels = getattr(backend, "_strided", None)  # gpu/strided.py's kernels, timed alike
    if kernels is not None:
        backend._strided = TimedModule(kernels, backend.synchronize, table)
    try:
        infer(problem, task, backend=backend)
    finally:
        backend.xp = real
        if kernels is not None:
            backend._strided = kernels
        phases, execute.PHASES = execute.PHASES, None
    lines = [
        f"## {Path(name).stem} {task} on {backend_name}",
        "",
        f"first run {first_s:.4f} s (kernels compiled or read from the cache); "
        f"plain run {plain_s:.4f} s (path {plain.times.get('path', 0.0):.4f} s, contraction "
        f"{plain.times.get('contract', 0.0):.4f} s, space {plain.space}); phases, synchronized: "
        + ", ".join(f"{k} {v:.4f} s" for k, v in phases.items()),
        "",
        "| call | caller | count | seconds |",
        "|---|---|---|---|",
    ]
    ranked = sorted(table.items(), key=lambda kv: -kv[1][1])[:top]
    lines += [f"| {op} | {caller} | {int(n)} | {s:.4f} |" for (op, caller), (n, s) in ranked]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="+", help=".uai paths or isingN")
    parser.add_argument("--backend", default="numpy")
    parser.add_argument("--task", default="mar", choices=["pr", "mar"])
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--without-strided",
        action="store_true",
        help="the device steps on CuPy's own operations (before gpu/strided.py), to compare",
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="a narrow network's PR on a device as one opt_einsum call, not the engine's steps",
    )
    args = parser.parse_args()
    if args.plain:
        from dcop.contraction import engine

        engine.PLAIN_ON_DEVICE = True
    if args.without_strided:
        from dcop.gpu import CupyBackend

        CupyBackend.strided = None  # type: ignore[assignment,misc]
    for name in args.models:
        sys.stdout.write(profile(name, args.backend, args.task, args.top) + "\n")


if __name__ == "__main__":
    main()
