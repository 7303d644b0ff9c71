"""``dcop solve`` (centralized BE / MBE / MPE) and ``dcop info`` (instance statistics)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dcop.choices import SUM_TASKS, BackendName, CentralAlgo, DtypeName
from dcop.cli.app import app
from dcop.cli.common import check_ordering, check_output, read_limits, summary_console, write_json
from dcop.cli.options import (
    BackendOption,
    CentralAlgoOption,
    DocumentInputFile,
    EvidenceOption,
    FormatOption,
    InputFile,
    JsonOption,
    OrderingOption,
    OrderTimeOption,
    QuietOption,
    SolutionOption,
    TaskOption,
    ThreadsOption,
    TimeoutOption,
    ZOption,
)
from dcop.cli.solving import run_solve
from dcop.errors import InputError, TableTooLarge
from dcop.io import read_problem
from dcop.results import objective

# `dcop info`'s planners are imported where they are used (tests/cli/test_imports.py)
if TYPE_CHECKING:
    from dcop.model import Problem


@app.command("solve")
def solve_command(
    file: DocumentInputFile,
    algo: CentralAlgoOption = CentralAlgo.be,
    z: ZOption = None,
    timeout: TimeoutOption = None,
    task: TaskOption = None,
    ordering: OrderingOption = "auto",
    order_time: OrderTimeOption = None,
    backend: BackendOption = BackendName.numpy,
    device: Annotated[
        str,
        typer.Option(
            help="CUDA device(s) of --backend cupy/auto: a number, 'all' or a list like 0,1 "
            "(several: each large bucket is split over them)"
        ),
    ] = "0",
    fmt: FormatOption = None,
    evidence: EvidenceOption = None,
    dtype: Annotated[
        DtypeName, typer.Option(help="Table dtype (auto: float32 where integer totals stay exact).")
    ] = DtypeName.auto,
    max_memory: Annotated[
        str | None,
        typer.Option(
            help="Memory the whole run may use, e.g. 8G (default: what the process holds plus "
            "half the available memory); a run whose planned peak exceeds it is refused."
        ),
    ] = None,
    json_out: JsonOption = None,
    solution: SolutionOption = None,
    quiet: QuietOption = False,
    threads: ThreadsOption = None,
) -> None:
    """Solve an instance with Bucket Elimination (exact), Mini-Bucket Elimination (bounds) or
    auto (anytime with --timeout); on a UAI model also its partition function (--task pr) or
    marginals (--task mar)."""
    # the work is typer-free (a plain command line runs it without typer: dcop.cli.plain)
    run_solve(
        file,
        algo,
        z,
        timeout,
        task,
        ordering,
        order_time,
        backend,
        device,
        fmt,
        evidence,
        dtype,
        max_memory,
        json_out,
        solution,
        quiet,
        threads,
    )


def describe(
    problem: Problem, order_time: float | None = None, sum_tasks: bool = True
) -> dict[str, object]:
    """The statistics ``dcop info`` prints; ``memory_bytes_<ordering>`` is BE's planned peak
    (:func:`dcop.plan.bucket_plan.plan_for`) in the dtype a run would use, this process's
    resident memory included, exactly as ``dcop solve`` checks it against ``--max-memory``;
    ``memory_bytes_argbest_auto`` the peak of the same BE along the auto order with argbest
    tables instead of its messages (what a run does when the messages do not fit).
    ``auto`` is the ordering engine's choice within ``order_time`` (None: its default budget,
    counted in work); ``orders`` lists every method it tried: width, largest table, total
    entries, seconds. The contraction tree of exact PR/MAR is planned only where the file has
    those tasks (``sum_tasks``: a UAI model), within the contraction search's own budget."""
    import numpy as np

    from dcop.backends.numpy import NumpyBackend
    from dcop.orders import best_order
    from dcop.orders.greedy import ORDERINGS, elimination_order, induced_width, largest_table
    from dcop.plan.bucket_plan import plan_for
    from dcop.plan.memory import resident_bytes
    from dcop.tables import choose_dtype

    adjacency = problem.neighbours()
    n = problem.n
    edges = sum(len(v) for v in adjacency.values()) // 2
    sizes = problem.domain_sizes()
    dtype = np.dtype(choose_dtype(problem))
    resident = resident_bytes()
    backend = NumpyBackend()
    info: dict[str, object] = {
        "name": problem.name,
        "variables": n,
        "max_domain": problem.max_domain(),
        "constraints": len(problem.tables),
        "max_arity": max((t.arity for t in problem.tables), default=0),
        "edges": edges,
        "density": edges / (n * (n - 1) / 2) if n > 1 else 0.0,
        "cost_kind": problem.cost_kind,
        "objective": objective(problem),  # as the result document says it (.uai: max)
        "dtype": dtype.name,
        "memory_resident": resident,
    }
    engine = best_order(problem, order_time)
    # the engine's greedy orders are the named heuristics' own: each is walked once
    found = {m.method: list(m.order) for m in engine.tried}
    orders = {
        name: found[name] if name in found else elimination_order(name, adjacency)
        for name in ORDERINGS
    }
    orders["auto"] = engine.order
    for name, order in orders.items():
        plan = plan_for(problem, order, None, dtype, backend, resident=resident)
        info[f"induced_width_{name}"] = induced_width(adjacency, order)
        info[f"largest_table_{name}"] = largest_table(adjacency, order, sizes)
        info[f"memory_bytes_{name}"] = plan.peak_bytes
        if name == "auto" and plan.lean is not None:  # BE's value phase from argbest tables
            info["memory_bytes_argbest_auto"] = plan.lean.peak_bytes
    info["order_auto"] = engine.method
    info["order_budget_s"] = engine.budget_s
    info["order_work"] = engine.work  # the search's runs: the budget, spent as work
    info["orders"] = [
        {
            "method": m.method,
            "width": m.cost.width,
            # None: cut short, over 1000x the best total so far
            "largest_table": m.cost.largest if math.isfinite(m.cost.largest) else None,
            "total_entries": m.cost.total if math.isfinite(m.cost.total) else None,
            "seconds": m.seconds,
        }
        for m in engine.tried
    ]
    # the exact search's heuristic: the largest z whose pass fits a share of the memory and of
    # ten seconds at a core's speed, and its tables' bytes (the plan only: no numba loaded)
    from dcop.plan.memory import effective_limit
    from dcop.search.ibound import PASS_SECONDS_NO_DEADLINE, choose_ibound

    z, heuristic, _ = choose_ibound(
        problem,
        engine.order,
        backend,
        effective_limit(None).bytes,
        PASS_SECONDS_NO_DEADLINE,
        resident=resident,
    )
    info["search_ibound"] = z
    info["search_heuristic_bytes"] = heuristic.message_bytes
    from dcop.planar import why_not

    # --algo planar (and auto's first rule): whether it applies, else why not
    info["planar"] = why_not(problem) or "applies: a planar Ising model without field"
    info["_order"] = engine.order
    if not sum_tasks:
        return info
    from dcop.contraction.engine import describe_tree

    # the contraction tree of exact PR/MAR (dcop.contraction): its largest intermediate
    try:
        tree = describe_tree(problem)
    except TableTooLarge as exc:
        info["contraction_tree"] = f"refused: {exc}"
        return info
    info["contraction_tree"] = tree["source"]
    info["contraction_largest_intermediate"] = tree["largest_intermediate"]
    info["contraction_flops"] = float(tree["flops"])
    info["contraction_slices"] = tree["slices"]
    # (no cost function: no tree, nothing planned, no peak of its own)
    info["memory_bytes_contraction_pr"] = tree.get("peak_bytes_pr", 0)
    info["memory_bytes_contraction_mar"] = tree.get("peak_bytes_mar", 0)
    info["contraction_search_s"] = tree.get("search_s", 0.0)
    return info


