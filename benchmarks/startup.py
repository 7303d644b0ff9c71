#!/usr/bin/env python
"""Start-up: what a user pays before an answer, every run a fresh process (issue 46).

    python benchmarks/run.py startup [--quick]
    python benchmarks/startup.py [--quick] [--repeats N] [--out DIR] [--only steady]

Measures, round-robin so that every command sees the same machine load:

* the yardsticks ``python -c pass`` and ``python -c "import numpy"``;
* ``dcop --version``, and ``dcop solve FILE -q`` (and with its summary) of the smallest shared
  files, each beside pytoulbar2's fresh-process wall time on the same file (``CFN.Read`` and
  ``Solve``, its verbosity off);
* the import breakdown of ``dcop solve test_Z.uai -q`` (``python -X importtime``: each module
  imported at the top level, cumulative, the least of the runs);
* the same PR (``infer(problem, "pr")``) and the same BE solve ten times in one process, with
  one BLAS thread as ``dcop solve`` takes it and with the library's default: each call's seconds,
  the spread of the warm calls (slowest over fastest), whether every call took the same order
  and tree, the share of ordering plus path search in each call, and the collector's pauses in
  each; among them calls over 0.2 s (an 18x18 spin glass's BE, a 22x22 one's PR), where the
  planning share's target applies.

The package's bytecode is written first (as ``pip install`` does), so that no measured process
compiles a module changed since its last import.

With ``--gpu`` (a CUDA device and CuPy), it measures instead, into ``startup_gpu.json`` and
``.md``: ``dcop solve FILE --backend cupy`` in fresh processes on new problems (a fresh kernel
cache; first the machine's first solve, which compiles the generic kernels once), three runs of
each, beside the CPU's wall for the same file, with the seconds spent compiling kernels apart
(the solve's own and the device start's warm-up, from the result's ``times``); and the same
PR and solve ten times in one process on the device.

Each in-process call is followed by a yardstick, the same fixed work every time, whose spread
over the warm calls says how much the machine's own speed moved meanwhile (on the shared 2-core
VM: 1.05-1.5x within a row at a load of 3, past 10x at a load of 30), and its page faults are
counted. ``--only steady`` runs only
that section, into ``startup_steady.json`` and ``.md`` in a folder of one's own (``--out``).

Writes ``benchmarks/results/startup.json`` and ``startup.md`` with the machine block. The
targets (issue 46): a solve of a file of under 100 variables in at most 1.5x the wall time of
``import numpy``, ``--version`` in at most 1.2x, warm calls within 1.5x of each other; on an
H200, at most 0.5 s compiling in a first solve of a new problem, and a warm-cache process at
most 0.6 s above the CPU's wall.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare.context import INSTANCES  # noqa: E402
from compare.machine import describe, machine_info  # noqa: E402

RESULTS = HERE / "results"
#: The smallest shared files (all under 100 variables), UAI models (MPE) and WCSPs.
SMALL_FILES = (
    "test_Z.uai",
    "test_Z2.uai",
    "pdb1etl.uai",
    "queens4.wcsp",
    "base2.wcsp",
    "warehouse.wcsp",
    "example.wcsp",
    "GEOM40_6.wcsp",
)
#: The PR and the solve repeated in one process: a shared grid model, and generated spin glasses
#: (file name -> generator and arguments; a 28x28 spin glass on a device).
PR_FILES = ("Grids_11.uai", "spinglass_20x20.uai")
GPU_PR_FILES = ("Grids_11.uai", "spinglass_28x28.uai")
SOLVE_FILES = ("spinglass_16x16.uai",)
#: Calls over 0.2 s on the 2-core VM, where the planning share's target holds (issue 46): a BE
#: solve of about 0.5 s, a PR of about 2 s (with one BLAS thread only: ten calls are enough).
LARGE_SOLVE_FILES = ("spinglass_18x18.uai",)
LARGE_PR_FILES = ("spinglass_22x22.uai",)
GPU_SOLVE_FILES = ("spinglass_22x22.uai",)
GENERATED: dict[str, tuple[str, tuple[Any, ...], dict[str, Any]]] = {
    "spinglass_16x16.uai": ("spin_glass", (16, 1), {}),
    "spinglass_18x18.uai": ("spin_glass", (18, 1), {}),
    "spinglass_20x20.uai": ("spin_glass", (20, 1), {}),
    "spinglass_22x22.uai": ("spin_glass", (22, 1), {}),
    "spinglass_28x28.uai": ("spin_glass", (28, 1), {}),
    "random_n20_d10.wcsp": ("generate", ("random", 20, 10), {"p1": 0.3, "p2": 0.5, "seed": 0}),
}
#: New problems of the GPU's first-solve runs (the issue's table): generated, then shared.
GPU_NEW_FILES = ("spinglass_22x22.uai", "random_n20_d10.wcsp", "spot5-404.wcsp", "Grids_11.uai")
#: The machine's first solve (it compiles the generic kernels, once per machine).
GPU_MACHINE_FIRST = "test_Z.uai"
GPU_RUNS = 3
PR_CALLS = 10
TOULBAR2 = (
    "import sys, pytoulbar2\ncfn = pytoulbar2.CFN(verbose=-1)\ncfn.Read(sys.argv[1])\ncfn.Solve()\n"
)


#: The package's source folders (pyproject.toml maps them into ``dcop``).
PACKAGE_DIRS = ("dcop", "agents", "coordinator", "protocol", "gpu")


def compile_package() -> None:
    """Write the package's bytecode first, as ``pip install`` does: a module changed since its
    last import would otherwise be compiled again by every measured process where
    ``PYTHONDONTWRITEBYTECODE`` is set (3-10 ms of a small solve's start, not a user's)."""
    import compileall

    for name in PACKAGE_DIRS:
        compileall.compile_dir(str(HERE.parent / name), quiet=1)


def dcop_command() -> list[str]:
    """The ``dcop`` console script beside this interpreter (what a user runs), else ``-m``."""
    script = Path(sys.executable).parent / "dcop"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dcop"]


def wall(argv: list[str]) -> float | None:
    """Seconds of one fresh process (None: it failed)."""
    return timed(argv)[0]


def timed(argv: list[str]) -> tuple[float | None, float]:
    """Wall seconds of one fresh process (None: it failed), and the CPU seconds (user and
    system) it and its children took: on a shared machine the wall waits for a core, the CPU
    time much less."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, check=False)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return (seconds if run.returncode == 0 else None), cpu


