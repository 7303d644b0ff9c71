"""A device backend started on a thread of its own while the caller reads and orders the file.

CuPy's import, the driver, the CUDA context and the memory pools take 0.5-1 s on a fresh
process (issue 46: a warm-cache ``dcop solve --backend cupy`` paid about 1.3 s above its
in-process total). None of it needs the problem, so ``dcop solve`` starts it before reading the
file and the solve takes the backend once its plan needs one
(:func:`dcop.backends.resolve_backend`), after reading and ordering. A CuPy start releases the
GIL in the driver's calls, so much of it runs beside the main thread's work.

``dcop solve --backend cupy`` starts it earlier still: the entry point, before the command's own
imports (typer, NumPy, dcop's modules), from the arguments alone (:func:`start_early`); the
command takes that start (:func:`take_early`) when its parsed options ask for the same.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# nothing heavy at import: the entry point starts a device here before NumPy's own import, and
# every solve asks whether its backend is a start (dcop.backends.resolve_backend): the thread and
# its future (concurrent.futures loads logging, ~7 ms) are imported by a start only
if TYPE_CHECKING:
    import concurrent.futures

    from dcop.backends.base import TableBackend


class StartingBackend:
    """``get_backend(name, devices=devices)`` being made on a daemon thread, then warmed up
    (``warm_up(dtypes, ops)``: pools, the generic kernels a min-sum solve runs) where the
    backend compiles kernels and ``ops`` is not empty.

    With ``begin=False`` the thread waits for :meth:`begin` (or the first :meth:`result`): a
    caller that may not need the device at all (``auto`` on a small problem, which the CPU
    ends before a device has started) decides first, and a start it does not take costs
    nothing, not even the import's share of the GIL beside the CPU's solve.

    :meth:`result` waits for it and returns it, or raises what the start raised (no CuPy, no
    device: :class:`~dcop.errors.BackendUnavailable`), in the caller's thread.
    """

    def __init__(
        self,
        name: str,
        devices: Sequence[int] | None = None,
        dtypes: Sequence[str] = ("float32", "float64"),
        ops: Sequence[str] = ("min",),
        begin: bool = True,
    ) -> None:
        import concurrent.futures

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
        #: of start_s: making the backend (CuPy's import, the CUDA context), then its warm-up
        self.init_s = 0.0
        self.warm_up_s = 0.0
        self._begun = False
        if begin:
            self.begin()

    def begin(self) -> None:
        """Start the device's thread, once (a start made with ``begin=False`` waits for this)."""
        import threading

        if self._begun:
            return
        self._begun = True
        threading.Thread(target=self._start, name="dcop-backend-start", daemon=True).start()

    @property
    def begun(self) -> bool:
        """Whether the start's thread was started (a deferred start that nobody took: False)."""
        return self._begun

    def _start(self) -> None:
        from dcop.backends import get_backend
        from dcop.backends.base import Compiles, capable

        started = time.perf_counter()
        try:
            backend = get_backend(self.name, devices=self._devices)
            made = time.perf_counter()
            self.init_s = made - started
            if self._ops and capable(backend, Compiles):
                backend.warm_up(dtypes=self._dtypes, ops=self._ops)
            self.warm_up_s = time.perf_counter() - made
            if capable(backend, Compiles):
                self.warm_kernels_s = float(backend.setup.as_dict().get("kernels_s", 0.0))
        except BaseException as exc:  # handed to the caller, raised in its thread
            self.start_s = time.perf_counter() - started
            self._future.set_exception(exc)
            return
        self.start_s = time.perf_counter() - started
        self._future.set_result(backend)

    @property
    def ready(self) -> bool:
        """Whether the start has ended (started, or failed): :meth:`result` would not wait."""
        return self._future.done()

    def result(self) -> TableBackend:
        """The backend, once started (waiting for it here; a deferred start begins now)."""
        self.begin()
        started = time.perf_counter()
        try:
            return self._future.result()
        finally:
            self.waited_s += time.perf_counter() - started


def timings(source: Any) -> dict[str, float]:
    """Where ``source`` is a :class:`StartingBackend` that started: the start's seconds on its
    thread (``backend_start``: ``backend_init``, making it, then ``backend_warm_up``), the
    caller's wait for it (``backend_wait``) and the seconds its warm-up spent compiling or loading
    kernels (``backend_kernels``); empty otherwise."""
    from dcop.backends.base import Compiles, capable

    if not isinstance(source, StartingBackend) or not source._future.done():
        return {}
    out = {"backend_start": source.start_s, "backend_wait": source.waited_s}
    if source._future.exception() is None:
        backend = source._future.result()
        if capable(backend, Compiles):
            out["backend_kernels"] = source.warm_kernels_s
            out["backend_init"] = source.init_s
            out["backend_warm_up"] = source.warm_up_s
    return out


#: Starts the entry point began before the command's imports, by backend name and warmed ops.
_EARLY: dict[tuple[str, tuple[str, ...]], StartingBackend] = {}
#: ``dcop solve``'s tasks whose run warms no join kernel (the contraction engine's PR and MAR).
_SUM_TASKS = ("pr", "mar")


def early_ops(sum_task: bool) -> tuple[str, ...]:
    """The ops a start warms up: ``min`` for a min-sum solve, none for PR/MAR."""
    return () if sum_task else ("min",)


def _option(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in ``argv`` (the last one given)."""
    value = None
    for k, arg in enumerate(argv):
        if arg == name and k + 1 < len(argv):
            value = argv[k + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def start_early(argv: Sequence[str]) -> None:
    """Start the device of ``dcop solve ARGV`` now, where the arguments ask for a CuPy backend on
    the default device: a guess from the raw arguments, which the command checks against its
    parsed options (:func:`take_early`); a start nobody takes costs only its own thread."""
    name = _option(argv, "--backend")
    device = _option(argv, "--device")
    if name not in ("cupy", "auto") or (device is not None and device.strip() != "0"):
        return
    ops = early_ops(_option(argv, "--task") in _SUM_TASKS)
    # ``--algo auto`` on a small file decides after reading it whether the device is worth its
    # start (:func:`dcop.inference.anytime.solve_auto`): the start waits for that decision
    small_auto = _option(argv, "--algo") == "auto" and _small_files(argv)
    _EARLY[(name, ops)] = StartingBackend(name, ops=ops, begin=not small_auto)


#: Bytes under which an instance file is small: read in well under 0.1 s, and most such
#: problems have under 1000 variables (``auto``'s CPU-first check).
SMALL_FILE_BYTES = 1 << 20


def _small_files(argv: Sequence[str]) -> bool:
    """Whether every argument naming an existing file names a small one (a guess from the raw
    arguments, as the backend's: the command parses them after its imports)."""
    import os

    sizes = [os.path.getsize(a) for a in argv if not a.startswith("-") and os.path.isfile(a)]
    return bool(sizes) and max(sizes) < SMALL_FILE_BYTES


def take_early(name: str, ops: Sequence[str]) -> StartingBackend | None:
    """The start :func:`start_early` began for backend ``name`` warming ``ops``, once."""
    return _EARLY.pop((name, tuple(ops)), None)
