"""``dcop batch``: files × algorithms × z values × repeats, one row (and one result document)
each. The rows are run by :mod:`dcop.cli.batch_rows`; this module is the command, its progress
and its summary."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from dcop.cli.app import app
from dcop.cli.batch_rows import (
    ALGOS,
    COLUMNS,
    BatchSettings,
    Row,
    RowSink,
    batch_document,
    choose_auto,
    run_batch,
    summary_lines,
)
from dcop.cli.common import (
    check_ordering,
    check_outputs,
    parse_memory,
    progress_line,
    summary_stream,
    write_json,
)
from dcop.cli.options import (
    JsonOption,
    OrderingOption,
    OrderTimeOption,
    QuietOption,
    ThreadsOption,
)
from dcop.cli.solvers import check_threads, needs_z
from dcop.errors import InputError
from dcop.results import EXIT_CODES

__all__ = ["COLUMNS", "batch_command", "choose_auto"]


def split_list(values: Sequence[str] | None, what: str) -> list[str]:
    """``--algo be,mbe --algo dpop`` -> ``["be", "mbe", "dpop"]`` (repeated or comma-separated)."""
    out = [part.strip() for value in values or () for part in value.split(",") if part.strip()]
    if values and not out:
        raise InputError(f"{what}: empty list")
    return out


def parse_zs(values: Sequence[str] | None) -> tuple[int, ...]:
    """``--z 2,3 --z 4`` -> ``(2, 3, 4)``; a usage error for anything but positive integers."""
    zs = []
    for text in split_list(values, "--z"):
        if not text.isdigit() or int(text) < 1:
            raise InputError(f"--z: want positive integers like 2,3, not {text!r}")
        zs.append(int(text))
    return tuple(dict.fromkeys(zs))


@contextmanager
def row_progress(total: int, enabled: bool) -> Iterator[Any]:
    """Report rows: a rich progress bar on a terminal, otherwise one plain line per row on
    stderr. Yields ``report(done, row)``."""
    if enabled and sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=Console(stderr=True),
            transient=True,
        ) as bar:
            task = bar.add_task("batch", total=total)

            def advance(done: int, row: Row) -> None:
                bar.update(task, completed=done, description=row.job.path.name)

            yield advance
        return

    def line(done: int, row: Row) -> None:
        if enabled:
            doc = row.document
            shown = doc["cost"] if doc["status"] == "ok" else doc["message"]
            algo = doc["algo"] + (f"({doc['z']})" if doc["z"] is not None else "")
            progress_line(
                f"[{done}/{total}] {row.job.path} {algo}: {doc['status']} {shown} "
                f"({row.wall_s:.3g} s)"
            )

    yield line


def print_rows(rows: Sequence[Row], json_target: Path | None) -> None:
    """The human summary: on a terminal a rich table, elsewhere plain lines; nothing is cut."""
    stream = summary_stream(json_target)
    if not stream.isatty():
        print(f"dcop batch: {len(rows)} rows", file=stream)
        for text in summary_lines(rows):
            print(text, file=stream)
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table as RichTable

    table = RichTable(title=f"dcop batch: {len(rows)} rows", box=box.SIMPLE_HEAD)
    for name in ("file", "algo", "status", "result", "wall"):
        table.add_column(name, overflow="fold")
    *lines, counts = summary_lines(rows)
    for text in lines:
        table.add_row(*text.split("  "))
    console = Console(file=stream)
    console.print(table)
    console.print(counts)


@app.command("batch")
def batch_command(
    files: Annotated[list[Path], typer.Argument(help="Instance files.")],
    algo: Annotated[
        list[str] | None,
        typer.Option(
            "--algo",
            autocompletion=lambda: list(ALGOS),
            help=f"Algorithms, comma-separated or repeated: {', '.join(ALGOS)} (default auto: "
            "anytime, as dcop solve --algo auto --timeout: be once it fits memory and time, else mbe "
            "with z raised until --timeout).",
        ),
    ] = None,
    z: Annotated[
        list[str] | None,
        typer.Option("--z", help="Mini-bucket sizes of mbe and adpop, e.g. 2,3,4."),
    ] = None,
    repeat: Annotated[int, typer.Option("--repeat", help="Runs of every row.")] = 1,
    jobs: Annotated[
        int,
        typer.Option("--jobs", "-j", help="Centralized rows run at once (distributed: one)."),
    ] = 1,
    timeout: Annotated[
        float, typer.Option(help="Seconds per row; a row over it is a timeout row.")
    ] = 600.0,
    max_memory: Annotated[
        str | None,
        typer.Option(
            help="Memory each be/mbe/auto row may use, e.g. 8G (default: what the solver process "
            "holds plus half the available memory), as dcop solve --max-memory."
        ),
    ] = None,
    ordering: OrderingOption = "auto",
    order_time: OrderTimeOption = None,
    threads: ThreadsOption = None,
    csv_out: Annotated[
        Path | None, typer.Option("--csv", dir_okay=False, help="Write one row per line here.")
    ] = None,
    jsonl_out: Annotated[
        Path | None,
        typer.Option("--jsonl", dir_okay=False, help="Write one result document per line here."),
    ] = None,
    json_out: JsonOption = None,
    quiet: QuietOption = False,
) -> None:
    """Run algorithms over files: one row per file, algorithm, z and repeat, in that order.

    Each row holds the file, the algorithm that ran, its z, the repeat, its status (as in the
    result document), the exit code the single command would have returned (2: bad input), the
    cost and bounds in the file's own sense, the times (wall_s: the row's wall time; total_s,
    eliminate_s, solve_s: the solver's; simulated_s: distributed simulated time), messages,
    bytes and the largest message of distributed rows, induced width and largest table of
    centralized rows, and the message of a failure. A row that fails does not end the batch:
    the exit code is 0 when the batch ran (130 when interrupted).
    """
    check_ordering(ordering, order_time)
    algos = split_list(algo, "--algo") or ["auto"]
    zs = parse_zs(z)
    if zs and not any(needs_z(a) for a in algos):
        print(f"dcop: warning: --z is ignored by --algo {','.join(algos)}", file=sys.stderr)
    check_threads(algos, threads)
    settings = BatchSettings(
        tuple(dict.fromkeys(algos)),
        zs,
        timeout,
        parse_memory(max_memory),
        ordering,
        repeat,
        jobs,
        order_time,
        threads,
    )
    check_outputs({"--csv": csv_out, "--jsonl": jsonl_out, "--json": json_out})
    planned = settings.plan(files)
    with ExitStack() as stack:
        sink = RowSink(stack, csv_out, jsonl_out)
        report = stack.enter_context(row_progress(len(planned), not quiet))
        done = [0]

        def on_row(row: Row) -> None:
            sink.add(row)
            done[0] += 1
            report(done[0], row)

        rows = run_batch(planned, settings, on_row)
    sink.spill(summary_stream(json_out))  # an output whose file failed: no row is lost
    write_json(batch_document(settings, rows), json_out)
    if not quiet:
        print_rows(rows, json_out)
    interrupted = any(row.document["status"] == "interrupted" for row in rows)
    raise typer.Exit(EXIT_CODES["interrupted"] if interrupted else 0)
