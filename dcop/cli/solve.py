"""``dcop solve`` (centralized BE / MBE / MPE) and ``dcop info`` (instance statistics)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table as RichTable

from dcop.cli.app import app
from dcop.cli.common import (
    BackendOption,
    FormatOption,
    InputFile,
    JsonOption,
    bucket_progress,
    write_json,
)
from dcop.errors import InputError
from dcop.inference import SolveResult, default_max_bytes, solve
from dcop.io import read_problem
from dcop.model import Problem
from dcop.ordering import ORDERINGS, elimination_order, induced_width, largest_table

console = Console(stderr=False)


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


@app.command("solve")
def solve_command(
    file: InputFile,
    algo: Annotated[str, typer.Option(help="be (exact) | mbe (bounds).")] = "be",
    z: Annotated[int | None, typer.Option(help="Mini-bucket size for mbe.")] = None,
    ordering: Annotated[str, typer.Option(help="minfill | mindegree | pseudotree.")] = "minfill",
    backend: BackendOption = "numpy",
    fmt: FormatOption = None,
    evidence: Annotated[
        Path | None, typer.Option(exists=True, dir_okay=False, help="UAI .evid file.")
    ] = None,
    dtype: Annotated[str, typer.Option(help="auto | float32 | float64.")] = "auto",
    max_memory: Annotated[
        str | None,
        typer.Option(help="Largest bucket table allowed, e.g. 8G (default: half the free RAM)."),
    ] = None,
    json_out: JsonOption = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing but errors.")] = False,
) -> None:
    """Solve an instance with Bucket Elimination (exact) or Mini-Bucket Elimination (bounds)."""
    problem = read_problem(file, fmt, evidence=evidence)
    with bucket_progress(not quiet) as progress:
        result = solve(
            problem,
            algo=algo,
            z=z,
            ordering=ordering,
            backend=backend,
            dtype=dtype,
            max_bytes=parse_memory(max_memory),
            progress=progress,
        )
    data = result.to_json()
    data["file"] = str(file)
    write_json(data, json_out)
    if not quiet and (json_out is None or str(json_out) != "-"):
        print_result(result)


def print_result(result: SolveResult) -> None:
    """A short human-readable summary of a solve."""
    data = result.to_json()
    p = result.problem
    title = f"{data['algo'].upper()}{'' if result.z is None else f'(z={result.z})'} on {p.name}"
    table = RichTable(title=title, show_header=False)
    if result.exact:
        table.add_row("optimum", _fmt(data["value"]))
    else:
        table.add_row("bound", _fmt(data["bound"]))
        table.add_row("value of assignment", _fmt(data["value"]))
    if p.cost_kind == "neg_ln":
        table.add_row("log10 probability", _fmt(data["log10_probability"]))
    table.add_row("variables / tables", f"{p.n} / {len(p.tables)}")
    table.add_row("induced width", f"{result.induced_width} ({result.ordering})")
    table.add_row("largest table", f"{result.largest_table:.4g} entries")
    table.add_row("backend / dtype", f"{result.backend} / {result.dtype}")
    table.add_row("time", f"{result.times.get('total', 0.0):.4f} s")
    if p.n <= 30:
        labels = data["labels"]
        table.add_row("assignment", " ".join(f"{k}={v}" for k, v in labels.items()))
    console.print(table)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.10g}"
    return str(value)


def describe(problem: Problem) -> dict[str, object]:
    """The statistics ``dcop info`` prints."""
    adjacency = problem.neighbours()
    n = problem.n
    edges = sum(len(v) for v in adjacency.values()) // 2
    sizes = problem.domain_sizes()
    info: dict[str, object] = {
        "name": problem.name,
        "variables": n,
        "max_domain": problem.max_domain(),
        "constraints": len(problem.tables),
        "max_arity": max((t.arity for t in problem.tables), default=0),
        "edges": edges,
        "density": edges / (n * (n - 1) / 2) if n > 1 else 0.0,
        "cost_kind": problem.cost_kind,
        "objective": "max" if problem.sign < 0 else "min",
    }
    for name in ORDERINGS:
        order = elimination_order(name, adjacency)
        biggest = largest_table(adjacency, order, sizes)
        info[f"induced_width_{name}"] = induced_width(adjacency, order)
        info[f"largest_table_{name}"] = biggest
        info[f"memory_bytes_{name}"] = biggest * 8
    return info


@app.command("info")
def info_command(
    file: InputFile,
    fmt: FormatOption = None,
    json_out: JsonOption = None,
) -> None:
    """Print n, d, constraints, density, induced width, largest table and the memory BE needs."""
    problem = read_problem(file, fmt)
    info = describe(problem)
    write_json(info, json_out)
    if json_out is not None and str(json_out) == "-":
        return
    table = RichTable(title=str(file), show_header=False)
    for key, value in info.items():
        if key.startswith("memory_bytes"):
            value = _bytes(float(value))  # type: ignore[arg-type]
        elif isinstance(value, float):
            value = f"{value:.4g}"
        table.add_row(key, str(value))
    table.add_row("memory limit (default)", _bytes(default_max_bytes()))
    console.print(table)


def _bytes(n: float) -> str:
    if n <= 0 or not math.isfinite(n):
        return str(n)
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    k = min(int(math.log(n, 1024)), len(units) - 1)
    return f"{n / 1024**k:.3g} {units[k]}"
