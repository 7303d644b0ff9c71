"""Pieces shared by CLI commands: options, progress display, result documents and exit codes."""

from __future__ import annotations

import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from dcop.choices import (
    BackendName,
    CentralAlgo,
    DistributedAlgo,
    DtypeName,
    FormatName,
    LogLevel,
    OrderingName,
)
from dcop.cli.rows import Rows
from dcop.cli.signals import interrupt_on_signals, keep_early_signals, raise_pending
from dcop.errors import DcopError, InputError, RunTimeout, TableTooLarge
from dcop.results import EXIT_BAD_INPUT, EXIT_CODES, Status, result_document

if TYPE_CHECKING:
    from rich.console import Console

    from dcop.inference.elimination import ProgressFn
    from dcop.io import ReadLimits


def write_answer_file(
    path: Path,
    problem: Any,
    task: str,
    *,
    answered: bool,
    assignment: Any = None,
    ln_z: float | None = None,
    marginals: Any = None,
    cost: float | None = None,
) -> None:
    """``--solution``: write the answer of ``task``; a run without one (infeasible, failed)
    writes none, except PR's proved ``Z = 0`` (``log10 Z = -inf``).

    An assignment whose ``cost`` is infinite (an MBE assignment that breaks a hard constraint)
    is written with a mark: a first line ``# infeasible ...`` in toulbar2's format (its readers,
    and dcop's, skip it), and a warning on stderr for every format."""
    from dcop.io import write_answer

    if answered or (task == "pr" and ln_z == float("-inf")):
        try:
            write_answer(path, problem, task, assignment=assignment, ln_z=ln_z, marginals=marginals)
            if cost is not None and math.isinf(cost) and task == "min":
                text = path.read_text(encoding="utf-8")
                if not text.startswith("MPE"):
                    mark = "# infeasible: this assignment breaks a hard constraint (cost inf)\n"
                    path.write_text(mark + text, encoding="utf-8")
                print(
                    f"dcop: warning: {path} holds an infeasible assignment (cost inf): no "
                    "feasible one was found",
                    file=sys.stderr,
                )
        except OSError as exc:
            # checked before the run (check_output), yet it failed now: the answer is not lost
            import tempfile

            with tempfile.TemporaryDirectory(prefix="dcop-answer-") as tmp:
                spare = Path(tmp) / path.name
                write_answer(
                    spare, problem, task, assignment=assignment, ln_z=ln_z, marginals=marginals
                )
                text = spare.read_text()
            print(
                f"dcop: warning: cannot write --solution {path}: {exc.strerror or exc}; "
                "the answer follows on stdout",
                file=sys.stderr,
            )
            sys.stdout.write(text)
            sys.stdout.flush()


def progress_line(text: str) -> None:
    """One line of progress (or a note) on stderr. A closed stderr (``2>&1 | head -1``) must not
    end the run: the line is dropped, and the run goes on to write its document (a
    BrokenPipeError here used to end ``dcop run`` with exit 1 and no document)."""
    with contextlib.suppress(OSError):
        print(text, file=sys.stderr, flush=True)


def check_output(path: Path | None, option: str) -> None:
    """Refuse (InputError, one line) an output path that cannot be written, before any work:
    a run of minutes must not end in a traceback that loses its answer. None and '-' (stdout)
    pass. A path that passes may still fail at the end (a full disk): the writers then print
    what they hold on stdout."""
    if path is None or to_stdout(path):
        return
    parent = path.parent
    if path.is_dir():
        raise InputError(f"{option} {path}: is a directory")
    if not parent.is_dir():
        raise InputError(f"{option} {path}: no such directory {parent}")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise InputError(f"{option} {path}: the file is not writable")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: cannot create a file in {parent}")


