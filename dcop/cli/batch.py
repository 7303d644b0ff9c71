"""``dcop batch``: one algorithm over many instance files, one row (and one result document) each.

A file's failure (unreadable, malformed, out of time, too large) is that file's row, never the end
of the batch. Centralized rows (be, mbe, auto) solve in a child process (forked from a server
that imported dcop once), killed at the deadline, so that ``--timeout`` holds even inside one long
bucket; the result document is the one ``dcop solve --json`` writes. Distributed rows (dpop,
adpop) run :func:`dcop.coordinator.run_local`, which enforces its own deadline.

``auto`` picks BE when its planned peak memory fits the memory limit, else MBE with the largest z
whose plan fits (:func:`choose_auto`, on the solver's own plan: scopes and domain sizes only).
"""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Annotated, Any

import numpy as np
import typer
from rich import box
from rich.console import Console
from rich.table import Table as RichTable

from dcop.backend import get_backend
from dcop.choices import BatchAlgo, check_z
from dcop.cli.app import app
from dcop.cli.common import (
    JsonOption,
    OrderingOption,
    OrderTimeOption,
    check_ordering,
    failure_document,
    failure_status,
    parse_memory,
    write_json,
)
from dcop.errors import DcopError, InputError
from dcop.inference.memory import (
    effective_limit,
    largest_fitting_z,
    plan_memory,
    resident_bytes,
    suggestion_bound,
    work_model_of,
)
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.results import EXIT_BAD_INPUT, EXIT_CODES, STATUSES
from dcop.tables import choose_dtype

#: Columns of the CSV (and keys of each row of the ``--json`` document), in order.
COLUMNS: tuple[str, ...] = (
    "file",
    "algo",
    "z",
    "status",
    "exit_code",
    "exact",
    "cost",
    "lower_bound",
    "upper_bound",
    "gap",
    "wall_s",
    "total_s",
    "eliminate_s",
    "solve_s",
    "messages",
    "bytes",
    "induced_width",
    "largest_table",
    "message",
)
#: Schema name of the ``dcop batch --json`` document.
BATCH_SCHEMA = "dcop-batch/1"
CENTRAL = ("be", "mbe", "auto")


# ---- auto --------------------------------------------------------------------------------------
def choose_auto(
    problem: Problem,
    max_bytes: float | None = None,
    ordering: str | ChosenOrder = "auto",
    resident: int | None = None,
) -> tuple[str, int | None]:
    """``auto``: BE when its planned peak memory fits the limit, else MBE with the largest z
    whose plan fits (z=1 when none does: that row then reports ``too_large``).

    The plan is the one :func:`dcop.inference.solve` checks before it builds any table
    (:func:`dcop.inference.memory.plan_memory` on the NumPy backend, the dtype ``auto`` picks),
    so the choice fits exactly when the solve's own check passes.

    Parameters
    ----------
    problem
        The problem to solve.
    max_bytes
        The memory limit of the run, as ``dcop solve --max-memory`` applies it (None: the
        solver's default).
    ordering
        The elimination order the solve will use (see :func:`dcop.orders.choose.choose_order`).
    resident
        Bytes the process holds before solving (None: measured now, as the solver does).

    Returns
    -------
    tuple
        ``("be", None)`` or ``("mbe", z)``.
    """
    order = choose_order(problem, ordering).order
    limit = effective_limit(max_bytes)
    plan = plan_memory(
        [t.scope for t in problem.tables],
        problem.domain_sizes(),
        order,
        None,
        np.dtype(choose_dtype(problem, "auto")).itemsize,
        resident=resident_bytes() if resident is None else resident,
        work=work_model_of(get_backend("numpy")),
    )
    if plan.fits(limit.bytes):
        return "be", None
    fitting = largest_fitting_z(plan, limit.bytes, suggestion_bound(plan))
    return "mbe", fitting.z if fitting is not None and fitting.z is not None else 1


