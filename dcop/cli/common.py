"""Pieces shared by CLI commands: options, progress display, JSON output."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from dcop.inference.elimination import ProgressFn

InputFile = Annotated[
    Path,
    typer.Argument(exists=True, dir_okay=False, readable=True, help="Instance file."),
]
FormatOption = Annotated[
    str | None,
    typer.Option("--format", "-f", help="wcsp | uai | yaml | xml (default: by extension)."),
]
BackendOption = Annotated[
    str, typer.Option("--backend", help="numpy | cupy | auto (cupy when a GPU is usable).")
]
JsonOption = Annotated[
    Path | None,
    typer.Option("--json", help="Write the result as JSON to this file ('-' = stdout)."),
]


def write_json(data: dict[str, Any], target: Path | None) -> None:
    """Write ``data`` as JSON to a file, or to stdout for '-'."""
    if target is None:
        return
    text = json.dumps(data, indent=2, sort_keys=False)
    if str(target) == "-":
        print(text)
    else:
        target.write_text(text + "\n")


@contextmanager
def bucket_progress(enabled: bool) -> Iterator[ProgressFn | None]:
    """A rich progress bar over buckets, only when stderr is a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("[bold]eliminating[/] {task.fields[var]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} buckets"),
        TimeElapsedColumn(),
        transient=True,
    ) as bar:
        task = bar.add_task("buckets", total=None, var="")

        def report(done: int, total: int, var: str) -> None:
            bar.update(task, completed=done, total=total, var=var)

        yield report
