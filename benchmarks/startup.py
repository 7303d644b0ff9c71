#!/usr/bin/env python
"""Start-up: what a user pays before an answer, every run a fresh process (issue 46).

    python benchmarks/run.py startup [--quick]
    python benchmarks/startup.py [--quick] [--repeats N] [--out DIR]

Measures, round-robin so that every command sees the same machine load:

* the yardsticks ``python -c pass`` and ``python -c "import numpy"``;
* ``dcop --version``, and ``dcop solve FILE -q`` (and with its summary) of the smallest shared
  files, each beside pytoulbar2's fresh-process wall time on the same file (``CFN.Read`` and
  ``Solve``, its verbosity off);
* the import breakdown of ``dcop solve test_Z.uai -q`` (``python -X importtime``: each module
  imported at the top level, cumulative, the least of the runs);
* the same PR (``infer(problem, "pr")``) ten times in one process: each call's seconds, the
  spread of the warm calls (slowest over fastest) and whether every call took the same tree.

Writes ``benchmarks/results/startup.json`` and ``startup.md`` with the machine block. The
targets (issue 46): a solve of a file of under 100 variables in at most 1.5x the wall time of
``import numpy``, ``--version`` in at most 1.2x, warm PR calls within 1.5x of each other.
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
#: The PR repeated in one process: a shared grid model, and a generated spin glass.
PR_FILES = ("Grids_11.uai",)
PR_CALLS = 10
TOULBAR2 = (
    "import sys, pytoulbar2\ncfn = pytoulbar2.CFN(verbose=-1)\ncfn.Read(sys.argv[1])\ncfn.Solve()\n"
)


def dcop_command() -> list[str]:
    """The ``dcop`` console script beside this interpreter (what a user runs), else ``-m``."""
    script = Path(sys.executable).parent / "dcop"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dcop"]


def wall(argv: list[str]) -> float | None:
    """Seconds of one fresh process (None: it failed)."""
    t0 = time.perf_counter()
    run = subprocess.run(argv, capture_output=True, check=False)
    seconds = time.perf_counter() - t0
    return seconds if run.returncode == 0 else None


def commands(instances: Path, quick: bool) -> dict[str, list[str]]:
    """Every measured command by row name."""
    py, dcop = sys.executable, dcop_command()
    out = {
        "python -c pass": [py, "-c", "pass"],
        "import numpy": [py, "-c", "import numpy"],
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
    failed: dict[str, int] = dict.fromkeys(cmds, 0)
    for _ in range(repeats):
        for name, argv in cmds.items():
            seconds = wall(argv)
            if seconds is None:
                failed[name] += 1
            else:
                times[name].append(seconds)
    return {
        name: {
            "command": " ".join(Path(a).name if os.sep in a else a for a in cmds[name]),
            "min_s": min(ts) if ts else None,
            "median_s": statistics.median(ts) if ts else None,
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


PR_SCRIPT = """
import json, sys, time
from dcop.inference.partition import infer
from dcop.io import read_problem
problem = read_problem(sys.argv[1])
calls = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    result = infer(problem, "pr")
    seconds = time.perf_counter() - t0
    doc = result.to_json()
    solver = doc.get("solver") or {}
    doc["ordering"] = solver.get("ordering")
    tree = {k: v for k, v in (solver.get("tree") or {}).items() if k != "search_s"}
    calls.append({"seconds": seconds, "ln_z": result.ln_partition,
                  "tree": json.dumps(tree, sort_keys=True, default=str),
                  "ordering": doc.get("ordering"), "times": result.times})