# ---- one row ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BatchSettings:
    """What every row of a batch runs.

    Parameters
    ----------
    algo
        ``be``, ``mbe``, ``dpop``, ``adpop`` or ``auto``.
    z
        Mini-bucket size of ``mbe`` and ``adpop`` (ignored by the others).
    timeout
        Seconds allowed per file.
    max_memory
        ``--max-memory`` as given (e.g. ``8G``), or None for the solver's default.
    ordering
        Elimination order of the centralized rows (``--ordering``: auto, a name or a file).
    order_time
        Seconds the auto ordering may search per file (None: its default budget).
    """

    algo: str
    z: int | None
    timeout: float
    max_memory: str | None = None
    ordering: str = "auto"
    order_time: float | None = None

    @property
    def max_bytes(self) -> float | None:
        """The memory limit in bytes, or None for the solver's default."""
        return parse_memory(self.max_memory)


@dataclass(frozen=True)
class Row:
    """One file's outcome: its result document, the exit code ``dcop solve``/``dcop run`` would
    have returned for it, and the wall time the batch spent on it."""

    document: dict[str, Any]
    exit_code: int
    wall_s: float

    def cells(self) -> dict[str, Any]:
        """The row as the CSV's columns (values as in the result document)."""
        doc = self.document
        times: Mapping[str, Any] = doc.get("times") or {}
        metrics: Mapping[str, Any] = doc.get("metrics") or {}
        solver: Mapping[str, Any] = doc.get("solver") or {}
        return {
            "file": doc["file"],
            "algo": doc["algo"],
            "z": doc["z"],
            "status": doc["status"],
            "exit_code": self.exit_code,
            "exact": doc["exact"],
            "cost": doc["cost"],
            "lower_bound": doc["lower_bound"],
            "upper_bound": doc["upper_bound"],
            "gap": doc["gap"],
            "wall_s": round(self.wall_s, 6),
            "total_s": times.get("total"),
            "eliminate_s": times.get("eliminate"),
            "solve_s": times.get("solve"),
            "messages": metrics.get("total_messages"),
            "bytes": metrics.get("total_bytes"),
            "induced_width": solver.get("induced_width"),
            "largest_table": solver.get("largest_table"),
            "message": doc["message"],
        }


def _failed(
    status: Any, message: str, algo: str, z: int | None, path: Path, problem: Problem | None
) -> dict[str, Any]:
    return failure_document(status, message, algo=algo, z=z, file=str(path), problem=problem)


def solve_in_child(conn: Connection, path: str, settings: BatchSettings) -> None:
    """The child process of one be/mbe/auto row: read, choose (auto), solve, send the document.

    Sends ``("chose", algo, z)`` once the algorithm is known, then ``("done", document,
    exit_code)``; the document and exit code are those of ``dcop solve --json`` on the file. A
    bug (anything but a DcopError) propagates: its traceback goes to stderr and the row says the
    solver crashed.

    Parameters
    ----------
    conn
        The parent's end of the pipe.
    path
        The instance file.
    settings
        The batch's settings.
    """
    from dcop.inference import solve
    from dcop.io import read_problem

    algo, z = settings.algo, settings.z if settings.algo == "mbe" else None
    problem: Problem | None = None
    try:
        problem = read_problem(path)
        limit = settings.max_bytes
        resident = resident_bytes()  # the same for auto's choice and the solve's own check
        # the order is chosen once, for auto's choice and the solve
        ordering = choose_order(problem, settings.ordering, settings.order_time)
        if algo == "auto":
            algo, z = choose_auto(problem, limit, ordering, resident)
        conn.send(("chose", algo, z))
        result = solve(problem, algo, z, ordering, max_bytes=limit, resident=resident)
        result.file = path
        doc = result.to_json()
        code = EXIT_CODES[doc["status"]]
    except (DcopError, MemoryError, KeyboardInterrupt) as exc:
        status = failure_status(exc)
        message = "interrupted" if isinstance(exc, KeyboardInterrupt) else str(exc)
        doc = _failed(status, message or "out of memory", algo, z, Path(path), problem)
        code = EXIT_BAD_INPUT if isinstance(exc, InputError) else EXIT_CODES[status]
    conn.send(("done", doc, code))
    conn.close()


