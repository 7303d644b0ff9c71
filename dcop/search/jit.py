"""The search's compiler switch: numba where it is installed, plain Python elsewhere.

The inner loops (:mod:`dcop.search.kernel`, :mod:`dcop.search.local`) are written in the subset
of Python that numba compiles, over flat NumPy arrays. numba compiles them once per machine and
caches the machine code beside the module (``cache=True``), so only the first run pays for the
compile. A machine without a numba wheel, or ``DCOP_NO_JIT=1``, runs the very same functions as
Python: correct, about a hundred times slower.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _NoBlasProbe(importlib.abc.MetaPathFinder):
    """Refuses ``scipy.linalg`` to the thread that imports numba, while it does. numba imports
    it only to learn whether ``np.dot`` can be compiled (``numba.np.arraymath``'s
    ``_check_blas``, at that module's import): 0.2 s of every search's start where SciPy is
    installed (PyMatching brings it), and the search's loops use no BLAS. Other threads import
    it as usual."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "scipy.linalg" and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"{name} is not imported while numba starts", name=name)
        return None


def _import_numba() -> Any:
    """numba, without its probe of SciPy's BLAS (:class:`_NoBlasProbe`)."""
    if "scipy.linalg" in sys.modules:  # already paid for: numba's probe finds it at once
        import numba

        return numba
    probe = _NoBlasProbe()
    sys.meta_path.insert(0, probe)
    try:
        import numba
        import numba.np.arraymath  # its probe runs at its import (numba loads it at a first call)
    finally:
        sys.meta_path.remove(probe)
    return numba


def _compiler(**options: Any) -> Callable[[Any], Any] | None:
    if os.environ.get("DCOP_NO_JIT", "") not in ("", "0"):
        return None
    try:
        numba = _import_numba()
    except ImportError:
        return None
    compiler: Callable[[Any], Any] = numba.njit(cache=True, nogil=True, **options)
    return compiler


_COMPILE = _compiler()
#: numba's own inlining (of its IR, before LLVM): a compiled call that passes arrays costs tens
#: of nanoseconds (each array a struct of seven words, its reference count touched on the way
#: in and out), as much as a small callee's work
_INLINE = _compiler(inline="always")

#: Whether the search's loops run compiled (numba) or as plain Python.
COMPILED = _COMPILE is not None


def jit(fn: F) -> F:
    """Compile ``fn`` with numba when it is available; else return it unchanged."""
    return fn if _COMPILE is None else _COMPILE(fn)


def jit_inline(fn: F) -> F:
    """:func:`jit`, and inlined into every compiled caller: for the small helpers of the inner
    loops, called per node (a call with a model's twenty arrays cost 40 ns of a 60 ns helper)."""
    return fn if _INLINE is None else _INLINE(fn)
