"""Problems that ``dcop solve`` takes but the wire cannot carry are refused by ``dcop run`` at
once, in one line (security round 4, finding 6: a 300-character variable name waited 121 s for
a hello, a variable in 5000 cost functions failed after the peer timeout)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dcop.coordinator.topology import check_wire_limits
from dcop.errors import InputError
from dcop.model import CostTable, Problem, Variable
from tests.cli.conftest import run_dcop


def _problem(name: str = "x", tables: int = 1) -> Problem:
    a, b = Variable.with_size(name, 2), Variable.with_size("y", 2)
    unary = [CostTable((name,), np.array([0.0, float(k % 3)]), f"u{k}") for k in range(tables)]
    return Problem.build([a, b], [*unary, CostTable((name, "y"), np.eye(2), "b")])


def test_wire_limits() -> None:
    check_wire_limits(_problem("x" * 256, 4095))  # at the limits: taken
    with pytest.raises(InputError, match="name of 257 characters"):
        check_wire_limits(_problem("x" * 257))
    with pytest.raises(InputError, match="is in 4097 cost functions"):
        check_wire_limits(_problem(tables=4096))


def test_run_refuses_a_long_variable_name_at_once(tmp_path: Path) -> None:
    long = "v" * 300
    path = tmp_path / "long.yaml"
    path.write_text(
        "name: long\nobjective: min\ndomains:\n  d: {values: [0, 1]}\n"
        f"variables:\n  {long}: {{domain: d}}\n  y: {{domain: d}}\n"
        f"constraints:\n  c:\n    type: intention\n    function: {long} + y\n"
    )
    done = run_dcop("run", str(path), "--timeout", "60")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"dcop: error: variable {long[:40]!r}... has a name of 300 characters: distributed "
        "runs allow at most 256 (dcop solve takes it)"
    ]
    assert run_dcop("solve", str(path)).returncode == 0