#: The row of ``import numpy`` with one BLAS thread.
ONE_THREAD = "import numpy, one BLAS thread"


def commands(instances: Path, quick: bool) -> dict[str, list[str]]:
    """Every measured command by row name."""
    py, dcop = sys.executable, dcop_command()
    out = {
        "python -c pass": [py, "-c", "pass"],
        "import numpy": [py, "-c", "import numpy"],
        # the import dcop solve makes (one BLAS thread): a yardstick a loaded machine moves less
        ONE_THREAD: [py, "-c", "import os; os.environ['OPENBLAS_NUM_THREADS'] = '1'; import numpy"],
        "dcop --version": [*dcop, "--version"],
    }
    files = SMALL_FILES[:3] if quick else SMALL_FILES
    for name in files:
        path = instances / name
        if not path.exists():
            continue
        out[f"dcop solve {name} -q"] = [*dcop, "solve", str(path), "-q"]
        out[f"dcop solve {name}"] = [*dcop, "solve", str(path)]
        if toulbar2_available():
            out[f"pytoulbar2 {name}"] = [py, "-c", TOULBAR2, str(path)]
    return out


def toulbar2_available() -> bool:
    try:
        import pytoulbar2  # noqa: F401
    except ImportError:
        return False
    return True


def measure(cmds: dict[str, list[str]], repeats: int) -> dict[str, dict[str, Any]]:
    """Each command ``repeats`` times, round-robin: least and median wall seconds."""
    times: dict[str, list[float]] = {name: [] for name in cmds}
    cpu: dict[str, list[float]] = {name: [] for name in cmds}
    failed: dict[str, int] = dict.fromkeys(cmds, 0)
    for _ in range(repeats):
        for name, argv in cmds.items():
            seconds, cpu_s = timed(argv)
            if seconds is None:
                failed[name] += 1
            else:
                times[name].append(seconds)
                cpu[name].append(cpu_s)
    return {
        name: {
            "command": " ".join(Path(a).name if os.sep in a else a for a in cmds[name]),
            "min_s": min(ts) if ts else None,
            "median_s": statistics.median(ts) if ts else None,
            "cpu_min_s": min(cpu[name]) if ts else None,
            "runs": len(ts),
            "failed": failed[name],
        }
        for name, ts in times.items()
    }


