"""What ``dcop solve`` does once its command line is read, by typer (:mod:`dcop.cli.solve`) or
plainly (:mod:`dcop.cli.plain`): read, solve, write the document and the summary.

Nothing here imports typer: a plain command line of ``dcop solve`` runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dcop.choices import (
    SUM_TASKS,
    BackendName,
    CentralAlgo,
    DtypeName,
    FormatName,
    TaskName,
)
from dcop.cli.common import (
    anytime_progress,
    bucket_progress,
    check_ordering,
    failure_document,
    finish_run,
    parse_memory,
    read_limits,
    shown_name,
    write_answer_file,
)
from dcop.cli.partition import print_partition, task_for
from dcop.cli.rows import Rows
from dcop.cli.solvers import CENTRAL, Request, check_threads, check_z
from dcop.errors import InputError
from dcop.io import read_problem
from dcop.results import Status, after_answer

# A command imports what it runs (tests/cli/test_imports.py checks the set): a min-sum solve
# never loads the contraction engine, the anytime driver or the PR/MAR engine, nor `dcop
# info`'s planners, so they are imported where they are used.
if TYPE_CHECKING:
    from rich.console import Console

    from dcop.inference import SolveResult

#: Seconds of a --timeout kept for writing the answer after the last step stops.
ANSWER_MARGIN_S = 0.3


def run_solve(
    file: Path,
    algo: CentralAlgo = CentralAlgo.be,
    z: int | None = None,
    timeout: float | None = None,
    task: TaskName | None = None,
    ordering: str = "auto",
    order_time: float | None = None,
    backend: BackendName = BackendName.numpy,
    device: str = "0",
    fmt: FormatName | None = None,
    evidence: Path | None = None,
    dtype: DtypeName = DtypeName.auto,
    max_memory: str | None = None,
    json_out: Path | None = None,
    solution: Path | None = None,
    quiet: bool = False,
    threads: int | None = None,
) -> None:
    """``dcop solve``: the options as typer hands them (enums, paths), the defaults
    :func:`dcop.cli.solve.solve_command` declares (a test checks both). Ends the process's work
    with :func:`dcop.cli.common.finish_run` (SystemExit with the status's code)."""
    from dcop.clock import process_started

    started = process_started()  # the command's start: interpreter and imports included

    read: dict[str, Any] = {}  # the problem once read, the answer's document once had
    asked_z = z

    def produce() -> tuple[dict[str, Any], Callable[[Console], None] | Rows]:
        solver = CENTRAL[algo.value]
        # a usage error still gets its document; an optional z (the search's) is the asked one
        z = asked_z if solver.z == "optional" else check_z(algo.value, asked_z)
        check_threads([algo.value], threads)
        check_ordering(ordering, order_time)
        chosen = task_for(file, fmt and fmt.value, task and task.value)
        # reading honours --timeout, and the default memory limit (a header of millions of
        # variables, a slow YAML intention end at once in one line); a --max-memory below what
        # the file needs is left to the plan, whose refusal names the z that would fit
        limits = read_limits(timeout, None)
        # a device backend starts on its own thread while the file is read and ordered
        engine = engine_for(backend.value, device, chosen in SUM_TASKS)
        read["problem"] = problem = read_problem(
            file, fmt and fmt.value, evidence=evidence, limits=limits
        )
        if chosen in SUM_TASKS:
            if chosen not in solver.tasks:
                takes = " or ".join(n for n, s in CENTRAL.items() if chosen in s.tasks)
                raise InputError(f"--task {chosen} takes --algo {takes}, not {algo.value}")
            if timeout is not None:
                raise InputError(f"--timeout is not supported with --task {chosen} yet")
            from dcop.inference.partition import infer

            with bucket_progress(not quiet) as progress:
                inferred = infer(
                    problem,
                    chosen,
                    z=z,
                    ordering=ordering,
                    order_time=order_time,
                    backend=engine,
                    dtype=dtype.value,
                    max_bytes=parse_memory(max_memory),
                    progress=progress,
                )
            inferred.file = str(file)
            inferred.times.update(_start_times(engine))  # a device's start, off the main thread
            read["doc"] = doc = inferred.to_json()
            if solution is not None:
                write_answer_file(
                    solution,
                    problem,
                    chosen,
                    ln_z=inferred.ln_partition,
                    marginals=inferred.marginals,
                    answered=inferred.status == "ok",
                )
            return doc, lambda console: print_partition(inferred, console)
        # the deadline counts from the command's start; a little is kept to write the answer
        deadline = None if timeout is None else started + timeout - ANSWER_MARGIN_S
        request = Request(
            z=z,
            deadline=deadline,
            ordering=ordering,
            order_time=order_time,
            backend=engine,
            dtype=dtype.value,
            max_bytes=parse_memory(max_memory),
            threads=threads,
        )
        with anytime_progress(not quiet, problem) as (progress, on_bounds):
            result = solver.run(problem, replace(request, progress=progress, on_bounds=on_bounds))
        result.file = str(file)
        result.times.update(_start_times(engine))  # a device's start, off the main thread
        read["doc"] = doc = result.to_json()
        if solution is not None and doc["assignment"] is not None:  # ok, or the best one kept
            write_answer_file(
                solution,
                problem,
                "min",
                assignment=result.assignment,
                answered=True,
                cost=result.upper_bound,
            )
        return doc, result_rows(result)

    def failure(status: Status, message: str) -> dict[str, Any]:
        if "doc" in read:  # it failed after the answer (a signal, a solution file): keep it
            return after_answer(read["doc"], status, message)
        doc = failure_document(
            status, message, algo=algo.value, z=asked_z, file=str(file), problem=read.get("problem")
        )
        return doc | ({"task": task.value} if task is not None else {})

    finish_run(produce, json_out, failure, quiet, {"--solution": solution})


def result_rows(result: SolveResult) -> Rows:
    """A short human-readable summary of a solve (drawn without rich: :mod:`dcop.cli.rows`)."""
    data = result.to_json()
    p = result.problem
    title = f"{data['algo'].upper()}{'' if result.z is None else f'(z={result.z})'} on {shown_name(result.file, p)}"
    table = Rows(title)
    status = data["status"]
    if status == "infeasible":
        table.add_row("status", "infeasible: no assignment has a finite cost (proved)")
    elif status != "ok":
        table.add_row("status", f"{status}: {data['message']}")
    if status == "ok" and result.exact:
        table.add_row("optimum", _fmt(data["cost"]))
    elif status != "infeasible" and data["lower_bound"] is not None:
        bounds = f"{_fmt(data['lower_bound'])} .. {_fmt(data['upper_bound'])}"
        table.add_row("bounds" if status in ("ok", "no_solution") else "bounds so far", bounds)
        if data["cost"] is not None:
            table.add_row("value of assignment", _fmt(data["cost"]))
    if p.cost_kind == "neg_ln" and data["cost"] is not None:
        table.add_row("(value is)", "log10 of the probability")
    table.add_row("variables / tables", f"{p.n} / {len(p.tables)}")
    if result.planar is not None:  # no order, no table: the planar dual's faces and T-join
        planar = result.planar
        table.add_row("planar dual", f"{planar.faces} faces, {planar.frustrated} frustrated")
        table.add_row("T-join", f"{planar.tjoin}, on the dual of {planar.edges} edges")
    else:
        table.add_row("induced width", f"{result.induced_width} ({result.ordering})")
        table.add_row("largest table", f"{result.largest_table:.4g} entries")
    table.add_row("backend / dtype", f"{result.backend} / {result.dtype}")
    table.add_row("time", f"{result.times.get('total', 0.0):.4f} s")
    for step in data.get("anytime") or []:
        name = "BE" if step["algo"] == "be" else f"MBE z={step['z']}"
        seconds = "" if step["seconds"] is None else f" in {step['seconds']:.3g} s"
        shown = (
            f"{_fmt(step['lower_bound'])} .. {_fmt(step['upper_bound'])}"
            if step["status"] == "ok"
            else f"{step['status']}: {step['message']}"
        )
        table.add_row(f"step {name}", f"{shown}{seconds}")
    if p.n <= 30 and data["assignment"] is not None:
        table.add_row("assignment", " ".join(f"{k}={v}" for k, v in data["assignment"].items()))
    return table


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def engine_for(name: str, device: str, sum_task: bool) -> Any:
    """The backend of ``--backend`` on the ``--device`` list: ``numpy`` by name; a device
    backend (cupy, auto) as a :class:`dcop.starting.StartingBackend`, started now on a
    thread of its own (CuPy's import, the CUDA context, the pools and, for a min-sum solve, the
    generic kernels it runs), which the solve takes once it has read and ordered the problem."""
    if name == "numpy":
        return name
    from dcop.placement import gpu_devices
    from dcop.starting import StartingBackend, early_ops, take_early

    ops = early_ops(sum_task)
    devices = None
    if device.strip() == "0":
        early = take_early(name, ops)  # begun by the entry point, before these imports
        if early is not None:
            return early
    else:
        from dcop.backends import gpu_count

        count = gpu_count()
        if count == 0:  # auto: the CPU; cupy: its own error (no CuPy, no device)
            return StartingBackend(name, ops=())
        devices = gpu_devices(device, count)
    # PR/MAR run the contraction engine's strided kernels, not the join kernels warm_up loads
    return StartingBackend(name, devices, ops=ops)


def _start_times(engine: Any) -> dict[str, float]:
    """A device start's seconds (:func:`dcop.starting.timings`); none for a backend by name."""
    if isinstance(engine, str):
        return {}
    from dcop.starting import timings

    return timings(engine)