print(json.dumps(calls))
"""


def pr_repeats(instances: Path, quick: bool) -> list[dict[str, Any]]:
    """The same PR ``PR_CALLS`` times in one fresh process, per model."""
    rows = []
    for name in PR_FILES:
        path = instances / name
        if not path.exists():
            continue
        calls_n = 4 if quick else PR_CALLS
        run = subprocess.run(
            [sys.executable, "-c", PR_SCRIPT, str(path), str(calls_n)],
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            rows.append({"file": name, "error": run.stderr.strip().splitlines()[-1:]})
            continue
        calls = json.loads(run.stdout)
        warm = [c["seconds"] for c in calls[1:]]
        rows.append(
            {
                "file": name,
                "calls_s": [round(c["seconds"], 4) for c in calls],
                "first_s": calls[0]["seconds"],
                "warm_min_s": min(warm),
                "warm_max_s": max(warm),
                "warm_spread": max(warm) / min(warm),
                "same_tree": len({c["tree"] for c in calls}) == 1,
                "same_order": len({c["ordering"] for c in calls}) == 1,
                "tree": json.loads(calls[0]["tree"]),
                "same_ln_z": len({c["ln_z"] for c in calls}) == 1,
                "path_s": [round(c["times"].get("path", 0.0), 4) for c in calls],
            }
        )
    return rows


def run_suite(out_dir: Path, quick: bool, repeats: int, command: str) -> dict[str, Any]:
    """Measure everything and write ``startup.json`` and ``startup.md`` to ``out_dir``."""
    machine = machine_info()
    instances = INSTANCES
    rows = measure(commands(instances, quick), repeats)
    numpy_row = rows["import numpy"]
    for row in rows.values():
        if row["median_s"] is not None and numpy_row["median_s"]:
            row["x_numpy_median"] = row["median_s"] / numpy_row["median_s"]
            row["x_numpy_min"] = row["min_s"] / numpy_row["min_s"]
    doc = {
        "machine": machine,
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "repeats": repeats,
        "rows": rows,
        "imports_ms": import_breakdown(instances, 3 if quick else 5),
        "pr_repeats": pr_repeats(instances, quick),
    }
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
        "ratios to `import numpy`, measured in the same rounds, move less).",
        "",
        "Targets (issue 46): `dcop solve` of a file under 100 variables at most 1.5x "
        "`import numpy`, `dcop --version` at most 1.2x.",
        "",
        "| command | min s | median s | x numpy (median) | x numpy (min) |",
        "|---|---|---|---|---|",
    ]
    for name, row in doc["rows"].items():
        ratio = row.get("x_numpy_median")
        ratio_min = row.get("x_numpy_min")
        lines.append(
            f"| `{name}` | {_s(row['min_s'])} | {_s(row['median_s'])} | "
            f"{'-' if ratio is None else f'{ratio:.2f}'} | "
            f"{'-' if ratio_min is None else f'{ratio_min:.2f}'} |"
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
    lines += [
        "",
        f"## The same PR {PR_CALLS} times in one process",
        "",
        "| file | first s | warm min s | warm max s | warm spread | same tree | same order |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in doc["pr_repeats"]:
        if "error" in row:
            lines.append(f"| {row['file']} | error: {row['error']} | | | | | |")
            continue
        lines.append(
            f"| {row['file']} | {row['first_s']:.3f} | {row['warm_min_s']:.3f} | "
            f"{row['warm_max_s']:.3f} | {row['warm_spread']:.2f} | {row['same_tree']} | "
            f"{row['same_order']} |"
        )
    return "\n".join(lines) + "\n"


def suite_startup(ctx: Any) -> dict[str, Any]:
    """The registered suite (``benchmarks/run.py startup``)."""
    return run_suite(ctx.out_dir, ctx.quick, 3 if ctx.quick else 9, ctx.command)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer files and runs (tests)")
    parser.add_argument("--repeats", type=int, default=9, help="runs of each command")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be positive")
    given = argv if argv is not None else sys.argv[1:]
    shown = [a for k, a in enumerate(given) if a != "--out" and (k == 0 or given[k - 1] != "--out")]
    command = " ".join(["python", "benchmarks/startup.py", *shown])
    summary = run_suite(args.out, args.quick, args.repeats, command)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
