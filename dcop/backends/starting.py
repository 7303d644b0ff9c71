"""A device backend started on a thread of its own while the caller reads and orders the file.

CuPy's import, the driver, the CUDA context and the memory pools take 0.5-1 s on a fresh
process (issue 46: a warm-cache ``dcop solve --backend cupy`` paid about 1.3 s above its
in-process total). None of it needs the problem, so ``dcop solve`` starts it before reading the
file and the solve takes the backend once its plan needs one (:func:`dcop.backends.resolve`),
after reading and ordering. A CuPy start releases the GIL in the driver's calls, so most of it
runs beside the main thread's work.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Sequence
from typing import Any

from dcop.backends.base import Compiles, TableBackend, capable


class StartingBackend:
    """``get_backend(name, devices=devices)`` being made on a daemon thread, then warmed up
    (``warm_up(dtypes, ops)``: pools, the generic kernels a min-sum solve runs) where the
    backend compiles kernels and ``ops`` is not empty.

    :meth:`result` waits for it and returns it, or raises what the start raised (no CuPy, no
    device: :class:`~dcop.errors.BackendUnavailable`), in the caller's thread.
    """

    def __init__(
        self,
        name: str,
        devices: Sequence[int] | None = None,
        dtypes: Sequence[str] = ("float32", "float64"),
        ops: Sequence[str] = ("min",),
    ) -> None:
        self.name = name
        self._devices = None if devices is None else tuple(devices)
        self._dtypes = tuple(dtypes)
        self._ops = tuple(ops)
        self._future: concurrent.futures.Future[TableBackend] = concurrent.futures.Future()
        #: seconds the start took on its thread, and those the caller waited for it
        self.start_s = 0.0
        self.waited_s = 0.0
        #: seconds the start spent compiling or loading kernels (a warm-up's generic kernels)
        self.warm_kernels_s = 0.0
        threading.Thread(target=self._start, name="dcop-backend-start", daemon=True).start()

    def _start(self) -> None:
        from dcop.backends import get_backend

        started = time.perf_counter()
        try:
            backend = get_backend(self.name, devices=self._devices)
            if self._ops and capable(backend, Compiles):
                backend.warm_up(dtypes=self._dtypes, ops=self._ops)
            if capable(backend, Compiles):
                self.warm_kernels_s = float(backend.setup.as_dict().get("kernels_s", 0.0))
        except BaseException as exc:  # handed to the caller, raised in its thread
            self.start_s = time.perf_counter() - started
            self._future.set_exception(exc)
            return
        self.start_s = time.perf_counter() - started
        self._future.set_result(backend)

    def result(self) -> TableBackend:
        """The backend, once started (waiting for it here)."""
        started = time.perf_counter()
        try:
            return self._future.result()
        finally:
            self.waited_s += time.perf_counter() - started


def timings(source: Any) -> dict[str, float]:
    """Where ``source`` is a :class:`StartingBackend` that started: the start's seconds on its
    thread (``backend_start``), the caller's wait for it (``backend_wait``) and the seconds its
    warm-up spent compiling or loading kernels (``backend_kernels``); empty otherwise."""
    if not isinstance(source, StartingBackend) or not source._future.done():
        return {}
    out = {"backend_start": source.start_s, "backend_wait": source.waited_s}
    if source._future.exception() is None:
        backend = source._future.result()
        if capable(backend, Compiles):
            out["backend_kernels"] = source.warm_kernels_s
    return out
