"""Command-line conventions: --version, shell completion, choices as enums, --json - on stdout."""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import pytest
import typer

import dcop
from dcop import choices
from dcop.agents.cli import app as agent_app
from dcop.cli.entry import load_app
from tests.cli.conftest import run_dcop

app = load_app([], {})  # every command registered


def test_version() -> None:
    run = run_dcop("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"dcop {dcop.__version__}"
    agent = subprocess.run(
        [sys.executable, "-m", "dcop.agents", "--version"], capture_output=True, text=True
    )
    assert agent.returncode == 0 and agent.stdout.strip() == f"dcop-agent {dcop.__version__}"


def test_shell_completion() -> None:
    # the shell is detected from the parent processes (an argument is ignored): run under bash,
    # which must not exec the command in its place (hence "; true")
    shown = subprocess.run(
        ["bash", "-c", f"'{sys.executable}' -m dcop --show-completion; true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "_DCOP_COMPLETE" in shown.stdout, shown.stderr
    env = {**os.environ, "_DCOP_COMPLETE": "complete_bash"}

    def complete(words: str, cword: int) -> list[str]:
        run = subprocess.run(
            [sys.executable, "-m", "dcop"],
            env={**env, "COMP_WORDS": words, "COMP_CWORD": str(cword)},
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.split()

    assert complete("dcop ba", 1) == ["batch"]
    assert complete("dcop solve x.wcsp --algo ", 4) == [
        "be",
        "mbe",
        "aobb",
        "dfbnb",
        "planar",
        "auto",
    ]
    assert set(complete("dcop batch x.wcsp --algo ", 4)) == {
        "be",
        "mbe",
        "aobb",
        "dfbnb",
        "planar",
        "dpop",
        "adpop",
        "mbdpop",
        "auto",
    }


def _commands(application: typer.Typer, path: str) -> Iterator[tuple[str, Callable[..., Any]]]:
    for info in application.registered_commands:
        assert info.callback is not None
        yield f"{path} {info.name or info.callback.__name__}", info.callback
    for group in application.registered_groups:
        assert group.typer_instance is not None
        yield from _commands(group.typer_instance, f"{path} {group.name}")
    if application.registered_callback is not None and application.registered_callback.callback:
        yield path, application.registered_callback.callback


def _parameters(fn: Callable[..., Any]) -> Iterator[tuple[str, type, Any]]:
    """(name, base type, typer ParameterInfo or None) of each parameter of a command."""
    for name, hint in get_type_hints(fn, include_extras=True).items():
        if name == "return":
            continue
        info = None
        if get_origin(hint) is Annotated:
            hint, *meta = get_args(hint)
            info = next((m for m in meta if hasattr(m, "help")), None)
        args = [a for a in get_args(hint) if a is not type(None)]
        if get_origin(hint) in (Union, types.UnionType) and len(args) == 1:
            hint = args[0]
        yield name, hint, info


def test_every_fixed_choice_is_an_enum_listed_in_help() -> None:
    """An option with a fixed set of values is an enum of dcop.choices (so --help lists the
    values and typer checks them); no free-text option's help lists alternatives instead."""
    alternatives = re.compile(r"\b[a-z0-9]+ ?\| ?[a-z0-9]+\b|one of")
    enums = 0
    for where, fn in [*_commands(app, "dcop"), *_commands(agent_app, "dcop-agent")]:
        for name, base, info in _parameters(fn):
            if isinstance(base, type) and issubclass(base, enum.Enum):
                enums += 1
                assert getattr(choices, base.__name__, None) is base, (where, name)
            elif base is str and info is not None and not getattr(info, "hidden", False):
                assert not alternatives.search(info.help or ""), (where, name, info.help)
    assert enums >= 10
    # the metavar wraps over two lines of rich's box, beside the help's first line
    solve_help = run_dcop("solve", "--help").stdout
    assert "<be|mbe|aobb|dfbnb|planar" in solve_help and "|auto>" in solve_help
    batch_help = run_dcop("batch", "--help").stdout  # --algo takes a list: its help names them
    assert all(f" {name}" in batch_help for name in ("be", "mbe", "dpop", "adpop", "auto"))


def test_solve_points_distributed_algorithms_to_run(tmp_path: Path) -> None:
    path = tmp_path / "x.wcsp"
    path.write_text("x 1 2 0 10\n2\n")
    for algo in ("dpop", "adpop"):
        run = run_dcop("solve", str(path), "--algo", algo)
        assert run.returncode == 2 and f"dcop run FILE --algo {algo}" in run.stderr


def test_info_json_on_stdout_summary_on_stderr(instances_dir: Path) -> None:
    run = run_dcop("info", str(instances_dir / "warehouse.wcsp"), "--json", "-")
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["variables"] == 15 and info["induced_width_minfill"] == 5
    assert "memory limit" in run.stderr  # the human table went to stderr
    plain = run_dcop("info", str(instances_dir / "warehouse.wcsp"))
    assert "memory limit" in plain.stdout and not plain.stdout.lstrip().startswith("{")


def test_solve_json_on_stdout_summary_on_stderr(instances_dir: Path) -> None:
    run = run_dcop("solve", str(instances_dir / "warehouse.wcsp"), "--json", "-")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["cost"] == 328
    assert "optimum" in run.stderr


def test_run_off_a_terminal_prints_a_plain_summary_without_rich(
    tmp_path: Path, instances_dir: Path
) -> None:
    """Off a terminal ``dcop run`` writes its summary as plain text (no markup, no rich: its
    import and rendering were 25 ms of every run) while its agents exit; beside ``--json -`` on
    stderr. The document's figures and the summary's agree."""
    out = tmp_path / "out.json"
    run = run_dcop("run", str(instances_dir / "warehouse.wcsp"), "--json", str(out))
    assert run.returncode == 0, run.stderr
    doc = json.loads(out.read_text())
    lines = run.stdout.splitlines()
    assert lines[0].startswith(f"DPOP on warehouse.wcsp: {len(doc['assignment'])} agents")
    assert f"optimum {doc['cost']:g} (the root's bound equals the recomputed cost)" in lines
    assert "messages on the wire:" in lines
    total = next(line.split() for line in lines if line.split()[:1] == ["total"])
    assert total[1:] == [str(doc["metrics"]["total_messages"]), str(doc["metrics"]["total_bytes"])]
    assert not re.search(r"\[/?bold|[\u2500-\u257f]", run.stdout)  # no markup, no box drawing
    example = [str(instances_dir / "example.wcsp"), "--json", str(tmp_path / "example.json")]
    imports = subprocess.run(  # rich is never loaded: not to print, not for a console
        [sys.executable, "-X", "importtime", "-m", "dcop", "run", *example],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imports.returncode == 0, imports.stderr
    assert "optimum" in imports.stdout
    assert not re.search(r"\| +rich", imports.stderr), "rich was imported"
    piped = run_dcop("run", str(instances_dir / "warehouse.wcsp"), "--json", "-")
    assert json.loads(piped.stdout)["cost"] == doc["cost"]
    assert f"optimum {doc['cost']:g}" in piped.stderr
    script = (
        "import io, sys\n"
        "from dcop.coordinator.launch import run_local\n"
        "from dcop.cli.report import write_summary\n"
        "from dcop.io import read_problem\n"
        f"run = run_local(read_problem({str(instances_dir / 'example.wcsp')!r}), timeout=60)\n"
        "write_summary(run, io.StringIO())\n"
        "print(any(m.startswith('rich') for m in sys.modules))\n"
    )
    check = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert check.stdout.strip() == "False", check.stderr


@pytest.mark.parametrize(
    ("loader", "quiet"),
    [("plain_call", ["-q"]), ("load_app", ["-q", "--quiet"])],
    ids=["plain line", "typer's line"],
)
def test_a_sigterm_during_start_up_still_writes_the_result_document(
    tmp_path: Path, instances_dir: Path, loader: str, quiet: list[str]
) -> None:
    """A SIGTERM that lands while dcop still imports is kept, and the command then ends as on
    Ctrl-C: status interrupted in the document, exit code 130 (here the signal is sent while
    the command's modules import, before the command line is parsed: the same moment, made
    certain), on a plain line (dcop.cli.plain) and on one typer reads (an option twice)."""
    out = tmp_path / "r.json"
    instance = instances_dir / "warehouse.wcsp"
    script = (
        "import os, signal, sys\n"
        "from dcop.cli import entry\n"
        f"load = entry.{loader}\n"
        "def loading(*args):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return load(*args)\n"
        f"entry.{loader} = loading\n"
        f"sys.argv = ['dcop', 'solve', {str(instance)!r}, '--json', {str(out)!r}, *{quiet!r}]\n"
        "entry.main()\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 130, run.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted" and "SIGTERM" in doc["message"]


def test_a_command_ends_with_its_exit_hooks_run_and_its_output_flushed(
    tmp_path: Path, instances_dir: Path
) -> None:
    """``dcop`` skips the interpreter's teardown at exit (os._exit), but only after the exit
    hooks ran (temporary folders are removed by them) and stdout was flushed: a JSON document
    piped to stdout arrives whole, and the exit code is the command's."""
    hook = tmp_path / "hook-ran"
    script = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(hook)!r}).write_text, 'yes')\n"
        "import dcop.cli.entry\n"
        f"sys.argv = ['dcop', 'solve', {str(instances_dir / 'warehouse.wcsp')!r}, '--json', '-', "
        "'-q']\n"
        "dcop.cli.entry.main()\n"
        "print('not reached')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["cost"] == 328 and "not reached" not in run.stdout
    assert hook.read_text() == "yes"


def test_the_command_table_names_every_command() -> None:
    """``dcop CMD`` imports only CMD's module (dcop.cli.entry.COMMANDS): the table must name
    every command the modules register, with the module that registers it."""
    from dcop.cli import entry

    registered = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    assert set(registered) == set(entry.COMMANDS)
    for name in entry.COMMANDS:  # each command found with only its own module imported
        shown = run_dcop(name, "--help")
        assert shown.returncode == 0 and f"dcop {name}" in shown.stdout, (name, shown.stderr)
    assert entry.command_modules(["run", "x.yaml"], {}) == ("dcop.cli.distributed",)
    assert entry.command_modules(["--help"], {}) == entry.COMMAND_MODULES
    assert entry.command_modules([], {}) == entry.COMMAND_MODULES
    completing = {"_DCOP_COMPLETE": "complete_bash"}
    assert entry.command_modules(["run"], completing) == entry.COMMAND_MODULES


def test_a_command_loads_only_what_it_needs() -> None:
    """``dcop run`` and ``dcop solve`` load neither the other commands' modules nor rich (only
    a summary or a live display needs it), and ZeroMQ's transport does not bring asyncio."""
    script = (
        "import sys\n"
        "argv = [sys.argv[1], 'x.yaml', '-q']\n"
        "from dcop.cli.entry import load_app, prepare\n"
        "prepare(argv)\n"
        "load_app(argv, {})\n"
        "import dcop.protocol.zmqlink\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('dcop.cli.', 'rich', "
        "'asyncio')))))\n"
    )
    for command, own in (("run", "dcop.cli.distributed"), ("solve", "dcop.cli.solve")):
        run = subprocess.run(
            [sys.executable, "-c", script, command], capture_output=True, text=True, check=True
        )
        loaded = set(run.stdout.split())
        assert own in loaded, loaded
        assert not loaded & {"dcop.cli.batch", "dcop.cli.deploy", "dcop.cli.generate"}, loaded
        assert not {m for m in loaded if m.startswith(("rich", "asyncio"))}, loaded


def test_live_status_on_a_terminal_and_off_it(monkeypatch: Any, capsys: Any) -> None:
    """On a terminal the status is a rich display (rich is loaded only then); elsewhere each
    change of phase is one plain line on stderr; disabled, there is no callback."""
    from dcop.cli.live import live_status
    from dcop.coordinator.driver import Progress

    status = Progress(phase="solve", agents=3, hellos=3, ready=3, utils=1, utils_expected=2)
    with live_status(False) as off:
        assert off is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    with live_status() as plain:
        assert plain is not None
        plain(status)
        plain(status)  # same phase, within the interval: no second line
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "solve" in lines[0] and "UTIL 1/2" in lines[0]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    with live_status() as live:
        assert live is not None
        live(status)  # a rich Live display updated with the table (transient: nothing left)


def test_importing_the_cli_does_nothing() -> None:
    """``import dcop.cli`` (and its entry module) reads no argv, starts no template, keeps no
    signal and imports no command: only :func:`dcop.cli.entry.main` does."""
    script = (
        "import signal, sys\n"
        "sys.argv = ['dcop', 'run', 'x.yaml']\n"
        "import dcop.cli, dcop.cli.entry\n"
        "print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('dcop', 'numpy', 'typer')))))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    default, loaded = run.stdout.splitlines()
    assert default == "True"
    assert set(loaded.split()) == {
        "dcop",
        "dcop.errors",
        "dcop.cli",
        "dcop.cli.entry",
        "dcop.cli.signals",
    }
