"""The one backend switch: ``get_backend("numpy" | "cupy" | "auto")``.

Algorithms call this and use the returned object's table methods (see ``dcop.tables``); they never
import NumPy's or CuPy's array functions for table work themselves. CuPy is imported lazily, only
when asked for, so ``import dcop`` works on machines without CUDA.
"""

from __future__ import annotations

from typing import Any

from dcop.errors import BackendUnavailable
from dcop.tables import NumpyBackend, TableBackend

BACKEND_NAMES = ("numpy", "cupy", "auto")


def gpu_usable() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # any import or driver failure means "no GPU here"
        return False


def get_backend(name: str = "numpy", device: int | None = None, stream: Any = None) -> TableBackend:
    """Return the table backend called ``name``.

    ``device`` and ``stream`` bind the CuPy backend to one GPU and one (non-blocking) CUDA stream,
    so that each agent process can own its stream; they are ignored by NumPy.
    """
    if name == "numpy":
        return NumpyBackend()
    if name == "auto":
        return get_backend("cupy", device, stream) if gpu_usable() else NumpyBackend()
    if name == "cupy":
        try:
            from dcop.gpu import CupyBackend
        except ImportError as exc:  # dcop.gpu itself imports cupy lazily; this is a missing package
            raise BackendUnavailable(
                f"backend 'cupy' needs CuPy: pip install 'dcop[gpu]' ({exc})"
            ) from exc
        return CupyBackend(device=device, stream=stream)
    raise BackendUnavailable(f"unknown backend {name!r}; use one of {', '.join(BACKEND_NAMES)}")
