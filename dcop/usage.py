"""Usage errors as one line, for every program of the package (``dcop``, ``dcop-agent``).

typer draws a usage error as a box of several lines; a log or a script wants one:
``dcop solve: error: Invalid value for '--algo': ... (see dcop solve --help)``, exit code 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

try:  # typer 0.28 carries its own click; older ones use click itself
    from typer._click.exceptions import ClickException, UsageError
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import Abort, ClickException, UsageError  # type: ignore[no-redef]


def one_line_error(exc: ClickException) -> str:
    """A usage error as one line: ``PROGRAM COMMAND: error: WHAT (see PROGRAM COMMAND --help)``."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "dcop"
    what = " ".join(exc.format_message().split())
    hint = f" (see {where} --help)" if isinstance(exc, UsageError) else ""
    return f"{where}: error: {what}{hint}"


def run_program(call: Callable[[], object], prog: str = "dcop") -> int:
    """Run a typer/click program in non-standalone mode (``call``) and return its exit code;
    usage errors are reported in one line on stderr (exit 2), an abort as "interrupted" (130).
    A program run without arguments that shows its help does so as typer would."""
    try:
        code = call()
    except ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":
            ctx = getattr(exc, "ctx", None)
            print(ctx.get_help() if ctx is not None else "", file=sys.stderr)
        else:
            print(one_line_error(exc), file=sys.stderr)
        return exc.exit_code
    except Abort:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return code if isinstance(code, int) else 0
