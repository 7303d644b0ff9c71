"""The root typer application; command modules register themselves on it.

The root takes ``--version`` and typer's ``--install-completion`` / ``--show-completion``.
"""

from __future__ import annotations

from typing import Annotated

import typer

import dcop

app = typer.Typer(
    name="dcop",
    help="Bucket Elimination (BE/MBE/MPE) and distributed DPOP/ADPOP agents.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


def print_version(value: bool) -> None:
    """``--version``: print the program name and ``dcop.__version__`` and exit.

    Parameters
    ----------
    value
        Whether the flag was given (typer calls this for every invocation).
    """
    if value:
        typer.echo(f"dcop {dcop.__version__}")
        raise typer.Exit()


VersionOption = Annotated[
    bool,
    typer.Option(
        "--version",
        callback=print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
]


@app.callback()
def root(version: VersionOption = False) -> None:
    """Bucket Elimination (BE/MBE/MPE) and distributed DPOP/ADPOP agents."""
