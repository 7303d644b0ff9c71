"""Every option that ``--help`` lists, for every command of ``dcop`` and for ``dcop-agent``,
appears in docs/USAGE.md (its options had drifted: ``--order-time``, ``--write-order``, ``-q``
and ``--ordering auto`` were missing)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main

from dcop.agents.cli import app as agent_app
from dcop.cli.entry import load_app

USAGE = Path(__file__).resolve().parents[2] / "docs" / "USAGE.md"


def _commands(command: Any, path: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """Each leaf command under ``command``, with its name as typed (``deploy compose``)."""
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in subcommands.items():
            yield from _commands(sub, (*path, name))
        return
    yield " ".join(path), command


def _listed_options(command: Any) -> list[str]:
    """The option names ``--help`` shows (a flag's ``--no-`` form is covered by the rule USAGE
    states once)."""
    return [
        name
        for param in command.params
        if param.param_type_name == "option" and not param.hidden
        for name in param.opts
    ]


COMMANDS = dict(_commands(typer.main.get_command(load_app([], {})), ("dcop",)))
COMMANDS["dcop-agent"] = typer.main.get_command(agent_app)


def test_every_command_is_checked() -> None:
    assert {"dcop solve", "dcop info", "dcop run", "dcop coordinator", "dcop batch"} <= set(
        COMMANDS
    )
    assert {"dcop deploy compose", "dcop keys generate", "dcop generate grid"} <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_of_help_is_in_usage(name: str) -> None:
    text = USAGE.read_text(encoding="utf-8")
    options = _listed_options(COMMANDS[name])
    assert options, f"{name} lists no option"
    # the whole option, not a prefix of a longer one (--tree is not --trees)
    missing = [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]
    assert not missing, f"{name}: {missing} are not in docs/USAGE.md"


def test_the_root_options_are_in_usage() -> None:
    text = USAGE.read_text(encoding="utf-8")
    root = typer.main.get_command(load_app([], {}))
    for option in _listed_options(root):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), option
