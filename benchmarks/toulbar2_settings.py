"""toulbar2 at its defaults and at its better settings beside dcop, on every shared file and on
the paper's generators: an honest comparison for the README's "when to use dcop, when toulbar2".

Settings (pytoulbar2; each the command-line flag it stands for):

* ``tb2``: toulbar2's defaults (HBFS, EDAC);
* ``tb2 -B=1``: tree decomposition (BTD), the standard flag for structured instances;
* ``tb2 -B=1 -A``: BTD with VAC in preprocessing;
* ``dcop BE``: ``dcop solve`` (exact BE in the process; refused when its plan does not fit);
* ``dcop auto``: ``dcop solve --algo auto --timeout LIMIT`` (each step in a forked child: BE when
  it fits memory and time, else MBE with z raised until the deadline: bounds, not a proof).

Every run is a fresh process under the same wall-clock limit; its time is read + solve inside
that process (Python's start-up left out for both). The settings run alternating, in a rotating
order, once per round, so that a machine shared with other jobs disturbs them alike; the table
keeps each setting's median and the ratios are taken between runs of the same rounds. Every
assignment is re-evaluated on dcop's own model and compared with the shared index's optimum.

    python benchmarks/toulbar2_settings.py [--limit 30] [--rounds 3] [--only NAME ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SETTINGS = ("tb2", "tb2 -B=1", "tb2 -B=1 -A", "dcop BE", "dcop auto")
#: The paper's generators (name -> dcop.generators call), solved from a written .wcsp file.
GENERATED = {
    "random n=20 d=10 p1=0.3 p2=0.5": ("random_network", (20, 10, 0.3, 0.5, 1)),
    "random n=30 d=5 p1=0.2 p2=0.5": ("random_network", (30, 5, 0.2, 0.5, 1)),
    "scale-free n=40 d=5 p2=0.5": ("scale_free_network", (40, 5, 0.5, 1)),
    "grid n=36 d=5 p2=0.5": ("grid_network", (36, 5, 0.5, 1)),
}
#: Runs below this many seconds are repeated in later rounds; longer ones run once.
REPEAT_BELOW_S = 3.0


def instances_dir() -> Path:
    """The shared instances: ``DCOP_INSTANCES``, else ``../shared/instances`` beside the repo."""
    return Path(os.environ.get("DCOP_INSTANCES", ROOT.parent / "shared" / "instances"))


def index() -> dict[str, dict[str, str]]:
    """Rows of the shared INDEX.tsv by file name (empty when it is missing)."""
    path = instances_dir() / "INDEX.tsv"
    if not path.exists():
        return {}
    with path.open() as fh:
        return {row["file"]: row for row in csv.DictReader(fh, delimiter="\t")}


def worker(setting: str, file: str, limit: float) -> dict[str, Any]:
    """One run, in this process: read + solve, the value re-evaluated by dcop."""
    from dcop.io import read_problem

    problem = read_problem(file)
    if setting.startswith("dcop"):
        from dcop.errors import TableTooLarge
        from dcop.inference import solve
        from dcop.inference.anytime import solve_auto

        t0 = time.perf_counter()
        try:
            if setting == "dcop BE":
                result = solve(read_problem(file), "be")
            else:
                result = solve_auto(read_problem(file), deadline=time.monotonic() + limit)
        except TableTooLarge:
            return {"seconds": None, "internal": None, "exact": False, "status": "too large"}
        seconds = time.perf_counter() - t0
        if result.status == "infeasible":
            return {"seconds": seconds, "internal": None, "exact": True, "status": "infeasible"}
        return {
            "seconds": seconds,
            "internal": result.upper_bound,
            "lower": result.lower_bound,
            "exact": result.exact,
            "status": result.status,
            "algo": result.algo,
            "z": result.z,
        }
    import pytoulbar2

    t0 = time.perf_counter()
    cfn = pytoulbar2.CFN(verbose=-1, vac=1 if "-A" in setting else 0)  # VAC is set up here
    if "-B=1" in setting:
        pytoulbar2.tb2.option.btdMode = 1
    cfn.Read(file)
    solved = cfn.Solve(timeLimit=max(1, int(limit)))
    seconds = time.perf_counter() - t0
    if solved is None:  # within the limit: a proof that nothing is feasible
        proved = seconds < limit
        status = "infeasible" if proved else "no solution"
        return {"seconds": seconds, "internal": None, "exact": proved, "status": status}
    values = [int(v) for v in solved[0]]
    assignment = dict(zip(problem.variables, values, strict=True))
    dual = float(cfn.GetDDualBound())
    proved = seconds < limit and dual >= float(solved[1]) - 1e-6 * max(1.0, abs(float(solved[1])))
    return {
        "seconds": seconds,
        "internal": problem.evaluate(assignment),
        "exact": bool(proved),
        "status": "ok",
    }


def run_one(setting: str, file: Path, limit: float) -> dict[str, Any]:
    """One run in a fresh process, killed a little after the limit."""
    cmd = [sys.executable, __file__, "--worker", setting, str(file), str(limit)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit + 15, check=False)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "status": "killed", "exact": False, "internal": None}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:160]
        return {"seconds": None, "status": f"crashed: {tail}", "exact": False, "internal": None}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def files(only: list[str], out: Path) -> list[tuple[str, Path]]:
    """Every shared .wcsp/.uai file, then the generated instances (written to ``out``)."""
    from dcop import generators
    from dcop.io import write_problem

    chosen = [
        (p.name, p)
        for p in sorted(instances_dir().glob("*"))
        if p.suffix in (".wcsp", ".uai") and p.is_file()
    ]
    out.mkdir(parents=True, exist_ok=True)
    for name, (fn, args) in GENERATED.items():
        path = out / (name.replace(" ", "_").replace("=", "") + ".wcsp")
        if not path.exists():
            write_problem(getattr(generators, fn)(*args), path)
        chosen.append((name, path))
    if only:
        chosen = [(n, p) for n, p in chosen if any(o in n for o in only)]
    return chosen


def check(row: dict[str, Any], result: dict[str, Any], problem: Any) -> str:
    """``ok`` when the value agrees with the known optimum (or is a bound on it)."""
    if result.get("status") == "infeasible":
        return "infeasible"
    if result.get("internal") is None:
        return "-"
    kind = problem.cost_kind
    known = row.get("neg_ln_optimum") if kind == "neg_ln" else row.get("optimum")
    try:
        ref = float(known) if kind == "neg_ln" else float(problem.sign) * float(known)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "no reference"
    value = float(result["internal"])
    tol = 1e-6 * max(1.0, abs(ref)) + (1e-4 if kind == "neg_ln" else 0.0)
    if result.get("exact"):
        return "ok" if abs(value - ref) <= tol else f"WRONG {value} vs {ref}"
    low = result.get("lower")
    fine = value >= ref - tol and (low is None or float(low) <= ref + tol)
    return "bound ok" if fine else f"WRONG bound {low}..{value} vs {ref}"


def rerender(args: argparse.Namespace) -> None:
    """``--from-json``: the Markdown again from a run's JSON (no run)."""
    doc = json.loads((args.out / f"{args.name}.json").read_text())
    args.limit, args.rounds = doc["limit_s"], doc["rounds"]
    write(args, doc["rows"], doc["started"], doc["load_average_at_start"], doc["command"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--worker", nargs=3, metavar=("SETTING", "FILE", "LIMIT"), help=argparse.SUPPRESS
    )
    ap.add_argument("--limit", type=float, default=30.0, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (short runs)")
    ap.add_argument("--only", nargs="*", default=[], help="substrings of instance names")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--name", default="toulbar2_settings")
    ap.add_argument("--from-json", action="store_true", help="re-render the Markdown only")
    args = ap.parse_args()
    if args.from_json:
        rerender(args)
        return
    if args.worker:
        setting, file, limit = args.worker
        print(json.dumps(worker(setting, file, float(limit))))
        return
    from dcop.io import read_problem

    meta = index()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="dcop-tb2-"))  # generated instances: not results
    for name, path in files(args.only, scratch):
        problem = read_problem(path)
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in SETTINGS}
        for r in range(args.rounds):
            order = SETTINGS[r % len(SETTINGS) :] + SETTINGS[: r % len(SETTINGS)]
            for setting in order:
                earlier = runs[setting]
                if earlier and not (earlier[0]["seconds"] or math.inf) < REPEAT_BELOW_S:
                    continue  # long runs once: the machine's noise is small beside them
                runs[setting].append(run_one(setting, path, args.limit))
        row: dict[str, Any] = {"instance": name, "n": problem.n, "d": problem.max_domain()}
        for setting, done in runs.items():
            times = [d["seconds"] for d in done if d.get("seconds") is not None]
            last = done[-1]
            row[setting] = {
                "median_s": statistics.median(times) if times else None,
                "runs": len(done),
                "exact": last.get("exact"),
                "status": last.get("status"),
                "check": check(meta.get(name, {}), last, problem),
                "algo": last.get("algo"),
                "z": last.get("z"),
            }
        exact = [r[-1]["internal"] for r in runs.values() if r and r[-1].get("exact")]
        exact = [float(v) for v in exact if v is not None]
        row["exact_answers_agree"] = not exact or max(exact) - min(exact) <= 1e-4 * max(
            1.0, abs(min(exact))
        )  # every proof (toulbar2's re-evaluated assignments, dcop's optimum) the same value
        rows.append(row)
        print(
            name,
            {s: (row[s]["median_s"], row[s]["exact"], row[s]["check"]) for s in SETTINGS},
            flush=True,
        )
    write(args, rows, started, load)


