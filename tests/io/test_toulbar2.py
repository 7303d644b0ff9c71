"""toulbar2 itself reads what our .wcsp writer writes and finds the same optimum.

Needs pytoulbar2 (in the ``test`` extra on x86_64, where its wheels exist); skipped elsewhere.
toulbar2 runs in a subprocess because its library keeps global state between problems. Its
optimum is in the file's units: ``(optimum - shift) / scale`` with the scale and shift that the
writer records in the problem name gives the optimum of the problem written.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from dcop.inference import solve
from dcop.io import read_problem, write_problem
from dcop.io.wcsp import split_title
from tests.conftest import INSTANCES, brute_force, random_problem
from tests.io.test_wcsp_writer import _shifted

pytest.importorskip(
    "pytoulbar2", reason="pytoulbar2 is not installed (its wheels exist for x86_64 only)"
)

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


def mapped_optimum(path: Path) -> float:
    """toulbar2's optimum on a file we wrote, mapped back with the recorded scale and shift."""
    _, scale, shift = split_title(path.read_text().split()[0])
    return (toulbar2_optimum(path) - shift) / scale


@pytest.mark.parametrize("seed", range(4))
def test_toulbar2_reads_negative_integer_costs(seed: int, tmp_path: Path) -> None:
    problem = _shifted(seed)
    out = tmp_path / "neg.wcsp"
    write_problem(problem, out)
    assert mapped_optimum(out) == solve(problem).upper_bound == brute_force(problem)


# (file, precision): DCOPs with negative real costs, and UAI models (-ln p) written as .wcsp
ROUNDED = [
    ("pydcop/ising_4x4.yaml", 6),
    ("pdb1etl.uai", 6),
    ("test_Z.uai", 6),
    ("Promedus_24.uai", 6),
    ("network.uai", 6),
]


@pytest.mark.parametrize(("name", "precision"), ROUNDED, ids=[r[0] for r in ROUNDED])
def test_toulbar2_optimum_matches_ours_on_real_costs(
    name: str, precision: int, tmp_path: Path
) -> None:
    """Costs kept to ``precision`` decimals: each entry moves by at most 0.5 / 10**precision."""
    if not (INSTANCES / name).exists():
        pytest.skip("reference instances missing")
    problem = read_problem(INSTANCES / name)
    ours = solve(problem).upper_bound
    out = tmp_path / "p.wcsp"
    write_problem(problem, out, precision=precision)
    tolerance = (len(problem.tables) + 1) * 0.5 / 10**precision
    assert mapped_optimum(out) == pytest.approx(ours, abs=tolerance)
    # our reader, on our own file, agrees too
    assert solve(read_problem(out)).upper_bound == pytest.approx(ours, abs=tolerance)
