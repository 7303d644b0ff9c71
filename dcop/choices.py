"""The named choices of the command lines, as enums: ``--help`` lists them, typer checks them.

Each is the one spelling of its set of names; the modules that act on a choice (orderings,
backends, run specs) check against these values. The rules of the other values every path
shares live here too, once: the mini-bucket size (:func:`check_z`) and the task names.
"""

from __future__ import annotations

import operator
from enum import Enum

from dcop.errors import DcopError, InputError


class CentralAlgo(str, Enum):
    """Centralized algorithms (``dcop solve``, ``dcop batch``): the one spelling of their names;
    what runs for each is :data:`dcop.cli.solvers.CENTRAL`."""

    be = "be"
    mbe = "mbe"
    aobb = "aobb"
    dfbnb = "dfbnb"
    planar = "planar"
    auto = "auto"


class DistributedAlgo(str, Enum):
    """Distributed algorithms (``dcop run``, ``dcop coordinator``, deployments): the one spelling
    of their names (the run spec's ``Algo`` literal repeats them for its type and is tested to
    agree); what runs for each is :data:`dcop.cli.solvers.DISTRIBUTED`."""

    dpop = "dpop"
    adpop = "adpop"
    mbdpop = "mbdpop"
    auto = "auto"


class TaskName(str, Enum):
    """Inference tasks of a UAI model (``dcop solve --task``): the most probable explanation,
    the partition function, the marginals."""

    mpe = "mpe"
    pr = "pr"
    mar = "mar"


#: What a run computes, as the run spec, the agents and the inference API spell it: ``min`` the
#: optimum (MPE on a model of potentials), ``pr`` the partition function, ``mar`` it and every
#: variable's marginal. The command line's ``--task mpe`` (:class:`TaskName`) is ``min``.
RUN_TASKS: tuple[str, ...] = ("min", "pr", "mar")
#: The sum-product tasks: UTILs and buckets by log-sum-exp instead of min.
SUM_TASKS: tuple[str, ...] = ("pr", "mar")


def run_task(name: str | None) -> str:
    """The task a run computes for a task name of the command line (:class:`TaskName`, or
    None for a file without tasks): ``mpe`` and None are ``min``."""
    if name in (None, TaskName.mpe.value, "min"):
        return "min"
    if name not in SUM_TASKS:
        raise InputError(
            f"unknown task {name!r}; use one of {', '.join(t.value for t in TaskName)}"
        )
    return name


#: The smallest mini-bucket size (z = 1: every table is eliminated alone).
MIN_Z = 1


def check_z(
    z: object, who: str, *, most: int | None = None, error: type[DcopError] = InputError
) -> int:
    """The one rule of a mini-bucket size (MBE, PR bounds, ADPOP, batch, the run spec): a whole
    number of at least :data:`MIN_Z` (and at most ``most``); else ``error`` says that ``who``
    needs one. Returns it as an ``int``."""
    try:
        value = None if isinstance(z, bool) else operator.index(z)  # type: ignore[arg-type]
    except TypeError:
        value = None
    if value is None or value < MIN_Z or (most is not None and value > most):
        bound = f"of at least {MIN_Z}" if most is None else f"between {MIN_Z} and {most}"
        raise error(f"{who} needs a mini-bucket size --z {bound}, not {z}")
    return value


class OrderingName(str, Enum):
    """Elimination orders."""

    minfill = "minfill"
    mindegree = "mindegree"
    pseudotree = "pseudotree"


class TreeName(str, Enum):
    """How ``dcop run`` and ``dcop coordinator`` choose the pseudo-tree (auto: the coordinator's
    elimination tree beside the agents' DFS candidates where narrower; dfs: the agents' DFS trees
    only; elimination: the coordinator's elimination tree)."""

    auto = "auto"
    dfs = "dfs"
    elimination = "elimination"


class BackendName(str, Enum):
    """Table backends (auto: cupy when a GPU is usable)."""

    numpy = "numpy"
    cupy = "cupy"
    auto = "auto"


class DtypeName(str, Enum):
    """Table dtypes (auto: float32 where integer totals stay exact)."""

    auto = "auto"
    float32 = "float32"
    float64 = "float64"


class FormatName(str, Enum):
    """Instance file formats."""

    wcsp = "wcsp"
    uai = "uai"
    yaml = "yaml"
    xml = "xml"


class LogLevel(str, Enum):
    """Log levels."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
