"""--max-memory is a cap for small files that expand (issue 33, items 5-7): peak RSS at most
1.1x the limit for solve, batch --algo auto, run and PR/MAR, or a too_large refusal before the
run grows. The files come from benchmarks/expansion.py, at a size a test can afford."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.expansion import CAP_FACTOR, commands, limit_for, measure, write_files
from dcop.io import read_problem

ARITY = 24


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_files(tmp_path_factory.mktemp("expansion"), ARITY)


def test_the_files_are_small_and_expand(files: dict[str, Path]) -> None:
    assert files["one.wcsp"].stat().st_size < 200
    problem = read_problem(files["one.wcsp"])
    (table,) = problem.tables
    assert table.entries == 1 << ARITY and table.sparse_form() is not None  # nothing built yet


@pytest.mark.parametrize("row", range(9))
def test_peak_rss_stays_under_the_cap(files: dict[str, Path], tmp_path: Path, row: int) -> None:
    limit = limit_for(ARITY)
    rows = commands(files, limit, tmp_path)
    if row >= len(rows):
        pytest.skip("no such row at this size")
    label, args = rows[row]
    got = measure(args, tmp_path / "doc.json")
    assert got["status"] in ("ok", "too_large"), (label, got)
    assert got["peak"] <= CAP_FACTOR * limit, (
        f"{label}: peak RSS {got['peak'] / 2**20:.0f} MiB > {CAP_FACTOR}x the limit of "
        f"{limit / 2**20:.0f} MiB"
    )


def test_dcop_run_refuses_a_setup_over_the_limits_before_sending_tables(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Each agent in the scope of the huge table gets its own copy: refused as too_large,
    naming the agent, before any table is sent (issue 33, item 6)."""
    out = tmp_path / "r.json"
    got = measure(
        ["run", str(files["one.wcsp"]), "--algo", "dpop", "--max-message-mib", "4095",
         "--max-memory", "100M", "-q", "--timeout", "60"],
        out,
    )  # fmt: skip
    doc = json.loads(out.read_text())
    assert got["code"] == 5 and doc["status"] == "too_large"
    assert "refused before any table was sent" in doc["message"]
    assert got["peak"] < 100 << 20


def test_a_peak_of_the_caller_is_not_charged_to_the_command(
    files: dict[str, Path], tmp_path: Path
) -> None:
    """Linux keeps ru_maxrss across exec: a command forked straight from a caller that once held
    400 MiB was charged 400 MiB (a pytest worker's 270 MiB failed a 191 MiB cap). measure()
    forks it from a small runner; run here from a fresh process that peaks first."""
    import subprocess
    import sys

    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from benchmarks.expansion import measure
big = bytearray(400 << 20)
for i in range(0, len(big), 4096):
    big[i] = 1
del big
print(measure(["solve", {str(files["one.wcsp"])!r}, "-q"], __import__("pathlib").Path({str(tmp_path / "d.json")!r}))["peak"])
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) < 200 << 20