#: Modules whose import the breakdown names wherever they are imported (what start-up used to
#: pay for, and what a min-sum solve should not load).
WATCHED = (
    "numpy",
    "typer",
    "dcop.cli.plain",
    "dcop.cli.solving",
    "concurrent.futures",
    "dataclasses",
    "rich.console",
    "json",
    "msgspec",
    "dcop.protocol",
    "dcop.contraction",
    "dcop.inference.anytime",
    "dcop.inference",
    "dcop.orders",
    "goatd",
    "opt_einsum",
    "cotengra",
)


def import_breakdown(instances: Path, repeats: int) -> dict[str, Any]:
    """Milliseconds of the imports of ``dcop solve test_Z.uai -q`` under ``python -X
    importtime`` (the least over ``repeats`` runs): the whole (every top-level import, site
    included), each top-level import, and each WATCHED module wherever it is imported (None:
    not imported)."""
    model = instances / "test_Z.uai"
    top: dict[str, float] = {}
    watched: dict[str, float | None] = dict.fromkeys(WATCHED)
    totals: list[float] = []
    for _ in range(repeats):
        run = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "dcop", "solve", str(model), "-q"],
            capture_output=True,
            text=True,
            check=False,
        )
        total = 0.0
        for line in run.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
            if match is None:
                continue
            ms, nested, name = int(match.group(1)) / 1000, match.group(2), match.group(3)
            if name in watched:
                seen = watched[name]
                watched[name] = ms if seen is None else min(seen, ms)
            if not nested:  # a nested import counts in its importer
                top[name] = min(top.get(name, ms), ms)
                total += ms
        totals.append(total)
    return {
        "total_ms": min(totals),
        "watched_ms": watched,
        "top_level_ms": dict(sorted(top.items(), key=lambda kv: -kv[1])),
    }


REPEAT_SCRIPT = """
import gc, json, resource, sys, time
import numpy as np
from dcop.inference import solve
from dcop.inference.partition import infer
from dcop.io import read_problem
path, calls_n, what, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
problem = read_problem(path)
if backend != "numpy":
    from dcop.backends import get_backend
    backend = get_backend(backend)
pauses = {"s": 0.0, "full": 0, "at": 0.0}
def pause(phase, info):  # the collector's pauses, per call (a full one: generation 2)
    if phase == "start":
        pauses["at"] = time.perf_counter()
    else:
        pauses["s"] += time.perf_counter() - pauses["at"]
        pauses["full"] += info["generation"] == 2
gc.callbacks.append(pause)
yard_a, yard_b = np.linspace(0.0, 1.0, 1 << 14), np.linspace(1.0, 0.0, 1 << 14)
def yardstick():  # the same fixed work after every call: the machine's own speed at that time
    t0 = time.perf_counter()
    for _ in range(250):
        np.minimum(yard_a, yard_b, out=yard_a)
        np.add(yard_a, yard_b, out=yard_a)
    total = 0
    for i in range(50000):
        total += i
    return time.perf_counter() - t0
calls = []
for _ in range(calls_n):
    pauses.update(s=0.0, full=0)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter()
    result = infer(problem, "pr", backend=backend) if what == "pr" else solve(problem, backend=backend)
    seconds = time.perf_counter() - t0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    machine_s = yardstick()
    doc = result.to_json()
    solver = doc.get("solver") or {}
    tree = {k: v for k, v in (solver.get("tree") or {}).items() if k != "search_s"}
    value = result.ln_partition if what == "pr" else result.upper_bound
    calls.append({"seconds": seconds, "value": value, "gc_s": pauses["s"], "gc_full": pauses["full"],
                  "faults": faults, "machine_s": machine_s,
                  "tree": json.dumps(tree, sort_keys=True, default=str),
                  "ordering": solver.get("ordering"), "times": result.times,
                  "order": [solver.get("ordering"), solver.get("induced_width"),
                            solver.get("largest_table")]})
print(json.dumps(calls))
"""

