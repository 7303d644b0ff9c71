"""Width benchmark: the centralized orders (min-fill, min-degree, the ordering engine's default,
goatd's best at a long budget) and the pseudo-tree ``dcop run`` would run (the best of its DFS
candidates, the coordinator's elimination tree, and the run's choice), per instance.

    .venv/bin/python benchmarks/orders.py                     # every instance, best at 30 s
    .venv/bin/python benchmarks/orders.py --quick             # a tiny set (tests)
    .venv/bin/python benchmarks/orders.py --only grid --best-time 5

For each instance and method: the width, the largest table (BE: joined entries with the
eliminated variable; trees: the largest UTIL) and the seconds. ``dcop run``'s tree is built the
way the coordinator builds it, in process: the K = 8 DFS candidates by the agents' own DFS code
(:func:`dcop.trees.dfs.build_candidates`), the elimination tree and whether it is offered by
:func:`dcop.coordinator.elimination.offer`, and the run keeps the smallest largest UTIL.

Instances: the shared files with known optima (``../shared/instances``), grids of side 10 to 30
(d = 3), scale-free networks (n = 100 and 200) and random Bayesian networks (pedigree-like: few
parents per variable, drawn from a window). Writes ``benchmarks/results/orders.json``,
``orders.md`` and ``orders_width_vs_n.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dcop.coordinator import peers_for, round_robin
from dcop.coordinator.elimination import offer
from dcop.coordinator.topology import layout_for
from dcop.generators import grid_network, random_bayes, scale_free_network
from dcop.io import read_problem
from dcop.model import Problem
from dcop.orders import OrderCost, best_order, order_cost, treedec
from dcop.orders.greedy import min_degree_order, min_fill_order
from dcop.trees.candidates import default_candidates
from dcop.trees.dfs import build_candidates

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SHARED = HERE.parent.parent / "shared" / "instances"
GRID_SIDES = (10, 14, 20, 30)
DFS_CANDIDATES = 8


def instances(quick: bool, shared: Path = SHARED) -> Iterator[tuple[str, str, Problem]]:
    """(family, name, problem) for every instance (``shared``: the folder of shared files)."""
    if quick:
        yield "grid", "grid5", grid_network(25, 3, 0.3, 1)
        yield "scale-free", "scalefree_n40", scale_free_network(40, 2, 0.3, 1, m=2)
        yield "bayes", "bayes_n40", random_bayes(40, 2, 2, 10, 1)
        return
    if shared.exists():
        for path in sorted(shared.glob("*.wcsp")) + sorted(shared.glob("*.uai")):
            yield "shared", path.name, read_problem(path)
    for side in GRID_SIDES:
        yield "grid", f"grid{side}x{side}", grid_network(side * side, 3, 0.3, 1)
    for n in (100, 200):
        yield "scale-free", f"scalefree_n{n}", scale_free_network(n, 2, 0.3, 1, m=2)
    for n in (100, 200, 400):
        yield "bayes", f"bayes_n{n}", random_bayes(n, 2, 3, 20, 1)


def central(
    problem: Problem, best_time: float, known_best: dict[str, float] | None = None
) -> dict[str, dict[str, float]]:
    """Width, largest table, total entries and seconds of each centralized order
    (``known_best``: goatd's best measured by an earlier run, kept instead of searching again)."""
    adjacency, sizes = problem.neighbours(), problem.domain_sizes()
    out: dict[str, dict[str, float]] = {}
    for name, make in (("minfill", min_fill_order), ("mindegree", min_degree_order)):
        t0 = time.perf_counter()
        order = make(adjacency)
        seconds = time.perf_counter() - t0
        cost = order_cost(adjacency, order, sizes)
        out[name] = {
            "width": cost.width,
            "largest": cost.largest,
            "total": cost.total,
            "seconds": seconds,
        }
    default = best_order(problem)
    predicted = OrderCost(default.width, default.largest_table_entries, default.total_entries)
    out["default"] = {
        "width": default.width,
        "largest": default.largest_table_entries,
        "total": default.total_entries,
        "seconds": default.seconds,
        "method": default.method,  # type: ignore[dict-item]
        "budget_s": default.budget_s,
        "predicted_solve_s": predicted.predicted_seconds(problem.n),
        # each candidate's seconds (the order and its cost), where the time goes
        "tried": {r.method: r.seconds for r in default.tried},  # type: ignore[dict-item]
    }
    if known_best is not None:
        out["goatd_best"] = known_best
    elif treedec.available() and best_time > 0:
        t0 = time.perf_counter()
        order = treedec.decompose_order(adjacency, best_time)
        seconds = time.perf_counter() - t0
        cost = order_cost(adjacency, order, sizes)
        out["goatd_best"] = {
            "width": cost.width,
            "largest": cost.largest,
            "total": cost.total,
            "seconds": seconds,
        }
    return out


def run_tree(problem: Problem) -> dict[str, dict[str, Any]]:
    """The trees ``dcop run`` would choose among, built as the coordinator and agents do."""
    peers = peers_for(
        problem, *round_robin(["127.0.0.1"], 0, list(range(20000, 20001 + problem.n)))
    )
    layout = layout_for(problem, peers)
    sizes = {a: problem.variables[v].size for a, v in layout.variable.items()}
    t0 = time.perf_counter()
    runs, k = build_candidates(
        layout.neighbours, layout.variable, sizes, default_candidates(DFS_CANDIDATES)
    )
    dfs_s = time.perf_counter() - t0
    dfs = runs[k].summary
    out: dict[str, dict[str, Any]] = {
        "dfs": {"width": dfs.width, "largest": dfs.largest, "seconds": dfs_s},
    }
    t0 = time.perf_counter()
    tree, why = offer(problem, layout, "auto", runs[0].summary.largest)
    offer_s = time.perf_counter() - t0
    out["elimination"] = (
        {"width": tree.width, "largest": tree.largest, "seconds": offer_s, "offered": True}
        if tree is not None
        else {"offered": False, "seconds": offer_s}
    )
    chosen = out["dfs"]
    if tree is not None and tree.largest < dfs.largest:
        chosen = out["elimination"]
    out["run"] = {
        "width": chosen["width"],
        "largest": chosen["largest"],
        "kind": "elimination" if chosen is out["elimination"] else "dfs",
        "why": why,
    }
    return out


def measure(
    family: str,
    name: str,
    problem: Problem,
    best_time: float,
    known_best: dict[str, float] | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "family": family,
        "instance": name,
        "n": problem.n,
        "d": problem.max_domain(),
    }
    row.update(central(problem, best_time, known_best))
    row.update(run_tree(problem))
    return row


def targets(row: dict[str, Any]) -> dict[str, Any]:
    """The issue's targets for one row (None where not measured)."""
    out: dict[str, Any] = {}
    best = row.get("goatd_best")
    if best is not None:
        ratio = row["default"]["largest"] / max(min(best["largest"], row["default"]["largest"]), 1)
        out["default_vs_best"] = ratio
        # 2x on grids and on solves over 10 s: predicted over 10 / 3.2 s, the most the
        # 1e-8 s per entry of the prediction was measured to underestimate by
        slow = row["default"]["predicted_solve_s"] * 3.2 > 10
        out["within"] = ratio <= (2 if row["family"] == "grid" or slow else 4)
    if row["family"] == "grid":
        side = math.isqrt(row["n"])
        out["grid_width_ok"] = row["default"]["width"] <= side + 1
    out["run_width_ok"] = row["run"]["width"] <= row["default"]["width"] + 1
    out["order_time_ok"] = row["default"]["seconds"] <= order_time_limit(
        row["default"]["predicted_solve_s"]
    )
    return out


def order_time_limit(solve_s: float) -> float:
    """The issue's ordering-time target for a solve of ``solve_s`` seconds: under 0.2 s if it
    solves in under 2 s, else under a tenth of it. The benchmark passes BE's predicted time
    (:meth:`OrderCost.predicted_seconds`, 1e-8 s per entry), which underestimates the measured
    1.3e-8 to 3.2e-8, so the limit it gets is never looser than the real solve's."""
    return 0.2 if solve_s < 2 else 0.1 * solve_s


def report_md(doc: dict[str, Any]) -> str:
    lines = [
        "# Orders and pseudo-trees: width, largest table, time",
        "",
        f"`{doc['command']}` on {doc['machine']}, {doc['date']} (times on a 2-core VM are "
        f"indicative; load average {doc['load'][0]:.1f} at the start, {doc['load'][1]:.1f} at "
        "the end"
        + (f"; {doc['note']}" if doc.get("note") else "")
        + "). goatd best: its portfolio at "
        f"{doc['best_time_s']} s. Largest: BE's largest joined table for orders, the largest "
        "UTIL for `dcop run`'s trees. Solve s: BE's predicted time along the default order "
        "(1e-8 s per joined entry, an underestimate). Targets: the default's largest table within "
        "4x of goatd's best (2x on grids and where the solve may pass 10 s: predicted over 3 s), "
        "a grid's width at most its side + 1, `dcop run`'s width at most the default's + 1, and "
        "ordering under 0.2 s below 2 s of solve, else under a tenth of it.",
        "",
        "| instance | n | min-fill w / largest | default w / largest (method, s) | solve s | "
        "goatd best w / largest | default / best | DFS best-of-8 w | elimination tree w | "
        "`dcop run` w (tree) | targets |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in doc["rows"]:
        mf, de = row["minfill"], row["default"]
        best = row.get("goatd_best")
        t = row["targets"]
        elim = row["elimination"]
        ok = [
            k
            for k in ("within", "grid_width_ok", "run_width_ok", "order_time_ok")
            if t.get(k) is False
        ]
        lines.append(
            f"| {row['instance']} | {row['n']} | {mf['width']} / {mf['largest']:.3g} | "
            f"{de['width']} / {de['largest']:.3g} ({de['method']}, {de['seconds']:.2f}) | "
            f"{de['predicted_solve_s']:.2g} | "
            + (
                f"{best['width']} / {best['largest']:.3g} | {t['default_vs_best']:.2g}x | "
                if best
                else "- | - | "
            )
            + f"{row['dfs']['width']} | {elim['width'] if elim.get('offered') else '-'} | "
            f"{row['run']['width']} ({row['run']['kind']}) | "
            f"{'ok' if not ok else 'MISSED: ' + ', '.join(ok)} |"
        )
    return "\n".join(lines) + "\n"


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    rows = sorted(doc["rows"], key=lambda r: r["n"])
    for key, label, marker in (
        ("minfill", "min-fill", "x"),
        ("default", "default (engine)", "o"),
        ("goatd_best", "goatd best", "."),
        ("dfs", "dcop run DFS best-of-8", "^"),
        ("run", "dcop run's tree", "s"),
    ):
        pts = [(r["n"], r[key]["width"]) for r in rows if key in r and "width" in r[key]]
        if pts:
            ax.scatter(*zip(*pts, strict=True), label=label, marker=marker, alpha=0.7)
    ax.set_xscale("log")
    ax.set_xlabel("variables n")
    ax.set_ylabel("width")
    ax.legend()
    ax.set_title("Width of orders and pseudo-trees")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny set of instances (tests)")
    parser.add_argument("--best-time", type=float, default=30.0, help="goatd's long budget (s)")
    parser.add_argument("--only", default="", help="instances whose name contains this")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for the results")
    parser.add_argument(
        "--instances", type=Path, default=SHARED, help="folder of the shared .wcsp/.uai files"
    )
    parser.add_argument(
        "--best-from",
        type=Path,
        default=None,
        help="reuse goatd's best of an earlier orders.json with the same --best-time",
    )
    parser.add_argument(
        "--note", default="", help="conditions of the run for the report (e.g. a shared machine)"
    )
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    known: dict[str, dict[str, float]] = {}
    if args.best_from is not None:
        earlier = json.loads(args.best_from.read_text())
        known = {r["instance"]: r["goatd_best"] for r in earlier["rows"] if "goatd_best" in r}
    best_time = min(args.best_time, 0.2) if args.quick else args.best_time
    rows = []
    if not args.quick and not args.instances.exists():
        print(
            f"no shared instances at {args.instances}: grids and generated ones only",
            file=sys.stderr,
        )
    for family, name, problem in instances(args.quick, args.instances):
        if args.only and args.only not in name:
            continue
        row = measure(family, name, problem, best_time, known.get(name))
        row["targets"] = targets(row)
        rows.append(row)
        print(
            f"{name}: n={row['n']} minfill w={row['minfill']['width']} default "
            f"w={row['default']['width']} ({row['default']['method']}) run "
            f"w={row['run']['width']} ({row['run']['kind']})",
            file=sys.stderr,
        )
    given = list(argv if argv is not None else sys.argv[1:])
    for flag in ("--note", "--out"):  # a field of its own; where the files went
        if flag in given:
            del given[given.index(flag) : given.index(flag) + 2]
        given = [a for a in given if not a.startswith(flag + "=")]
    doc = {
        # the command, without this machine's paths
        "command": " ".join(
            ["benchmarks/orders.py", *(a if not a.startswith("/") else Path(a).name for a in given)]
        ),
        "machine": f"{platform.machine()} {platform.system()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "best_time_s": best_time,
        "load": [load_start, os.getloadavg()[0]],
        "note": args.note,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "orders_quick" if args.quick else "orders"
    from keep import write_results

    write_results(args.out, stem, doc, report_md(doc))
    try:
        plot(doc, args.out / f"{stem}_width_vs_n.png")
    except ImportError:
        print("matplotlib is missing: no plot (pip install '.[bench]')", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