@cache
def _forkserver() -> Any:
    """Processes forked from one server that imported dcop once (fast to start, and safe: the
    server has no threads, unlike this process with its progress bar)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["dcop.cli.batch", "dcop.inference", "dcop.io"])
    return ctx


def run_central(path: Path, settings: BatchSettings) -> tuple[dict[str, Any], int]:
    """One be/mbe/auto row, solved in a child process that is killed at the deadline.

    Parameters
    ----------
    path
        The instance file.
    settings
        The batch's settings.

    Returns
    -------
    tuple
        The result document and the exit code ``dcop solve`` would have returned.
    """
    algo, z = settings.algo, settings.z if settings.algo == "mbe" else None
    ctx = _forkserver()
    ours, theirs = ctx.Pipe(duplex=False)
    child = ctx.Process(target=solve_in_child, args=(theirs, str(path), settings), daemon=True)
    try:
        child.start()  # returns once forked: the server's own start does not count
        deadline = time.monotonic() + settings.timeout
        theirs.close()
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not ours.poll(left):
                message = f"no answer within {settings.timeout:g} s (--timeout)"
                return _failed("timeout", message, algo, z, path, None), EXIT_CODES["timeout"]
            try:
                reply = ours.recv()
            except EOFError:  # the child died without a word (a bug, or killed from outside)
                child.join(5)
                code = child.exitcode
                why = f"the solver process ended without a result (exit code {code})"
                if code is not None and code < 0:
                    why = f"the solver process was killed by signal {-code} (out of memory?)"
                return _failed("error", why, algo, z, path, None), EXIT_CODES["error"]
            if reply[0] == "chose":
                algo, z = reply[1], reply[2]
                continue
            return reply[1], reply[2]
    finally:
        ours.close()
        if child.is_alive():
            child.kill()
        if child.pid is not None:
            child.join()


def run_distributed(path: Path, settings: BatchSettings) -> tuple[dict[str, Any], int]:
    """One dpop/adpop row: one agent process per variable on this machine.

    Parameters
    ----------
    path
        The instance file.
    settings
        The batch's settings.

    Returns
    -------
    tuple
        The result document and the exit code ``dcop run`` would have returned.
    """
    from dcop.coordinator import run_local
    from dcop.io import read_problem
    from dcop.protocol import RunSpec

    problem: Problem | None = None
    z = settings.z if settings.algo == "adpop" else None
    try:
        spec = RunSpec.from_options(settings.algo, z)
        problem = read_problem(path)
        doc = run_local(problem, spec, timeout=settings.timeout).to_json()
    except (DcopError, MemoryError) as exc:
        status = failure_status(exc)
        code = EXIT_BAD_INPUT if isinstance(exc, InputError) else EXIT_CODES[status]
        message = str(exc) or "out of memory"
        return _failed(status, message, settings.algo, z, path, problem), code
    doc["file"] = str(path)
    return doc, EXIT_CODES[doc["status"]]


def run_row(path: Path, settings: BatchSettings) -> Row:
    """Run one file of the batch; every outcome but an interrupt is a row.

    Parameters
    ----------
    path
        The instance file.
    settings
        The batch's settings.

    Returns
    -------
    Row
        The file's result document, exit code and wall time.
    """
    start = time.perf_counter()
    if not path.is_file():
        algo = settings.algo
        z = settings.z if algo in ("mbe", "adpop") else None
        doc = _failed("error", f"{path}: no such file", algo, z, path, None)
        return Row(doc, EXIT_BAD_INPUT, time.perf_counter() - start)
    run = run_central if settings.algo in CENTRAL else run_distributed
    doc, code = run(path, settings)
    return Row(doc, code, time.perf_counter() - start)


# ---- output ------------------------------------------------------------------------------------
def csv_cell(value: object) -> str:
    """A CSV cell: empty for None, ``true``/``false`` for booleans, numbers as Python writes them.

    Parameters
    ----------
    value
        A value of a row.

    Returns
    -------
    str
        Its text.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class RowSink:
    """Writes rows as they come: the CSV and the JSON Lines file (one result document a line),
    flushed after each so that an interrupted batch keeps what it finished."""

    def __init__(self, stack: ExitStack, csv_path: Path | None, jsonl_path: Path | None) -> None:
        self._csv: Any = None
        self._jsonl: IO[str] | None = None
        if csv_path is not None:
            handle = stack.enter_context(csv_path.open("w", newline="", encoding="utf-8"))
            self._csv = (handle, csv.writer(handle))
            self._csv[1].writerow(COLUMNS)
        if jsonl_path is not None:
            self._jsonl = stack.enter_context(jsonl_path.open("w", encoding="utf-8"))

    def add(self, row: Row) -> None:
        """Write one row."""
        if self._csv is not None:
            handle, writer = self._csv
            cells = row.cells()
            writer.writerow([csv_cell(cells[c]) for c in COLUMNS])
            handle.flush()
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(row.document, allow_nan=False) + "\n")
            self._jsonl.flush()