#: BLAS threads of the in-process repeats: one, as ``dcop solve`` takes it, and the library's
#: default (None: the variable unset).
BLAS_SETTINGS: dict[str, str | None] = {"1 (as dcop solve)": "1", "default": None}


def materialize(name: str, instances: Path, scratch: Path) -> Path:
    """A shared file by name, or a generated one written to ``scratch`` once."""
    if name not in GENERATED:
        return instances / name
    path = scratch / name
    if not path.exists():
        from dcop import generators
        from dcop.io import write_problem

        fn, args, kwargs = GENERATED[name]
        write_problem(getattr(generators, fn)(*args, **kwargs), path)
    return path


def repeat_calls(
    files: tuple[str, ...],
    what: str,
    instances: Path,
    scratch: Path,
    calls_n: int,
    backend: str = "numpy",
    blas: dict[str, str | None] | None = None,
) -> list[dict[str, Any]]:
    """The same PR (``what="pr"``) or BE solve ``calls_n`` times in one fresh process, per file
    and BLAS setting: each call's seconds, the warm calls' spread, whether the order and the tree
    stayed the same, and ordering plus path search as a share of each call."""
    rows = []
    for name in files:
        path = materialize(name, instances, scratch)
        if not path.exists():
            continue
        for label, threads in (blas or {"default": None}).items():
            env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
            if threads is not None:
                env["OPENBLAS_NUM_THREADS"] = threads
            run = subprocess.run(
                [sys.executable, "-c", REPEAT_SCRIPT, str(path), str(calls_n), what, backend],
                capture_output=True,
                text=True,
                check=False,
                env=env,
            )
            row: dict[str, Any] = {"file": name, "what": what, "backend": backend, "blas": label}
            if run.returncode != 0:
                rows.append(row | {"error": run.stderr.strip().splitlines()[-1:]})
                continue
            calls = json.loads(run.stdout)
            warm = [c["seconds"] for c in calls[1:]]
            planning = [
                c["times"].get("path", 0.0) + c["times"].get("ordering", 0.0) for c in calls
            ]
            rows.append(
                row
                | {
                    "calls_s": [round(c["seconds"], 4) for c in calls],
                    "first_s": calls[0]["seconds"],
                    "warm_min_s": min(warm),
                    "warm_max_s": max(warm),
                    "warm_spread": max(warm) / min(warm),
                    "same_tree": len({c["tree"] for c in calls}) == 1,
                    "same_order": len({c["ordering"] for c in calls}) == 1
                    and len({tuple(c["order"]) for c in calls}) == 1,
                    "tree": json.loads(calls[0]["tree"]),
                    "same_value": len({c["value"] for c in calls}) == 1,
                    "planning_s": [round(x, 4) for x in planning],
                    # the collector's pauses in each call, and its full collections
                    "gc_s": [round(c["gc_s"], 4) for c in calls],
                    "gc_full": [c["gc_full"] for c in calls],
                    # page faults in each call (a table's first touch of a fresh page)
                    "faults": [c["faults"] for c in calls],
                    # the yardstick after each call (fixed work: NumPy loops in cache and a
                    # Python loop) and its spread over the warm calls: how much the machine's own
                    # speed moved while they ran (other processes, the host of this VM)
                    "machine_s": [round(c["machine_s"], 5) for c in calls],
                    "machine_spread": max(c["machine_s"] for c in calls[1:])
                    / min(c["machine_s"] for c in calls[1:]),
                    # seconds each call compiled or loaded kernels: a bucket shape whose joined
                    # entries, summed over the calls, pass DEFAULT_SPECIALIZE_ENTRIES gets its own
                    # kernel in the call that passes it
                    "compile_s": [round(c["times"].get("kernel_compile", 0.0), 4) for c in calls],
                    "planning_share": max(
                        p / c["seconds"] for p, c in zip(planning, calls, strict=True)
                    ),
                    # the first call plans; the warm ones take its plan (dcop.plan.reuse)
                    "planning_share_first": planning[0] / calls[0]["seconds"],
                    "planning_share_warm": max(
                        p / c["seconds"] for p, c in zip(planning[1:], calls[1:], strict=True)
                    ),
                    # a PR's contraction: the tree's flops per second of its warm calls (what
                    # the path search's yardstick, dcop.contraction.engine.FLOP_RATE, predicts)
                    "contract_flops_per_s": contraction_rate(calls),
                }
            )
    return rows


