"""SIGTERM and SIGHUP end a command as Ctrl-C does, from the first instant of the process.

The handlers go in before the command line's heavy imports (``dcop.cli.entry.main`` installs them first
thing): a signal that arrives while Python still imports is kept in :data:`PENDING`, and
:func:`raise_pending` turns it into the same ``KeyboardInterrupt`` once the command is running,
so that even then the command stops its agents, removes its files and writes its result
document with status ``interrupted``. Standard library only: it loads in microseconds.
"""

from __future__ import annotations

import signal
from types import FrameType

#: Signals that arrived before the command could act on them.
PENDING: list[int] = []
SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _keep(signum: int, _frame: FrameType | None) -> None:
    PENDING.append(signum)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signum, signal.SIG_IGN)  # once is enough: clean-up must not be interrupted
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def keep_early_signals() -> None:
    """Until :func:`interrupt_on_signals`: remember SIGTERM/SIGHUP instead of dying of them."""
    for signum in SIGNALS:
        signal.signal(signum, _keep)


def interrupt_on_signals() -> None:
    """From now on SIGTERM/SIGHUP raise KeyboardInterrupt (see the module docstring)."""
    for signum in SIGNALS:
        signal.signal(signum, _interrupt)


def raise_pending() -> None:
    """Raise the KeyboardInterrupt of a signal that arrived during start-up, if one did."""
    if PENDING:
        signum = PENDING.pop()
        signal.signal(signum, signal.SIG_IGN)
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
