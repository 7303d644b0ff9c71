"""Command line: ``dcop <command>``. Each module below registers its commands on ``app``.

A ``DcopError`` becomes one line on stderr and exit code 2; anything else is a bug.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import sys
from collections.abc import Mapping
from typing import NoReturn

from dcop.cli.signals import interrupt_on_signals, keep_early_signals

keep_early_signals()  # before the heavy imports: a SIGTERM now still ends in a result document

if sys.argv[1:2] in (["run"], ["coordinator"]):
    from dcop.blas import one_blas_thread

    one_blas_thread()  # before NumPy's import, here and in the agents' template started below
if sys.argv[1:2] == ["run"]:  # fork agents from a template that imports while we do (fast start)
    from dcop.coordinator.processes import prestart_template

    prestart_template()

from dcop.cli.app import app  # noqa: E402  (after the signal handlers, on purpose)
from dcop.errors import DcopError  # noqa: E402

#: Each command and the module whose import registers it on ``app`` (in help order).
COMMANDS = {
    "solve": "dcop.cli.solve",
    "info": "dcop.cli.solve",
    "generate": "dcop.cli.generate",
    "peers": "dcop.cli.distributed",
    "coordinator": "dcop.cli.distributed",
    "run": "dcop.cli.distributed",
    "batch": "dcop.cli.batch",
    "deploy": "dcop.cli.deploy",
    "keys": "dcop.cli.deploy",
}
COMMAND_MODULES = tuple(dict.fromkeys(COMMANDS.values()))


def command_modules(argv: list[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """The command modules to import for ``dcop ARGV``: only the named command's, or all of
    them for help, ``--version``, shell completion or an unknown name. Importing every module
    and building every command's options cost each command ~50 ms of start-up."""
    if argv and argv[0] in COMMANDS and "_DCOP_COMPLETE" not in environ:
        return (COMMANDS[argv[0]],)
    return COMMAND_MODULES


for _module in command_modules(sys.argv[1:], os.environ):
    importlib.import_module(_module)


def _distributed_algo_in_solve(argv: list[str]) -> str | None:
    """``dcop solve ... --algo dpop``: the algorithm asked of solve that only ``run`` has."""
    if not argv or argv[0] != "solve":
        return None
    for k, arg in enumerate(argv):
        value = argv[k + 1] if arg == "--algo" and k + 1 < len(argv) else None
        if arg.startswith("--algo="):
            value = arg.split("=", 1)[1]
        if value in ("dpop", "adpop"):
            return value
    return None


def main() -> NoReturn:
    """Console-script entry point."""
    try:
        _main()
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _leave(code: object) -> NoReturn:
    """End the process: flush the output, run the exit hooks (temporary folders, ...), and skip
    the interpreter's teardown of every imported module and object (40 ms of `dcop run`)."""
    if not isinstance(code, int):
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)


#: Commands that write a result document: finish_run turns signals into interrupts itself.
DOCUMENT_COMMANDS = ("solve", "run", "coordinator")


def _main() -> None:
    if sys.argv[1:2] not in [[c] for c in DOCUMENT_COMMANDS]:
        interrupt_on_signals()
    algo = _distributed_algo_in_solve(sys.argv[1:])
    if algo is not None:
        print(
            f"dcop: error: {algo} is a distributed algorithm: use `dcop run FILE --algo {algo}` "
            "(dcop solve runs be or mbe)",
            file=sys.stderr,
        )
        sys.exit(2)
    try:
        app(prog_name="dcop")  # standalone: typer reports usage errors itself (exit 2)
    except DcopError as exc:
        print(f"dcop: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("dcop: interrupted", file=sys.stderr)
        sys.exit(130)


__all__ = ["app", "main"]
