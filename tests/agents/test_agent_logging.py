"""An agent's log lines name it: through the handler its template prepared before forking, or
one of its own when it was started fresh."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from dcop.agents.run import AgentFormatter, agent_logging, prepare_logging


@pytest.fixture
def bare_root() -> Iterator[None]:
    """The root logger without handlers for the test, restored after."""
    root = logging.getLogger()
    saved, level = root.handlers[:], root.level
    root.handlers = [h for h in saved if not isinstance(h.formatter, AgentFormatter)]
    try:
        yield
    finally:
        root.handlers, root.level = saved, level


def _ours() -> list[logging.Handler]:
    return [h for h in logging.getLogger().handlers if isinstance(h.formatter, AgentFormatter)]


def test_a_forked_agent_names_itself_on_its_templates_handler(bare_root: None) -> None:
    out = io.StringIO()
    prepare_logging(out)  # the template, once
    agent_logging(7, "INFO")  # the child
    assert len(_ours()) == 1  # no second handler
    logging.getLogger("dcop.agents").info("ready at %s", "tcp://x")
    logging.getLogger("dcop.agents").debug("not at INFO")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("dcop-agent 7: ") and lines[0].endswith(" INFO ready at tcp://x")


def test_a_fresh_agent_gets_a_handler_on_stderr(
    bare_root: None, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_logging(3, "WARNING")
    assert len(_ours()) == 1
    logging.getLogger("dcop.agents").warning("lost %d", 2)
    assert "dcop-agent 3: " in capsys.readouterr().err
