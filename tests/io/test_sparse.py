"""Tiny files must not allocate gigabytes: tables given by a default cost stay sparse.

Regression for "a 145-byte WCSP (one arity-27 function given by its default cost) made
``dcop solve`` use 3.3 GB". Memory is measured, never time: the peak RSS of a child process that
reads the file, and tracemalloc's peak (NumPy reports its buffers to it) in this process.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import dcop.io._common as common
from dcop.errors import InputError
from dcop.io import read_problem, write_problem
from dcop.tables import choose_dtype
from tests.io.helpers import write

pytestmark = pytest.mark.timeout(120)

N = 27  # 2**27 float64 entries = 1 GiB if built densely
NAMES = [f"x{i}" for i in range(N)]

WCSP = f"t {N} 2 1 10\n{' '.join(['2'] * N)}\n{N} {' '.join(map(str, range(N)))} 0 0\n"
XML = (
    '<instance><presentation name="t" maximize="false"/>'
    '<domains nbDomains="1"><domain name="D" nbValues="2">0..1</domain></domains>'
    f'<variables nbVariables="{N}">'
    + "".join(f'<variable name="{v}" domain="D"/>' for v in NAMES)
    + "</variables>"
    f'<relations><relation name="r" arity="{N}" nbTuples="1" semantics="soft" defaultCost="3">'
    f"7: {' '.join(['1'] * N)}</relation></relations>"
    f'<constraints><constraint name="c" arity="{N}" scope="{" ".join(NAMES)}" reference="r"/>'
    "</constraints></instance>"
)
YAML = (
    "name: t\ndomains: {d: {values: [0, 1]}}\nvariables:\n"
    + "".join(f"  {v}: {{domain: d}}\n" for v in NAMES)
    + f"constraints:\n  c: {{type: extensional, variables: [{', '.join(NAMES)}], default: 3, "
    + f"values: {{7: '{' '.join(['1'] * N)}'}}}}\n"
)
#: one function over 10 variables of 1000 values (10**30 entries), default cost 0
WIDE = "t 10 1000 1 10\n" + " ".join(["1000"] * 10) + "\n10 0 1 2 3 4 5 6 7 8 9 0 0\n"

READ = """
import sys
from dcop.io import read_problem
problem = read_problem(sys.argv[1])
print(problem.tables[0].entries, problem.evaluate(dict.fromkeys(problem.variables, 0)))
"""
#: a fresh process whose only child reads the file: RUSAGE_CHILDREN then sees that child alone
MEASURE = """
import resource, subprocess, sys
run = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], capture_output=True,
                     text=True)
print(run.returncode, run.stdout.strip(), "|", run.stderr.strip()[-300:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def test_a_tiny_wcsp_with_a_huge_default_table_reads_in_little_memory(tmp_path: Path) -> None:
    path = write(tmp_path, "wide.wcsp", WCSP)
    assert path.stat().st_size < 150
    run = subprocess.run(
        [sys.executable, "-c", MEASURE, READ, str(path)],
        capture_output=True,
        text=True,
        timeout=100,
    )
    status, peak_kib = run.stdout.splitlines()
    assert status.startswith(f"0 {2**N} 0.0 |"), status
    # the interpreter with NumPy and dcop takes well under 200 MiB; the dense table alone is 1 GiB
    assert int(peak_kib) < 300 * 1024, f"peak RSS {int(peak_kib) // 1024} MiB"


@pytest.mark.parametrize(
    ("name", "content", "entries", "cost"),
    [
        ("wide.wcsp", WCSP, 2**N, 0.0),
        ("wide.xml", XML, 2**N, 3.0),
        ("wide.yaml", YAML, 2**N, 3.0),
        ("wider.wcsp", WIDE, 1000**10, 0.0),
    ],
)
def test_huge_default_tables_stay_sparse(
    name: str, content: str, entries: int, cost: float, tmp_path: Path
) -> None:
    path = write(tmp_path, name, content)
    tracemalloc.start()
    try:
        problem = read_problem(path)
        table = problem.tables[0]
        zeros = dict.fromkeys(problem.variables, 0)
        assert problem.evaluate(zeros) == cost
        if not name.endswith(".wcsp"):  # the WCSP files list no tuple
            assert problem.evaluate(dict.fromkeys(problem.variables, 1)) == 7.0
        assert choose_dtype(problem) == np.float32
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert table.is_sparse and table.entries == entries
    assert peak < 4 * 2**20, f"{peak} bytes traced"


def test_a_missing_tuple_without_default_is_refused_before_any_allocation(tmp_path: Path) -> None:
    """Without a default every tuple must be listed: found without a 1 GiB table of NaN."""
    path = write(tmp_path, "nodefault.yaml", YAML.replace("default: 3, ", ""))
    assert path.stat().st_size < 1000
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=r"tuple '0 0 0 .* 0' has no cost and no default"):
            read_problem(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20, f"{peak} bytes traced"


@pytest.mark.parametrize("fmt", ["wcsp", "xml", "yaml"])
def test_sparse_tables_are_written_sparsely(fmt: str, tmp_path: Path) -> None:
    """Writers list a sparse table's tuples; reading the copy gives the same costs."""
    source = write(tmp_path, f"wide.{fmt}", {"wcsp": WCSP, "xml": XML, "yaml": YAML}[fmt])
    problem = read_problem(source)
    out = tmp_path / f"copy.{fmt}"
    tracemalloc.start()
    try:
        write_problem(problem, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 2**20
    assert out.stat().st_size < 4000
    again = read_problem(out)
    assert again.tables[0].is_sparse
    for value in (0, 1):
        assignment = dict.fromkeys(again.variables, value)
        assert again.evaluate(assignment) == problem.evaluate(
            dict.fromkeys(problem.variables, value)
        )


def test_listed_tuples_still_count_against_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "MAX_TOTAL_ENTRIES", 20)
    monkeypatch.setattr(common, "DENSE_SLACK", 0)
    head = f"t 10 2 1 10\n{' '.join(['2'] * 10)}\n10 {' '.join(map(str, range(10)))} 0"
    rows = [" ".join(["1"] * 9 + [str(i)]) + " 5\n" for i in range(2)]
    one = read_problem(write(tmp_path, "one.wcsp", f"{head} 1\n{rows[0]}"))  # 11 values
    assert one.tables[0].is_sparse
    with pytest.raises(InputError, match="entries in all"):
        read_problem(write(tmp_path, "two.wcsp", f"{head} 2\n{''.join(rows)}"))  # 22 values


def test_a_file_that_lists_most_tuples_is_read_densely(tmp_path: Path) -> None:
    content = "t 2 3 1 100\n3 3\n2 0 1 0 8\n" + "".join(
        f"{a} {b} {a + b}\n" for a in range(3) for b in range(3) if (a, b) != (2, 2)
    )
    table = read_problem(write(tmp_path, "dense.wcsp", content)).tables[0]
    assert not table.is_sparse
    assert table.costs.tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 0]]
    assert math.isfinite(table.costs.sum())
