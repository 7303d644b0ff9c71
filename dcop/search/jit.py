"""The search's compiler switch: numba where it is installed, plain Python elsewhere.

The inner loops (:mod:`dcop.search.kernel`, :mod:`dcop.search.local`) are written in the subset
of Python that numba compiles, over flat NumPy arrays. numba compiles them once per machine and
caches the machine code beside the module (``cache=True``), so only the first run pays for the
compile. A machine without a numba wheel, or ``DCOP_NO_JIT=1``, runs the very same functions as
Python: correct, about a hundred times slower.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _compiler(**options: Any) -> Callable[[Any], Any] | None:
    if os.environ.get("DCOP_NO_JIT", "") not in ("", "0"):
        return None
    try:
        import numba
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
