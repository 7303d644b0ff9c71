"""Pseudo-tree quality: the distributed DFS (each heuristic, and the best of K candidate trees)
against min-fill, min-degree and the centralized DFS, by width and largest UTIL message.

    .venv/bin/python benchmarks/pseudotree.py                  # 45 instances, K = 1..32
    .venv/bin/python benchmarks/pseudotree.py --seeds 2 --k 1,4,16
    .venv/bin/python benchmarks/pseudotree.py --from-json benchmarks/results/pseudotree.json

Every distributed tree is built by :func:`dcop.trees.dfs.simulate`, which runs the agents' own
DFS state machines (:class:`dcop.trees.dfs.DfsState`) and delivers their tokens in process; the
best of K candidates is the one :func:`dcop.trees.dfs.choose_candidate` picks from what the roots
report. Min-fill and min-degree trees come from :func:`dcop.trees.induced.order_pseudo_tree` (their
width is the order's induced width; they are not DFS trees and agents cannot build them).

Instances: ``dcop.generators`` random (n = 30, p1 = 4/(n-1), about 2n edges; and n = 40,
p1 = 0.12), scale-free (n = 30, m = 2 and m = 5) and grids (16 to 64 variables: a grid's graph does
not depend on the seed, so the five grids are five sizes), d = 6; and the FRODO-generated
Max-DisCSP and graph-colouring instances of ``benchmarks/instances/frodo/``.

Writes benchmarks/results/pseudotree.json and pseudotree.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dcop.generators import grid_network, random_network, scale_free_network
from dcop.io import read_problem
from dcop.model import Problem
from dcop.orders.greedy import min_degree_order, min_fill_order
from dcop.trees.candidates import HEURISTICS, Candidate, default_candidates
from dcop.trees.dfs import DfsRun, choose_candidate, simulate
from dcop.trees.induced import order_pseudo_tree
from dcop.trees.pseudotree import PseudoTree, dfs_pseudo_tree

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from compare.machine import describe, machine_info  # noqa: E402  (benchmarks/compare)

RESULTS = HERE / "results"
FRODO = HERE / "instances" / "frodo"
GRID_SIZES = (16, 25, 36, 49, 64)
TARGET = 0.8  # share of instances whose width should be within +1 of min-fill's
FAMILIES = {
    "random n30": "random, n = 30, p1 = 4/29",
    "random n40": "random, n = 40, p1 = 0.12",
    "scalefree m2": "scale-free, n = 30, m = 2",
    "scalefree m5": "scale-free, n = 30, m = 5",
    "grid": "grid, n = 16 .. 64",
    "frodo maxdiscsp p0.15": "FRODO Max-DisCSP, n = 30, d = 6, p1 = 0.15",
    "frodo maxdiscsp p0.2": "FRODO Max-DisCSP, n = 30, d = 6, p1 = 0.2",
    "frodo coloring n30": "FRODO graph colouring, n = 30, p = 0.2, 3 colours",
    "frodo coloring n50": "FRODO graph colouring, n = 50, p = 0.1, 3 colours",
}


def instances(seeds: int) -> Iterator[tuple[str, str, Problem]]:
    """(family, name, problem) for every instance of the benchmark."""
    for s in range(seeds):
        yield "random n30", f"random_n30_s{s}", random_network(30, 6, 4 / 29, 0.3, s)
    for s in range(seeds):
        yield "random n40", f"random_n40_s{s}", random_network(40, 6, 0.12, 0.3, s)
    for s in range(seeds):
        yield "scalefree m2", f"scalefree_n30_m2_s{s}", scale_free_network(30, 6, 0.3, s)
    for s in range(seeds):
        yield "scalefree m5", f"scalefree_n30_m5_s{s}", scale_free_network(30, 6, 0.3, s, m=5)
    for n in GRID_SIZES[:seeds]:
        yield "grid", f"grid_n{n}", grid_network(n, 6, 0.3, 0)
    frodo = [
        ("frodo maxdiscsp p0.15", "max_discsp_n30_d6_p0.15_t0.5_{}.xml"),
        ("frodo maxdiscsp p0.2", "max_discsp_n30_d6_p0.2_t0.5_{}.xml"),
        ("frodo coloring n30", "graph_coloring_soft_n30_p0.2_c3_{}.xml"),
        ("frodo coloring n50", "graph_coloring_soft_n50_p0.1_c3_{}.xml"),
    ]
    for family, pattern in frodo:
        for s in range(1, seeds + 1):
            path = FRODO / pattern.format(s)
            yield family, path.stem, read_problem(path)


NOTES = """\
* Why DFS trees lose to min-fill: in a DFS the subtree of an agent is the connected component of
  unvisited agents it enters, and its separator is that component's boundary (the ancestors with
  unvisited neighbours in it), so the width is decided by which neighbour each agent enters next.
  `most-connected` (the paper's and FRODO's
  default) goes for hubs and leaves many ancestors open; `close-ancestors` (the token carries each
  ancestor's count of unvisited neighbours) first takes the neighbour that finishes the ancestors
  closest to done, otherwise the least connected, from the least connected agent: the ideas of
  Sloan's and Cuthill-McKee's profile orders, whose front is the DFS separator.
* `max-cardinality` (most links to ancestors) and `random` are measured for comparison; neither
  is worth running. Tie-breaks with a seed rarely matter for `close-ancestors`: its candidates
  differ by their roots.
* Min-fill and min-degree trees (`dcop.trees.induced.order_pseudo_tree`) are not DFS trees: a parent may
  not be a neighbour, so agents cannot build them by token passing (the centralized option).
* Tokens: each candidate is one sequential walk, 2 (n - roots) tokens; K candidates are
  independent walks that agents can run at the same time, so K adds messages, not rounds. A token
  carries the path (ids, domain sizes, open counts: O(depth)) and the visited set (O(n)).
* A grid's graph does not depend on the seed: its five instances are five sizes.
"""


def tree_cost(tree: PseudoTree, sizes: Mapping[str, int]) -> dict[str, int]:
    """Width, largest and total UTIL entries of a pseudo-tree (the roots send no UTIL)."""
    seps = tree.separators()
    util = [math.prod(sizes[u] for u in s) for v, s in seps.items() if tree.parent[v] is not None]
    return {
        "width": max((len(s) for s in seps.values()), default=0),
        "largest": max(util, default=0),
        "total": sum(util),
    }


def run_cost(run: DfsRun) -> dict[str, int]:
    s = run.summary
    return {"width": s.width, "largest": s.largest, "total": s.total, "messages": run.messages}


def best_of(runs: list[DfsRun]) -> dict[str, int]:
    """The candidate choose_candidate picks, with the tokens of all K walks."""
    chosen = run_cost(runs[choose_candidate([r.summary for r in runs])])
    chosen["messages"] = sum(r.messages for r in runs)
    return chosen


def series(name: str, k: int) -> list[Candidate]:
    """The first ``k`` candidates of a series: ``default`` (:func:`default_candidates`),
    ``H restarts`` (H unseeded from the most connected root, then seeded ties and seeded random
    roots) or ``H least`` (H from the 1st, 2nd, ... least connected agent)."""
    if name == "default":
        return default_candidates(k)
    h, kind = name.rsplit(" ", 1)
    if kind == "restarts":
        return [Candidate(h), *(Candidate(h, "random", 0, seed) for seed in range(1, k))]
    return [Candidate(h, "least-connected", rank) for rank in range(k)]


SERIES = (
    *(f"{h} restarts" for h in HEURISTICS),
    "close-ancestors least",
    "max-cardinality least",
    "most-connected least",
    "default",
)


def measure(problem: Problem, ks: list[int]) -> dict[str, Any]:
    adjacency = problem.neighbours()
    sizes = problem.domain_sizes()
    names = dict(enumerate(sorted(adjacency)))
    ids = {v: i for i, v in names.items()}
    adj = {ids[v]: {ids[u] for u in ns} for v, ns in adjacency.items()}
    domains = {ids[v]: sizes[v] for v in adjacency}
    central = dfs_pseudo_tree(adjacency)
    out: dict[str, Any] = {
        "n": problem.n,
        "edges": sum(len(ns) for ns in adjacency.values()) // 2,
        "d": max(sizes.values()),
        "components": len(central.roots),
        "minfill": tree_cost(order_pseudo_tree(adjacency, min_fill_order(adjacency)), sizes),
        "mindegree": tree_cost(order_pseudo_tree(adjacency, min_degree_order(adjacency)), sizes),
        "central_dfs": tree_cost(central, sizes),
    }
    cache: dict[Candidate, DfsRun] = {}

    def run(c: Candidate) -> DfsRun:
        if c not in cache:
            cache[c] = simulate(adj, names, domains, c)
        return cache[c]

    for name in SERIES:
        runs = [run(c) for c in series(name, max(ks))]
        out[name] = {str(k): best_of(runs[:k]) for k in ks}
    # the distributed most-connected tree is today's centralized one
    today = run(Candidate()).pseudo_tree(names)
    out["most_connected_is_central"] = (today.parent, today.order) == (
        central.parent,
        central.order,
    )
    return out


# ---- report -------------------------------------------------------------------------------------
BASELINES = (
    ("min-degree (central order, not a DFS tree)", "mindegree"),
    ("DFS, centralized (`dfs_pseudo_tree`, = most-connected K = 1)", "central_dfs"),
)


def cost_of(row: dict[str, Any], key: str, k: str | None) -> dict[str, int]:
    return row[key] if k is None else row[key][k]  # type: ignore[no-any-return]


def stats(rows: list[dict[str, Any]], key: str, k: str | None) -> dict[str, Any]:
    """How close a method comes to min-fill over ``rows``."""
    excess = [cost_of(r, key, k)["width"] - r["minfill"]["width"] for r in rows]
    ratio = [cost_of(r, key, k)["largest"] / max(r["minfill"]["largest"], 1) for r in rows]
    return {
        "key": key,
        "k": k,
        "n": len(rows),
        "within0": sum(e <= 0 for e in excess),
        "within1": sum(e <= 1 for e in excess),
        "mean_excess": statistics.mean(excess),
        "max_excess": max(excess),
        "geomean_util_ratio": math.exp(statistics.mean(math.log(x) for x in ratio)),
        "tokens_per_agent": statistics.mean(
            cost_of(r, key, k).get("messages", 0) / max(r["n"], 1) for r in rows
        ),
    }


def summary(report: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = [stats(rows, key, None) for _, key in BASELINES]
    out += [stats(rows, name, k) for name in SERIES for k in report["ks"]]
    return out


def markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    ks = report["ks"]
    by = {(s["key"], s["k"]): s for s in report["summary"]}
    n = len(rows)
    lines = [
        "# Pseudo-trees: the distributed DFS against min-fill",
        "",
        f"Command: `{report['command']}`  ",
        f"Machine: {describe(report['machine'])}; {report['date']}.  ",
        f"{n} instances: {len(FAMILIES)} families, {report['seeds']} each (below). Width = largest "
        "separator. UTIL = predicted entries of the largest UTIL message (the product of the "
        "separator's domain sizes). Every distributed tree is built by the agents' own DFS state "
        "machines (`dcop.trees.dfs.DfsState`, run in process by `simulate`); of K candidates "
        "the one `choose_candidate` picks from the roots' reports (smallest largest UTIL, then "
        "smallest total) is counted.",
        "",
        "Candidate series: **H restarts** = heuristic H from the most connected root, then K-1 "
        "runs with seeded tie-breaks and seeded random roots; **H least** = H from the 1st, 2nd, "
        "... least connected agent of each component; **default** = `default_candidates(K)`: "
        "close-ancestors from the least connected agent, today's tree (most-connected), then "
        "close-ancestors from the 2nd, 3rd, ... least connected agents.",
        "",
        "## Instances within +1 of min-fill's width",
        "",
        "Each cell: instances whose width is at most min-fill's + 1 (mean width excess over "
        "min-fill).",
        "",
        "| method | " + " | ".join(f"K = {k}" for k in ks) + " |",
        "|---|" + "---|" * len(ks),
    ]

    def cell(s: dict[str, Any]) -> str:
        return f"{s['within1']}/{s['n']} ({s['mean_excess']:+.2f})"

    for label, key in BASELINES:
        lines.append(f"| {label} | {cell(by[(key, None)])} |" + " |" * (len(ks) - 1))
    for name in SERIES:
        lines.append(f"| {name} | " + " | ".join(cell(by[(name, k)]) for k in ks) + " |")
    lines += ["", f"## Target: within +1 of min-fill on at least {TARGET:.0%} of the instances", ""]
    for name in SERIES:
        hit = [k for k in ks if by[(name, k)]["within1"] >= TARGET * n]
        lines.append(
            f"* {name}: "
            + (f"reached at K = {hit[0]}" if hit else f"not reached at K <= {ks[-1]}")
            + f" (K = {ks[-1]}: {by[(name, ks[-1])]['within1']}/{n})"
        )
    lines += [
        "",
        "## Largest UTIL message against min-fill's",
        "",
        "Geometric mean over the instances of largest UTIL entries / min-fill's; instances with "
        "the same width as min-fill (≤ +0); DFS token messages per agent for all K walks (2 per "
        "tree edge and candidate).",
        "",
        "| method | K | UTIL ratio | ≤ +0 | ≤ +1 | max excess | tokens / agent |",
        "|---|---|---|---|---|---|---|",
    ]
    shown = [k for k in (ks[0], "4", "8", "16", ks[-1]) if k in ks]
    for label, key in BASELINES:
        s = by[(key, None)]
        lines.append(
            f"| {label} | - | {s['geomean_util_ratio']:.3g} | {s['within0']}/{n} | "
            f"{s['within1']}/{n} | {s['max_excess']:+d} | - |"
        )
    for name in SERIES:
        for k in dict.fromkeys(shown):
            s = by[(name, k)]
            lines.append(
                f"| {name} | {k} | {s['geomean_util_ratio']:.3g} | {s['within0']}/{n} | "
                f"{s['within1']}/{n} | {s['max_excess']:+d} | {s['tokens_per_agent']:.1f} |"
            )
    kmax = ks[-1]
    fam_cols = [("close-ancestors least", "1"), ("default", "8"), ("default", kmax)]
    fam_cols = [(a, k) for a, k in dict.fromkeys(fam_cols) if k in ks]
    lines += [
        "",
        "## Per family: mean width",
        "",
        "| family | min-fill | min-degree | central DFS | "
        + " | ".join(f"{a} K={k}" for a, k in fam_cols)
        + " |",
        "|---|---|---|---|" + "---|" * len(fam_cols),
    ]
    for family, title in FAMILIES.items():
        fr = [r for r in rows if r["family"] == family]
        if not fr:
            continue

        def mean(key: str, k: str | None = None, fr: list[dict[str, Any]] = fr) -> str:
            return f"{statistics.mean(cost_of(r, key, k)['width'] for r in fr):.1f}"

        lines.append(
            f"| {title} ({len(fr)}) | {mean('minfill')} | {mean('mindegree')} | "
            f"{mean('central_dfs')} | " + " | ".join(mean(a, k) for a, k in fam_cols) + " |"
        )
    lines += [
        "",
        "## Per instance",
        "",
        f"Width (largest UTIL entries). K = 1 unless said; default K = {kmax} is the best of "
        f"{kmax} candidates.",
        "",
        "| instance | n | edges | comp. | min-fill | min-degree | central DFS "
        "| close-anc. (least root) | max-card. | random | default K = 8 "
        f"| default K = {kmax} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def size(c: dict[str, int]) -> str:
        return f"{c['width']} ({c['largest']:.3g})"

    k8 = "8" if "8" in ks else kmax
    for r in rows:
        same = "" if r["most_connected_is_central"] else " (≠ distributed)"
        lines.append(
            f"| {r['instance']} | {r['n']} | {r['edges']} | {r['components']} | "
            f"{size(r['minfill'])} | {size(r['mindegree'])} | {size(r['central_dfs'])}{same} | "
            f"{size(r['close-ancestors least']['1'])} | "
            f"{size(r['max-cardinality restarts']['1'])} | {size(r['random restarts']['1'])} | "
            f"{size(r['default'][k8])} | {size(r['default'][kmax])} |"
        )
    lines += ["", "## Notes", "", NOTES, ""]
    return "\n".join(lines)


def write_outputs(report: dict[str, Any], out: Path) -> None:
    from keep import write_results

    write_results(out, "pseudotree", report, markdown(report))
    print(f"wrote {out / 'pseudotree.md'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="instances per family (at most 5)")
    ap.add_argument("--k", default="1,2,4,8,16,32", help="candidate counts, comma-separated")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument(
        "--from-json", type=Path, help="only re-render the Markdown from a results JSON"
    )
    args = ap.parse_args()
    if args.from_json is not None:
        report = json.loads(args.from_json.read_text())
        write_outputs(report, args.out)
        return
    if not 1 <= args.seeds <= 5:
        ap.error("--seeds must be between 1 and 5 (five FRODO instances per family)")
    ks = sorted({int(k) for k in args.k.split(",")})
    if ks[0] < 1:
        ap.error("--k values must be >= 1")
    rows = []
    for family, name, problem in instances(args.seeds):
        t0 = time.perf_counter()
        row = {"family": family, "instance": name, **measure(problem, ks)}
        rows.append(row)
        print(
            f"{name}: min-fill {row['minfill']['width']}, most-connected "
            f"{row['central_dfs']['width']}, close-ancestors "
            f"{row['close-ancestors least']['1']['width']}, default K={ks[-1]} "
            f"{row['default'][str(ks[-1])]['width']} "
            f"({time.perf_counter() - t0:.1f} s)",
            file=sys.stderr,
        )
    report: dict[str, Any] = {
        "command": " ".join(["benchmarks/pseudotree.py", *sys.argv[1:]]),
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "seeds": args.seeds,
        "ks": [str(k) for k in ks],
        "rows": rows,
    }
    report["summary"] = summary(report, rows)
    write_outputs(report, args.out)


if __name__ == "__main__":
    main()
