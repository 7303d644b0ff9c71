"""Batch runs as experiments: files × algorithms × z values × repeats, one row (and one result
document) each. The command is :mod:`dcop.cli.batch`; this module runs the rows.

A row's failure (unreadable file, malformed, out of time, too large) is that row, never the end
of the batch. Centralized rows (be, mbe, auto) solve in a child process (forked from a server
that imported dcop once), killed at the deadline, so that the timeout holds even inside one long
bucket; ``auto`` is the anytime solve of ``dcop solve --algo auto --timeout`` (z raised step by
step, the best bounds kept; :mod:`dcop.inference.anytime`). Distributed rows (dpop, adpop) run
:func:`dcop.coordinator.run_local`, which enforces its own deadline, one at a time (each is
already one process per variable). Up to ``jobs`` centralized rows run at once.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dcop.choices import check_z
from dcop.cli.solvers import BATCH, CENTRAL, DISTRIBUTED, Request, needs_z
from dcop.errors import DcopError, InputError, RunTimeout, TableTooLarge
from dcop.inference.anytime import Options, base_plan, choose_by_memory
from dcop.model import Problem
from dcop.orders.choose import ChosenOrder, choose_order
from dcop.results import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    STATUSES,
    Status,
    after_answer,
    result_document,
)

if TYPE_CHECKING:
    from dcop.io import ReadLimits

#: Columns of the CSV (and keys of each row of the ``--json`` document), in order.
COLUMNS: tuple[str, ...] = (
    "file",
    "algo",
    "z",
    "repeat",
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
    "simulated_s",
    "messages",
    "bytes",
    "largest_message_bytes",
    "induced_width",
    "largest_table",
    "message",
)
#: Schema name of the ``dcop batch --json`` document.
BATCH_SCHEMA = "dcop-batch/2"  # 2: the rows' documents are dcop-result/2
#: The algorithms of a row (:data:`dcop.cli.solvers.BATCH`).
ALGOS = BATCH
#: Seconds of a row's timeout an anytime (auto) row keeps to send its bounds before the kill.
ANSWER_MARGIN_S = 0.5


def choose_auto(
    problem: Problem,
    max_bytes: float | None = None,
    ordering: str | ChosenOrder = "auto",
    resident: int | None = None,
) -> tuple[str, int | None]:
    """``auto`` by memory alone (no deadline): BE when its planned peak fits the limit, else MBE
    with the largest z whose plan fits (z=1 when none does: that row then reports
    ``too_large``). The plan is the one :func:`dcop.inference.solve` checks.

    Parameters
    ----------
    problem
        The problem to solve.
    max_bytes
        The memory limit of the run (None: the solver's default).
    ordering
        The elimination order the solve will use.
    resident
        Bytes the process holds before solving (None: measured now, as the solver does).

    Returns
    -------
    tuple
        ``("be", None)`` or ``("mbe", z)``.
    """
    plan = base_plan(problem, Options(ordering=ordering, resident=resident))
    return choose_by_memory(plan, max_bytes)


@dataclass(frozen=True)
class Job:
    """One row to run: a file, an algorithm, its z (mbe, adpop) and which repeat it is."""

    path: Path
    algo: str
    z: int | None
    repeat: int = 0


@dataclass(frozen=True)
class BatchSettings:
    """What the rows of a batch share.

    Parameters
    ----------
    algos
        Algorithms, each of :data:`ALGOS`.
    zs
        Mini-bucket sizes for mbe and adpop (each such algorithm runs once per z).
    timeout
        Seconds allowed per row.
    max_memory
        The memory limit of a centralized row in bytes, or None for the solver's default.
    ordering
        Elimination order of the centralized rows.
    repeat
        Runs of every (file, algorithm, z).
    jobs
        Centralized rows run at once.
    order_time
        Seconds the auto ordering may search per file (None: its default budget).
    threads
        CPU threads of each aobb/auto row's search (None: the usable cores shared by the
        ``jobs`` rows at once, at most 8: :func:`dcop.search.cores.usable_threads`).
    """

    algos: tuple[str, ...]
    zs: tuple[int, ...]
    timeout: float
    max_memory: float | None = None
    ordering: str = "auto"
    repeat: int = 1
    jobs: int = 1
    order_time: float | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        unknown = [a for a in self.algos if a not in ALGOS]
        if not self.algos or unknown:
            raise InputError(f"--algo: want some of {', '.join(ALGOS)}, not {unknown or 'none'}")
        with_z = [a for a in self.algos if needs_z(a)]
        for z in self.zs or ((None,) if with_z else ()):
            check_z(z, f"--algo {with_z[0] if with_z else 'mbe'}")  # the one rule of a z
        if self.repeat < 1 or self.jobs < 1:
            raise InputError("--repeat and -j must be at least 1")
        if not self.timeout > 0:
            raise InputError("--timeout must be a positive number of seconds")

    def plan(self, files: Sequence[Path]) -> list[Job]:
        """Every row, in order: by file, then algorithm, then z, then repeat."""
        out: list[Job] = []
        for path in files:
            for algo in self.algos:
                for z in self.zs if needs_z(algo) else (None,):
                    out.extend(Job(path, algo, z, k) for k in range(self.repeat))
        return out


@dataclass(frozen=True)
class Row:
    """One row's outcome: its result document, the exit code ``dcop solve``/``dcop run`` would
    have returned for it, and the wall time the batch spent on it."""

    job: Job
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
            "repeat": self.job.repeat,
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
            "simulated_s": metrics.get("simulated_runtime_s"),
            "messages": metrics.get("total_messages"),
            "bytes": metrics.get("total_bytes"),
            "largest_message_bytes": metrics.get("largest_util_bytes"),
            "induced_width": solver.get("induced_width"),
            "largest_table": solver.get("largest_table"),
            "message": doc["message"],
        }


def failed(
    status: Status, message: str, algo: str, z: int | None, path: Path, problem: Problem | None
) -> dict[str, Any]:
    """The result document of a row that ended without an answer."""
    return result_document(
        problem=problem, status=status, message=message, algo=algo, exact=False, z=z, file=str(path)
    )


def _status(exc: BaseException) -> Status:
    if isinstance(exc, TableTooLarge | MemoryError):
        return "too_large"
    if isinstance(exc, RunTimeout):
        return "timeout"
    return "error"


def _read_limits(deadline: float, settings: BatchSettings, agents: bool = False) -> ReadLimits:
    """A row's file is read within the row's timeout and the memory its solve may use (a
    distributed row's: the default limit, ``--max-memory`` bounds each agent)."""
    from dcop.io import ReadLimits
    from dcop.plan.memory import effective_limit, resident_bytes

    limit = effective_limit(None if agents else settings.max_memory)
    return ReadLimits(
        deadline,
        max(0.0, limit.bytes - resident_bytes()),
        f"the row's timeout of {settings.timeout:g} s",
        limit.text,
    )


def solve_in_child(conn: Connection, job: Job, settings: BatchSettings) -> None:
    """The child process of one be/mbe/auto row: read, solve, send ``("done", document,
    exit_code)`` (those of ``dcop solve --json`` on the file). ``auto`` is anytime until the
    row's timeout, less a margin to send its bounds. The child leads its own process group, so
    that the kill at the deadline takes its step processes too. A bug (anything but a
    DcopError) propagates: its traceback goes to stderr and the row says the solver crashed.

    Parameters
    ----------
    conn
        The parent's end of the pipe.
    job
        The row.
    settings
        The batch's settings.
    """
    deadline = time.monotonic() + settings.timeout  # the parent's clock starts as we do
    os.setpgid(0, 0)
    from dcop.io import read_problem

    problem: Problem | None = None
    try:
        problem = read_problem(job.path, limits=_read_limits(deadline, settings))
        # the order is chosen once per row, for auto's steps and the solve alike
        ordering = choose_order(problem, settings.ordering, settings.order_time)
        solver = CENTRAL[job.algo]
        # an anytime solver stops with its bounds before the row's kill; the others are killed
        end = deadline - ANSWER_MARGIN_S if solver.anytime else None
        from dcop.search.cores import usable_threads  # no numba: a plain count

        threads = settings.threads or usable_threads(shared_by=settings.jobs)
        request = Request(job.z, end, ordering, max_bytes=settings.max_memory, threads=threads)
        result = solver.run(problem, request)
        result.file = str(job.path)
        doc = result.to_json()
        code = EXIT_CODES[doc["status"]]
    except (DcopError, MemoryError) as exc:
        status = _status(exc)
        doc = failed(status, str(exc) or "out of memory", job.algo, job.z, job.path, problem)
        code = EXIT_BAD_INPUT if isinstance(exc, InputError) else EXIT_CODES[status]
    except KeyboardInterrupt:
        return
    conn.send(("done", doc, code))
    conn.close()


@cache
def _forkserver() -> Any:
    """Processes forked from one server that imported dcop once (fast to start, and safe: the
    server has no threads, unlike this process with its progress bar and row threads)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["dcop.cli.batch_rows", "dcop.inference", "dcop.io"])
    return ctx


def run_central(job: Job, settings: BatchSettings) -> tuple[dict[str, Any], int, float]:
    """One be/mbe/auto row, solved in a child process that is killed at the deadline.

    Returns
    -------
    tuple
        The result document, the exit code ``dcop solve`` would have returned, and the row's
        wall seconds from the fork: the first row's start of the fork server (an interpreter
        that imports dcop) is not the row's (it made BE read as 7x slower than MBE).
    """
    ctx = _forkserver()
    ours, theirs = ctx.Pipe(duplex=False)
    # not a daemon: an auto row forks its steps (the finally below kills them all in any case)
    child = ctx.Process(target=solve_in_child, args=(theirs, job, settings))
    try:
        child.start()  # returns once forked: the server's own start does not count
        forked = time.perf_counter()
        deadline = time.monotonic() + settings.timeout
        theirs.close()
        left = deadline - time.monotonic()
        if left <= 0 or not ours.poll(left):
            message = f"no answer within {settings.timeout:g} s (--timeout)"
            doc = failed("timeout", message, job.algo, job.z, job.path, None)
            return doc, EXIT_CODES["timeout"], time.perf_counter() - forked
        try:
            reply = ours.recv()
        except EOFError:  # the child died without a word (a bug, or killed from outside)
            child.join(5)
            code = child.exitcode
            why = f"the solver process ended without a result (exit code {code})"
            if code is not None and code < 0:
                why = f"the solver process was killed by signal {-code} (out of memory?)"
            doc = failed("error", why, job.algo, job.z, job.path, None)
            return doc, EXIT_CODES["error"], time.perf_counter() - forked
        return reply[1], reply[2], time.perf_counter() - forked
    finally:
        ours.close()
        if child.pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)  # the row and any step it forked
            if child.is_alive():  # killed before it led its group
                child.kill()
            child.join()


def run_distributed(job: Job, settings: BatchSettings) -> tuple[dict[str, Any], int, float]:
    """One dpop/adpop row: one agent process per variable on this machine.

    Returns
    -------
    tuple
        The result document, the exit code ``dcop run`` would have returned, and the row's wall
        seconds.
    """
    from dcop.io import read_problem

    start = time.perf_counter()
    problem: Problem | None = None
    answers: list[Any] = []  # the coordinator's answer, had before the agents exit
    deadline = time.monotonic() + settings.timeout
    try:
        solver = DISTRIBUTED[job.algo]
        # the coordinator reads the file: --max-memory bounds each agent, not the reader
        problem = read_problem(job.path, limits=_read_limits(deadline, settings, agents=True))
        request = Request(job.z, timeout=settings.timeout, on_answer=answers.append)
        doc = solver.run(problem, request).to_json()
    except (DcopError, MemoryError) as exc:
        status = _status(exc)
        code = EXIT_BAD_INPUT if isinstance(exc, InputError) else EXIT_CODES[status]
        message = str(exc) or "out of memory"
        if answers:  # it failed once the answer was in (while the agents exit): keep it
            doc = after_answer(answers[0].to_json(), status, message)
        else:
            doc = failed(status, message, job.algo, job.z, job.path, problem)
        doc["file"] = str(job.path)
        return doc, code, time.perf_counter() - start
    doc["file"] = str(job.path)
    return doc, EXIT_CODES[doc["status"]], time.perf_counter() - start


def run_row(job: Job, settings: BatchSettings) -> Row:
    """Run one row; every outcome but an interrupt is a row."""
    if not job.path.is_file():
        doc = failed("error", f"{job.path}: no such file", job.algo, job.z, job.path, None)
        return Row(job, doc, EXIT_BAD_INPUT, 0.0)
    run = run_central if job.algo in CENTRAL else run_distributed
    return Row(job, *run(job, settings))


def run_batch(
    jobs: Sequence[Job], settings: BatchSettings, on_row: Callable[[Row], None]
) -> list[Row]:
    """Run every job: distributed rows in this thread, one at a time; up to ``settings.jobs``
    centralized rows at once in worker threads (each waits on its own child process). Rows are
    handed to ``on_row`` in job order, as soon as every row before them is done.
    A KeyboardInterrupt ends the batch: the rows done so far are returned with an
    ``interrupted`` row for the first job not done."""
    rows: dict[int, Row] = {}
    handed = 0
    lock = threading.Lock()

    def hand_over() -> None:
        nonlocal handed
        with lock:
            while handed in rows:
                on_row(rows[handed])
                handed += 1

    def finish(k: int, row: Row) -> None:
        with lock:
            rows[k] = row
        hand_over()

    pending: list[Future[Row]] = []
    try:
        with ExitStack() as stack:
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=settings.jobs))
            for k, job in enumerate(jobs):
                if job.algo in CENTRAL and settings.jobs > 1:
                    future = pool.submit(run_row, job, settings)
                    future.add_done_callback(functools.partial(_done, finish, k))
                    pending.append(future)
                else:
                    finish(k, run_row(job, settings))
            for future in pending:
                future.result()
    except KeyboardInterrupt:
        for future in pending:
            future.cancel()
        first = next(k for k in range(len(jobs)) if k not in rows)
        job = jobs[first]
        doc = failed("interrupted", "interrupted", job.algo, job.z, job.path, None)
        rows[first] = Row(job, doc, EXIT_CODES["interrupted"], 0.0)
        hand_over()
        return [rows[k] for k in range(handed)]
    return [rows[k] for k in range(len(jobs))]


def _done(finish: Callable[[int, Row], None], k: int, future: Future[Row]) -> None:
    finish(k, future.result())


# ---- output ------------------------------------------------------------------------------------
def csv_cell(value: object) -> str:
    """A CSV cell: empty for None, ``true``/``false`` for booleans, numbers as Python writes them."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class RowSink:
    """Writes rows as they come: the CSV and the JSON Lines file (one result document a line),
    flushed after each so that an interrupted batch keeps what it finished.

    A write that fails (a full disk, ``/dev/full``) ends that file only, with one warning on
    stderr: the batch goes on, and :meth:`spill` then writes that output whole on a stream, so
    no row is lost (before, the batch stopped with a traceback at its first row)."""

    def __init__(self, stack: ExitStack, csv_path: Path | None, jsonl_path: Path | None) -> None:
        self._paths = {"--csv": csv_path, "--jsonl": jsonl_path}
        self._handles: dict[str, IO[str]] = {}
        self._failed: list[str] = []
        self._rows: list[Row] = []
        for option, path in self._paths.items():
            if path is None:
                continue
            try:
                handle = path.open("w", newline="" if option == "--csv" else None, encoding="utf-8")
            except OSError as exc:
                self._fail(option, exc)
                continue
            self._handles[option] = handle
            stack.callback(self._close, option)
        self._write("--csv", lambda h: csv.writer(h).writerow(COLUMNS))

    def add(self, row: Row) -> None:
        """Write one row."""
        self._rows.append(row)
        cells = row.cells()
        self._write(
            "--csv", lambda h: csv.writer(h).writerow([csv_cell(cells[c]) for c in COLUMNS])
        )
        self._write("--jsonl", lambda h: h.write(_jsonl_line(row)))

    def spill(self, stream: IO[str]) -> None:
        """Write each output whose file failed, whole, on ``stream``."""
        for option in self._failed:
            if option == "--csv":
                writer = csv.writer(stream)
                writer.writerow(COLUMNS)
                for row in self._rows:
                    cells = row.cells()
                    writer.writerow([csv_cell(cells[c]) for c in COLUMNS])
            else:
                stream.writelines(_jsonl_line(row) for row in self._rows)
        stream.flush()

    def _write(self, option: str, write: Callable[[IO[str]], object]) -> None:
        handle = self._handles.get(option)
        if handle is None:
            return
        try:
            write(handle)
            handle.flush()
        except OSError as exc:
            self._close(option)
            self._fail(option, exc)

    def _close(self, option: str) -> None:
        handle = self._handles.pop(option, None)
        if handle is None:
            return
        try:
            handle.close()
        except OSError as exc:  # the last buffered bytes did not fit either
            self._fail(option, exc)

    def _fail(self, option: str, exc: OSError) -> None:
        if option in self._failed:
            return
        self._failed.append(option)
        print(
            f"dcop: warning: cannot write {option} {self._paths[option]}: "
            f"{exc.strerror or exc}; the batch goes on, and that output follows whole at its end",
            file=sys.stderr,
        )


