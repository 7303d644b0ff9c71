"""One rehearsal of an agent's solving path on tiny tables, run during set-up.

A forked agent shares the template's memory copy-on-write, and the first call of any function in
a fresh process writes to many of those pages (reference counts, the interpreter's inline caches,
NumPy's dispatch caches): each written page is copied then. Measured on the 2-core VM in forked
children, the first join+eliminate of a 1000-entry bucket took 1.2 ms and the second 0.25 ms; the
first encode and decode of its UTIL 0.31 and 0.38 ms against 0.05 and 0.09 ms; the first value
choice 0.18 ms against 0.06 ms. Paid in the solve, that is a millisecond and more on every agent
of the critical path, in both the wall time and the simulated runtime. :func:`rehearse` pays it
once, before the agent's hello, as a GPU agent compiles its kernels then: the same functions, on
tables of two values per variable. The template calls it too, so the children inherit what a
first call initialises and only copy pages.

A forked NumPy agent skips its own rehearsal (:func:`rehearse_unless_inherited`): the template's
already initialised everything a first call does, and the child's repeat only copied the pages it
touched before the hello - 0.9 MB and 1.8 ms of CPU per agent (``benchmarks/agent_dirty.py``),
the largest step of its start-up, paid by every agent of a 1000-agent launch on two cores. The
solve copies the pages it really touches when it gets there: about 1.3 ms more on each agent of
the critical path, split between its UTIL and its VALUE (a child's first rehearsal took 1.8 ms
of CPU, its second 0.5 ms). A GPU agent still rehearses: its device state is its own.
"""

from __future__ import annotations

import time

import numpy as np

from dcop.backends.base import IpcHandover, Placed, TableBackend, capable
from dcop.backends.numpy import NumpyBackend
from dcop.buckets import choose_value, eliminate_bucket
from dcop.protocol import Degree, Token, Util, Value, WireTable, decode, encode
from dcop.tables import Table

#: The dtype of DPOP's tables wherever integer costs stay exact in it (see the driver's choice).
REHEARSAL_DTYPE = np.float32

#: Whether this process's memory went through NumPy's solving path already: set by a rehearsal
#: on the NumPy backend, and inherited by every agent forked afterwards.
_NUMPY_REHEARSED = False


def rehearse(backend: TableBackend) -> float:
    """Run the UTIL and VALUE path once on tiny tables with ``backend``; the seconds it took.

    Leaves no trace in the backend's figures: a placed backend forgets the bucket it placed."""
    started = time.perf_counter()
    names = ("rehearsal-x", "rehearsal-y", "rehearsal-z")
    bucket = [Table(names[: k + 1], np.zeros((2,) * (k + 1), REHEARSAL_DTYPE)) for k in range(3)]
    out = eliminate_bucket(backend, bucket, names[0])
    wire = tuple(WireTable.from_array(t.scope, backend.to_numpy(t.data)) for t in out.tables)
    token = Token(0, "child", (1,), 0.0, path=(1,), domains=(2,))
    for body in (Degree((1,), 0.0), token, Util(wire, 0.0, ()), Value(((names[1], 0),), 0.0)):
        received = decode(encode(0, 1, body)).body
        if isinstance(received, Util):
            for t in received.tables:
                data = t.to_array()
                backend.table(t.scope, data, data.dtype)
    choose_value(backend, bucket[:2], names[0], {names[1]: 0})
    if isinstance(backend, IpcHandover):  # a GPU agent's ahead-of-time UTIL buffer
        backend.offer_ipc(0)  # "too small for CUDA IPC", decided once here with what decides it
    backend.synchronize()
    if capable(backend, Placed):
        backend.placements.clear()
    global _NUMPY_REHEARSED
    _NUMPY_REHEARSED = _NUMPY_REHEARSED or type(backend) is NumpyBackend
    return time.perf_counter() - started


def rehearse_unless_inherited(backend: TableBackend) -> float:
    """:func:`rehearse` ``backend``, unless it is the plain NumPy backend (which holds no state
    of its own) and this process, or the template it was forked from, already rehearsed that:
    then 0.0 (see the module docstring)."""
    if type(backend) is NumpyBackend and _NUMPY_REHEARSED:
        return 0.0
    return rehearse(backend)
