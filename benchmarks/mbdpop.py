"""MB-DPOP at message limits DPOP cannot meet: dcop's agents beside FRODO's MB-DPOP.

    python benchmarks/run.py mbdpop                         # the series, CPU agents
    python benchmarks/run.py mbdpop --frodo DIR             # FRODO's MB-DPOP beside each row
    python benchmarks/run.py mbdpop --gpu 0                 # CPU and GPU agents (the device)
    python benchmarks/run.py mbdpop --only grid:100:5 --limits 1,8
    python benchmarks/run.py mbdpop --only random:20:10 --limits 1 --width 5 --gpu 0

Rows: grids (``dcop generate grid``) at n = 100-196 and d = 3-5, scale-free with two links at
n = 100-300, the paper's random networks (d = 10, p1 = 0.3) at n = 16-22; each at message limits
of 1, 8 and 64 MiB. Every row writes the instance and times, each as a fresh process:

* ``dcop solve FILE`` (BE: the optimum every row must equal);
* ``dcop run FILE --algo dpop --trees 1 --max-message-mib L``: refused (``too_large``) or not;
* ``dcop run FILE --algo mbdpop --trees 1 --max-message-mib L [--width K]``: wall time, the
  simulated time (the critical path of compute and messages, as the paper counts it), messages
  and bytes by type, the largest message sent, the cut; with ``--gpu`` once more with GPU agents.
  A UTIL over L goes up in parts; cuts come from what an agent holds, or from ``--width K``;
* with ``--frodo DIR``: FRODO's stock MB-DPOP agent (``agents/DPOP/MB-DPOP/MB-DPOPagent.xml``)
  on the same instance as XCSP, its width limit ``maxDim`` set to K, or else to the variables
  a message of L MiB holds at the instance's domain size (float64 entries): FRODO bounds its
  messages by cutting, so both keep every message within L.

Writes benchmarks/results/mbdpop.json and .md (``mbdpop_gpu`` with ``--gpu``; ``--name`` another).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dcop.generators import grid_network, random_network, scale_free_network
from dcop.io import write_problem
from dcop.model import Problem

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
from compare.machine import machine_info  # noqa: E402
from distributed import timed_command  # noqa: E402

#: dcop as a module of this interpreter (a GPU machine with carried wheels has no console script)
DCOP = [sys.executable, "-m", "dcop"]
MIB = 1 << 20

#: family -> instance from (n, d, seed)
FAMILIES: dict[str, Callable[[int, int, int], Problem]] = {
    "grid": lambda n, d, seed: grid_network(n, d, 0.0, seed),
    "links2": lambda n, d, seed: scale_free_network(n, d, 0.0, seed, m=2),
    "random": lambda n, d, seed: random_network(n, d, 0.3, 0.0, seed=seed),
}
SERIES: list[tuple[str, int, int]] = [
    ("grid", 100, 3),
    ("grid", 144, 3),
    ("grid", 196, 3),
    ("grid", 100, 5),
    ("links2", 100, 3),
    ("links2", 200, 3),
    ("links2", 300, 3),
    ("random", 16, 10),
    ("random", 18, 10),
    ("random", 20, 10),
    ("random", 22, 10),
]


def _doc(path: Path) -> dict[str, Any]:
    """What a row keeps of a result document."""
    if not path.exists():
        return {}
    doc = json.loads(path.read_text())
    path.unlink()
    out: dict[str, Any] = {"status": doc.get("status"), "cost": doc.get("cost")}
    if doc.get("status") not in ("ok", "infeasible"):
        out["message"] = (doc.get("message") or "")[:300]
    m = doc.get("metrics") or {}
    if m.get("messages"):
        out.update(
            simulated_s=m.get("simulated_runtime_s"),
            solve_wall_s=m.get("solve_wall_s"),
            messages=m.get("total_messages"),
            bytes=m.get("total_bytes"),
            by_type=m.get("messages"),
            bytes_by_type=m.get("bytes"),
            largest_message_bytes=m.get("largest_message_bytes"),
        )
    tree = doc.get("pseudo_tree") or {}
    if tree.get("cuts"):
        out["cuts"] = tree["cuts"]
        out["contexts"] = max(c["contexts"] for c in tree["cuts"])
    return out


def dcop_run(
    file: Path,
    algo: str,
    mib: float,
    timeout: float,
    gpu: str | None,
    width: int | None = None,
    trees: int = 1,
) -> dict[str, Any]:
    out = file.with_suffix(".json")
    argv = [
        *DCOP,
        "run",
        str(file),
        "--algo",
        algo,
        "--trees",
        str(trees),
        "-q",
        "--json",
        str(out),
    ]
    argv += ["--max-message-mib", f"{mib:g}", "--timeout", str(timeout)]
    if width is not None:
        argv += ["--width", str(width)]
    if gpu is not None:
        argv += ["--gpu", gpu]
    return timed_command(argv, timeout + 60) | _doc(out)


def max_dim(mib: float, d: int) -> int:
    """The variables a UTIL of ``mib`` MiB holds at domain size ``d`` (float64 entries, less the
    4 KiB dcop keeps for a message's header): FRODO's maxDim for the same limit."""
    entries = (mib * MIB - 4096) / 8
    return max(1, math.floor(math.log(entries) / math.log(d) + 1e-9))


def frodo_mbdpop(frodo: Path, xml: Path, dim: int, timeout: float, folder: Path) -> dict[str, Any]:
    """FRODO's stock MB-DPOP agent with ``maxDim`` = ``dim`` (graph display off)."""
    from compare.context import Context
    from compare.external import frodo_command, parse_frodo

    src = frodo / "agents" / "DPOP" / "MB-DPOP" / "MB-DPOPagent.xml"
    text = src.read_text().replace('displayGraph = "true"', 'displayGraph = "false"')
    if 'maxDim = "10"' not in text:
        return {"status": "error", "error": f"{src.name}: no maxDim to set"}
    agent = folder / f"MB-DPOPagent-{dim}.xml"
    agent.write_text(text.replace('maxDim = "10"', f'maxDim = "{dim}"'))
    ctx = Context(out_dir=folder, frodo=frodo, time_limit=timeout, work_dir=folder)
    outcome = ctx.run_command(
        frodo_command(frodo, xml, agent, timeout, ctx.mem_gb),
        timeout=timeout + 30,
        address_space_limit=False,
    )
    res: dict[str, Any] = {"status": outcome.status, "wall_s": outcome.wall_s, "max_dim": dim}
    res["max_rss_mb"] = outcome.max_rss_mb
    text = outcome.stdout + "\n" + outcome.stderr
    parsed = parse_frodo(text)
    if "Out of Memory" in text or "OutOfMemoryError" in text:
        res["status"] = "oom"
    elif parsed.get("timed_out"):
        res["status"] = "oot"
    res.update({k: parsed.get(k) for k in ("cost", "simulated_s")})
    return res


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return False
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)


