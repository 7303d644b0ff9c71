"""Table backends, and the one backend switch: ``get_backend("numpy" | "cupy" | "placed" | "auto")``.

* ``base``    the contract: the base protocol every backend keeps (``TableBackend``), the
  capability protocols some add and how code asks for one (``capable``), ``BackendInfo``
* ``numpy``   NumPy's backend (the host)
* ``placed``  a GPU agent's backend: each bucket on the CPU or the GPU by its size
* CuPy's backends (one GPU, several) are ``dcop.gpu``'s, imported only when asked for.

Algorithms call :func:`get_backend` and use the returned object's table methods; they never
import NumPy's or CuPy's array functions for table work themselves. CuPy is imported lazily, only
when asked for, so ``import dcop`` works on machines without CUDA.

- ``numpy``: the host backend.
- ``cupy``: one GPU (``device``), or with several ``devices`` a backend that splits a large
  bucket's output along its leading variables over them (:class:`dcop.gpu.multi.MultiGpuBackend`).
- ``placed``: a GPU agent's backend: each bucket on the CPU or the device by its size
  (:class:`dcop.backends.placed.PlacedBackend`, threshold ``min_entries``); with several ``devices``
  its large buckets are split over them, the rest on ``device`` (made lazily: an agent whose
  buckets are small never opens the others).
- ``auto``: ``cupy`` when a GPU is usable, else ``numpy``.

The devices themselves come from a ``--gpu`` value through :func:`dcop.placement.gpu_devices`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dcop.backends.base import TableBackend
from dcop.backends.numpy import NumpyBackend
from dcop.errors import BackendUnavailable

BACKEND_NAMES = ("numpy", "cupy", "placed", "auto")


def gpu_count() -> int:
    """CUDA devices visible to this process (0 without CuPy or a driver)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # any import or driver failure means "no GPU here"
        return 0


def gpu_usable() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return gpu_count() > 0


def resolve_backend(backend: str | Any) -> TableBackend:
    """The backend a solve runs on: ``get_backend(backend)`` for a name, the started backend for
    a :class:`dcop.starting.StartingBackend` (waiting for its start), else ``backend``
    itself. A solve calls this where it first needs the backend, so that a start on its own
    thread runs beside the reading and the ordering."""
    if isinstance(backend, str):
        return get_backend(backend)
    from dcop.starting import StartingBackend

    if isinstance(backend, StartingBackend):
        return backend.result()
    return backend  # type: ignore[no-any-return]


def backend_name(backend: str | Any) -> str:
    """The name of a backend given as :func:`resolve_backend` takes it, without waiting for one
    still starting (``auto`` stays ``auto`` until it has started)."""
    return backend if isinstance(backend, str) else str(backend.name)


def get_backend(
    name: str = "numpy",
    device: int | None = None,
    stream: Any = None,
    *,
    devices: Sequence[int] | None = None,
    min_entries: int | None = None,
    **gpu_options: Any,
) -> TableBackend:
    """Return the table backend called ``name``.

    ``device`` and ``stream`` bind a GPU backend to one GPU and one (non-blocking) CUDA stream,
    so that each agent process can own its stream; ``devices`` (two or more) gives ``cupy`` a
    bucket split over those GPUs. ``min_entries`` is the ``placed`` backend's threshold and
    ``gpu_options`` go to :class:`dcop.gpu.CupyBackend`. NumPy ignores them all.
    """
    if name == "numpy":
        return NumpyBackend()
    if name == "auto":
        if not gpu_usable():
            return NumpyBackend()
        return get_backend("cupy", device, stream, devices=devices, **gpu_options)
    if name not in ("cupy", "placed"):
        raise BackendUnavailable(f"unknown backend {name!r}; use one of {', '.join(BACKEND_NAMES)}")
    try:
        from dcop.gpu import CupyBackend
    except ImportError as exc:  # dcop.gpu itself imports cupy lazily; this is a missing package
        raise BackendUnavailable(
            f"backend {name!r} needs CuPy: pip install 'dcop[gpu]' ({exc})"
        ) from exc
    several = devices is not None and len(set(devices)) > 1
    if name == "placed":
        from dcop.backends.placed import PlacedBackend

        if several:
            from dcop.gpu.multi import MultiGpuBackend

            assert devices is not None
            first = int(devices[0]) if device is None else int(device)
            ordered = [first, *(int(d) for d in devices if int(d) != first)]
            gpu: Any = MultiGpuBackend(ordered, lazy=True, stream=stream, **gpu_options)
        else:
            gpu = CupyBackend(device=device, stream=stream, **gpu_options)
        return PlacedBackend(NumpyBackend(), gpu, min_entries)
    if several:
        from dcop.gpu.multi import MultiGpuBackend

        assert devices is not None
        return _heap_frozen(MultiGpuBackend(devices, stream=stream, **gpu_options))
    if devices is not None and len(devices) == 1:
        device = devices[0]
    return _heap_frozen(CupyBackend(device=device, stream=stream, **gpu_options))


#: Whether :func:`_heap_frozen` has frozen the heap in this process.
_frozen = False


def _heap_frozen(backend: TableBackend) -> TableBackend:
    """``backend``, once the heap alive now is out of the collector's full passes (``gc.freeze``,
    once a process). CuPy brings hundreds of thousands of long-lived objects; a full collection
    walks them all, tens of milliseconds inside whichever solve it falls in: a BE solve repeated
    on an H200 spread 1.65x between warm calls, where the CPU's spread 1.1-1.3x (an agent freezes
    its heap after set-up for the same reason: ``dcop.agents.pauses``). Objects frozen are still
    freed when no longer referenced; only a cycle among them would stay."""
    global _frozen
    if not _frozen:
        import gc

        gc.freeze()
        _frozen = True
    return backend