def contraction_rate(calls: list[dict[str, Any]]) -> float | None:
    """The contraction tree's flops over the least warm call's ``contract`` seconds (None for a
    BE solve, or a call without a tree)."""
    flops = json.loads(calls[0]["tree"]).get("flops")
    seconds = [c["times"].get("contract") for c in calls[1:] or calls]
    least = min((t for t in seconds if t), default=None)
    return None if not flops or least is None else float(flops) / least


#: Seconds a CPU solve beside a GPU one may take (a 24x24 spin glass's BE takes minutes on a
#: core: its GPU wall is far below anyway).
CPU_BESIDE_S = 20.0


def result_times(
    argv: list[str], env: dict[str, str], timeout: float | None = None
) -> tuple[float | None, dict[str, float]]:
    """Wall seconds of one fresh ``dcop solve ... --json FILE`` and its result's ``times``
    (None and an error past ``timeout`` or on failure)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        t0 = time.perf_counter()
        try:
            run = subprocess.run(
                [*argv, "--json", str(out)],
                capture_output=True,
                env=env,
                check=False,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return None, {"error": f"over {timeout:.0f} s"}  # type: ignore[dict-item]
        seconds = time.perf_counter() - t0
        if run.returncode != 0 or not out.exists():
            return None, {"error": run.stderr.decode(errors="replace").strip()[-300:]}  # type: ignore[dict-item]
        return seconds, json.loads(out.read_text()).get("times") or {}


def gpu_first_runs(
    instances: Path, scratch: Path, runs: int, quick: bool = False
) -> list[dict[str, Any]]:
    """``dcop solve FILE --backend cupy -q`` in fresh processes on new problems, with a fresh
    kernel cache: the machine's first solve, then each file ``runs`` times, beside the CPU's
    wall (the least of two runs); the seconds compiling or loading kernels apart (the solve's,
    ``kernel_compile``, and the device start's warm-up, ``backend_kernels``)."""
    import tempfile

    dcop = dcop_command()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, DCOP_KERNEL_CACHE=cache)
        for k, name in enumerate((GPU_MACHINE_FIRST, *GPU_NEW_FILES)):
            path = materialize(name, instances, scratch)
            if not path.exists():
                continue
            row: dict[str, Any] = {"file": name, "machine_first": k == 0, "runs": []}
            for _ in range(1 if k == 0 else runs):
                wall_s, times = result_times(
                    [*dcop, "solve", str(path), "--backend", "cupy", "-q"], env
                )
                row["runs"].append(
                    {
                        "wall_s": wall_s,
                        "error": times.get("error"),
                        "compile_s": times.get("kernel_compile", 0.0)
                        + times.get("backend_kernels", 0.0),
                        "times": times,
                    }
                )
            cpu = [
                result_times([*dcop, "solve", str(path), "-q"], env, CPU_BESIDE_S)[0]
                for _ in range(1 if quick else 2)
            ]
            row["cpu_wall_s"] = min((c for c in cpu if c is not None), default=None)
            rows.append(row)
    return rows


def run_gpu_suite(out_dir: Path, quick: bool, command: str) -> dict[str, Any]:
    """The GPU part: first runs of new problems, and the same PR and solve in one process."""
    import tempfile

    machine = machine_info()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        calls_n = 4 if quick else PR_CALLS
        doc = {
            "machine": machine,
            "command": command,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "first_runs": gpu_first_runs(INSTANCES, scratch, 2 if quick else GPU_RUNS, quick),
            "repeats": repeat_calls(GPU_PR_FILES, "pr", INSTANCES, scratch, calls_n, "cupy")
            + repeat_calls(GPU_SOLVE_FILES, "solve", INSTANCES, scratch, calls_n, "cupy"),
        }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "startup_gpu.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out_dir / "startup_gpu.md").write_text(gpu_report(doc))
    return {r["file"]: [run["compile_s"] for run in r["runs"]] for r in doc["first_runs"]}


