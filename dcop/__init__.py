"""dcop: Bucket Elimination (BE, MBE(z), MPE) and distributed DPOP/ADPOP over ZeroMQ.

General layout. One import name, ``dcop``; the design card's top-level folders are mapped into it by
``pyproject.toml``:

* ``dcop/`` (``dcop``): the core. ``model`` (Variable, CostTable, Problem), ``io/`` (readers and
  writers per file format), ``generators`` (the paper's random, scale-free and grid networks),
  ``ordering`` (min-fill, min-degree, DFS pseudo-trees, induced width), ``tables`` (NumPy table
  operations), ``backend`` (the NumPy/CuPy switch), ``inference/`` (BE, MBE(z), MPE), ``cli/``.
* ``gpu/`` (``dcop.gpu``): the CuPy backend: CUDA kernels, streams, chunking.
* ``protocol/`` (``dcop.protocol``): message types, msgpack codec, size limits, version.
* ``agents/`` (``dcop.agents``): the agent process (one per variable): sockets, DFS, DPOP/ADPOP.
* ``coordinator/`` (``dcop.coordinator``): peers.json, launching agents, gathering results, metrics.

Data enters through ``dcop.io.read_problem`` (or ``dcop.generators``), flows as a ``Problem`` into
``dcop.inference`` (centralized) or ``dcop.coordinator`` (distributed), and leaves as a result dict
(JSON) from the CLI.
"""

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
from dcop.model import CostTable, Problem, Variable

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
