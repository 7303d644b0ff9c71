"""The named choices of the command lines, as enums: ``--help`` lists them, typer checks them.

Each is the one spelling of its set of names; the modules that act on a choice (orderings,
backends, run specs) check against these values.
"""

from __future__ import annotations

from enum import Enum


class CentralAlgo(str, Enum):
    """Centralized algorithms (``dcop solve``)."""

    be = "be"
    mbe = "mbe"
    auto = "auto"


class DistributedAlgo(str, Enum):
    """Distributed algorithms (``dcop run``, ``dcop coordinator``, deployments)."""

    dpop = "dpop"
    adpop = "adpop"
    auto = "auto"


class TaskName(str, Enum):
    """Inference tasks of a UAI model (``dcop solve --task``): the most probable explanation,
    the partition function, the marginals."""

    mpe = "mpe"
    pr = "pr"
    mar = "mar"


class BatchAlgo(str, Enum):
    """Algorithms of ``dcop batch`` (auto: BE when its largest table fits the memory limit,
    else MBE with the largest z that fits)."""

    be = "be"
    mbe = "mbe"
    dpop = "dpop"
    adpop = "adpop"
    auto = "auto"


class OrderingName(str, Enum):
    """Elimination orders."""

    minfill = "minfill"
    mindegree = "mindegree"
    pseudotree = "pseudotree"


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
