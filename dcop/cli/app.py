"""The root typer application; command modules register themselves on it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="dcop",
    help="Bucket Elimination (BE/MBE/MPE) and distributed DPOP/ADPOP agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
