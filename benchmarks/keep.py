"""The one way into ``benchmarks/results/``: a registered suite's JSON and Markdown, stamped.

Only the suites registered in ``benchmarks/run.py`` keep results (``python benchmarks/run.py
SUITE [ARGS]``); :func:`write_results` writes every kept file and stamps it with the machine block
(:func:`compare.machine.machine_info`), the command and the date: the JSON under ``"kept"``, the
Markdown in a closing line. A script run on its own, or any other script, is a probe: it may
write elsewhere (``--out``), never here.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
#: Set by ``benchmarks/run.py`` while a registered suite runs: its name and arguments (JSON).
SUITE_ENV = "DCOP_BENCH_SUITE"


def running() -> list[str] | None:
    """The registered suite running now and its arguments, or None."""
    raw = os.environ.get(SUITE_ENV)
    return list(json.loads(raw)) if raw else None


class NotASuite(SystemExit):
    """A script wrote to benchmarks/results/ without being run as a registered suite."""


def stamp() -> dict[str, Any]:
    """The block every kept file carries: the machine, the command that wrote it, the date."""
    machine_info, _ = _machine()
    suite = running()
    assert suite is not None
    return {
        "machine": machine_info(),
        "command": shlex.join(["python", "benchmarks/run.py", *map(_public, suite)]),
        "written": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def kept_here(out: Path) -> bool:
    """Whether ``out`` is benchmarks/results/ itself (where only a registered suite writes)."""
    return out.resolve() == RESULTS


def write_results(out: Path, stem: str, doc: Any, markdown: str | None = None) -> Path:
    """Write ``out/STEM.json`` (``doc``) and ``out/STEM.md`` (``markdown``, if given). In
    benchmarks/results/ they carry :func:`stamp`'s block, and only a registered suite may write
    there; elsewhere (a test's or a probe's folder) they are written as they are."""
    out.mkdir(parents=True, exist_ok=True)
    block = None
    if kept_here(out):
        if running() is None:
            raise NotASuite(
                f"benchmarks/results/ keeps the registered suites only: run `python "
                f"benchmarks/run.py SUITE` (see its --help), or give --out a folder of your own "
                f"({stem})"
            )
        block = stamp()
        doc = {**doc, "kept": block} if isinstance(doc, dict) else {"rows": doc, "kept": block}
    path = out / f"{stem}.json"
    path.write_text(json.dumps(doc, indent=1, default=_plain) + "\n")
    if markdown is not None:
        if block is not None:
            _, describe = _machine()
            markdown = markdown.rstrip("\n") + (
                f"\n\n_Kept by `{block['command']}` on {describe(block['machine'])}, "
                f"{block['written']}._\n"
            )
        (out / f"{stem}.md").write_text(markdown)
    return path


def _plain(value: Any) -> Any:
    """What json cannot write alone: NumPy scalars and arrays, paths, anything else as text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


def _public(arg: str) -> str:
    """An argument as a results file may show it: a folder of this machine becomes ``PATH``."""
    option, eq, value = arg.partition("=")
    if eq and value.startswith("/"):
        return f"{option}=PATH"
    return "PATH" if arg.startswith("/") else arg


def machine_block() -> Any:
    """A suite document's machine block (``compare.machine.machine_info``), however this module
    was imported."""
    machine_info, _ = _machine()
    return machine_info()


def _machine() -> tuple[Any, Any]:
    """``compare.machine``'s machine_info and describe, however this module was imported."""
    try:
        from compare.machine import describe, machine_info
    except ImportError:  # imported as benchmarks.keep (tests, benchmarks.expansion)
        from benchmarks.compare.machine import describe, machine_info
    return machine_info, describe
