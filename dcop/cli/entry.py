"""The ``dcop`` command's entry point (``dcop = dcop.cli.entry:main``, ``python -m dcop``).

What a command needs before anything heavy is imported happens here, in :func:`main`, from the
command's name alone: signals are kept from the first instant (:mod:`dcop.cli.signals`),
``run`` and ``coordinator`` ask for one BLAS thread before NumPy loads, and ``run`` starts the
agents' fork template while the command's own module imports (fast start). Only then does it
import the named command's module (:data:`COMMANDS`), which registers it on ``app``; a plain
``dcop solve`` line is read without typer instead (:func:`plain_call`). The collector stays off
while these imports run, and their objects are frozen out of it before the command's work.
Importing this module, or ``dcop.cli``, does none of it.

A ``DcopError`` becomes one line on stderr and exit code 2; anything else is a bug.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys

# the signal handlers go in first (main), so this module imports no more than it must before:
# a signal before them ends the process without its document (round 4, finding 14)
from dcop.cli.signals import interrupt_on_signals, keep_early_signals

TYPE_CHECKING = False  # typing loads later, with the command (see dcop/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import NoReturn

    import typer

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


def prepare(argv: Sequence[str]) -> None:
    """What ``dcop ARGV`` needs before the heavy imports: one BLAS thread for the commands that
    start agents or a coordinator and for ``solve`` and ``info`` (:mod:`dcop.blas`), for
    ``solve --backend cupy`` the device's start (:func:`dcop.starting.start_early`), and for
    ``run`` the agents' template, which imports while we do."""
    if list(argv[:1]) in (["run"], ["coordinator"], ["solve"], ["info"]):
        from dcop.blas import one_blas_thread

        one_blas_thread()  # before NumPy's import, here and in the agents' template below
    if list(argv[:1]) == ["solve"] and any(a.startswith("--backend") for a in argv):
        # (dcop.starting loads threads and futures: 7 ms a solve on the CPU need not pay)
        from dcop.starting import start_early

        start_early(argv[1:])  # a CuPy backend's start, beside the imports below
    if list(argv[:1]) == ["run"]:
        from dcop.coordinator.processes import prestart_template

        prestart_template()


def command_modules(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """The command modules to import for ``dcop ARGV``: only the named command's, or all of
    them for help, ``--version``, shell completion or an unknown name. Importing every module
    and building every command's options cost each command ~50 ms of start-up."""
    if argv and argv[0] in COMMANDS and "_DCOP_COMPLETE" not in environ:
        return (COMMANDS[argv[0]],)
    return COMMAND_MODULES


def load_app(argv: Sequence[str], environ: Mapping[str, str]) -> typer.Typer:
    """The root application with the commands ``dcop ARGV`` needs registered on it."""
    from dcop.cli.app import app

    for module in command_modules(argv, environ):
        importlib.import_module(module)
    return app


def _distributed_algo_in_solve(argv: Sequence[str]) -> str | None:
    """``dcop solve ... --algo dpop``: the algorithm asked of solve that only ``run`` has."""
    if not argv or argv[0] != "solve":
        return None
    from dcop.cli.solvers import only_distributed

    for k, arg in enumerate(argv):
        value = argv[k + 1] if arg == "--algo" and k + 1 < len(argv) else None
        if arg.startswith("--algo="):
            value = arg.split("=", 1)[1]
        if value is not None and only_distributed(value):
            return value
    return None


def main() -> NoReturn:
    """Console-script entry point."""
    argv = sys.argv[1:]
    if argv == ["--version"]:
        # the root's --version prints just this: answered before typer, click and rich load
        # (they would triple the command's start-up)
        import dcop

        print(f"dcop {dcop.__version__}")
        _leave(0)
    keep_early_signals()  # before the heavy imports: a SIGTERM now still ends in a result document
    # no collector passes while the command imports: what the imports make lives as long as the
    # process, and the passes over it were 6-17 ms of a small solve (2-core VM); the heap is
    # frozen and the collector back on once the command's modules are in (_main)
    gc.disable()
    prepare(argv)
    try:
        _main(argv)
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _leave(code: object) -> NoReturn:
    """End the process: flush the output, run the exit hooks (temporary folders, ...), and skip
    the interpreter's teardown of every imported module and object (40 ms of `dcop run`)."""
    import contextlib

    if not isinstance(code, int):
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code)


#: Commands that write a result document: :func:`dcop.cli.common.finish_run` turns signals into
#: interrupts itself, around their work only (a signal while typer parses must not end them
#: without their document: click makes a KeyboardInterrupt "Aborted!" and exit 1).
DOCUMENT_COMMANDS = ("solve", "run", "coordinator")


def plain_call(argv: Sequence[str], environ: Mapping[str, str]) -> Callable[[], int] | None:
    """``dcop solve ARGV`` on a plain command line, run without typer (:mod:`dcop.cli.plain`:
    typer's import and parse are a third of what a small solve adds to NumPy's import); None
    for every other command line, which typer reads."""
    if list(argv[:1]) != ["solve"] or "_DCOP_COMPLETE" in environ:
        return None
    from dcop.cli.plain import read_solve, run_plain

    options = read_solve(argv[1:])  # only central algorithms: never a distributed one
    if options is None:
        return None
    from dcop.cli.solving import run_solve

    return lambda: run_plain(lambda: run_solve(**options))  # type: ignore[arg-type]


def _main(argv: Sequence[str]) -> None:
    call = plain_call(argv, os.environ)
    if call is None:
        call = _typer_call(argv)
    from dcop.errors import DcopError

    # the imports' objects out of every later pass (main turned the collector off for them)
    gc.freeze()
    gc.enable()

    try:
        code = call()
    except DcopError as exc:
        print(f"dcop: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("dcop: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code)


def _typer_call(argv: Sequence[str]) -> Callable[[], int]:
    """``dcop ARGV`` as typer reads it (the root app with the command's module loaded)."""
    app = load_app(argv, os.environ)
    if list(argv[:1]) not in [[c] for c in DOCUMENT_COMMANDS]:
        interrupt_on_signals()  # the others: finish_run does it around their work
    algo = _distributed_algo_in_solve(argv)
    if algo is not None:
        print(
            f"dcop: error: {algo} is a distributed algorithm: use `dcop run FILE --algo {algo}` "
            "(dcop solve runs be, mbe or auto)",
            file=sys.stderr,
        )
        sys.exit(2)
    from dcop.usage import run_program

    # not standalone: a usage error is reported in one line (typer draws a box)
    return lambda: run_program(lambda: app(prog_name="dcop", standalone_mode=False))


__all__ = ["COMMANDS", "command_modules", "load_app", "main", "plain_call", "prepare"]