def check_output_dir(path: Path, option: str) -> None:
    """Make the output directory ``path`` now, before any work (the command would make it
    anyway), or refuse it with one line (InputError): a directory that cannot be made or is
    not writable."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} {path}: not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{option} {path}: cannot make it: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{option} {path}: the directory is not writable")


def check_outputs(outputs: Mapping[str, Path | None]) -> None:
    """:func:`check_output` of each ``{option: path}``; on a bad one print its line and exit 2
    (the result document has nowhere safe to go yet)."""
    try:
        for option, path in outputs.items():
            check_output(path, option)
    except InputError as exc:
        print(f"dcop: error: {exc}", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)


# the choices, re-exported (the options themselves are in dcop.cli.options, which imports typer:
# this module does not, so that a plain `dcop solve` runs without it, dcop.cli.plain)
__all__ = [
    "BackendName",
    "CentralAlgo",
    "DistributedAlgo",
    "DtypeName",
    "FormatName",
    "LogLevel",
    "OrderingName",
]


def check_ordering(ordering: str, order_time: float | None = None) -> None:
    """Refuse, before any work, an ``--ordering`` that names no method and no readable file, or
    a negative ``--order-time`` (exit 2)."""
    from dcop.orders.choose import is_order_name

    if order_time is not None and not (order_time >= 0 and order_time < float("inf")):
        raise InputError("--order-time must be a number of seconds >= 0")
    if not is_order_name(ordering) and not Path(ordering).is_file():
        raise InputError(
            f"--ordering {ordering!r} is neither auto, minfill, mindegree, pseudotree nor an "
            "order file"
        )


def parse_memory(text: str | None) -> float | None:
    """'8G', '512M', '1.5GiB', '1000000' (bytes) -> bytes."""
    if text is None:
        return None
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = 1.0
    if raw and raw[-1] in units:
        scale, raw = units[raw[-1]], raw[:-1]
    try:
        value = float(raw) * scale
    except ValueError:
        raise InputError(f"--max-memory: cannot read {text!r} (use e.g. 8G or 512M)") from None
    if not value > 0:
        raise InputError(f"--max-memory must be positive, not {text!r}")
    return value


def shown_name(file: str | None, problem: Any) -> str:
    """The name a summary's title gives a run: the file's name as given on the command line (a
    file's own header may name something else, e.g. SPOT5's ``../spot5/404.spot``), else the
    problem's name (a problem built in Python)."""
    return Path(file).name if file else str(problem.name)


def read_limits(timeout: float | None, max_memory: float | None) -> ReadLimits:
    """The limits of reading a command's input file: ``timeout`` seconds from the command's
    start, and the memory its run may use (``max_memory`` bytes, None: the default limit) less
    what this process holds already."""
    from dcop.clock import process_started
    from dcop.io import ReadLimits
    from dcop.plan.memory import effective_limit, resident_bytes

    limit = effective_limit(max_memory)
    deadline = None if timeout is None else process_started() + timeout
    return ReadLimits(
        deadline,
        max(0.0, limit.bytes - resident_bytes()),
        f"--timeout {timeout:g} s" if timeout is not None else "the timeout",
        limit.text,
    )


def to_stdout(target: Path | None) -> bool:
    """Whether ``--json`` asks for the document on stdout."""
    return target is not None and str(target) == "-"


def summary_stream(json_target: Path | None) -> TextIO:
    """Where the human summary goes: stdout, or stderr when the JSON goes to stdout."""
    return sys.stderr if to_stdout(json_target) else sys.stdout


def summary_console(json_target: Path | None) -> Console:
    """A rich console on :func:`summary_stream`."""
    return console_for(summary_stream(json_target))


#: The width of a console off a terminal: wide enough that no line or table is cut or wrapped.
LOG_WIDTH = 10_000


def console_for(stream: TextIO) -> Console:
    """A rich console on ``stream``; off a terminal (a log, a pipe) lines are never wrapped or
    cut, so a number is never broken across lines and a long value is never lost."""
    from rich.console import Console  # only to print (rich's import is ~20 ms of start-up)

    if stream.isatty():
        return Console(file=stream)
    return Console(file=stream, width=LOG_WIDTH, soft_wrap=True)


def write_json(data: dict[str, Any], target: Path | None) -> None:
    """Write ``data`` as JSON to a file, or to stdout for '-'."""
    if target is None:
        return
    import json  # only to write a document (its encoder is ~10 ms of start-up)

    text = json.dumps(data, indent=2, sort_keys=False, allow_nan=False)
    if to_stdout(target):
        print(text, flush=True)
        return
    try:
        target.write_text(text + "\n")
    except OSError as exc:  # checked before the work (check_output): the document is not lost
        print(
            f"dcop: warning: cannot write --json {target}: {exc.strerror or exc}; the document "
            "follows on stdout",
            file=sys.stderr,
        )
        print(text, flush=True)