@app.command("info")
def info_command(
    file: InputFile,
    fmt: FormatOption = None,
    evidence: EvidenceOption = None,
    json_out: JsonOption = None,
    order_time: OrderTimeOption = None,
    write_order: Annotated[
        Path | None,
        typer.Option(
            dir_okay=False,
            help="Write the auto order here, for --ordering FILE: a PACE tree decomposition "
            "when the name ends in .td, else one variable per line.",
        ),
    ] = None,
    quiet: QuietOption = False,
) -> None:
    """Print n, d, constraints, density, induced width, largest table and BE's planned peak
    memory per ordering, and per method of the ordering engine its width, largest table, total
    work (joined entries) and time; on a UAI model also the contraction tree of exact PR/MAR.
    Every planner runs within a budget: info takes seconds on any model."""
    from dcop.cli.partition import FORMAT_TASKS
    from dcop.io import detect_format

    check_ordering("auto", order_time)
    check_output(json_out, "--json")
    kind = detect_format(file, fmt.value if fmt is not None else None)
    # within the default memory limit: a header of millions of variables is refused at once
    problem = read_problem(
        file,
        fmt.value if fmt is not None else None,
        evidence=evidence,
        limits=read_limits(None, None),
    )
    sum_tasks = any(t in SUM_TASKS for t in FORMAT_TASKS.get(kind, ()))
    info = describe(problem, order_time, sum_tasks)
    order = info.pop("_order")
    if write_order is not None:
        from dcop.orders.files import write_order as save_order

        note = f"{problem.name}: {info['order_auto']}, width {info['induced_width_auto']}"
        try:
            save_order(write_order, order, problem.neighbours(), list(problem.variables), note)  # type: ignore[arg-type]
        except OSError as exc:
            raise InputError(f"cannot write the order: {exc.strerror}", str(write_order)) from None
    write_json(info, json_out)
    if quiet:
        return
    from rich.table import Table as RichTable

    from dcop.inference import default_max_bytes
    from dcop.plan.memory import human_bytes

    table = RichTable(title=str(file), show_header=False)
    for key, value in info.items():
        if key == "orders":
            for m in value:  # type: ignore[attr-defined]
                cost = (
                    f"largest table {m['largest_table']:.4g}, total {m['total_entries']:.4g} "
                    "entries"
                    if m["total_entries"] is not None
                    else "cut short (over 1000x the best total)"
                )
                table.add_row(f"order {m['method']}", f"{cost}, {m['seconds']:.3f} s")
            continue
        if key.startswith("memory_"):
            value = human_bytes(float(value))  # type: ignore[arg-type]
        elif isinstance(value, float):
            value = f"{value:.4g}"
        table.add_row(key, str(value))
    table.add_row("memory limit (default)", human_bytes(default_max_bytes()))
    summary_console(json_out).print(table)
