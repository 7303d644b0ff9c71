"""dcop: Bucket Elimination (BE, MBE(z), MPE, PR/MAR) and distributed DPOP/ADPOP over ZeroMQ.

General layout. One import name, ``dcop``; the design card's top-level folders are mapped into it by
``pyproject.toml`` (the import rules between them: ``docs/DESIGN.md``, checked by a test):

* ``dcop/`` (``dcop``): the core. ``model`` (Variable, CostTable, Problem), ``io/`` (readers and
  writers per file format, solution files), ``generators`` (the paper's random, scale-free and
  grid networks, Ising grids, Bayesian networks), ``ordering`` (min-fill, min-degree, DFS
  pseudo-trees, induced width), ``tables`` (the ``TableBackend`` protocol and NumPy tables),
  ``backend`` (the NumPy/CuPy switch), ``placement`` (CPU or GPU per bucket), ``buckets`` (the
  bucket step BE, MBE and the agents share), ``sumproduct`` (log-space steps for PR/MAR),
  ``inference/`` (BE, MBE(z), MPE, PR/MAR, the memory plan), ``results`` and ``schema/`` (the
  result document), ``choices`` (option values), ``cli/``.
* ``gpu/`` (``dcop.gpu``): the CuPy backend: CUDA kernels, plans, streams, chunking.
* ``protocol/`` (``dcop.protocol``): the RunSpec, message types, msgpack codec, ZeroMQ
  transports, CURVE keys, peers.json, candidate trees; size limits and version.
* ``agents/`` (``dcop.agents``): the agent process (one per variable): its loop and liveness
  (``agent``), one problem's state (``session``), the DFS, UTIL sizing, jobs, metrics.
* ``coordinator/`` (``dcop.coordinator``): layouts, launching agents, one run (``driver``),
  serving clusters, the typed ``RunResult`` and the wire metrics.
* ``deploy/`` (``dcop.deploy``): docker-compose, Swarm and multi-host deployments.

Data enters through ``dcop.io.read_problem`` (or ``dcop.generators``), flows as a ``Problem`` into
``dcop.inference`` (centralized) or ``dcop.coordinator`` (distributed: agents get their part in
Setup messages), and leaves as a typed result (``SolveResult``, ``PartitionResult``,
``RunResult``) whose ``to_json()`` is the one result document the CLI writes.
"""

from typing import TYPE_CHECKING, Any

from dcop.errors import (
    BackendUnavailable,
    DcopError,
    InputError,
    ModelError,
    PeerTimeout,
    ProblemMismatch,
    ProtocolError,
    RunError,
    RunTimeout,
    TableTooLarge,
)

if TYPE_CHECKING:
    from dcop.model import CostTable, Problem, Variable


def __getattr__(name: str) -> Any:
    # the model (and NumPy with it) loads on first use: a process may set what NumPy reads at
    # import first (dcop.blas), and `import dcop.errors` stays light
    if name in ("CostTable", "Problem", "Variable"):
        from dcop import model

        return getattr(model, name)
    raise AttributeError(f"module 'dcop' has no attribute {name!r}")


__all__ = [
    "BackendUnavailable",
    "CostTable",
    "DcopError",
    "InputError",
    "ModelError",
    "PeerTimeout",
    "Problem",
    "ProblemMismatch",
    "ProtocolError",
    "RunError",
    "RunTimeout",
    "TableTooLarge",
    "Variable",
]
__version__ = "0.1.0"
