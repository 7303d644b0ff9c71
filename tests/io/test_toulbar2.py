"""toulbar2 itself reads what our .wcsp writer writes and finds the same optimum.

Needs pytoulbar2 (the ``bench`` extra); skipped where it is not installed. toulbar2 runs in a
subprocess because its library keeps global state between problems.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from dcop.io import read_problem, write_problem
from tests.conftest import INSTANCES, brute_force, random_problem

pytest.importorskip("pytoulbar2")

SOLVE = """
import sys, pytoulbar2
cfn = pytoulbar2.CFN(verbose=-1)
try:
    cfn.Read(sys.argv[1])
except Exception as exc:  # toulbar2 proves infeasibility while reading
    print("RESULT inf", type(exc).__name__)
    raise SystemExit(0)
res = cfn.Solve()
print("RESULT", "inf" if res is None else repr(float(res[1])))
"""


def toulbar2_optimum(path: Path) -> float:
    run = subprocess.run(
        [sys.executable, "-c", SOLVE, str(path)], capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT")]
    assert lines, run.stderr[-2000:]
    return float(lines[-1].split()[1])


@pytest.mark.parametrize("seed", range(6))
def test_toulbar2_reads_our_wcsp(seed: int, tmp_path: Path) -> None:
    problem = random_problem(seed, n=6, max_domain=3, n_tables=7)
    out = tmp_path / "p.wcsp"
    write_problem(problem, out)
    expected = brute_force(problem)
    got = toulbar2_optimum(out)
    assert got == expected or (math.isinf(got) and math.isinf(expected))


@pytest.mark.parametrize("name", ["queens4-bis.wcsp", "oconnell_bayesnet.wcsp", "warehouse.wcsp"])
def test_toulbar2_agrees_after_our_round_trip(name: str, tmp_path: Path) -> None:
    """Shared tables are expanded by our reader; toulbar2 must find the INDEX optimum again."""
    if not (INSTANCES / name).exists():
        pytest.skip("reference instances missing")
    out = tmp_path / name
    write_problem(read_problem(INSTANCES / name), out)
    expected = {"queens4-bis.wcsp": 0.0, "oconnell_bayesnet.wcsp": 1589.0, "warehouse.wcsp": 328.0}
    assert toulbar2_optimum(out) == expected[name]


def test_toulbar2_reads_our_sample(tmp_path: Path) -> None:
    sample = Path(__file__).parent / "data" / "features.wcsp"
    assert toulbar2_optimum(sample) == brute_force(read_problem(sample)) == 12
