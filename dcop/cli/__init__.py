"""Command line: ``dcop <command>``. Each module below registers its commands on ``app``.

A ``DcopError`` becomes one line on stderr and exit code 2; anything else is a bug.
"""

from __future__ import annotations

import importlib
import sys

import click

from dcop.cli.app import app
from dcop.errors import DcopError

#: Modules whose import registers commands on ``app`` (in help order).
COMMAND_MODULES = (
    "dcop.cli.solve",
    "dcop.cli.generate",
)

for _module in COMMAND_MODULES:
    importlib.import_module(_module)


def main() -> None:
    """Console-script entry point."""
    try:
        code = app(standalone_mode=False)
    except DcopError as exc:
        print(f"dcop: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except click.ClickException as exc:  # usage errors: click's own one-line message
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("dcop: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "main"]
