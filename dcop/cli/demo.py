"""``make demo``: the paper's default instance solved centrally and by real agent processes.

Generates the paper's default random network (n=10, d=10, p1=0.3, p2=0.5), solves it with BE and
MBE(z=2..4) on the CPU, then runs DPOP with one OS process per variable over ZeroMQ on localhost,
checks that its cost equals BE's, and prints the network metrics.
"""

from __future__ import annotations

import sys

from rich.table import Table as RichTable

from dcop.cli.common import console_for
from dcop.cli.report import natural_key, print_summary
from dcop.coordinator import run_local
from dcop.generators import random_network
from dcop.inference import solve
from dcop.protocol import RunSpec

console = console_for(sys.stdout)  # off a terminal (make demo | tee): lines not wrapped


def main() -> int:
    """``make demo``: BE, MBE(z=2..4) and a local DPOP run on the paper's default random network;
    returns the exit code."""
    problem = random_network(10, 10, 0.3, 0.5, seed=1)
    console.print(
        f"[bold]instance[/] {problem.name}: {problem.n} variables, {len(problem.tables)} tables"
    )
    exact = solve(problem, "be", ordering="pseudotree")
    table = RichTable(title="centralized (NumPy)")
    for column in ("algo", "bound", "cost of assignment", "w*", "time (s)"):
        table.add_column(column)
    table.add_row(
        "BE",
        f"{exact.lower_bound:g}",
        f"{exact.upper_bound:g}",
        str(exact.induced_width),
        f"{exact.times['total']:.4f}",
    )
    for z in (2, 3, 4):
        r = solve(problem, "mbe", z=z, ordering="pseudotree")
        table.add_row(
            f"MBE(z={z})",
            f"{r.lower_bound:g}",
            f"{r.upper_bound:g}",
            "-",
            f"{r.times['total']:.4f}",
        )
    console.print(table)
    console.print(
        "assignment: "
        + " ".join(f"{k}={v}" for k, v in sorted(exact.assignment.items(), key=natural_key))
    )

    console.print(
        f"\n[bold]DPOP[/]: one agent process per variable ({problem.n}) on localhost, ZeroMQ"
    )
    run = run_local(problem, RunSpec("dpop"), timeout=120.0)
    print_summary(run, console)
    agrees = run.status == "ok" and run.internal_cost == exact.lower_bound
    console.print(
        f"[bold]DPOP cost {run.cost:g} {'equals' if agrees else 'DIFFERS FROM'} "
        f"centralized BE ({exact.lower_bound:g})[/]"
    )
    if not agrees:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
