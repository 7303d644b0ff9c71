"""``dcop generate random|scalefree|grid``: the paper's instances, written in any writable format."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dcop.cli.app import app
from dcop.cli.common import FormatName, check_outputs
from dcop.cli.options import FormatOption
from dcop.errors import InputError
from dcop.generators import (
    grid_network,
    network_bytes,
    random_edge_count,
    random_network,
    scale_free_network,
)
from dcop.io import write_problem
from dcop.model import Problem
from dcop.plan.memory import available_bytes, human_bytes

generate_app = typer.Typer(help="Generate the paper's random, scale-free and grid networks.")
app.add_typer(generate_app, name="generate")

NOption = Annotated[int, typer.Option("--n", help="Number of variables.")]
DOption = Annotated[int, typer.Option("--d", help="Domain size.")]
P2Option = Annotated[float, typer.Option("--p2", help="Tightness: share of +inf entries.")]
SeedOption = Annotated[int, typer.Option("--seed", min=0, help="Random seed (0 or more).")]
OutOption = Annotated[
    Path, typer.Option("--output", "-o", help="Output file (.wcsp, .yaml, .xml, .uai).")
]


def _check(output: Path, n: int, d: int, edges: int, pairs: int = 0) -> None:
    """Before anything is made: the output path can be written, and the network fits in memory
    (half of what is available: the writer needs room too). One line and exit 2 otherwise."""
    check_outputs({"--output": output})
    if n < 1 or d < 1:
        return  # the generator names what is wrong
    need = network_bytes(edges, n, d, pairs)
    room = available_bytes() // 2
    if need > room:
        raise InputError(
            f"{edges} tables of {d}x{d} entries over {n} variables need about "
            f"{human_bytes(need)} to make, more than the {human_bytes(room)} (half the "
            "available memory) this command allows; choose a smaller --n, --d or --p1"
        )


def _write(problem: Problem, output: Path, fmt: FormatName | None) -> None:
    """Write the network (its output path and size were checked before it was made)."""
    write_problem(problem, output, fmt.value if fmt is not None else None)
    typer.echo(f"wrote {output} ({problem.n} variables, {len(problem.tables)} tables)")


@generate_app.command("random")
def random_command(
    output: OutOption,
    n: NOption = 10,
    d: DOption = 10,
    p1: Annotated[float, typer.Option("--p1", help="Graph density.")] = 0.3,
    p2: P2Option = 0.5,
    seed: SeedOption = 0,
    fmt: FormatOption = None,
) -> None:
    """Random network: floor(p1 n (n-1) / 2) edges, connected."""
    _check(output, n, d, random_edge_count(n, p1) if 0 <= p1 <= 1 else 0, n * (n - 1) // 2)
    _write(random_network(n, d, p1, p2, seed), output, fmt)


@generate_app.command("scalefree")
def scalefree_command(
    output: OutOption,
    n: NOption = 10,
    d: DOption = 10,
    p2: P2Option = 0.5,
    seed: SeedOption = 0,
    links: Annotated[
        int, typer.Option("--links", help="Edges per new node (the paper's text: 2).")
    ] = 2,
    fmt: FormatOption = None,
) -> None:
    """Scale-free network (Barabási–Albert, two edges per new node unless --links)."""
    _check(output, n, d, max(links, 1) * n)
    _write(scale_free_network(n, d, p2, seed, m=links), output, fmt)


@generate_app.command("grid")
def grid_command(
    output: OutOption,
    n: NOption = 100,
    d: DOption = 10,
    p2: P2Option = 0.5,
    seed: SeedOption = 0,
    fmt: FormatOption = None,
) -> None:
    """Grid network (n must be a square: side x side)."""
    _check(output, n, d, 2 * n)
    _write(grid_network(n, d, p2, seed), output, fmt)
