"""A command imports what it runs (issue 46): the modules a fresh process loads, against a list.

Each case runs the real entry point in a new interpreter and records ``sys.modules`` at exit
(``dcop.cli.entry`` ends the process through the exit hooks, so an ``atexit`` hook sees the
final set). The deny lists name what start-up used to pay for and a command must not load.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: A 5-variable Markov network (toulbar2's test_Z, abridged) and a 3-variable WCSP.
TINY_UAI = """MARKOV
3
2 2 2
3
2 0 1
2 1 2
1 2

4
 1 2
 3 1

4
 2 1
 1 5

2
 1 3
"""
TINY_WCSP = """tiny 3 2 3 10
2 2 2
2 0 1 0 1
1 1 3
2 1 2 0 1
0 0 4
1 2 0 1
1 1
"""

#: Loaded by no command that solves on the host: the wire, the device, the other engines.
NEVER_ON_THE_HOST = (
    "cupy",
    "dcop.gpu",
    "dcop.protocol.codec",
    "dcop.protocol.messages",
    "msgspec",
    "zmq",
    "dcop.agents",
    "dcop.coordinator",
    "networkx",
    "yaml",
)
#: Loaded by no min-sum solve of a small file: the contraction engine (PR/MAR), its path
#: optimizers, the anytime driver, the tree-decomposition search (nothing to search on a
#: problem that solves in a millisecond), futures (a device's start: they load logging), the
#: archive modules (shutil: a summary on a terminal only).
NOT_FOR_MIN_SUM = (
    "dcop.contraction",
    "dcop.contraction.engine",
    "opt_einsum",
    "cotengra",
    "dcop.inference.anytime",
    "dcop.inference.partition",
    "goatd",
    "json",
    "concurrent.futures",
    "logging",
    "shutil",
)
#: Loaded by no plain command line of ``dcop solve`` (dcop.cli.plain reads it): typer, its
#: click, the typer declarations of the options.
TYPER = ("typer", "typer._click", "click", "dcop.cli.app", "dcop.cli.options", "dcop.cli.solve")


def loaded_by(args: list[str], cwd: Path) -> set[str]:
    """The modules ``dcop ARGS`` had loaded when it exited (a fresh interpreter)."""
    out = cwd / "modules.txt"
    script = (  # the hook itself imports nothing (json would count against the command)
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write(' '.join(sys.modules)))\n"
        f"sys.argv = ['dcop', *{args!r}]\n"
        "from dcop.cli.entry import main\n"
        "main()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert run.returncode == 0, run.stderr
    return set(out.read_text().split())


def present(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


def test_importing_the_entry_point_loads_nothing_heavy() -> None:
    script = "import sys, dcop.cli.entry; print(' '.join(sorted(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    modules = set(run.stdout.split())
    assert "dcop.cli.entry" in modules
    assert present(modules, ("numpy", "typer", "click", "rich", "dcop.model", "dcop.cli.app")) == []


def test_version_loads_neither_typer_nor_numpy(tmp_path: Path) -> None:
    modules = loaded_by(["--version"], tmp_path)
    assert present(modules, ("numpy", "typer", "rich", "dcop.model")) == []


@pytest.mark.parametrize(("name", "text"), [("tiny.uai", TINY_UAI), ("tiny.wcsp", TINY_WCSP)])
def test_a_min_sum_solve_loads_what_it_runs(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    modules = loaded_by(["solve", name, "-q"], tmp_path)
    # what it runs: the reader, BE and its order
    assert {"numpy", "dcop.inference.solve", "dcop.orders.engine", "dcop.io"} <= modules
    assert present(modules, NEVER_ON_THE_HOST + NOT_FOR_MIN_SUM + TYPER + ("rich",)) == []


def test_typer_reads_what_is_not_plain(tmp_path: Path) -> None:
    """A line the plain reader leaves (here an option given twice) is typer's, and runs."""
    (tmp_path / "tiny.wcsp").write_text(TINY_WCSP)
    modules = loaded_by(["solve", "tiny.wcsp", "-q", "--quiet"], tmp_path)
    assert {"typer", "dcop.cli.solve", "dcop.cli.solving"} <= modules


def test_a_summary_loads_neither_rich_nor_an_engine(tmp_path: Path) -> None:
    """Off a terminal the summary is drawn by dcop.cli.rows, as rich draws it, without rich."""
    (tmp_path / "tiny.uai").write_text(TINY_UAI)
    modules = loaded_by(["solve", "tiny.uai"], tmp_path)
    assert "dcop.cli.rows" in modules
    assert present(modules, (*NEVER_ON_THE_HOST, *NOT_FOR_MIN_SUM, *TYPER, "rich")) == []


def test_a_pr_solve_loads_the_contraction_engine_and_not_the_wire(tmp_path: Path) -> None:
    (tmp_path / "tiny.uai").write_text(TINY_UAI)
    modules = loaded_by(["solve", "tiny.uai", "--task", "pr", "-q"], tmp_path)
    assert "dcop.contraction.engine" in modules
    assert present(modules, (*NEVER_ON_THE_HOST, "dcop.inference.anytime")) == []


def test_a_json_document_loads_json(tmp_path: Path) -> None:
    (tmp_path / "tiny.wcsp").write_text(TINY_WCSP)
    modules = loaded_by(["solve", "tiny.wcsp", "-q", "--json", "out.json"], tmp_path)
    assert "json" in modules and (tmp_path / "out.json").exists()
    assert present(modules, NEVER_ON_THE_HOST) == []


@pytest.mark.parametrize("plain", [True, False], ids=["plain line", "typer's line"])
def test_the_collector_skips_the_imports_and_runs_after_them(tmp_path: Path, plain: bool) -> None:
    """The collector is off while a command imports (its passes over the imports' objects cost a
    small solve 6-17 ms), then on again for the work, with those objects frozen out of it."""
    (tmp_path / "tiny.wcsp").write_text(TINY_WCSP)
    out = tmp_path / "gc.txt"
    extra = [] if plain else ["--quiet"]  # an option twice: typer reads the line
    script = (
        "import atexit, gc, sys\n"
        f"atexit.register(lambda: open({str(out)!r}, 'w').write("
        "f'{gc.isenabled()} {gc.get_freeze_count()}'))\n"
        f"sys.argv = ['dcop', 'solve', 'tiny.wcsp', '-q', *{extra!r}]\n"
        "from dcop.cli.entry import main\n"
        "main()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    enabled, frozen = out.read_text().split()
    assert enabled == "True" and int(frozen) > 1000