def one_instance(
    family: str, n: int, d: int, width: int | None, args: argparse.Namespace, folder: Path
) -> list[dict[str, Any]]:
    problem = FAMILIES[family](n, d, args.seed)
    file = folder / f"{family}_n{n}_d{d}.wcsp"
    write_problem(problem, file)
    solved = file.with_suffix(".json")
    # the optimum: BE's, or where BE cannot hold its tables the search's proof (auto picks)
    reference = [*DCOP, "solve", str(file), "--algo", "auto", "--timeout", str(args.timeout)]
    be = timed_command([*reference, "-q", "--json", str(solved)], args.timeout + 60)
    be |= _doc(solved)
    xml = None
    if args.frodo is not None:
        xml = folder / f"{family}_n{n}_d{d}.xml"
        write_problem(problem, xml)
    rows = []
    for mib in args.limits:
        row: dict[str, Any] = {"family": family, "n": n, "d": d, "limit_mib": mib, "be": be}
        dpop = dcop_run(file, "dpop", mib, args.timeout, None, trees=args.trees)
        row["dpop_refused"] = dpop.get("status") == "too_large"
        row["dpop"] = {k: dpop.get(k) for k in ("status", "wall_s", "simulated_s", "cost")}
        row["width"] = width
        row["mbdpop"] = dcop_run(file, "mbdpop", mib, args.timeout, None, width, args.trees)
        if args.gpu is not None:
            row["mbdpop_gpu"] = dcop_run(
                file, "mbdpop", mib, args.timeout, args.gpu, width, args.trees
            )
        if xml is not None:
            dim = width if width is not None else max_dim(mib, d)
            row["frodo"] = frodo_mbdpop(args.frodo, xml, dim, args.timeout, folder)
        check_row(row)
        rows.append(row)
        mb = row["mbdpop"]
        print(
            f"{family} n={n} d={d} {mib:g} MiB: dpop {dpop.get('status')}, mbdpop "
            f"{mb.get('status')} {mb.get('wall_s', 0):.1f} s (simulated "
            f"{mb.get('simulated_s') or 0:.2f} s), contexts {mb.get('contexts', 0)}, "
            f"= BE: {row['equal_be']}",
            file=sys.stderr,
        )
    return rows


