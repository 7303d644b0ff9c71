"""A readable summary of a distributed run's result, for the CLI and the demo (presentation:
it lives with the command line, above the coordinator that produced the result).

One summary, two renderings: rich on a terminal (and in the demo), plain lines of text elsewhere
(a log file, a pipe, a benchmark harness), which do not import rich: its import and its rendering
were 25 ms at the end of every `dcop run` on the 2-core VM.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TextIO

from dcop.results.run import RunResult

if TYPE_CHECKING:
    from rich.console import Console

#: The markup the summary's lines use (rich's), removed in plain text.
_MARKUP = re.compile(r"\[/?(?:bold|red| )+\]")


def natural_key(item: tuple[str, Any]) -> list[Any]:
    """Sort key of ``(name, value)`` by name as people count: x2 before x10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", item[0])]


def _num(x: object) -> str:
    if x is None:
        return "-"
    return f"{x:g}" if isinstance(x, float) else str(x)


@dataclass(frozen=True)
class Summary:
    """What the summary says: lines before the message table, its rows, lines after it."""

    head: tuple[str, ...]
    table_title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    tail: tuple[str, ...]


def run_label(run: RunResult) -> str:
    """What ran: ``DPOP``, ``ADPOP(3)``; an auto run names what it chose,
    ``AUTO (chose ADPOP, z=8)`` (the document's ``algo`` and ``z`` say the same)."""
    if run.spec.algo != "auto":
        return run.spec.label
    ran = run.ran
    task = f" {ran.task.upper()}" if ran.summing else ""
    name = "MB-DPOP" if ran.algo == "mbdpop" else ran.algo.upper()
    return f"AUTO{task} (chose {name}{'' if ran.z is None else f', z={ran.z}'})"


def _answer(run: RunResult, result: dict[str, Any]) -> str | None:
    """The line that states the answer (None for PR/MAR: their answer is a table of its own)."""
    status = result["status"]
    if run.partition is not None:
        return None
    if status == "infeasible":
        return "[bold]infeasible[/bold]: no assignment has a finite cost (proved)"
    if status == "no_solution":
        return (
            f"[bold red]no_solution[/bold red]: {result['message']}; lower bound "
            f"{_num(result['lower_bound'])}, upper bound {_num(result['upper_bound'])}"
        )
    if status != "ok":
        return f"[bold red]{status}[/bold red]: {result['message']}"
    if run.exact:
        return f"optimum {_num(result['cost'])} (the root's bound equals the recomputed cost)"
    return (
        f"lower bound {_num(result['lower_bound'])}, upper bound (recomputed cost "
        f"of the assignment) {_num(result['upper_bound'])}"
    )


def summarize(run: RunResult) -> Summary:
    """The summary of ``run``: answer, bounds, times and the wire metrics beside the theory
    (without a partition function's table, which :func:`print_summary` adds)."""
    from dcop.cli.common import shown_name

    result = run.to_json()
    m = run.metrics
    th = m["theory"]
    candidates = len(run.tree.widths)
    kind = run.tree.kinds[run.tree.tree] if run.tree.kinds else "dfs"
    head = [
        f"[bold]{run_label(run)}[/bold] on {shown_name(run.file, run.problem)}: "
        f"{run.problem.n} agents, candidate tree {run.tree.tree + 1} of {candidates} ({kind}), "
        f"{th['trees']} root(s): {', '.join(run.roots[:5])}"
    ]
    answer = _answer(run, result)
    if answer is not None:
        head.append(answer)
    head.append(
        f"wall {m['wall_s']:.3f} s (launch {run.times.get('launch', 0.0):.3f} s, solve "
        f"{m['solve_wall_s']:.3f} s), simulated "
        f"runtime {m['simulated_runtime_s']:.4f} s, compute total "
        f"{m['compute_s_total']:.4f} s, max per agent {m['compute_s_max']:.4f} s"
    )
    expected = {
        "util": th["util_messages"],
        "value": th["value_messages"],
        "down": th["down_messages"],
        "token": th["token_messages"],
        "degree": th["degree_messages"],
    }
    rows = [
        (kind, str(count), str(m["bytes"].get(kind, 0)), str(expected.get(kind, "")))
        for kind, count in m["messages"].items()
    ]
    rows.append(("total", str(m["total_messages"]), str(m["total_bytes"]), ""))
    tail = [
        f"largest UTIL message {m['largest_util_bytes']} bytes, "
        f"{m['largest_util_entries']} entries (theory d^|sep|: "
        f"{th['largest_util_entries']}); max separator {th['max_separator']}"
    ]
    for cut in result["pseudo_tree"].get("cuts") or []:  # MB-DPOP: each cluster's cut
        tail.append(
            f"cluster at {cut['root']}: {cut['members']} wide agent(s), cut "
            f"{', '.join(cut['cut'])}: {cut['contexts']} contexts in chunks of {cut['chunk']}; "
            f"largest message sent {m['largest_message_bytes']} bytes"
        )
    paths = m.get("handover_tables")
    if paths:  # GPU agents: how the UTILs reached their parents (one GPU, peer GPUs, the host)
        tail.append("UTIL tables handed over: " + ", ".join(f"{p} {n}" for p, n in paths.items()))
    if run.partition is None:
        assignment = result["assignment"] or {}
        shown = ", ".join(f"{k}={v}" for k, v in sorted(assignment.items(), key=natural_key))
        tail.append(f"assignment: {shown}")  # whole: a log must not lose values
    return Summary(
        tuple(head),
        "messages on the wire",
        ("type", "messages", "bytes", "theory"),
        tuple(rows),
        tuple(tail),
    )


def print_summary(run: RunResult, console: Console | None = None) -> None:
    """The summary with rich (a terminal, the demo)."""
    from rich.table import Table as RichTable

    if console is None:
        from dcop.cli.common import console_for

        console = console_for(sys.stdout)
    summary = summarize(run)
    console.print(summary.head[0], soft_wrap=True)  # soft: no line broken inside a number
    if run.partition is not None:
        from dcop.cli.partition import print_partition

        print_partition(replace(run.partition, file=run.file), console)  # titled by the file
    for line in summary.head[1:]:
        console.print(line, soft_wrap=True)
    table = RichTable(*summary.columns, title=summary.table_title)
    for row in summary.rows:
        table.add_row(*row)
    console.print(table)
    for line in summary.tail:
        console.print(line, soft_wrap=True)


def write_summary(run: RunResult, stream: TextIO) -> None:
    """The summary as plain lines of text (off a terminal); a partition function's summary,
    which only rich draws, goes through :func:`print_summary` on ``stream``."""
    if run.partition is not None:
        from dcop.cli.common import console_for

        print_summary(run, console_for(stream))
        return
    summary = summarize(run)
    lines = [_MARKUP.sub("", line) for line in summary.head]
    table = [summary.columns, *summary.rows]
    widths = [max(len(row[k]) for row in table) for k in range(len(summary.columns))]
    lines.append(f"{summary.table_title}:")
    for row in table:  # the type left, the numbers right
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  " + "  ".join(cells).rstrip())
    lines += [_MARKUP.sub("", line) for line in summary.tail]
    stream.write("\n".join(lines) + "\n")
    stream.flush()
