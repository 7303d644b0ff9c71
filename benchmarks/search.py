#!/usr/bin/env python
"""Exact search beside toulbar2: who proves the optimum, and how fast.

    python benchmarks/run.py search [--limit S] [--gpu] [--jobs N] [--threads T] [--only NAME ...]
        [--out DIR]
    python benchmarks/run.py search --models DIR [--limit 15] [--only NAME ...]
    python benchmarks/run.py search --rescore benchmarks/results/search_anytime.json

Every run is a fresh process (``--worker``) with the same limit, timed inside the process from
reading the file to the answer (toulbar2 through pytoulbar2 alike). Settings: toulbar2 at its
defaults (``tb2``) and with tree decomposition (``tb2 -B=1``), dcop's search (``dcop aobb``) and
its portfolio (``dcop auto``); ``--gpu`` runs dcop's settings with ``--backend cupy``. dcop's
search runs on ``--threads`` CPU threads (default: the usable cores less the ``--jobs``
toulbar2 runs beside it, at least 1, at most 8), recorded in the results.
Instances: the shared files, then generated families written to a scratch folder (not kept):
the paper's random networks (d = 10, p1 = 0.3, p2 = 0 and 0.2, n = 18-30), ±J spin glasses
12x12-36x36, grids (d = 3-5) and scale-free networks. Every answer is checked: a proved value
against the known optimum (shared files) and against every other setting's proof.

Writes ``search[_gpu].json`` and ``.md`` to ``--out`` (default benchmarks/results) with the
machine block, and ``search[_gpu].png``, a cactus plot (instances proved against seconds), where
matplotlib is installed. The Markdown states the issue's measures: the share of the instances
where toulbar2's best setting needs at least 0.5 s or fails that dcop proves first, and the
random family's speed-up.

``--models DIR`` is the anytime mode: every ``*.uai`` of DIR (public UAI competition MAP models,
fetched there beforehand and never committed; a ``.uai.evid`` beside a model is its evidence),
the evidence applied and the model written once to a scratch folder, then ``dcop auto`` and
toulbar2 (defaults and ``-B=1``) on that same file, each a fresh process at the same limit
(default 15 s). Every answer is re-evaluated by dcop; a row says whose answer is better (a
relative tolerance of 1e-9). Writes ``search_anytime.json`` and ``.md`` (``--name``: another
stem, for a subset of the models): the share of the models where dcop's answer is at least as
good as toulbar2's best setting's, and as each setting's.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from toulbar2_settings import check, index, instances_dir

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TB2 = ("tb2", "tb2 -B=1")
DCOP = ("dcop aobb", "dcop auto")
SETTINGS = TB2 + DCOP
#: Shared files worth a row: the others are proved in milliseconds by everyone.
SHARED = (
    "CELAR6-SUB0.wcsp",
    "spot5-404.wcsp",
    "pedigree1.wcsp",
    "example.wcsp",
    "Grids_11.uai",
    "DBN_11.uai",
    "Segmentation_11.uai",
    "Pedigree_12.uai",
    "Promedus_13.uai",
    "Promedus_15.uai",
    "CSP_12.uai",
    "ObjectDetection_56.uai",
    "grid10x10.f10.uai",
    "279_ASP.uai",
    "water.uai",
)
#: name -> (generator, arguments); written once per run to a scratch folder.
GENERATED: dict[str, tuple[str, tuple[Any, ...]]] = {
    **{
        f"random n={n} p2=0 s{s}": ("random_network", (n, 10, 0.3, 0.0, s))
        for n in (18, 20, 22, 24, 26, 28, 30)
        for s in (1, 2)
    },
    **{f"random n={n} p2=0.2 s1": ("random_network", (n, 10, 0.3, 0.2, 1)) for n in (22, 24, 26)},
    **{f"spinglass {k}x{k}": ("spin_glass", (k, 1)) for k in (12, 16, 20, 24, 28, 32, 36)},
    **{f"grid n=100 d={d}": ("grid_network", (100, d, 0.0, 1)) for d in (3, 4, 5)},
    "grid n=144 d=3": ("grid_network", (144, 3, 0.0, 1)),
    "scale-free n=100 d=4": ("scale_free_network", (100, 4, 0.0, 1)),
    "scale-free n=200 d=3": ("scale_free_network", (200, 3, 0.0, 1)),
}


def default_threads(jobs: int) -> int:
    """dcop's threads beside ``jobs`` single-threaded toulbar2 runs: the usable cores less
    those, at least 1, at most 8."""
    from dcop.search.cores import MAX_DEFAULT_THREADS, usable_cores

    return max(1, min(MAX_DEFAULT_THREADS, usable_cores() - max(0, jobs)))


def worker(
    setting: str, file: str, limit: float, gpu: bool, threads: int | None = None
) -> dict[str, Any]:
    """One run in this process: read + solve, timed from before the solver's own imports; the
    value re-evaluated by dcop (toulbar2's clock stops before dcop reads the file); dcop's
    search on ``threads`` threads."""
    t0 = time.perf_counter()
    if setting.startswith("dcop"):
        from dcop.io import read_problem

        problem = read_problem(file)
        from dcop.errors import TableTooLarge

        deadline = time.monotonic() + limit - (time.perf_counter() - t0)
        backend = "cupy" if gpu else "numpy"
        try:
            # each setting imports what it runs, as `dcop solve` does: the search's module loads
            # numba (0.4-0.8 s), which auto pays only when it searches
            if setting == "dcop aobb":
                from dcop.search import solve_aobb

                result = solve_aobb(problem, deadline=deadline, backend=backend, threads=threads)
            else:
                from dcop.inference.anytime import solve_auto

                result = solve_auto(problem, deadline=deadline, backend=backend, threads=threads)
        except TableTooLarge:
            return {"seconds": None, "internal": None, "exact": False, "status": "too large"}
        seconds = time.perf_counter() - t0
        out: dict[str, Any] = {
            "seconds": seconds,
            "internal": result.upper_bound,
            "lower": result.lower_bound,
            "exact": result.exact,
            "status": result.status,
            "algo": result.algo,
            "z": result.z,
            "backend": result.backend,
            "times": {k: round(v, 4) for k, v in result.times.items()},
            "choice": result.choice,
        }
        if result.search is not None:
            out["expanded"] = result.search.expanded
            out["rate"] = result.search.rate
            out["steps"] = [s.to_json() for s in result.search.steps]
            out["threads"] = result.search.threads
        return out
    import pytoulbar2

    cfn = pytoulbar2.CFN(verbose=-1)
    if "-B=1" in setting:
        pytoulbar2.tb2.option.btdMode = 1
    cfn.Read(file)
    budget = max(1, int(limit - (time.perf_counter() - t0)))  # toulbar2 takes whole seconds
    t_solve = time.perf_counter()
    solved = cfn.Solve(timeLimit=budget)
    # a run stopped by its own time limit proves nothing, whatever its bound says (-B=1 has
    # returned a worse assignment with a bound equal to it)
    in_time = time.perf_counter() - t_solve < budget - 0.25
    seconds = time.perf_counter() - t0
    if solved is None:  # nothing found: within the limit, a proof that nothing is feasible
        proved = seconds < limit and in_time
        status = "infeasible" if proved else "no solution"
        return {"seconds": seconds, "internal": None, "exact": proved, "status": status}
    from dcop.io import read_problem

    problem = read_problem(file)
    values = [int(v) for v in solved[0]]
    assignment = dict(zip(problem.variables, values, strict=True))
    dual = float(cfn.GetDDualBound())
    value = float(solved[1])
    internal = problem.evaluate(assignment)
    # a proof needs the bound to meet the value; on a .wcsp (toulbar2's costs are ours) also the
    # value to be its assignment's: with -B=1 toulbar2 has returned an assignment costing more
    # than the value it proved (a .uai's costs are toulbar2's own scaled logs: not comparable)
    tol = 1e-6 * max(1.0, abs(value))
    same_units = Path(file).suffix == ".wcsp"
    proved = (
        seconds < limit
        and in_time
        and dual >= value - tol
        and (not same_units or abs(internal - value) <= 1e-6 * max(1.0, abs(internal)))
    )
    return {
        "seconds": seconds,
        "internal": internal,
        "lower": (dual if same_units else internal) if proved else None,  # in dcop's units
        "exact": bool(proved),
        "status": "ok",
    }


def run_one(
    setting: str, file: Path, limit: float, gpu: bool, threads: int | None = None
) -> dict[str, Any]:
    """One run in a fresh process, killed a little after the limit."""
    cmd = [sys.executable, __file__, "--worker", setting, str(file), str(limit)]
    cmd += ["--gpu"] if gpu else []
    cmd += [] if threads is None else ["--threads", str(threads)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=limit + KILL_AFTER_S, check=False
        )
    except subprocess.TimeoutExpired:
        return {"seconds": None, "status": "killed", "exact": False, "internal": None}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:160]
        return {"seconds": None, "status": f"crashed: {tail}", "exact": False, "internal": None}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def instances(only: list[str], scratch: Path) -> list[tuple[str, Path]]:
    """The shared files of SHARED that exist, then the generated instances."""
    from dcop import generators
    from dcop.io import write_problem

    chosen = [(n, instances_dir() / n) for n in SHARED if (instances_dir() / n).exists()]
    for name, (fn, args) in GENERATED.items():
        kind = ".uai" if fn == "spin_glass" else ".wcsp"
        path = scratch / (name.replace(" ", "_").replace("=", "") + kind)
        write_problem(getattr(generators, fn)(*args), path)
        chosen.append((name, path))
    if only:
        chosen = [(n, p) for n, p in chosen if any(o in n for o in only)]
    return chosen


def agree(results: dict[str, dict[str, Any]]) -> bool:
    """Every proof of a row gives the same value."""
    values = [r["internal"] for r in results.values() if r["exact"] and r["internal"] is not None]
    return all(abs(v - values[0]) <= 1e-6 * max(1.0, abs(values[0])) for v in values)


def measures(rows: list[dict[str, Any]], limit: float) -> dict[str, Any]:
    """The issue's measures over the rows."""

    def proved_s(entry: dict[str, Any]) -> float | None:
        s = entry.get("seconds")
        return s if entry["exact"] and s is not None and s <= limit else None

    hard, first = 0, 0
    random_ratios = []
    for row in rows:
        tb2 = [t for t in (proved_s(row[s]) for s in TB2) if t is not None]
        mine = [t for t in (proved_s(row[s]) for s in DCOP) if t is not None]
        best_tb2 = min(tb2, default=None)
        best_mine = min(mine, default=None)
        if best_tb2 is None or best_tb2 >= 0.5:
            hard += 1
            if best_mine is not None and (best_tb2 is None or best_mine < best_tb2):
                first += 1
        if row["instance"].startswith("random n=") and best_mine is not None:
            n = int(row["instance"].split("n=")[1].split()[0])
            if 22 <= n <= 26:
                random_ratios.append((best_tb2 if best_tb2 is not None else limit) / best_mine)
    return {
        "hard_rows": hard,
        "dcop_first_on_hard": first,
        "share_first_on_hard": first / hard if hard else None,
        "random_22_26_speedup_min": min(random_ratios, default=None),
        "proved": {s: sum(1 for r in rows if proved_s(r[s]) is not None) for s in SETTINGS},
    }


def write(args: argparse.Namespace, rows: list[dict[str, Any]], started: str) -> None:
    """JSON, Markdown and the cactus plot."""
    from compare.machine import describe, machine_info

    name = "search_gpu" if args.gpu else "search"
    stats = measures(rows, args.limit)
    doc = {
        "command": "python benchmarks/search.py " + " ".join(sys.argv[1:]),
        "started": started,
        "limit_s": args.limit,
        "gpu": args.gpu,
        "dcop_threads": args.threads,
        "settings": SETTINGS,
        "machine": machine_info(),
        "measures": stats,
        "rows": rows,
    }

    def cell(entry: dict[str, Any]) -> str:
        s = entry.get("seconds")
        if entry["exact"] and s is not None and s <= args.limit:
            return f"{s:.3g}"
        if entry.get("internal") is not None and entry.get("internal") != float("inf"):
            low = entry.get("lower")
            return f"> {args.limit:g} ({low:.6g} .. {entry['internal']:.6g})" if low else "> limit"
        return entry["status"] if entry["status"] not in ("ok", "timeout") else "> limit"

    backend = "CuPy on the GPU" if args.gpu else "NumPy on the CPU"
    lines = [
        f"## Exact search beside toulbar2 ({started}, dcop on {backend})",
        "",
        describe(doc["machine"]),
        "",
        f"Seconds to a proof, read + solve in a fresh process, limit {args.limit:g} s, dcop's "
        f"search on {args.threads} thread(s) beside {args.jobs} toulbar2 run(s); "
        "unproved: `> limit (lower .. upper)` in internal costs. Command: "
        f"`{doc['command']}`.",
        "",
        "| instance | " + " | ".join(SETTINGS) + " | checks |",
        "|---|" + "---|" * (len(SETTINGS) + 1),
    ]
    for row in rows:
        lines.append(
            f"| {row['instance']} | "
            + " | ".join(cell(row[s]) for s in SETTINGS)
            + f" | {row['checks']} |"
        )
    share = stats["share_first_on_hard"]
    lines += [
        "",
        f"Proved within the limit: {', '.join(f'{k} {v}' for k, v in stats['proved'].items())}.",
        f"Rows where toulbar2's best setting needs at least 0.5 s or fails: {stats['hard_rows']}; "
        f"dcop proves first on {stats['dcop_first_on_hard']}"
        + (f" ({share:.0%})." if share is not None else "."),
        "Random networks n = 22-26: dcop's best against toulbar2's best, smallest ratio: "
        + (
            f"{stats['random_22_26_speedup_min']:.3g}x."
            if stats["random_22_26_speedup_min"]
            else "-."
        ),
        "",
    ]
    from keep import write_results

    write_results(args.out, name, doc, "\n".join(lines))
    cactus(rows, args.limit, args.out / f"{name}.png")


def cactus(rows: list[dict[str, Any]], limit: float, path: Path) -> None:
    """Instances proved against seconds, one line per setting (skipped without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for s in SETTINGS:
        times = sorted(
            r[s]["seconds"]
            for r in rows
            if r[s]["exact"] and r[s].get("seconds") is not None and r[s]["seconds"] <= limit
        )
        ax.step(times, range(1, len(times) + 1), where="post", label=s)
    ax.set_xscale("log")
    ax.set_xlabel("seconds")
    ax.set_ylabel("instances proved")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


#: A run is killed this many seconds past its limit (status ``killed``: no answer).
KILL_AFTER_S = 30.0
#: Relative tolerance under which two answers are the same.
SAME = 1e-9


def anytime_models(folder: Path, only: list[str], scratch: Path) -> list[tuple[str, Path]]:
    """The models of ``folder`` (name order), each with its evidence applied, written to
    ``scratch`` as a ``.uai`` that every solver reads."""
    from dcop.errors import DcopError
    from dcop.io import read_problem, write_problem

    chosen = []
    for model in sorted(folder.glob("*.uai")):
        if only and not any(o in model.name for o in only):
            continue
        evid = model.with_name(model.name + ".evid")
        try:
            problem = read_problem(model, evidence=evid if evid.exists() else None)
        except DcopError as exc:
            print(f"{model.name}: skipped ({exc})", flush=True)
            continue
        path = scratch / model.name
        write_problem(problem, path)
        chosen.append((model.name, path))
    return chosen


def better(mine: dict[str, Any], theirs: dict[str, Any]) -> str:
    """Whose answer (internal cost) is better: ``dcop``, ``tb2``, ``same``, or ``none`` (no
    answer from either: both killed past the limit)."""
    a, b = mine.get("internal"), theirs.get("internal")
    if a is None and b is None:
        return "none"
    if a is None or b is None:
        return "tb2" if a is None else "dcop"
    close = math.isfinite(a) and math.isfinite(b) and abs(a - b) <= SAME * max(1.0, abs(a), abs(b))
    if a == b or close:  # two infinities (no feasible answer either) are the same too
        return "same"
    return "dcop" if a < b else "tb2"


def run_anytime(args: argparse.Namespace) -> None:
    """The anytime mode (``--models DIR``): dcop auto beside toulbar2 at the same limit."""
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    settings = ("dcop auto", *TB2)
    rows = []
    # --reuse-tb2: toulbar2's answers of an earlier document (same models, same limit), so that
    # a change of dcop's is measured without running toulbar2 again on a shared machine
    reused: dict[str, dict[str, Any]] = {}
    tb2_from = None
    if args.reuse_tb2 is not None:
        earlier = json.loads(args.reuse_tb2.read_text())
        if earlier["limit_s"] != args.limit:
            raise SystemExit(f"--reuse-tb2: its limit is {earlier['limit_s']} s, not {args.limit}")
        reused = {r["model"]: r for r in earlier["rows"]}
        tb2_from = f"{args.reuse_tb2.name} of {earlier['started']}"
    with tempfile.TemporaryDirectory() as scratch:
        chosen = anytime_models(args.models, args.only, Path(scratch))
        from dcop.io import read_problem

        for name, path in chosen:  # one process at a time: the machine is shared
            problem = read_problem(path)
            row: dict[str, Any] = {"model": name, "n": problem.n, "d": problem.max_domain()}
            for s in settings:
                if s in TB2 and name in reused and s in reused[name]:
                    row[s] = reused[name][s]
                else:
                    threads = args.threads if s.startswith("dcop") else None
                    row[s] = run_one(s, path, args.limit, False, threads)
            best_tb2 = min(
                (row[s] for s in TB2 if row[s].get("internal") is not None),
                key=lambda r: r["internal"],
                default={"internal": None},
            )
            row["vs best tb2"] = better(row["dcop auto"], best_tb2)
            for s in TB2:
                row[f"vs {s}"] = better(row["dcop auto"], row[s])
            rows.append(row)
            print(name, {s: row[s].get("internal") for s in settings}, row["vs best tb2"],
                  flush=True)  # fmt: skip
    write_anytime(args, rows, settings, started, tb2_from=tb2_from)


def write_anytime(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    settings: tuple[str, ...],
    started: str,
    measured: dict[str, Any] | None = None,
    tb2_from: str | None = None,
) -> None:
    """``search_anytime.json`` and ``.md``; ``measured``: the document whose rows these are
    (``--rescore``: its command and machine stand, the scores are made again); ``tb2_from``:
    the document toulbar2's answers were taken from (``--reuse-tb2``)."""
    from compare.machine import describe, machine_info

    def share(key: str, among: list[dict[str, Any]]) -> dict[str, Any]:
        """Over ``among``'s rows where either answered."""
        answered = [r for r in among if r[key] != "none"]
        good = sum(1 for r in answered if r[key] in ("dcop", "same"))
        return {
            "rows": len(answered),
            "at_least_as_good": good,
            "better": sum(1 for r in answered if r[key] == "dcop"),
            "worse": sum(1 for r in answered if r[key] == "tb2"),
            "share": good / len(answered) if answered else None,
        }

    for row in rows:  # scored again, so that a document can be rescored (--rescore)
        best_tb2 = min(
            (row[s] for s in TB2 if row[s].get("internal") is not None),
            key=lambda r: r["internal"],
            default={"internal": None},
        )
        row["vs best tb2"] = better(row["dcop auto"], best_tb2)
        for s in TB2:
            row[f"vs {s}"] = better(row["dcop auto"], row[s])
    # the target: the models nobody proves within the limit
    unproved = [r for r in rows if not any(r[s].get("exact") for s in settings)]

    keys = ("vs best tb2", *(f"vs {s}" for s in TB2))
    stats: dict[str, Any] = {key: share(key, rows) for key in keys}
    stats["nobody proves"] = {key: share(key, unproved) for key in keys}
    stats["no answer from either"] = sum(1 for r in rows if r["vs best tb2"] == "none")
    stats["proved"] = {s: sum(1 for r in rows if r[s].get("exact")) for s in settings}
    command = "python benchmarks/search.py " + " ".join(sys.argv[1:])
    doc = {
        "command": command if measured is None else measured["command"],
        "started": started,
        "limit_s": args.limit,
        "models": len(rows),
        "settings": settings,
        "dcop_threads": args.threads if measured is None else measured.get("dcop_threads"),
        "machine": machine_info() if measured is None else measured["machine"],
        "measures": stats,
        "rows": rows,
    }
    if measured is not None:
        tb2_from = measured.get("tb2_from")
    if tb2_from is not None:
        doc["tb2_from"] = tb2_from
    if measured is not None:
        doc["rescored_by"] = command

    def cell(entry: dict[str, Any]) -> str:
        value = entry.get("internal")
        if value is None:
            return entry.get("status", "-")
        mark = " (proved)" if entry.get("exact") else ""
        return f"{value:.10g}{mark}"

    lines = [
        f"## Anytime: dcop auto beside toulbar2 at {args.limit:g} s ({started})",
        "",
        describe(doc["machine"]),
        "",
        f"{len(rows)} public UAI MAP models (evidence applied), each solver a fresh process at "
        f"the same limit, one at a time. Answers are dcop's internal costs (-ln of the "
        f"probability, less is better), every assignment re-evaluated by dcop. Command: "
        f"`{doc['command']}`."
        + (f" toulbar2's answers are those of {tb2_from} (not run again)." if tb2_from else ""),
        "",
        "| model | n | " + " | ".join(settings) + " | better answer |",
        "|---|---|" + "---|" * (len(settings) + 1),
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['n']} | "
            + " | ".join(cell(row[s]) for s in settings)
            + f" | {row['vs best tb2']} |"
        )
    lines.append("")
    for label, block in (("all models", stats), ("models nobody proves", stats["nobody proves"])):
        for key in keys:
            st = block[key]
            pct = f" ({st['share']:.0%})" if st["share"] is not None else ""
            lines.append(
                f"- {label}, dcop auto {key}: at least as good on {st['at_least_as_good']} of "
                f"{st['rows']}{pct}; better on {st['better']}, worse on {st['worse']}."
            )
    lines += [
        f"- No answer from dcop nor toulbar2 (every run killed {KILL_AFTER_S:g} s past the "
        f"limit): {stats['no answer from either']} models, left out of the shares above.",
        f"- Proved within the limit: {', '.join(f'{k} {v}' for k, v in stats['proved'].items())}.",
        "",
    ]
    from keep import write_results

    write_results(args.out, args.name, doc, "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", nargs=3, metavar=("SETTING", "FILE", "LIMIT"))
    parser.add_argument("--limit", type=float, help="seconds (default 60; --models: 15)")
    parser.add_argument("--gpu", action="store_true", help="dcop with --backend cupy")
    parser.add_argument("--jobs", type=int, default=1, help="toulbar2 runs at once")
    parser.add_argument(
        "--threads",
        type=int,
        help="dcop's search threads (default: the usable cores less --jobs, 1 to 8)",
    )
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS))
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--models", type=Path, help="anytime mode: the UAI MAP models of this folder"
    )
    parser.add_argument(
        "--rescore", type=Path, help="score an anytime document's rows again (search_anytime.json)"
    )
    parser.add_argument(
        "--reuse-tb2",
        type=Path,
        help="anytime mode: toulbar2's answers from this earlier document (same limit); dcop runs",
    )
    parser.add_argument(
        "--name",
        default="search_anytime",
        help="anytime mode: the results' file stem (a subset of the models: a name of its own)",
    )
    args = parser.parse_args()
    if args.worker:
        setting, file, limit = args.worker
        print(json.dumps(worker(setting, file, float(limit), args.gpu, args.threads)))
        return
    if args.threads is None:
        args.threads = default_threads(args.jobs)
    elif args.threads < 1:
        parser.error(f"--threads: at least 1, not {args.threads}")
    if args.limit is None:
        args.limit = 15.0 if args.models is not None else 60.0
    if args.rescore is not None:  # the anytime document's rows scored again
        measured = json.loads(args.rescore.read_text())
        args.limit = measured["limit_s"]
        settings = tuple(measured["settings"])
        write_anytime(args, measured["rows"], settings, measured["started"], measured)
        return
    if args.models is not None:
        if not args.models.is_dir():
            parser.error(f"--models: no folder {args.models}")
        run_anytime(args)
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    known = index()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        chosen = instances(args.only, Path(scratch))
        # toulbar2 runs side by side (one core each); dcop's one after another (one GPU)
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            tb2 = {
                (name, s): pool.submit(run_one, s, path, args.limit, False)
                for name, path in chosen
                for s in TB2
                if s in args.settings
            }
            if args.jobs <= 1:  # one core: nothing side by side
                concurrent.futures.wait(list(tb2.values()))
            mine = {
                (name, s): run_one(s, path, args.limit, args.gpu, args.threads)
                for name, path in chosen
                for s in DCOP
                if s in args.settings
            }
            results = {k: f.result() for k, f in tb2.items()} | mine
        from dcop.io import read_problem

        for name, path in chosen:
            problem = read_problem(path)
            row: dict[str, Any] = {"instance": name, "n": problem.n, "d": problem.max_domain()}
            for s in SETTINGS:
                row[s] = results.get((name, s)) or {"status": "not run", "exact": False}
            ref = known.get(name, {})
            checks = {check(ref, row[s], problem) for s in SETTINGS if row[s].get("internal")}
            checks -= {"-", "ok", "bound ok", "no reference"}
            if not agree({s: row[s] for s in SETTINGS if "internal" in row[s]}):
                checks.add("PROOFS DISAGREE")
            row["checks"] = ", ".join(sorted(checks)) or "all ok"
            rows.append(row)
            print(name, {s: row[s].get("seconds") for s in SETTINGS}, row["checks"], flush=True)
    write(args, rows, started)


if __name__ == "__main__":
    main()
