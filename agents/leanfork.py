"""fork(2) for the agents' template, without the interpreter's at-fork work where none is needed.

``os.fork`` runs CPython's fork hooks in both processes: the import lock, and the Python
handlers registered with ``os.register_at_fork`` - in a template, threading's (which rebuilds its
thread bookkeeping), random's (a new seed) and logging's (new handler locks). Each runs Python
code over objects spread all over the heap, and every page it writes in the child, or in the
template after the fork, is a private page of that child. Measured with the template's imports on
the 2-core VM: a child stopped at once after ``os.fork`` held 0.86 MB of private pages (its
template as many), after fork(2) alone 0.10 MB; threading's handler alone wrote 0.44 MB,
logging's 0.10-0.28 MB, random's 0.06 MB (``benchmarks/agent_dirty.py`` measures the fork).

Those handlers exist for a process whose other threads may hold a lock, or be half-way through
one, at the fork. A template has no other thread (:func:`single_threaded`): then
:func:`lean_fork` calls fork(2) directly, holding the interpreter's lock throughout, and the child
keeps the only thread, its ident, and every lock as the template left it (none held). What the
handlers would still change is random's state, the same in every child without a new seed: the
child asks for one (:func:`after_lean_fork`). Where the process has another thread, it is
``os.fork``.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: fork(2) called with the interpreter's lock held (PyDLL): nothing else runs meanwhile.
_FORK = ctypes.PyDLL(None, use_errno=True).fork
_FORK.restype = ctypes.c_int
_FORK.argtypes = []

#: The handlers a template's imports register (``os.register_at_fork``), by module: what
#: :func:`after_lean_fork` stands for. A test holds the template's imports to these.
REPLACED_HANDLERS = ("threading", "random", "logging")


def single_threaded() -> bool:
    """Whether this process has one OS thread (Linux: ``/proc/self/task``; else unknown: no)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def lean_fork() -> int:
    """``os.fork()``, without the interpreter's at-fork hooks where this process has one
    thread (see the module docstring); the child calls :func:`after_lean_fork` first."""
    if not single_threaded():
        return os.fork()
    pid = int(_FORK())
    if pid < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return pid


def after_lean_fork() -> None:
    """In a child of :func:`lean_fork`: a seed of its own for ``random`` (when it is loaded)."""
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
