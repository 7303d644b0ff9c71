"""How late a deadline is kept (issue 45: ``--timeout`` returns the best answer and both bounds):
inside one large bucket of a mini-bucket pass, and in the planar solver; and the planar solver's
steps with a grid's embedding against networkx's planarity test.

* **hub**: a variable of ``D`` values tied to six of 10 values, eliminated first: one bucket of
  ``D * 1e6 * 6`` joined entries. The search (``solve_aobb``, z = 7) with a deadline ``t`` s
  after its start: how long after the deadline it returns, and what with.
* **z = 8 pass**: the paper's random network n = 26 (seed 1) along min-fill at z = 8, with a
  progress hook that raises at a deadline placed 25/50/75 % into its largest bucket (measured
  in a first pass): how late the raise reaches the caller.
* **planar**: ±J spin glasses, the solver's steps (grid embedding, then networkx's test forced),
  and with a deadline inside the solve.

``--backend cupy`` (on a GPU machine; results ``deadline_cupy``): the hub with nine leaves, its
size ``D`` chosen so that its bucket takes about ``--bucket-seconds`` on this device (timed on a
smaller hub first, then scaled). A pass on the CuPy backend (its default kernels, as BE runs)
with a hook that raises 1, 2 and 3 s into the hub's bucket: how late the raise reaches the
caller, with the backend's pieces (:data:`dcop.gpu.plan.PIECE_S`) and without them (one piece:
the bucket as one launch, as before pieces); then the search (``solve_aobb`` on the CuPy
backend) with a deadline inside that bucket.

    python benchmarks/run.py deadline [--quick]
    python benchmarks/run.py deadline --backend cupy [--bucket-seconds 15] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcop.backends import resolve_backend
from dcop.bucketpass import bucket_pass
from dcop.generators import random_network, spin_glass
from dcop.model import CostTable, Problem, Variable
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.planar import embed, solve_planar
from dcop.search import solve_aobb

ROOT = Path(__file__).resolve().parents[1]


class Late(Exception):
    """The z = 8 pass's hook past its deadline."""


def hub(values: int, leaves: int = 6) -> tuple[Problem, ChosenOrder]:
    """The hub problem and its order, hub first."""
    rng = np.random.default_rng(0)
    variables = [Variable("h", tuple(range(values)))]
    variables += [Variable(f"y{i}", tuple(range(10))) for i in range(leaves)]
    tables = [
        CostTable(("h", f"y{i}"), rng.integers(0, 100, (values, 10)).astype(np.float64))
        for i in range(leaves)
    ]
    for i in range(leaves):
        for j in range(i + 1, leaves):
            costs = rng.integers(0, 100, (10, 10)).astype(np.float64)
            tables.append(CostTable((f"y{i}", f"y{j}"), costs))
    order = ChosenOrder("hub first", ["h", *(f"y{i}" for i in range(leaves))])
    return Problem.build(variables, tables, name=f"hub D={values}"), order


def hub_rows(values: int, after: list[float]) -> list[dict[str, Any]]:
    problem, order = hub(values)
    rows = []
    t0 = time.monotonic()
    whole = solve_aobb(problem, z=7, ordering=order)
    rows.append({"case": f"hub D={values}", "deadline_s": None,
                 "seconds": time.monotonic() - t0, "late_s": None, "status": whole.status,
                 "lower": whole.lower_bound, "upper": whole.upper_bound})  # fmt: skip
    for t in after:
        start = time.monotonic()
        deadline = start + t
        result = solve_aobb(problem, z=7, ordering=order, deadline=deadline)
        rows.append({"case": f"hub D={values}", "deadline_s": t,
                     "seconds": time.monotonic() - start, "late_s": time.monotonic() - deadline,
                     "status": result.status, "lower": result.lower_bound,
                     "upper": result.upper_bound})  # fmt: skip
    return rows


def _raising(big: str, after: float, at: dict[str, float]) -> Any:
    """A pass's hook that sets ``at["deadline"]`` ``after`` s past the start of bucket ``big``
    and raises :class:`Late` from then on."""

    def hook(done: int, total: int, var: str) -> None:
        if var == big and "deadline" not in at:
            at["deadline"] = time.monotonic() + after
        if "deadline" in at and time.monotonic() >= at["deadline"]:
            raise Late

    return hook