@contextmanager
def file_progress(total: int, enabled: bool) -> Iterator[Any]:
    """Report rows: a rich progress bar over the files when stderr is a terminal, otherwise one
    plain line per file on stderr. Yields ``report(done, path, row_or_None)``."""
    err = Console(stderr=True)
    if enabled and sys.stderr.isatty():
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        ) as bar:
            task = bar.add_task("batch", total=total)

            def advance(done: int, path: Path, row: Row | None) -> None:
                bar.update(task, completed=done, description=path.name)

            yield advance
        return

    def line(done: int, path: Path, row: Row | None) -> None:
        if enabled and row is not None:
            doc = row.document
            shown = doc["cost"] if doc["status"] == "ok" else doc["message"]
            print(
                f"[{done}/{total}] {path}: {doc['status']} {shown} ({row.wall_s:.3g} s)",
                file=sys.stderr,
                flush=True,
            )

    yield line


def batch_document(settings: BatchSettings, rows: Sequence[Row]) -> dict[str, Any]:
    """The ``--json`` document: the settings, counts per status, the rows and their result
    documents (schema ``$defs/batch`` of ``dcop/schema/result.schema.json``).

    Parameters
    ----------
    settings
        The batch's settings.
    rows
        The rows run, in order.

    Returns
    -------
    dict
        The document.
    """
    counts = Counter(row.document["status"] for row in rows)
    limit = settings.max_bytes
    return {
        "schema": BATCH_SCHEMA,
        "algo": settings.algo,
        "z": settings.z if settings.algo in ("mbe", "adpop") else None,
        "timeout_s": settings.timeout,
        "max_memory_bytes": limit,
        "files": len(rows),
        "counts": {s: counts[s] for s in STATUSES if counts[s]},
        "rows": [row.cells() for row in rows],
        "results": [row.document for row in rows],
    }