def steady_rows(instances: Path, quick: bool) -> list[dict[str, Any]]:
    """The same PR or solve ten times in one process: every file and BLAS setting's row."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        calls_n = 4 if quick else PR_CALLS
        files = PR_FILES[:1] if quick else PR_FILES
        blas = {"1 (as dcop solve)": "1"} if quick else BLAS_SETTINGS
        rows = repeat_calls(files, "pr", instances, Path(tmp), calls_n, blas=blas)
        if not quick:
            rows += repeat_calls(
                SOLVE_FILES + LARGE_SOLVE_FILES, "solve", instances, Path(tmp), calls_n, blas=blas
            )
            one = {"1 (as dcop solve)": "1"}
            rows += repeat_calls(LARGE_PR_FILES, "pr", instances, Path(tmp), calls_n, blas=one)
    return rows


def run_steady(out_dir: Path, quick: bool, command: str) -> dict[str, Any]:
    """Only the in-process repeats (``--only steady``), into ``startup_steady.json`` and
    ``.md``: the full run's section, again in minutes instead of the whole suite."""
    compile_package()
    doc: dict[str, Any] = {
        "machine": machine_info(),
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "pr_repeats": steady_rows(INSTANCES, quick),
        "load_end": [round(x, 2) for x in os.getloadavg()],
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "startup_steady.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [
        "# Start-up: the same PR or solve in one process (only)",
        "",
        f"`{doc['command']}` on {describe(doc['machine'])}, {doc['date']}. Load average at the "
        f"end: {doc['load_end']}.",
        "",
        *repeats_table(doc["pr_repeats"]),
    ]
    (out_dir / "startup_steady.md").write_text("\n".join(lines) + "\n")
    return {
        f"{r['file']} {r['what']} {r['blas']}": round(r.get("warm_spread", 0.0), 2)
        for r in doc["pr_repeats"]
    }