def pass_rows(n: int, z: int) -> list[dict[str, Any]]:
    problem = random_network(n, 10, 0.3, 0.0, 1)
    order = choose_order(problem, "minfill", None).order
    engine = resolve_backend("numpy")
    t0 = time.monotonic()
    seconds = bucket_pass(problem, order, engine, z).stats.bucket_seconds
    whole = time.monotonic() - t0
    big = max(seconds, key=seconds.__getitem__)
    rows = []
    for share in (0.25, 0.5, 0.75):
        at: dict[str, float] = {}
        with contextlib.suppress(Late):
            bucket_pass(problem, order, engine, z, progress=_raising(big, share * seconds[big], at))
        rows.append({"case": f"random n={n} s1 z={z}: {share:.0%} into its largest bucket "
                             f"({seconds[big]:.3g} s of a {whole:.3g} s pass)",
                     "deadline_s": None, "seconds": None,
                     "late_s": time.monotonic() - at["deadline"], "status": "raised",
                     "lower": None, "upper": None})  # fmt: skip
    return rows


def planar_rows(side: int) -> list[dict[str, Any]]:
    problem = spin_glass(side, 0)
    rows = []
    for how in ("grid", "networkx"):
        original = embed.grid_successors
        if how == "networkx":
            embed.grid_successors = lambda model: None  # type: ignore[assignment]
        try:
            t0 = time.monotonic()
            result = solve_planar(problem)
            seconds = time.monotonic() - t0
        finally:
            embed.grid_successors = original  # type: ignore[assignment]
        rows.append({"case": f"planar {side}x{side}, {how} embedding", "deadline_s": None,
                     "seconds": seconds, "late_s": None, "status": result.status,
                     "lower": result.lower_bound, "upper": result.upper_bound,
                     "steps": {k: round(v, 4) for k, v in result.times.items()}})  # fmt: skip
    for t in (0.01, 0.1):
        start = time.monotonic()
        result = solve_planar(problem, deadline=start + t)
        rows.append({"case": f"planar {side}x{side}", "deadline_s": t,
                     "seconds": time.monotonic() - start,
                     "late_s": time.monotonic() - start - t, "status": result.status,
                     "lower": result.lower_bound, "upper": result.upper_bound})  # fmt: skip
    return rows


#: The cupy mode's hub: leaves of 10 values (10**HUB_LEAVES output rows, 8 GB in float64: many
#: rows and a hub of thousands of values, as a large bucket of the random networks has, rather
#: than a few rows each folding a million values, where one launch's grid alone is seconds),
#: and the hub's values of the first bucket timed to size the real one (2e11 joined entries:
#: the generated kernel, as the real one runs, and a fraction of a second).
HUB_LEAVES = 9
CALIBRATION_VALUES = 200
#: The most values the cupy mode gives the hub (its problem's build takes seconds per million).
MAX_HUB_VALUES = 2_000_000


def device_bucket_seconds(backend: Any, values: int) -> float:
    """Seconds of the hub's bucket (``values`` values) on ``backend``, waited for; the second of
    two runs (the first compiles its kernel)."""
    problem, _ = hub(values, HUB_LEAVES)
    tables = [
        backend.table(t.scope, t.dense(), np.float64) for t in problem.tables if "h" in t.scope
    ]
    seconds = 0.0
    for _ in range(2):
        backend.synchronize()
        t0 = time.monotonic()
        out = backend.join_eliminate(tables, "h")
        backend.synchronize()
        seconds = time.monotonic() - t0
        del out
    return seconds


def cupy_pass_rows(backend: Any, values: int, after: list[float]) -> list[dict[str, Any]]:
    """A pass over the hub, raised ``after`` s into the hub's bucket, with the backend's pieces
    and without them (one piece, one launch: as before pieces) for the first deadline."""
    problem, order = hub(values, HUB_LEAVES)
    pieces = backend.piece_seconds
    rows = []
    for t, piece_s in [(after[0], math.inf), *((t, pieces) for t in after)]:
        backend.piece_seconds = piece_s
        at: dict[str, float] = {}
        start = time.monotonic()
        with contextlib.suppress(Late):
            bucket_pass(
                problem, order.order, backend, HUB_LEAVES + 1, progress=_raising("h", t, at)
            )
        backend.synchronize()
        end = time.monotonic()
        rows.append({"case": f"cupy pass, hub D={values} (10^{HUB_LEAVES} rows), "
                             + ("one piece (before)" if math.isinf(piece_s)
                                else f"pieces of {piece_s:g} s"),
                     "deadline_s": t, "seconds": end - start,
                     "late_s": end - at["deadline"] if "deadline" in at else None,
                     "status": "raised" if "deadline" in at and end >= at["deadline"]
                     else "finished", "lower": None, "upper": None})  # fmt: skip
    backend.piece_seconds = pieces
    return rows