def _f(x: Any, fmt: str = ".2f") -> str:
    return "-" if x is None else format(x, fmt)


def summary(report: dict[str, Any]) -> list[str]:
    """The targets' lines: rows DPOP refuses and MB-DPOP solves, and beside FRODO where both
    finish (wall and simulated time ratios)."""
    refused = [r for r in report["rows"] if r["dpop_refused"]]
    solved = [r for r in refused if r["mbdpop"].get("status") == "ok" and r["equal_be"]]
    lines = [
        f"DPOP refuses {len(refused)} rows; MB-DPOP solves {len(solved)} of them, every cost "
        "equal to the optimum, no message over the limit"
        + ("" if all(r["within_limit"] for r in report["rows"]) else " (**a message over**)")
        + (
            "; the rest it refuses in one line (the cut's contexts) or fails (see the row)."
            if len(solved) < len(refused)
            else "."
        ),
    ]
    both = [
        r
        for r in report["rows"]
        if (r.get("frodo") or {}).get("status") == "ok" and r["mbdpop"].get("status") == "ok"
    ]
    if both:
        wall = [r["mbdpop"]["wall_s"] / r["frodo"]["wall_s"] for r in both]
        sim = [
            r["mbdpop"]["simulated_s"] / r["frodo"]["simulated_s"]
            for r in both
            if r["frodo"].get("simulated_s")
        ]
        lines.append(
            f"Beside FRODO's MB-DPOP, on the {len(both)} rows both finish: dcop's wall "
            f"{min(wall):.3f}-{max(wall):.3f}x FRODO's, its simulated time "
            f"{min(sim):.4f}-{max(sim):.4f}x."
        )
    gpu_only = [
        r
        for r in refused
        if r["mbdpop"].get("status") != "ok"
        and (r.get("mbdpop_gpu") or {}).get("status") == "ok"
        and r["equal_be"]
    ]
    if gpu_only:
        lines.append(
            f"GPU agents solve {len(gpu_only)} row(s) that CPU agents do not finish in time, "
            "every cost equal to the optimum: "
            + ", ".join(
                f"{r['family']} n={r['n']} d={r['d']} at {r['limit_mib']:g} MiB "
                f"({r['mbdpop_gpu']['wall_s']:.1f} s wall, "
                f"{r['mbdpop_gpu']['simulated_s']:.3f} s simulated)"
                for r in gpu_only
            )
            + "."
        )
    big = [
        r
        for r in report["rows"]
        if (r["mbdpop"].get("contexts") or 0) >= 100
        and r["mbdpop"].get("simulated_s")
        and (r.get("mbdpop_gpu") or {}).get("simulated_s")
    ]
    if big:
        ratios = ", ".join(
            f"{r['mbdpop']['simulated_s'] / r['mbdpop_gpu']['simulated_s']:.1f}x" for r in big
        )
        lines.append(
            f"GPU agents against CPU agents in simulated time, on the {len(big)} rows whose cut "
            f"has 100 or more contexts: {ratios}."
        )
    return lines