def run_suite(out_dir: Path, quick: bool, repeats: int, command: str) -> dict[str, Any]:
    """Measure everything and write ``startup.json`` and ``startup.md`` to ``out_dir``."""
    machine = machine_info()
    instances = INSTANCES
    compile_package()
    rows = measure(commands(instances, quick), repeats)
    numpy_row = rows["import numpy"]
    for row in rows.values():
        if row["median_s"] is not None and numpy_row["median_s"]:
            row["x_numpy_median"] = row["median_s"] / numpy_row["median_s"]
            row["x_numpy_min"] = row["min_s"] / numpy_row["min_s"]
        one = rows[ONE_THREAD]
        if row["median_s"] is not None and one["median_s"]:
            row["x_numpy_one_thread_median"] = row["median_s"] / one["median_s"]
        if row["cpu_min_s"] and numpy_row["cpu_min_s"]:
            row["x_numpy_cpu_min"] = row["cpu_min_s"] / numpy_row["cpu_min_s"]
    doc = {
        "machine": machine,
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeats": repeats,
        "rows": rows,
        "imports_ms": import_breakdown(instances, 3 if quick else 5),
    }
    doc["pr_repeats"] = steady_rows(instances, quick)
    doc["load_end"] = [round(x, 2) for x in os.getloadavg()]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "startup.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out_dir / "startup.md").write_text(report(doc))
    return {
        name: round(row.get("x_numpy_median", 0.0), 2)
        for name, row in rows.items()
        if name.startswith(("dcop", "pytoulbar2"))
    }


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def report(doc: dict[str, Any]) -> str:
    """The Markdown page of one run."""
    lines = [
        "# Start-up: fresh processes",
        "",
        f"`{doc['command']}` on {describe(doc['machine'])}, {doc['date']}. Each command ran "
        f"{doc['repeats']} times, "
        "round-robin with the others (a shared 2-core machine: medians move with the load; the "
        "ratios to `import numpy`, measured in the same rounds, move less); the package's "
        "bytecode written first, as an install does.",
        "",
        "Targets (issue 46): `dcop solve` of a file under 100 variables at most 1.5x "
        "`import numpy`, `dcop --version` at most 1.2x.",
        "",
        f"Load average at the end: {doc.get('load_end', '-')}. x numpy, one thread: over "
        "`import numpy` with one BLAS thread, as `dcop solve` imports it (a loaded machine slows "
        "the default import's thread pool more than anything else here). CPU: user and system "
        "seconds of the process, the least of the runs (a loaded machine moves them least).",
        "",
        "| command | min s | median s | x numpy (median) | x numpy (min) | "
        "x numpy, one thread (median) | CPU min s | x numpy (CPU min) |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    for name, row in doc["rows"].items():
        lines.append(
            f"| `{name}` | {_s(row['min_s'])} | {_s(row['median_s'])} | "
            f"{ratio(row.get('x_numpy_median'))} | {ratio(row.get('x_numpy_min'))} | "
            f"{ratio(row.get('x_numpy_one_thread_median'))} | {_s(row.get('cpu_min_s'))} | "
            f"{ratio(row.get('x_numpy_cpu_min'))} |"
        )
    imports = doc["imports_ms"]
    lines += [
        "",
        "## Imports of `dcop solve test_Z.uai -q`",
        "",
        f"`python -X importtime` (which slows imports), the least of the runs: "
        f"{imports['total_ms']:.0f} ms in all. Watched modules, cumulative wherever imported "
        "(- : not imported):",
        "",
        "| module | ms |",
        "|---|---|",
    ]
    lines += [
        f"| `{name}` | {'-' if ms is None else f'{ms:.1f}'} |"
        for name, ms in imports["watched_ms"].items()
    ]
    lines += ["", "Top-level imports (each with what it imported first):", "", "| module | ms |"]
    lines += ["|---|---|"]
    lines += [f"| `{n}` | {ms:.1f} |" for n, ms in imports["top_level_ms"].items() if ms >= 1.0]
    lines += ["", *repeats_table(doc["pr_repeats"])]
    return "\n".join(lines) + "\n"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def planning_shares(row: dict[str, Any]) -> str:
    """The first call's planning share and the warm calls' largest (a row of before the plans
    were kept: the largest of all)."""
    if "planning_share_first" not in row:
        return f"{100 * row['planning_share']:.0f} %"
    return f"{100 * row['planning_share_first']:.0f} / {100 * row['planning_share_warm']:.0f} %"


def repeats_table(rows: list[dict[str, Any]]) -> list[str]:
    """The Markdown section of the in-process repeats."""
    lines = [
        f"## The same PR or solve {PR_CALLS} times in one process",
        "",
        "Target: the slowest warm call at most 1.5x the fastest; ordering plus path search at "
        "most 25 % of a call over 0.2 s (planning share: the first call's, which plans, and the "
        "largest of the warm calls', which take the first one's plan for the same structure, "
        "`dcop.plan.reuse`). GC: the "
        "collector's pauses in the warm calls, the most in one call, and its full collections "
        "in all of them. flops/s: a PR tree's flops over its fastest warm contraction (the path "
        "search predicts with `FLOP_RATE`: 2e9 on NumPy, 1.3e11 on CuPy). compile: the most "
        "seconds a warm call spent compiling or loading kernels (a bucket shape gets its own "
        "kernel in the call whose summed joined entries pass `DEFAULT_SPECIALIZE_ENTRIES`). "
        "machine spread: the same fixed work timed after each warm call (NumPy loops in cache "
        "and a Python loop, about 4 ms here), slowest over fastest: what the machine's own speed did "
        "meanwhile (other processes; on a VM, its host); a warm spread near it is the machine's. "
        "faults: the most page faults in one warm call (first touches of fresh pages).",
        "",
        "| file | call | backend | BLAS threads | first s | warm min s | warm max s | "
        "warm spread | machine spread | faults | same order | same tree | "
        "planning share (first / warm) | GC max s (full) | flops/s | compile max s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        head = f"| {row['file']} | {row['what']} | {row['backend']} | {row['blas']} |"
        if "error" in row:
            lines.append(f"{head} error: {row['error']} | | | | | | | | | | | |")
            continue
        gc_warm = row.get("gc_s", [0.0])[1:] or [0.0]
        rate = row.get("contract_flops_per_s")
        faults = "-" if len(row.get("faults", [])) < 2 else str(max(row["faults"][1:]))
        lines.append(
            f"{head} {row['first_s']:.3f} | {row['warm_min_s']:.3f} | "
            f"{row['warm_max_s']:.3f} | {row['warm_spread']:.2f} | "
            f"{_ratio(row.get('machine_spread'))} | {faults} | "
            f"{row['same_order']} | "
            f"{row['same_tree']} | {planning_shares(row)} | "
            f"{max(gc_warm):.3f} ({sum(row.get('gc_full', [0])[1:])}) | "
            f"{'-' if not rate else f'{rate:.2g}'} | "
            f"{max(row.get('compile_s', [0.0])[1:] or [0.0]):.3f} |"
        )
    return lines


def gpu_report(doc: dict[str, Any]) -> str:
    """The Markdown page of the GPU part."""
    lines = [
        "# Start-up on a GPU: first solves of new problems, compile time apart",
        "",
        f"`{doc['command']}` on {describe(doc['machine'])}, {doc['date']}. Every solve a fresh "
        "`dcop solve FILE --backend cupy -q` process with a fresh kernel cache: first the "
        f"machine's first solve ({GPU_MACHINE_FIRST}: the generic kernels, compiled once per "
        "machine), then each new problem in turn. compile s: kernels compiled or loaded, the "
        "solve's own and the device start's warm-up (on its thread); start s: the device's start "
        "on its thread, begun before the command's imports; wait s: what the solve "
        "waited for the device's start after reading and ordering. CPU s: the least of two "
        "`dcop solve FILE -q` on the same machine (-: over "
        f"{CPU_BESIDE_S:.0f} s, or refused by the default memory limit).",
        "",
        "Targets (issue 46): at most 0.5 s compiling in all in a first solve of a new problem; "
        "a later process (warm cache) at most 0.6 s above the CPU's wall.",
        "",
        "| file | run | wall s | compile s | start s (make + warm-up) | wait s | "
        "in-process total s | CPU s | over CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in doc["first_runs"]:
        for k, run in enumerate(row["runs"]):
            times = run["times"]
            cpu = row["cpu_wall_s"]
            over = "-" if cpu is None or run["wall_s"] is None else f"{run['wall_s'] - cpu:.2f}"
            label = "machine's first" if row["machine_first"] else f"{k + 1}"
            if run.get("error"):
                lines.append(f"| {row['file']} | {label} | error: {run['error']} | | | | | | |")
                continue
            lines.append(
                f"| {row['file']} | {label} | {_s(run['wall_s'])} | {run['compile_s']:.3f} | "
                f"{_s(times.get('backend_start'))} ({_s(times.get('backend_init'))} + "
                f"{_s(times.get('backend_warm_up'))}) | "
                f"{_s(times.get('backend_wait'))} | {_s(times.get('total'))} | {_s(cpu)} | "
                f"{over} |"
            )
    lines += ["", *repeats_table(doc["repeats"])]
    return "\n".join(lines) + "\n"


def suite_startup(ctx: Any) -> dict[str, Any]:
    """The registered suite (``benchmarks/run.py startup``)."""
    return run_suite(ctx.out_dir, ctx.quick, 3 if ctx.quick else 9, ctx.command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer files and runs (tests)")
    parser.add_argument("--repeats", type=int, default=9, help="runs of each command")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    parser.add_argument(
        "--gpu", action="store_true", help="the GPU part (startup_gpu.*): needs CuPy and a device"
    )
    parser.add_argument(
        "--only",
        choices=("steady",),
        help="steady: only the same PR or solve ten times in one process, into "
        "--out/startup_steady.* (not benchmarks/results/)",
    )
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    if args.only and args.out.resolve() == RESULTS.resolve():
        # benchmarks/results/ keeps whole runs of the registered suite (benchmarks/run.py)
        parser.error("--only writes part of a run: give --out a folder of your own")
    given = argv if argv is not None else sys.argv[1:]
    shown = [a for k, a in enumerate(given) if a != "--out" and (k == 0 or given[k - 1] != "--out")]
    command = " ".join(["python", "benchmarks/startup.py", *shown])
    if args.gpu:
        summary = run_gpu_suite(args.out, args.quick, command)
    elif args.only == "steady":
        summary = run_steady(args.out, args.quick, command)
    else:
        summary = run_suite(args.out, args.quick, args.repeats, command)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
