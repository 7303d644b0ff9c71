"""The options every command shares, defined once: the same name, values and help everywhere.

Commands take defaults of their own (``--timeout`` is 120 s for ``dcop run`` and none for
``dcop solve``), never a spelling of their own. The checks that several commands make on these
values live here too: :func:`parse_gpu` (the one reading of ``--gpu``), and, re-exported from
:mod:`dcop.cli.solvers` (typer-free, for a plain ``dcop solve``), :func:`check_z` (a mini-bucket
size where one is needed, a warning where it is ignored).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer

from dcop.choices import (
    BackendName,
    CentralAlgo,
    DistributedAlgo,
    FormatName,
    LogLevel,
    TaskName,
)
from dcop.cli.solvers import check_z as check_z  # re-exported
from dcop.protocol.constants import MAX_MESSAGE_MIB

InputFile = Annotated[
    Path,
    typer.Argument(exists=True, dir_okay=False, readable=True, help="Instance file."),
]
#: The instance of a command that writes a result document (solve, run): the reader checks it,
#: inside the run, so that a missing, unreadable or directory path still ends in the ``error``
#: document of ``--json`` (click's own check exits before the command and writes none).
DocumentInputFile = Annotated[Path, typer.Argument(help="Instance file.")]
FormatOption = Annotated[
    FormatName | None,
    typer.Option("--format", "-f", help="File format (default: by extension)."),
]
BackendOption = Annotated[
    BackendName,
    typer.Option("--backend", help="Table backend (auto: cupy when a GPU is usable)."),
]
JsonOption = Annotated[
    Path | None,
    typer.Option(
        "--json",
        help="Write the result document as JSON to this file ('-': stdout, and the summary "
        "goes to stderr). Written on every exit path.",
    ),
]
SolutionOption = Annotated[
    Path | None,
    typer.Option(
        "--solution",
        help="Write the answer as a solution file: the UAI competition's MPE, PR or MAR format "
        "for .uai models, toulbar2's value line otherwise.",
    ),
]
OrderingOption = Annotated[
    str,
    typer.Option(
        help="Elimination order: auto (the best of min-fill, min-degree, the file's order and a "
        "tree-decomposition search within --order-time), minfill, mindegree, pseudotree, or a "
        "file written by dcop info --write-order (an order file or a PACE .td).",
    ),
]
OrderTimeOption = Annotated[
    float | None,
    typer.Option(
        help="Seconds the auto ordering may search, spent as a count of runs with fixed seeds "
        "(the same order on every call; default: four times the predicted solve time up to "
        "0.05 s, a fifth of a longer one, greedy orders included; none for problems that solve "
        "in a millisecond, at most 10 s; 0: greedy only).",
    ),
]
CentralAlgoOption = Annotated[
    CentralAlgo,
    typer.Option(
        "--algo",
        help="be (exact), mbe (bounds, needs --z), aobb (exact AND/OR search guided by MBE(z): "
        "--z or the largest that fits; anytime with --timeout), dfbnb (exact depth-first branch "
        "and bound keeping soft arc consistency at every node, as toulbar2; anytime), planar (the exact "
        "ground state of a planar Ising model without field: two values per variable, pairwise "
        "tables, no unary field, a planar graph; it refuses others) or auto (planar where it "
        "applies, else be when its plan fits and is quick, else aobb).",
    ),
]
DistributedAlgoOption = Annotated[
    DistributedAlgo,
    typer.Option(
        "--algo",
        help="dpop (exact), adpop (bounds, needs --z), mbdpop (exact, every UTIL message within "
        "--max-message-mib and --width: cycle cuts) or auto (dpop where its UTILs fit, else "
        "mbdpop where its predicted work fits --timeout, else adpop with the largest z that "
        "fits).",
    ),
]
ZOption = Annotated[
    int | None,
    typer.Option(
        "--z",
        min=1,
        help="Mini-bucket size of mbe, adpop and aobb's heuristic (variables per mini-bucket).",
    ),
]

ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        help="CPU threads of the search (aobb, and auto where it searches; default: the usable "
        "cores, at most 8; dcop batch shares them among its --jobs rows). One thread gives the same result every run; with more the optimum "
        "is the same, but the nodes expanded and, between optimal assignments, the one returned "
        "may differ.",
    ),
]


WidthOption = Annotated[
    int | None,
    typer.Option(
        "--width",
        min=1,
        help="MB-DPOP's largest UTIL message in variables (FRODO's maxDim); the message limit "
        "applies as well.",
    ),
]


def seconds(value: float | None) -> float | None:
    """A time limit: a positive, finite number of seconds (nan and inf once gave tracebacks)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value} is not a positive, finite number of seconds")
    return value


TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--timeout", min=0.001, callback=seconds, help="Seconds allowed for the whole run."
    ),
]
MaxMessageOption = Annotated[
    float,
    typer.Option(
        "--max-message-mib",
        help=f"Largest message of the run in MiB (UTIL tables above it are refused before any "
        f"table is built); up to {MAX_MESSAGE_MIB}.",
    ),
]
PeerTimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--peer-timeout",
        callback=seconds,
        help="Seconds of silence before an agent counts as dead (default: from the message limit).",
    ),
]
LogOption = Annotated[
    LogLevel,
    typer.Option("--log-level", help="Log level of the agents.", case_sensitive=False),
]
QuietOption = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print nothing but errors (no progress, no summary).")
]
TaskOption = Annotated[
    TaskName | None,
    typer.Option(
        "--task",
        help="UAI models only: mpe (default), pr (partition function) or mar (marginals).",
    ),
]
EvidenceOption = Annotated[
    Path | None,
    typer.Option("--evidence", help="UAI .evid file."),  # checked as it is read (see above)
]
GpuOption = Annotated[
    str | None,
    typer.Option(
        "--gpu",
        metavar="DEVICES",
        help="Run large tables with CuPy on these CUDA devices: a number (0), a list (0,1) or "
        "all; agents go round robin over them.",
    ),
]
BasePortOption = Annotated[
    int,
    typer.Option(
        "--base-port",
        help="The coordinator's port; agents listen on the ports after it, one per agent on "
        "each host (default lies below the kernel's ephemeral range).",
    ),
]


def parse_gpu(value: str | None) -> str | None:
    """The one reading of ``--gpu``: None (no GPU), ``all``, or device numbers such as ``0`` and
    ``0,1`` (normalised: no spaces). Which devices exist is checked where the agents run
    (:func:`dcop.placement.gpu_devices`); a malformed value is a usage error here."""
    if value is None:
        return None
    from dcop.placement import gpu_devices

    text = value.strip().lower()
    if text == "all":
        return text
    return ",".join(str(d) for d in gpu_devices(text, None))
