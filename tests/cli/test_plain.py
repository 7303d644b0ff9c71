"""A plain ``dcop solve`` line read without typer (dcop.cli.plain) means what typer reads in it.

The plain reader either gives the very arguments typer would pass to ``run_solve`` (the same
values, types and defaults) or gives None, and typer reads the line. Both readers run here in
this process on the same lines: hand-picked ones and generated ones.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st

import dcop.cli.solve as solve_module
from dcop.cli.app import app
from dcop.cli.entry import plain_call
from dcop.cli.plain import SOLVE_FILE, SOLVE_OPTIONS, read_solve
from dcop.cli.solving import run_solve
from dcop.usage import ClickException

SIGNATURE = inspect.signature(run_solve)


def typer_reads(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """The arguments typer passes to run_solve for ``dcop solve ARGS`` (None: typer refused the
    line, or it asked for help)."""
    seen: list[dict[str, Any]] = []

    def capture(*a: Any, **k: Any) -> None:
        seen.append(dict(SIGNATURE.bind(*a, **k).arguments))

    monkeypatch.setattr(solve_module, "run_solve", capture)
    try:
        app(prog_name="dcop", args=["solve", *args], standalone_mode=False)
    except ClickException:
        return None
    return seen[0] if seen else None


def plain_reads(args: list[str]) -> dict[str, Any] | None:
    """The plain reader's arguments, the defaults of run_solve filled in."""
    read = read_solve(args)
    if read is None:
        return None
    bound = SIGNATURE.bind(**read)
    bound.apply_defaults()
    return dict(bound.arguments)


def same_or_none(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """Check the rule on one line; the plain reader's answer."""
    plain = plain_reads(args)
    if plain is not None:
        typed = typer_reads(args, monkeypatch)
        assert typed is not None, f"typer refuses {args}, the plain reader took it"
        # repr: the same values (nan included), types and order
        assert repr(plain) == repr(typed), args
    return plain


def test_the_table_names_every_option_of_the_command() -> None:
    command = typer.main.get_command(app).commands["solve"]  # type: ignore[attr-defined]
    options = {name: p.name for p in command.params for name in (*p.opts, *p.secondary_opts)}
    arguments = [p.name for p in command.params if p.param_type_name == "argument"]
    assert arguments == [SOLVE_FILE]
    table = {name: param for name, (param, _) in SOLVE_OPTIONS.items()}
    assert table == {k: v for k, v in options.items() if k != SOLVE_FILE}
    flags = {n for n, (_, read) in SOLVE_OPTIONS.items() if read is None}
    assert flags == {n for p in command.params if getattr(p, "is_flag", False) for n in p.opts}


def test_the_defaults_are_typers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.uai"
    model.write_text("x")
    assert plain_reads([str(model)]) == typer_reads([str(model)], monkeypatch)


PLAIN_LINES = [
    ["-q"],
    ["--json", "-", "-q"],
    ["--json", "r.json", "--solution", "r.sol"],
    ["--algo", "mbe", "--z", "3"],
    ["--algo=aobb", "--timeout", "2.5", "--z=2"],
    ["--task", "pr", "--backend", "cupy", "--device", "0,1"],
    ["-f", "uai", "--dtype", "float32", "--max-memory", "8G"],
    ["--format=wcsp", "--ordering", "minfill", "--order-time", "0"],
    ["--order-time", "-1"],  # typer takes it; the command refuses it (exit 2, a document)
    ["--order-time", "nan", "--ordering", ""],
    ["--z", " 3"],
]
TYPER_LINES = [
    ["--help"],
    ["-q", "--help"],
    ["--"],
    ["--algo", "dpop"],
    ["--algo", "BE"],
    ["--z", "0"],
    ["--z", "1.5"],
    ["--timeout", "0"],
    ["--timeout", "inf"],
    ["--timeout", "nan"],
    ["-q", "-q"],
    ["--quiet", "-q"],
    ["--quiet=1"],
    ["-qf", "uai"],
    ["-f=uai"],
    ["--jso", "x"],
    ["--json"],
    ["--unknown"],
    ["--algo", "be", "--algo", "mbe"],
    ["extra"],
]


@pytest.mark.parametrize("line", PLAIN_LINES, ids=" ".join)
def test_a_plain_line_is_read_as_typer_reads_it(
    line: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.uai"
    model.write_text("x")
    assert same_or_none([str(model), *line], monkeypatch) is not None
    assert same_or_none([*line, str(model)], monkeypatch) is not None  # options first


@pytest.mark.parametrize("line", TYPER_LINES, ids=" ".join)
def test_other_lines_are_left_to_typer(
    line: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.uai"
    model.write_text("x")
    assert same_or_none([str(model), *line], monkeypatch) is None


def test_a_line_without_a_file_or_with_an_unreadable_one_is_left_to_typer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert read_solve([]) is None and read_solve(["-q"]) is None and read_solve([""]) is None
    secret = tmp_path / "secret.uai"
    secret.write_text("x")
    secret.chmod(0)
    if os.access(secret, os.R_OK):  # root reads anything
        return
    assert same_or_none([str(secret)], monkeypatch) is None


def test_only_solve_is_read_plainly(tmp_path: Path) -> None:
    model = str(tmp_path / "m.uai")
    assert plain_call(["solve", model], {}) is not None
    assert plain_call(["info", model], {}) is None
    assert plain_call(["solve", model], {"_DCOP_COMPLETE": "bash_complete"}) is None


TOKENS = [
    "m.uai",
    "other.wcsp",
    "-q",
    "--quiet",
    "--json",
    "-",
    "--algo",
    "be",
    "mbe",
    "dpop",
    "--z",
    "0",
    "2",
    "--timeout",
    "1e-4",
    "3",
    "--task",
    "pr",
    "-f",
    "--format=uai",
    "--ordering",
    "--order-time",
    "--help",
    "--",
    "--backend",
    "numpy",
    "--dtype",
    "float64",
    "--max-memory",
    "--evidence",
    "--solution",
    "--device",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=7))
def test_any_line_is_read_as_typer_reads_it_or_left_to_it(tokens: list[str]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        same_or_none(tokens, monkeypatch)
