"""Instance files: read and write Problems in four formats.

========  ===================  ======  =====  ==================================================
name      extensions           read    write  module
========  ===================  ======  =====  ==================================================
wcsp      ``.wcsp``            yes     yes    :mod:`dcop.io.wcsp` (toulbar2 native)
uai       ``.uai`` (+``.evid``) yes    yes    :mod:`dcop.io.uai` (MARKOV/BAYES, costs -ln p)
yaml      ``.yaml`` ``.yml``   yes     yes    :mod:`dcop.io.pydcop_yaml` (pyDCOP DCOPs)
xml       ``.xml``             yes     yes    :mod:`dcop.io.frodo_xml` (FRODO XCSP 2.1)
========  ===================  ======  =====  ==================================================

Every reader reports malformed or oversized input as ``InputError`` (``file:line: reason``) and
checks declared sizes against :mod:`dcop.io._common`'s limits before allocating; tables given by a
default cost plus tuples stay sparse when that is much smaller than their dense form.

Beside the instance formats: :mod:`dcop.io.solution` writes and reads solution files (toulbar2's
``-w`` line, the UAI competition's MPE / PR / MAR results) and :mod:`dcop.io.placement` decides
which agent runs each variable from a file's agents and hints (one agent per variable).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dcop.errors import InputError, ModelError
from dcop.io._common import ReadLimits, reading_within

if TYPE_CHECKING:
    from dcop.io.frodo_xml import read_xml, write_xml
    from dcop.io.placement import agent_placement
    from dcop.io.pydcop_yaml import read_yaml, write_yaml
    from dcop.io.solution import read_solution, write_answer, write_mar, write_pr, write_solution
    from dcop.io.uai import read_uai, write_uai
    from dcop.io.wcsp import read_wcsp, write_wcsp
    from dcop.model import Problem

#: Format name -> the module that reads and writes it (``read_<name>``, ``write_<name>``).
_MODULES: dict[str, str] = {
    "wcsp": "dcop.io.wcsp",
    "uai": "dcop.io.uai",
    "yaml": "dcop.io.pydcop_yaml",
    "xml": "dcop.io.frodo_xml",
}
#: Where each name of this package lives: a format's module (and what it imports: PyYAML, the
#: XML parser) loads when first used, not with every command (~20 ms of start-up).
_LAZY = {
    **{f"{op}_{kind}": module for kind, module in _MODULES.items() for op in ("read", "write")},
    "agent_placement": "dcop.io.placement",
    **dict.fromkeys(
        ("read_solution", "write_answer", "write_mar", "write_pr", "write_solution"),
        "dcop.io.solution",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


#: Format names, in the order ``--format`` lists them.
FORMATS: tuple[str, ...] = ("wcsp", "uai", "yaml", "xml")
#: File extension (lower case) -> format name.
EXTENSIONS: dict[str, str] = {
    ".wcsp": "wcsp",
    ".uai": "uai",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".xml": "xml",
}


def detect_format(path: str | Path, format: str | None = None) -> str:
    """The format name from ``format`` (if given) or from the file's extension."""
    if format is not None:
        name = format.strip().lower()
        if name == "yml":
            name = "yaml"
        if name not in FORMATS:
            raise InputError(f"unknown format {format!r}; use one of {', '.join(FORMATS)}")
        return name
    suffix = Path(path).suffix.lower()
    if suffix not in EXTENSIONS:
        raise InputError(
            f"cannot tell the format from the extension {suffix or '(none)'!r}; use one of "
            f"{', '.join(EXTENSIONS)} or give the format ({', '.join(FORMATS)})",
            str(path),
        )
    return EXTENSIONS[suffix]


def read_problem(
    path: str | Path,
    format: str | None = None,
    evidence: str | Path | None = None,
    *,
    limits: ReadLimits | None = None,
) -> Problem:
    """Read an instance file; ``evidence`` (a ``.evid`` file) is only valid for UAI.

    ``limits`` bounds the read by the run's own deadline and memory (see
    :class:`~dcop.io._common.ReadLimits`): past the deadline it raises ``RunTimeout``, and a file
    that declares more than the memory allows raises ``TableTooLarge`` before it is built."""
    kind = detect_format(path, format)
    if evidence is not None and kind != "uai":
        raise InputError(f"evidence files only apply to UAI models, not {kind}", str(evidence))
    reader = __getattr__(f"read_{kind}")
    with reading_within(limits):
        problem: Problem = reader(path, evidence) if kind == "uai" else reader(path)
    return problem


def write_problem(
    problem: Problem, path: str | Path, format: str | None = None, precision: int | None = None
) -> None:
    """Write ``problem`` in the format named or implied by the extension of ``path``.

    ``precision`` (``.wcsp`` only) is the number of decimals kept for costs that are not
    integers; without it such costs are written exactly or refused (see :func:`write_wcsp`).
    """
    kind = detect_format(path, format)
    if precision is not None and kind != "wcsp":
        raise ModelError(f"a precision applies to .wcsp files only, not {kind}")
    writer = __getattr__(f"write_{kind}")
    try:
        if kind == "wcsp":
            writer(problem, path, precision=precision)
        else:
            writer(problem, path)
    except OSError as exc:
        raise InputError(f"cannot write file: {exc.strerror or exc}", str(path)) from None


__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "ReadLimits",
    "agent_placement",
    "detect_format",
    "read_problem",
    "read_solution",
    "read_uai",
    "read_wcsp",
    "read_xml",
    "read_yaml",
    "write_answer",
    "write_mar",
    "write_pr",
    "write_problem",
    "write_solution",
    "write_uai",
    "write_wcsp",
    "write_xml",
    "write_yaml",
]