def _cell(entry: dict[str, Any], limit: float) -> str:
    t = entry["median_s"]
    if t is None or (t >= limit and not entry["exact"]):
        if entry["status"] == "too large":
            return "too large"
        return f"> {limit:g} s" if entry["status"] != "no solution" else "none"
    text = f"{t:.3g}" + (" (infeasible)" if entry["status"] == "infeasible" else "")
    return (
        text
        if entry["exact"]
        else f"{text} (bounds{'' if entry['z'] is None else ', z=' + str(entry['z'])})"
    )


def write(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    started: str,
    load: Any,
    command: str | None = None,
) -> None:
    """JSON with every run's summary and a Markdown table."""
    from keep import machine_block

    args.out.mkdir(parents=True, exist_ok=True)
    limit = args.limit
    doc = {
        "command": command or "python benchmarks/toulbar2_settings.py " + " ".join(sys.argv[1:]),
        "started": started,
        "load_average_at_start": load,
        "limit_s": limit,
        "rounds": args.rounds,
        "settings": SETTINGS,
        "machine": machine_block(),
        "rows": rows,
    }
    wins = {"dcop": 0, "tb2 best": 0, "even": 0}
    lines = [
        f"## toulbar2 (defaults, -B=1, -B=1 -A) beside dcop --algo auto ({started})",
        "",
        f"Seconds (median of up to {args.rounds} alternating runs; read + solve inside one process)"
        f" under a {limit:g} s limit; `(bounds)`: dcop's anytime MBE, not a proof. Load average at "
        f"the start: {load[0]:.2f} (machine shared with other jobs: compare within a row). "
        "`best tb2 / best dcop` > 1: dcop's faster proof beat toulbar2's best setting.",
        "",
        "| instance | n | d | tb2 | tb2 -B=1 | tb2 -B=1 -A | dcop BE | dcop auto | best tb2 / best dcop | checks |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        tb2 = [row[s] for s in SETTINGS[:3] if row[s]["exact"] and row[s]["median_s"] is not None]
        best = min((e["median_s"] for e in tb2), default=None)
        proved = [row[s]["median_s"] for s in SETTINGS[3:] if row[s]["exact"]]
        mine = min((x for x in proved if x is not None), default=None)
        ratio = "-"
        if best is not None and mine is not None:
            ratio = f"{best / mine:.3g}"
            key = "dcop" if best / mine > 1.2 else "tb2 best" if best / mine < 1 / 1.2 else "even"
            wins[key] += 1
        elif mine is not None:
            ratio, wins["dcop"] = "dcop only", wins["dcop"] + 1
        elif best is not None:
            ratio, wins["tb2 best"] = "tb2 only", wins["tb2 best"] + 1
        checks = {row[s]["check"] for s in SETTINGS} - {"-", "ok", "bound ok", "no reference"}
        checks -= {"infeasible"}
        if not row.get("exact_answers_agree", True):
            checks.add("EXACT ANSWERS DISAGREE")
        lines.append(
            f"| {row['instance']} | {row['n']} | {row['d']} | "
            + " | ".join(_cell(row[s], limit) for s in SETTINGS)
            + f" | {ratio} | {', '.join(sorted(checks)) or 'all ok'} |"
        )
    lines += [
        "",
        f"Proved first (within 1.2x counts as even): dcop {wins['dcop']}, toulbar2's best setting "
        f"{wins['tb2 best']}, even {wins['even']}.",
        "",
    ]
    doc["wins"] = wins
    from keep import write_results

    write_results(args.out, args.name, doc, "\n".join(lines))


if __name__ == "__main__":
    main()