def failure_status(exc: BaseException) -> Status:
    """The result status of a run that ended with ``exc``."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, TableTooLarge | MemoryError):
        return "too_large"
    if isinstance(exc, RunTimeout):
        return "timeout"
    return "error"


def finish_run(
    produce: Callable[[], tuple[dict[str, Any], Callable[[Console], None] | Rows | None]],
    json_target: Path | None,
    failure: Callable[[Status, str], dict[str, Any]],
    quiet: bool = False,
    outputs: Mapping[str, Path | None] | None = None,
) -> NoReturn:
    """Run a command's work, write its result document on every exit path, print the summary,
    and exit with the status's code (see :mod:`dcop.results`).

    ``produce`` returns the document and a summary printer (None: it printed its summary
    itself, and rich is not loaded for nothing), or the summary's :class:`Rows` (written
    without rich: a small solve's start-up); ``failure(status, message)`` makes
    the document of a run that failed (a command keeps there the answer it already had:
    :func:`dcop.results.after_answer`). A closed stdout or stderr drops the summary and the
    failure line, never the document or the exit code. Bad input (InputError) exits 2 after writing its
    document; anything that is not a DcopError is a bug and propagates. ``--json`` and the
    other ``outputs`` ({option: path}) are checked first (:func:`check_outputs`).
    """
    check_outputs({"--json": json_target, **(outputs or {})})
    try:
        interrupt_on_signals()
        raise_pending()  # a signal that came while the command was starting
        doc, show = produce()
        keep_early_signals()  # the work is done: a late signal must not lose its document
    except (DcopError, MemoryError, KeyboardInterrupt) as exc:
        keep_early_signals()  # a second signal must not cut the failure document short
        status = failure_status(exc)
        message = (
            f"interrupted ({exc})" if isinstance(exc, KeyboardInterrupt) and str(exc) else str(exc)
        ) or "interrupted"
        if isinstance(exc, MemoryError):
            message = f"out of memory: {exc}" if str(exc) else "out of memory"
        write_json(failure(status, message), json_target)
        # one word once: "dcop: interrupted (signal SIGINT)", not "dcop: interrupted:
        # interrupted (signal SIGINT)"
        said = message if message.startswith(status) else f"{status}: {message}"
        progress_line(f"dcop: {said}")
        sys.exit(EXIT_BAD_INPUT if isinstance(exc, InputError) else EXIT_CODES[status])
    write_json(doc, json_target)
    if not quiet and show is not None:
        # a closed stdout (rich turns a broken pipe into SystemExit(1)): the document is
        # written already, and the exit code stays the status's
        with contextlib.suppress(OSError, SystemExit):
            if isinstance(show, Rows):
                show.print(summary_stream(json_target))
            else:
                show(summary_console(json_target))
    sys.exit(EXIT_CODES[doc["status"]])


def failure_document(
    status: Status,
    message: str,
    *,
    algo: str,
    z: int | None,
    file: str | None,
    problem: Any,
    task: str = "min",
    times: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The result document of a command that ended without an answer."""
    return result_document(
        problem=problem,
        status=status,
        message=message,
        algo=algo,
        exact=False,
        z=z,
        file=file,
        task=task,
        times=times,
    )


#: Seconds between two lines of a search's bounds off a terminal.
BOUNDS_EVERY_S = 1.0


@contextmanager
def bucket_progress(enabled: bool) -> Iterator[ProgressFn | None]:
    """A rich progress bar over the run's work (joined entries, from the memory plan: one
    large bucket weighs what it costs), only when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]eliminating[/] {task.fields[var]}"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}% of the work"),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("buckets", total=None, var="")

        def report(done: int, total: int, var: str) -> None:
            bar.update(task, completed=done, total=total, var=var)

        yield report


@contextmanager
def anytime_progress(
    enabled: bool, problem: Any
) -> Iterator[tuple[ProgressFn | None, Callable[[float, float, float], None] | None]]:
    """Progress of a solve that may search (``--algo auto``, ``aobb``, ``--timeout``): a bar over
    the bucket work on a terminal, and the search's bounds as they improve, in the file's sense
    (on a terminal one line rewritten in place, off it a plain line at most every
    ``BOUNDS_EVERY_S`` seconds, and the last one). Yields ``(progress, on_bounds)``."""
    if not enabled:
        yield None, None
        return
    from dcop.results import file_value

    tty = sys.stderr.isatty()
    shown: dict[str, Any] = {"at": -math.inf, "text": "", "printed": ""}

    def on_bounds(seconds: float, lower: float, upper: float) -> None:
        ends = sorted((file_value(problem, lower), file_value(problem, upper)))
        gap = ends[1] - ends[0]
        text = f"dcop: search: bounds {ends[0]:.10g} .. {ends[1]:.10g}"
        text += (
            f" (gap {gap:.6g}, {seconds:.3g} s)" if math.isfinite(gap) else f" ({seconds:.3g} s)"
        )
        shown["text"] = text
        if tty:
            with contextlib.suppress(OSError):
                print(f"\r\x1b[K{text}", end="", file=sys.stderr, flush=True)
        elif seconds - shown["at"] >= BOUNDS_EVERY_S:
            shown["at"] = seconds
            shown["printed"] = text
            progress_line(text)

    with bucket_progress(enabled) as progress:
        try:
            yield progress, on_bounds
        finally:
            if tty and shown["text"]:
                progress_line("")
            elif shown["text"] != shown["printed"]:  # off a terminal: the last bounds too
                progress_line(shown["text"])
