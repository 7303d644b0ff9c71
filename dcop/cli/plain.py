"""A plain ``dcop solve`` command line, read without typer (issue 46: a fast first answer).

typer and its click cost a solve of a small file about 30 ms of its start on the 2-core VM (their
imports, then the command built from the function's signature, then the parse): a third of
what dcop adds to NumPy's own import. Most command lines are plain: a file and a few options,
each once, with values typer takes as they are. :func:`read_solve` reads such a line into the
arguments typer would pass to :func:`dcop.cli.solving.run_solve`; any other line (``--help``,
an unknown, repeated or abbreviated option, ``--``, a value typer would refuse or might read
otherwise) gives None, and typer reads it: help, usage errors and their exit codes stay typer's
own, word for word.

:data:`SOLVE_OPTIONS` spells ``dcop solve``'s options a second time, as data; the typer
declaration (:func:`dcop.cli.solve.solve_command`) stays the one users see.
``tests/cli/test_plain.py`` checks that the two name the same options, and that on the same
command lines the plain reader gives what typer gives, or nothing.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path

from dcop.choices import BackendName, CentralAlgo, DtypeName, FormatName, TaskName

#: How a value is read: a function of the text that raises ValueError where typer might not
#: take the text as it is (typer then reads the whole line).
Reader = Callable[[str], object]


def _text(value: str) -> str:
    return value


def _path(value: str) -> Path:
    """typer's path check with its defaults: an existing path must be readable."""
    if not value or (os.path.exists(value) and not os.access(value, os.R_OK)):
        raise ValueError(value)
    return Path(value)


def _z(value: str) -> int:
    """``--z``: typer's int (``int(text)``) of at least 1."""
    z = int(value)
    if z < 1:
        raise ValueError(value)
    return z


def _threads(value: str) -> int:
    """``--threads``: typer's int of at least 1."""
    threads = int(value)
    if threads < 1:
        raise ValueError(value)
    return threads


def _number(value: str) -> float:
    """A float as typer reads it (``float(text)``: inf and nan included)."""
    return float(value)


def _seconds(value: str) -> float:
    """``--timeout``: at least 0.001 and finite (typer's range, then its callback)."""
    seconds = float(value)
    if not (math.isfinite(seconds) and seconds >= 0.001):
        raise ValueError(value)
    return seconds


def _choice(kind: type[Enum]) -> Reader:
    """An enum's value, spelled exactly (typer's choices are case-sensitive here)."""

    def read(value: str) -> Enum:
        return kind(value)

    return read


#: ``dcop solve``'s options: each spelling -> the parameter of :func:`run_solve` it fills and
#: how its value is read (None: a flag, True when given).
SOLVE_OPTIONS: dict[str, tuple[str, Reader | None]] = {
    "--algo": ("algo", _choice(CentralAlgo)),
    "--z": ("z", _z),
    "--timeout": ("timeout", _seconds),
    "--task": ("task", _choice(TaskName)),
    "--ordering": ("ordering", _text),
    "--order-time": ("order_time", _number),
    "--backend": ("backend", _choice(BackendName)),
    "--device": ("device", _text),
    "--format": ("fmt", _choice(FormatName)),
    "-f": ("fmt", _choice(FormatName)),
    "--evidence": ("evidence", _path),
    "--dtype": ("dtype", _choice(DtypeName)),
    "--max-memory": ("max_memory", _text),
    "--json": ("json_out", _path),
    "--solution": ("solution", _path),
    "--threads": ("threads", _threads),
    "--quiet": ("quiet", None),
    "-q": ("quiet", None),
}
#: The positional argument: the instance file.
SOLVE_FILE = "file"


def read_solve(args: Sequence[str]) -> dict[str, object] | None:
    """The arguments of :func:`dcop.cli.solving.run_solve` for ``dcop solve ARGS``, those given
    only (the rest keep its defaults), or None where typer must read the line."""
    out: dict[str, object] = {}
    k = 0
    while k < len(args):
        arg = args[k]
        k += 1
        if not arg.startswith("-"):
            if SOLVE_FILE in out:
                return None  # an extra argument: typer's error
            try:
                out[SOLVE_FILE] = _path(arg)
            except ValueError:
                return None
            continue
        name, eq, inline = arg.partition("=")
        if not name.startswith("--"):
            eq, inline = "", ""  # a short option takes no "=": "-f=uai" is typer's to read
            name = arg
        if name not in SOLVE_OPTIONS:
            return None  # --help, --, an unknown or abbreviated option, -qf, a negative number
        param, read = SOLVE_OPTIONS[name]
        if param in out:
            return None  # given twice (or as two spellings): typer's rules, not ours
        if read is None:
            if eq:
                return None  # a flag with a value: typer's error
            out[param] = True
            continue
        if eq:
            value = inline
        elif k < len(args):
            value = args[k]
            k += 1
        else:
            return None  # no value: typer's error
        try:
            out[param] = read(value)
        except ValueError:
            return None
    return out if SOLVE_FILE in out else None


def run_plain(call: Callable[[], object]) -> int:
    """Run a command read plainly as typer's click would run it in
    :func:`dcop.usage.run_program`: an interrupt that reaches here is "interrupted" (exit 130,
    after click's empty line), a broken pipe exit 1."""
    import errno

    try:
        code = call()
    except (EOFError, KeyboardInterrupt):
        print(file=sys.stderr)
        print("dcop: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        sys.exit(1)
    return code if isinstance(code, int) else 0