def markdown(report: dict[str, Any]) -> str:
    gpu = report["gpu"] is not None
    lines = [
        "# MB-DPOP at message limits",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {report['machine']}; {report['date']}; load at the start {report['load']}.  ",
        f"Each run a fresh process, `--trees {report.get('trees', 1)}` (1: one DFS tree, as "
        "FRODO; 0: the product's default, up to 8 candidates). `= optimum`: the cost equals BE's, "
        "or where BE cannot hold its tables the search's proof (`dcop solve --algo auto`). "
        "`DPOP`: refused (`too_large`) at "
        "the limit or not. dcop's MB-DPOP: wall (the whole command) and simulated time (the "
        "critical path of compute and messages), messages (chunks, `more`, `replay` included), "
        "the largest message sent, the largest cut's contexts (a UTIL over the message limit "
        "goes up in parts; `-`: no cut). `width`: the row's `--width` (cuts every separator of "
        "more variables; `-`: cuts only where an agent cannot hold a UTIL). FRODO: its MB-DPOP "
        "agent with `maxDim` = the width, or else the variables a message of the limit holds.",
        "",
    ]
    head = "| instance | limit MiB | width | DPOP | MB-DPOP | wall s | simulated s | messages | largest msg KiB | contexts | = optimum |"
    sep = "|---|---|---|---|---|---|---|---|---|---|---|"
    if gpu:
        head += " GPU agents wall s | GPU simulated s | CPU/GPU simulated |"
        sep += "---|---|---|"
    if report["frodo"]:
        head += " FRODO maxDim | FRODO wall s | FRODO simulated s | FRODO = optimum |"
        sep += "---|---|---|---|"
    for line in summary(report):
        lines += [line, ""]
    lines += [head, sep]
    for r in report["rows"]:
        mb = r["mbdpop"]
        cells = [
            f"{r['family']} n={r['n']} d={r['d']}",
            f"{r['limit_mib']:g}",
            str(r.get("width") or "-"),
            "refused" if r["dpop_refused"] else str(r["dpop"].get("status")),
            str(mb.get("status")),
            _f(mb.get("wall_s"), ".1f"),
            _f(mb.get("simulated_s"), ".3f"),
            str(mb.get("messages", "-")),
            _f((mb.get("largest_message_bytes") or 0) / 1024, ".0f"),
            str(mb.get("contexts", "-")),
            _checked(r),
        ]
        if gpu:
            g = r.get("mbdpop_gpu") or {}
            ratio = (
                mb["simulated_s"] / g["simulated_s"]
                if mb.get("simulated_s") and g.get("simulated_s")
                else None
            )
            cells += [_f(g.get("wall_s"), ".1f"), _f(g.get("simulated_s"), ".3f"), _f(ratio, ".1f")]
        if report["frodo"]:
            fr = r.get("frodo") or {}
            cells += [
                str(fr.get("max_dim", "-")),
                _f(fr.get("wall_s"), ".1f")
                + ("" if fr.get("status") == "ok" else f" ({fr.get('status')})"),
                _f(fr.get("simulated_s"), ".3f"),
                "-"
                if fr.get("status") != "ok"
                else "yes"
                if _same(fr.get("cost"), r["be"].get("cost"))
                else "**no**",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _public(arg: str) -> str:
    """An argument as the report shows it: a folder of this machine becomes ``PATH``."""
    from keep import _public as public

    return str(public(arg))


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def parse_only(text: str, width: int | None) -> list[tuple[str, int, int, int | None]]:
    """Rows as FAMILY:N:D[:WIDTH] (a row's own --width, else the run's)."""
    rows = []
    for item in text.split(","):
        family, n, d, *w = item.split(":")
        if family not in FAMILIES:
            raise SystemExit(f"unknown family {family!r}; use one of {', '.join(FAMILIES)}")
        rows.append((family, int(n), int(d), int(w[0]) if w else width))
    return rows


def check_row(row: dict[str, Any]) -> None:
    """A row's checks: every run that answered equals the optimum (a run that timed out says so
    in its own cell, not as a wrong answer), and no message passed the limit."""
    runs = [row["mbdpop"], *([row["mbdpop_gpu"]] if "mbdpop_gpu" in row else [])]
    done = [r for r in runs if r.get("status") == "ok"]
    row["equal_be"] = bool(done) and all(_same(r.get("cost"), row["be"].get("cost")) for r in done)
    limit = row["limit_mib"] * MIB
    row["within_limit"] = all((r.get("largest_message_bytes") or 0) <= limit for r in runs)


def _checked(row: dict[str, Any]) -> str:
    """A row's ``= optimum`` cell: refused, yes, ``-`` (no run answered), or a wrong answer."""
    runs = [row["mbdpop"], *([row["mbdpop_gpu"]] if "mbdpop_gpu" in row else [])]
    if row["mbdpop"].get("status") == "too_large":
        return "refused"
    if row["equal_be"]:
        return "yes"
    return "-" if all(r.get("status") != "ok" for r in runs) else "**no**"


def rescore(path: Path) -> dict[str, Any]:
    """Check a kept document's rows again (:func:`check_row`) and write it and its Markdown."""
    from keep import write_results

    report = json.loads(path.read_text())
    report.pop("kept", None)
    for row in report["rows"]:
        check_row(row)
    text = markdown(report)
    write_results(path.parent, path.stem, report, text)
    print(text)
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--only", help="rows as FAMILY:N:D[:WIDTH],... instead of the series (WIDTH: --width)"
    )
    ap.add_argument("--limits", default="1,8,64", help="message limits in MiB (1,8,64)")
    ap.add_argument(
        "--width",
        type=int,
        help="MB-DPOP's --width (and FRODO's maxDim): cut every separator of more variables",
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--trees", type=int, default=1, help="dcop run's --trees (1: one DFS tree, as FRODO)"
    )
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--gpu", help="also run GPU agents on these devices (e.g. 0)")
    ap.add_argument("--frodo", type=Path, help="FRODO's folder: its MB-DPOP beside each row")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--name", help="the results' file name (default: mbdpop, or mbdpop_gpu with --gpu)"
    )
    ap.add_argument(
        "--rescore",
        type=Path,
        help="a kept mbdpop JSON: check its rows against the optimum again and write it back",
    )
    args = ap.parse_args(argv)
    if args.rescore is not None:
        return rescore(args.rescore)
    args.limits = [float(x) for x in args.limits.split(",")]
    rows_asked = (
        parse_only(args.only, args.width)
        if args.only
        else [(f, n, d, args.width) for f, n, d in SERIES]
    )
    info = machine_info()
    report: dict[str, Any] = {
        "command": "benchmarks/mbdpop.py "
        + " ".join(map(_public, argv if argv is not None else sys.argv[1:])),
        "machine": f"{info['cpu']}, {info['cores']} cores, {info['ram_gib']} GiB",
        "machine_info": info,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load": _load(),
        "seed": args.seed,
        "trees": args.trees,
        "width": args.width,
        "gpu": args.gpu,
        "frodo": args.frodo is not None,
        "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="dcop-mbdpop-") as tmp:
        for family, n, d, width in rows_asked:
            report["rows"] += one_instance(family, n, d, width, args, Path(tmp))
    report["load_end"] = _load()
    from keep import write_results

    name = args.name or ("mbdpop_gpu" if args.gpu is not None else "mbdpop")
    text = markdown(report)
    write_results(args.out, name, report, text)
    print(text)
    return report


if __name__ == "__main__":
    main()