def cupy_search_rows(backend: Any, values: int, after: list[float]) -> list[dict[str, Any]]:
    """The search on the CuPy backend with a deadline ``t`` s after its start."""
    problem, order = hub(values, HUB_LEAVES)
    rows = []
    for t in after:
        start = time.monotonic()
        deadline = start + t
        result = solve_aobb(problem, z=HUB_LEAVES + 1, ordering=order, backend=backend,
                            deadline=deadline, reduced=False)  # fmt: skip
        rows.append({"case": f"cupy search, hub D={values}", "deadline_s": t,
                     "seconds": time.monotonic() - start, "late_s": time.monotonic() - deadline,
                     "status": result.status, "lower": result.lower_bound,
                     "upper": result.upper_bound,
                     "steps": {k: round(v, 3) for k, v in result.times.items()}})  # fmt: skip
    return rows


def cupy_rows(bucket_seconds: float, quick: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The cupy mode's rows, and how its hub was sized."""
    from dcop.gpu import CupyBackend

    backend = CupyBackend()
    backend.warm_up()
    # timed twice: a small bucket, then one sized at a twentieth of the wanted time (its tables
    # past the L2 cache, as the real one's), scaled to the wanted time
    probes: list[tuple[int, float]] = []
    values = CALIBRATION_VALUES
    for share in (1 / 20, 1.0):
        seconds = device_bucket_seconds(backend, values)
        probes.append((values, seconds))
        wanted = int(values * share * bucket_seconds / max(seconds, 1e-6))
        values = max(CALIBRATION_VALUES, min(MAX_HUB_VALUES, wanted))
    sized = {"probes": probes, "hub_values": values, "bucket_seconds_wanted": bucket_seconds,
             "piece_s": backend.piece_seconds, "device": backend.device_name}  # fmt: skip
    # the sized bucket's kernel compiled before any clock (a generated kernel per shape)
    problem, _ = hub(values, HUB_LEAVES)
    backend.prepare(
        [backend.table(t.scope, t.dense()) for t in problem.tables if "h" in t.scope], "h"
    )
    del problem
    after = [0.3] if quick else [1.0, 2.0, 3.0]
    rows = cupy_pass_rows(backend, values, after)
    rows += cupy_search_rows(backend, values, [after[-1] + 1.0])
    return rows, sized


def _cell(value: Any) -> str:
    return "" if value is None else f"{value:.3g}" if isinstance(value, float) else str(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run (small sizes)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--backend", choices=("numpy", "cupy"), default="numpy",
                    help="cupy: the hub's bucket on the GPU (results deadline_cupy)")  # fmt: skip
    ap.add_argument("--bucket-seconds", type=float, default=15.0,
                    help="cupy: the hub's bucket is sized to take about this long")  # fmt: skip
    args = ap.parse_args()
    solve_aobb(random_network(12, 4, 0.3, 0.0, 0))  # numba's load, before any clock
    sized: dict[str, Any] = {}
    if args.backend == "cupy":
        rows, sized = cupy_rows(args.bucket_seconds / (5 if args.quick else 1), args.quick)
    elif args.quick:
        rows = hub_rows(200, [0.3]) + pass_rows(16, 5) + planar_rows(16)
    else:
        rows = hub_rows(3000, [1.0, 2.0, 3.0]) + pass_rows(26, 8)
        rows += planar_rows(64) + planar_rows(128)
    from keep import machine_block

    doc = {
        "command": "python benchmarks/run.py deadline"
        + (f" --backend cupy --bucket-seconds {args.bucket_seconds:g}" if sized else "")
        + (" --quick" if args.quick else ""),
        "hub_sized": sized,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average": os.getloadavg(),
        "machine": machine_block(),
        "rows": rows,
    }
    lines = [
        "## Deadlines inside a large bucket and in the planar solver",
        "",
        f"{doc['when']}, load average {doc['load_average'][0]:.2f} (machine shared with other "
        "jobs). `late` is how long after the deadline the call returned (the hook's raise "
        "reached the caller, for the z = 8 pass).",
        "",
        "| case | deadline (s) | seconds | late (s) | status | lower | upper | steps |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if sized:
        lines[4:4] = [
            f"CuPy on {sized['device']}: the hub's bucket (values, seconds) timed "
            f"{sized['probes']}, then sized at D = {sized['hub_values']} for about "
            f"{sized['bucket_seconds_wanted']:g} s; pieces of {sized['piece_s']:g} s predicted. "
            "`one piece (before)`: the bucket as one launch, as before pieces.",
            "",
        ]
    lines += [
        f"| {r['case']} | {_cell(r['deadline_s'])} | {_cell(r['seconds'])} | "
        f"{_cell(r['late_s'])} | {r['status']} | {_cell(r['lower'])} | {_cell(r['upper'])} | "
        f"{r.get('steps', '')} |"
        for r in rows
    ]
    from keep import write_results

    name = "deadline_cupy" if sized else "deadline"
    name += "_quick" if args.quick else ""
    write_results(args.out, name, doc, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
