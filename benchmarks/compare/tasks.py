"""Measurements that run inside an isolated worker process (``run.py --worker TASK.json``).

Each task reads its instance itself (the parse time is reported apart), solves it, recomputes the
cost of the returned assignment on dcop's own Problem, and returns a JSON-friendly dict. A memory
failure becomes ``{"status": "oom"}`` (the worker also exits non-zero), never a traceback.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from dcop.model import Problem


def load_problem(path: str | Path) -> Problem:
    """Read an instance with dcop's own readers (``dcop.io``)."""
    path = Path(path)
    try:
        from dcop.io import read_problem
    except ImportError:  # the format dispatcher is newer than the per-format readers
        if path.suffix == ".uai":
            from dcop.io.uai import read_uai

            return read_uai(path)
        from dcop.io.wcsp import read_wcsp

        return read_wcsp(path)
    return read_problem(path)


def generated(spec: dict[str, Any]) -> Problem:
    """One of the paper's generated networks (``dcop.generators.generate``)."""
    from dcop.generators import generate

    return generate(
        spec["topology"],
        spec["n"],
        spec["d"],
        p1=spec.get("p1", 0.3),
        p2=spec.get("p2", 0.5),
        seed=spec["seed"],
        links=spec.get("links", 2),
    )


def _num(x: float) -> float | str:
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def dcop_solve(task: dict[str, Any]) -> dict[str, Any]:
    """BE (``z`` None) or MBE(z) with dcop.inference on the NumPy (or given) backend."""
    import dcop.io  # noqa: F401 - module imports are not part of the measured read time
    from dcop.inference import solve

    t0 = time.perf_counter()
    problem = load_problem(task["file"]) if "file" in task else generated(task["generate"])
    read_s = time.perf_counter() - t0
    z = task.get("z")
    max_bytes = task.get("max_bytes")
    t0 = time.perf_counter()
    result = solve(
        problem,
        "mbe" if z else "be",
        z=z,
        backend=task.get("backend", "numpy"),
        ordering=task.get("ordering", "minfill"),
        max_bytes=max_bytes,
    )
    solve_s = time.perf_counter() - t0
    # The cost is recomputed here from the Problem, independently of the solver's own bookkeeping.
    recomputed = problem.evaluate(result.assignment)
    return {
        "status": "ok",
        "read_s": read_s,
        "solve_s": solve_s,
        "lower_bound": _num(result.lower_bound),
        "upper_bound": _num(result.upper_bound),
        "recomputed": _num(recomputed),
        "reported_value": _num(problem.reported(recomputed)),
        "reported_bound": _num(problem.reported(result.lower_bound)),
        "cost_kind": problem.cost_kind,
        "induced_width": result.induced_width,
        "largest_table": result.largest_table,
        "dtype": result.dtype,
        "backend": result.backend,
    }


def toulbar2_solve(task: dict[str, Any]) -> dict[str, Any]:
    """pytoulbar2 ``CFN.Read`` + ``Solve(timeLimit)``; its assignment is re-evaluated by dcop.

    toulbar2 scales UAI costs (round(-ln p * ~1e7)) and renormalises BAYES rows, so its own cost is
    not the MPE value: only the re-evaluation on dcop's Problem is compared.
    """
    import pytoulbar2

    problem = load_problem(task["file"])
    t0 = time.perf_counter()
    cfn = pytoulbar2.CFN(verbose=-1)
    cfn.Read(str(task["file"]))
    read_s = time.perf_counter() - t0
    limit = int(task.get("time_limit", 60))
    t0 = time.perf_counter()
    solved = cfn.Solve(timeLimit=limit)
    solve_s = time.perf_counter() - t0
    if solved is None:
        return {
            "status": "oot" if solve_s >= limit - 1 else "nosol",
            "read_s": read_s,
            "solve_s": solve_s,
        }
    values, tb2_cost, _ = solved
    names = list(problem.variables)
    if len(values) != len(names):
        raise ValueError(f"toulbar2 returned {len(values)} values for {len(names)} variables")
    assignment = {name: int(v) for name, v in zip(names, values, strict=True)}
    recomputed = problem.evaluate(assignment)
    dual = float(cfn.GetDDualBound())
    # Proved optimal when the dual bound meets the primal one within toulbar2's own (integer) units.
    proved = solve_s < limit - 1 and dual >= float(tb2_cost) - 1e-6 * max(1.0, abs(float(tb2_cost)))
    return {
        "status": "ok",
        "read_s": read_s,
        "solve_s": solve_s,
        "tb2_cost": float(tb2_cost),
        "tb2_dual_bound": dual,
        "proved_optimal": bool(proved),
        "recomputed": _num(recomputed),
        "reported_value": _num(problem.reported(recomputed)),
        "cost_kind": problem.cost_kind,
    }


TASKS = {"dcop_solve": dcop_solve, "toulbar2": toulbar2_solve}
