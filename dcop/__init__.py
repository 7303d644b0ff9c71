"""dcop: Bucket Elimination (BE, MBE(z), MPE, PR/MAR) and distributed DPOP/ADPOP over ZeroMQ.

Rooms. One import name, ``dcop``; ``pyproject.toml`` maps the design card's top-level folders into
it. Each room below is one package of ``pyproject.toml``; the import rules between them are in
``docs/DESIGN.md`` and ``tests/quality/test_import_rules.py``, which also checks that this list, the
packages and the rules name the same rooms:

* ``dcop`` (``dcop/``): the core. ``model`` (Variable, CostTable, Problem), ``generators`` (the
  paper's random, scale-free and grid networks, Ising grids, Bayesian networks), ``tables`` (the
  table type, its checks, the dtype), ``placement`` (CPU or GPU per bucket, agents on GPUs),
  ``buckets`` (the bucket step BE, MBE and the agents share), ``sumproduct`` (log-space
  steps for PR/MAR), ``choices`` (option values, the z rule, the task names).
* ``dcop.io`` (``dcop/io/``): readers and writers per file format, solution files.
* ``dcop.trees`` (``dcop/trees/``): the pseudo-tree: ``PseudoTree``, the centralized and the
  distributed DFS, candidate trees, UTIL sizing; the coordinator and the agents both use it.
* ``dcop.orders`` (``dcop/orders/``): the ordering engine: greedy orders (min-fill, min-degree)
  and an order's induced width at once, tree decompositions (goatd) within a budget counted in
  work, kept by real cost; order and PACE ``.td`` files.
* ``dcop.contraction`` (``dcop/contraction/``): exact PR/MAR by tensor contraction: trees,
  scaled linear space, slicing, the backward pass for marginals.
* ``dcop.backends`` (``dcop/backends/``): the table backends' contract (a base protocol, small
  capability protocols, ``BackendInfo``), NumPy's and the placed backend, and the one switch
  ``get_backend``.
* ``dcop.plan`` (``dcop/plan/``): what is decided before a solve: memory limits and the
  backends' models, the bucket plan (``plan_for``: the planned peak, the largest z that fits).
* ``dcop.inference`` (``dcop/inference/``): BE, MBE(z), MPE, PR/MAR, ``--algo auto``.
* ``dcop.search`` (``dcop/search/``): exact AND/OR branch and bound guided by the mini-bucket
  pass's tables (``dcop.bucketpass``), compiled with numba where it is installed.
* ``dcop.planar`` (``dcop/planar/``): the exact solver of planar Ising models without field:
  recognition, the faces of the embedding, the minimum T-join of the dual (PyMatching, or
  networkx's matching), the assignment.
* ``dcop.results`` (``dcop/results/``): the typed results and the one result document.
* ``dcop.schema`` (``dcop/schema/``): the result document's JSON Schema.
* ``dcop.cli`` (``dcop/cli/``): the roof: the command line (entry point ``dcop.cli.entry``),
  the solver registry (``solvers``: each algorithm name and the function that runs it), the
  run summary, batch rows, ``make demo``; nothing below it imports the coordinator, the agents
  or the deployments.
* ``dcop.gpu`` (``gpu/``): the CuPy backend: CUDA kernels, plans, streams, chunking, CUDA IPC.
* ``dcop.protocol`` (``protocol/``): the RunSpec, message types, codec, ZeroMQ transports, CURVE
  keys, peers.json; size limits and version. No algorithm.
* ``dcop.agents`` (``agents/``): the agent process (one per variable): its loop and liveness
  (``agent``), one problem's state (``session``: messages in, messages out), the CUDA IPC
  hand-over of its UTILs (``handover``), jobs, metrics.
* ``dcop.coordinator`` (``coordinator/``): layouts, launching agents, one run: what is decided
  before it (``plan``: the ``RunPlan``), the problem's state (``session``: messages in, messages
  out), the tree and algorithm choice (``choice``, pure), the answer (``answer``), the loop and
  liveness (``driver``); serving clusters, the wire metrics.
* ``dcop.deploy`` (``deploy/``): docker-compose, Swarm and multi-host deployments.

Data enters through ``dcop.io.read_problem`` (or ``dcop.generators``), flows as a ``Problem`` into
``dcop.inference`` (centralized) or ``dcop.coordinator`` (distributed: agents get their part in
Setup messages), and leaves as a typed result (``SolveResult``, ``PartitionResult``,
``RunResult``) whose ``to_json()`` is the one result document the CLI writes.
"""

from __future__ import annotations

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

# typing's import (4 ms) is left to the first module that needs it: `dcop`'s console script
# keeps signals from its first line on, and everything imported before that line widens the
# window in which a signal ends the process without its result document (round 4, finding 14)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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
