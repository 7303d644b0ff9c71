"""SIGTERM, SIGHUP and SIGINT end a command alike, from the first instant of the process.

The handlers go in before the command line's heavy imports (``dcop.cli.entry.main`` installs them first
thing): a signal that arrives while Python still imports is kept in :data:`PENDING`, and
:func:`raise_pending` turns it into the same ``KeyboardInterrupt`` once the command is running,
so that even then the command stops its agents, removes its files and writes its result
document with status ``interrupted``. Standard library only: it loads in microseconds.

A command that writes a result document (solve, run, coordinator) keeps signals pending until
its work starts inside :func:`dcop.cli.common.finish_run`, and again once the work is done: a
signal while typer parses the command line, or while the document is written, must not end the
process without its document (click turns a KeyboardInterrupt outside the command into
"Aborted!" and exit 1).
"""

from __future__ import annotations

import signal
from types import FrameType

#: Signals that arrived before the command could act on them.
PENDING: list[int] = []
SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _keep(signum: int, _frame: FrameType | None) -> None:
    PENDING.append(signum)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_IGN)  # once is enough: clean-up must not be interrupted
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def keep_early_signals() -> None:
    """Until :func:`interrupt_on_signals`: remember SIGTERM/SIGHUP/SIGINT instead of dying of
    them (a SIGINT during the imports used to end in a KeyboardInterrupt traceback)."""
    for signum in SIGNALS:
        signal.signal(signum, _keep)


def interrupt_on_signals() -> None:
    """From now on SIGTERM/SIGHUP/SIGINT raise KeyboardInterrupt (see the module docstring)."""
    for signum in SIGNALS:
        signal.signal(signum, _interrupt)


def raise_pending() -> None:
    """Raise the KeyboardInterrupt of a signal that arrived during start-up, if one did."""
    if PENDING:
        signum = PENDING.pop()
        signal.signal(signum, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