def print_rows(rows: Sequence[Row], console: Console) -> None:
    """The human summary: one line per file (full messages are in the CSV and JSON) and the
    count per status.

    Parameters
    ----------
    rows
        The rows run, in order.
    console
        Where to print (stderr when the JSON goes to stdout).
    """
    table = RichTable(title=f"dcop batch: {len(rows)} files", box=box.SIMPLE_HEAD)
    table.add_column("file", no_wrap=True, overflow="ellipsis", max_width=24)
    table.add_column("algo", no_wrap=True, min_width=6)
    table.add_column("status", no_wrap=True, min_width=10)
    table.add_column("result", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("wall s", no_wrap=True, justify="right", min_width=6)
    for row in rows:
        doc = row.document
        algo = doc["algo"] + (f"({doc['z']})" if doc["z"] is not None else "")
        if doc["status"] != "ok":
            shown = doc["message"] or ""
        elif doc["exact"]:
            shown = f"optimum {_short(doc['cost'])}"
        else:
            shown = f"{_short(doc['lower_bound'])} .. {_short(doc['upper_bound'])}"
        table.add_row(Path(str(doc["file"])).name, algo, doc["status"], shown, f"{row.wall_s:.3g}")
    console.print(table)
    counts = Counter(row.document["status"] for row in rows)
    console.print(", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s]))


def _short(value: object) -> str:
    return f"{value:.10g}" if isinstance(value, float) else str(value)


# ---- the command -------------------------------------------------------------------------------
@app.command("batch")
def batch_command(
    files: Annotated[list[Path], typer.Argument(help="Instance files, one row each.")],
    algo: Annotated[
        BatchAlgo,
        typer.Option(
            help="be, mbe (needs --z), dpop, adpop (needs --z), or auto: be when its planned "
            "memory fits --max-memory, else mbe with the largest z that fits."
        ),
    ] = BatchAlgo.auto,
    z: Annotated[int | None, typer.Option(help="Mini-bucket size for mbe and adpop.")] = None,
    timeout: Annotated[
        float, typer.Option(help="Seconds per file; a file over it is a timeout row.")
    ] = 600.0,
    max_memory: Annotated[
        str | None,
        typer.Option(
            help="Memory each be/mbe/auto run may use, e.g. 8G (default: what the solver process "
            "holds plus half the available memory), as dcop solve --max-memory."
        ),
    ] = None,
    ordering: OrderingOption = "auto",
    order_time: OrderTimeOption = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", dir_okay=False, help="Write one row per file here.")
    ] = None,
    jsonl_out: Annotated[
        Path | None,
        typer.Option("--jsonl", dir_okay=False, help="Write one result document per line here."),
    ] = None,
    json_out: JsonOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress, no summary.")] = False,
) -> None:
    """Run one algorithm over many files: one row per file, in the order given.

    Each row holds the file, the algorithm that ran (auto's choice), its status (ok, infeasible,
    timeout, too_large, error, interrupted: as in the result document), the exit code the single
    command would have returned (2: bad input), the cost and bounds in the file's own sense, the
    times (wall_s: this row's wall time, total_s / eliminate_s / solve_s: the solver's), messages
    and bytes of distributed runs, induced width and largest table of centralized runs, and the
    message of a failure. A file that fails is a row, not the end of the batch: the exit code is
    0 when the batch ran (130 when interrupted).
    """
    if algo.value in ("mbe", "adpop"):
        z = check_z(z, f"--algo {algo.value}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise InputError("--timeout must be a positive number of seconds")
    check_ordering(ordering, order_time)
    settings = BatchSettings(algo.value, z, timeout, max_memory, ordering, order_time)
    settings.max_bytes  # noqa: B018  (bad --max-memory: exit 2 before any row runs)
    rows: list[Row] = []
    interrupted = False
    with ExitStack() as stack:
        sink = RowSink(stack, csv_out, jsonl_out)
        report = stack.enter_context(file_progress(len(files), not quiet))
        for k, path in enumerate(files):
            try:
                row = run_row(path, settings)
            except KeyboardInterrupt:
                z_row = settings.z if settings.algo in ("mbe", "adpop") else None
                doc = _failed("interrupted", "interrupted", settings.algo, z_row, path, None)
                row = Row(doc, EXIT_CODES["interrupted"], 0.0)
                interrupted = True
            rows.append(row)
            sink.add(row)
            report(k + 1, path, row)
            if interrupted:
                break
    write_json(batch_document(settings, rows), json_out)
    if not quiet:
        from dcop.cli.common import summary_console

        print_rows(rows, summary_console(json_out))
    raise typer.Exit(EXIT_CODES["interrupted"] if interrupted else 0)
