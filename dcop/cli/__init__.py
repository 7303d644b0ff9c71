"""Command line: ``dcop <command>``. Each module below registers its commands on ``app``.

A ``DcopError`` becomes one line on stderr and exit code 2; anything else is a bug.
"""

from __future__ import annotations

import importlib
import sys

from dcop.cli.app import app
from dcop.errors import DcopError

#: Modules whose import registers commands on ``app`` (in help order).
COMMAND_MODULES = (
    "dcop.cli.solve",
    "dcop.cli.generate",
    "dcop.cli.distributed",
    "dcop.cli.deploy",
)

for _module in COMMAND_MODULES:
    importlib.import_module(_module)


def main() -> None:
    """Console-script entry point."""
    try:
        app()  # standalone: typer reports usage errors itself (exit 2)
    except DcopError as exc:
        print(f"dcop: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("dcop: interrupted", file=sys.stderr)
        sys.exit(130)


__all__ = ["app", "main"]
