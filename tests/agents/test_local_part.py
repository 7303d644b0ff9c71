"""A hand-started agent reads its ``--problem`` within its own ``--timeout`` (security round 4,
finding 2: reading ignored every time limit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcop.agents.run import local_part
from dcop.errors import RunTimeout
from dcop.protocol.peers import AgentEntry, Peers


def test_reading_the_problem_past_the_agents_timeout_is_a_timeout(tmp_path: Path) -> None:
    n = 200_000
    path = tmp_path / "many.wcsp"
    path.write_text(f"many {n} 1 0 10\n" + "1 " * n + "\n")
    entry = AgentEntry(0, "x0", "tcp://127.0.0.1:1")
    peers = Peers("many", "tcp://127.0.0.1:2", (entry,))
    with pytest.raises(RunTimeout, match="longer than --timeout -1 s"):
        local_part(str(path), entry, peers, timeout_s=-1.0)
    tables, domain = local_part(str(path), entry, peers, timeout_s=600.0)
    assert (tables, domain) == ([], 1)
