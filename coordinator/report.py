"""A readable summary of a distributed run's result (rich), for the CLI and the demo."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dcop.coordinator.result import RunResult

if TYPE_CHECKING:
    from rich.console import Console


def _num(x: object) -> str:
    if x is None:
        return "-"
    return f"{x:g}" if isinstance(x, float) else str(x)


def print_summary(run: RunResult, console: Console | None = None) -> None:
    """A readable summary: answer, bounds, times and the wire metrics beside the theory."""
    from rich.console import Console  # imported to print only (~20 ms of a command's start)
    from rich.table import Table as RichTable

    console = console or Console()
    result = run.to_json()
    m = run.metrics
    th = m["theory"]
    console.print(
        f"[bold]{run.spec.label}[/bold] on {run.problem.name}: {run.problem.n} agents, "
        f"{th['trees']} tree(s), roots {', '.join(run.roots[:5])}"
    )
    status = result["status"]
    if run.partition is not None:
        from dcop.cli.partition import print_partition

        print_partition(run.partition, console)
    elif status == "infeasible":
        console.print("[bold]infeasible[/bold]: no assignment has a finite cost (proved)")
    elif status != "ok":
        console.print(f"[bold red]{status}[/bold red]: {result['message']}")
    elif run.exact:
        console.print(
            f"optimum {_num(result['cost'])} (the root's bound equals the recomputed cost)"
        )
    else:
        console.print(
            f"lower bound {_num(result['lower_bound'])}, upper bound (recomputed cost "
            f"of the assignment) {_num(result['upper_bound'])}"
        )
    console.print(
        f"wall {m['wall_s']:.3f} s (solve {m['solve_wall_s']:.3f} s), simulated "
        f"runtime {m['simulated_runtime_s']:.4f} s, compute total "
        f"{m['compute_s_total']:.4f} s, max per agent {m['compute_s_max']:.4f} s"
    )
    table = RichTable("type", "messages", "bytes", "theory", title="messages on the wire")
    expected = {
        "util": th["util_messages"],
        "value": th["value_messages"],
        "down": th["down_messages"],
        "token": th["token_messages"],
        "degree": th["degree_messages"],
    }
    for kind, count in m["messages"].items():
        table.add_row(kind, str(count), str(m["bytes"].get(kind, 0)), str(expected.get(kind, "")))
    table.add_row("total", str(m["total_messages"]), str(m["total_bytes"]), "")
    console.print(table)
    console.print(
        f"largest UTIL message {m['largest_util_bytes']} bytes, "
        f"{m['largest_util_entries']} entries (theory d^|sep|: "
        f"{th['largest_util_entries']}); max separator {th['max_separator']}"
    )
    if run.partition is not None:
        return
    assignment = result["assignment"] or {}
    shown = ", ".join(f"{k}={v}" for k, v in list(assignment.items())[:12])
    console.print(f"assignment: {shown}{' ...' if len(assignment) > 12 else ''}")