def _jsonl_line(row: Row) -> str:
    return json.dumps(row.document, allow_nan=False) + "\n"


def batch_document(settings: BatchSettings, rows: Sequence[Row]) -> dict[str, Any]:
    """The ``--json`` document: the settings, counts per status, the rows and their result
    documents (schema ``$defs/batch`` of ``dcop/schema/result.schema.json``)."""
    counts = Counter(row.document["status"] for row in rows)
    single = len(settings.algos) == 1
    uses_z = any(needs_z(a) for a in settings.algos)
    return {
        "schema": BATCH_SCHEMA,
        "algo": settings.algos[0] if single else ",".join(settings.algos),
        "z": (settings.zs[0] if len(settings.zs) == 1 else list(settings.zs)) if uses_z else None,
        "repeat": settings.repeat,
        "jobs": settings.jobs,
        "timeout_s": settings.timeout,
        "max_memory_bytes": settings.max_memory,
        "files": len({row.job.path for row in rows}),
        "counts": {s: counts[s] for s in STATUSES if counts[s]},
        "rows": [row.cells() for row in rows],
        "results": [row.document for row in rows],
    }


def summary_lines(rows: Sequence[Row]) -> Iterator[str]:
    """The human summary as plain lines, nothing cut: one per row and the count per status."""
    for row in rows:
        doc = row.document
        algo = doc["algo"] + (f"({doc['z']})" if doc["z"] is not None else "")
        if doc["exact"]:
            shown = f"optimum {_short(doc['cost'])}"
        elif doc["lower_bound"] is not None and doc["status"] != "infeasible":
            # every status but infeasible keeps the bounds the row had (no_solution: .. inf)
            shown = f"bounds {_short(doc['lower_bound'])} .. {_short(doc['upper_bound'])}"
        else:
            shown = doc["message"] or ""
        yield f"{doc['file']}  {algo}  {doc['status']}  {shown}  {row.wall_s:.3g} s"
    counts = Counter(row.document["status"] for row in rows)
    yield ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])


def _short(value: object) -> str:
    return f"{value:.10g}" if isinstance(value, float) else str(value)
