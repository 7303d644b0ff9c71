"""``dcop solve --task pr|mar``: which task a file allows, and the summary of a PR/MAR run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dcop.choices import TaskName
from dcop.errors import InputError
from dcop.io import detect_format

if TYPE_CHECKING:
    from rich.console import Console

    from dcop.results.partition import PartitionResult

#: Marginals a MAR summary shows; the document and the solution file hold every one.
MARGINALS_SHOWN = 5

#: Tasks each file format allows; the first is the default.
FORMAT_TASKS: dict[str, tuple[str, ...]] = {"uai": tuple(t.value for t in TaskName)}


def task_for(file: Path, format: str | None, task: str | None) -> str | None:
    """The task to run on ``file``: ``task`` when its format allows it, the format's default when
    ``task`` is None (None for formats without tasks: plain minimisation). Raises InputError (one
    line) for a task the format does not have."""
    kind = detect_format(file, format)
    allowed = FORMAT_TASKS.get(kind, ())
    if task is None:
        return allowed[0] if allowed else None
    if task not in allowed:
        raise InputError(
            f"--task {task} applies to UAI models (.uai) only; this is a {kind} file "
            "(solve it without --task)",
            str(file),
        )
    return task


def print_partition(result: PartitionResult, console: Console) -> None:
    """A short human-readable summary of a PR or MAR run, titled with the file's name; MAR shows
    the first :data:`MARGINALS_SHOWN` marginals and says where the rest are."""
    from rich.table import Table as RichTable

    from dcop.cli.common import shown_name

    data = result.to_json()
    p = result.problem
    label = "PR" if result.task == "pr" else "MAR"
    title = f"{label}: {data['algo'].upper()}{'' if result.z is None else f'(z={result.z})'}"
    table = RichTable(title=f"{title} on {shown_name(result.file, p)}", show_header=False)
    status = data["status"]
    if status == "infeasible":
        table.add_row("status", "infeasible: Z = 0, no assignment has a positive weight")
    elif status != "ok":
        table.add_row("status", f"{status}: {data['message']}")
    elif data["bounds"] is None:
        table.add_row("log10 Z", f"{data['log10_partition']:.10g}")
        table.add_row("ln Z", f"{data['ln_partition']:.10g}")
    else:
        bounds = data["bounds"]
        low, high = (_fmt(bounds[k]) for k in ("log10_lower", "log10_upper"))
        table.add_row("log10 Z bounds", f"{low} .. {high}")
        table.add_row("upper bound", str(bounds["upper_kind"]))
        table.add_row("lower bound", str(bounds["lower_kind"]))
    if "evidence" in p.meta:
        table.add_row("(with evidence)", "Z is P(e) times the model's Z")
    table.add_row("variables / tables", f"{p.n} / {len(p.tables)}")
    table.add_row("induced width", f"{result.induced_width} ({result.ordering})")
    table.add_row("largest table", f"{result.largest_table:.4g} entries")
    table.add_row("backend / dtype", f"{result.backend} / {result.dtype}")
    table.add_row("time", f"{result.times.get('total', 0.0):.4f} s")
    marginals = data["marginals"]
    if marginals is not None:
        names = list(marginals)
        for name in names[:MARGINALS_SHOWN]:
            table.add_row(f"P({name})", " ".join(f"{x:.4g}" for x in marginals[name]))
        rest = len(names) - MARGINALS_SHOWN
        where = "in --json FILE's marginals and in --solution FILE (the UAI MAR format)"
        if rest > 0:
            table.add_row(f"(the other {rest})", where)
        elif names:
            table.add_row("(every marginal)", where)
    console.print(table)


def _fmt(value: object) -> str:
    return f"{value:.10g}" if isinstance(value, float) else str(value)
