"""Smoke tests of benchmarks/run.py's pure parts: limits, z schedule, parsers, instance builders."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dcop.inference import solve_be
from dcop.model import CostTable, Problem, Variable
from tests.conftest import brute_force

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

from compare.central import (  # noqa: E402
    EXTRA_WCSP,
    check_bounds,
    check_exact,
    reference_optimum,
    z_schedule,
)
from compare.external import parse_frodo, parse_pydcop  # noqa: E402
from compare.instances import finite_version, max_discsp  # noqa: E402
from compare.limits import classify, run_limited  # noqa: E402
from compare.report import fmt_num, fmt_time, geomean, ratio  # noqa: E402


def test_classify_statuses() -> None:
    assert classify(0, "", False) == "ok"
    assert classify(None, "", True) == "oot"
    assert classify(1, "numpy...: Unable to allocate 3.2 GiB", False) == "oom"
    assert classify(3, "MemoryError", False) == "oom"
    assert classify(-9, "", False) == "oom"
    assert classify(1, "ValueError: bad", False) == "error"


def test_run_limited_time_and_memory() -> None:
    slow = run_limited([sys.executable, "-c", "import time; time.sleep(30)"], 0.5, None)
    assert slow.status == "oot"
    assert slow.wall_s < 10
    hog = run_limited([sys.executable, "-c", "b = bytearray(3 * 2**30)"], 30, 1.0)
    assert hog.status == "oom"
    fine = run_limited([sys.executable, "-c", "print('hello')"], 30, 2.0)
    assert fine.status == "ok" and fine.stdout.strip() == "hello"
    bad = run_limited([sys.executable, "-c", "raise SystemExit('broken input')"], 30, 2.0)
    assert bad.status == "error" and bad.reason() == "broken input"


def test_z_schedule_follows_the_paper() -> None:
    # z_min = arity, z_max = min(20, w*+1, memory), thirds in between
    assert z_schedule(2, 5, 6, 2**31) == [2, 3, 5, 6]
    assert z_schedule(2, 30, 2, 2**40) == [2, 8, 14, 20]
    # d = 44: 44^5 * 8 bytes = 1.3 GB fits 2 GiB, 44^6 does not
    assert z_schedule(2, 7, 44, 2**31)[-1] == 5
    # w* below the arity: a single z
    assert z_schedule(4, 3, 4, 2**31) == [4]


def test_checks_catch_wrong_answers() -> None:
    assert check_exact({"status": "ok", "recomputed": 5.0, "lower_bound": 5.0}, 5.0, 1e-9) == "ok"
    assert check_exact({"status": "ok", "recomputed": 6.0}, 5.0, 1e-9).startswith("WRONG")
    assert check_exact({"status": "oot"}, 5.0, 1e-9) == "-"
    assert check_bounds({"status": "ok", "lower_bound": 3, "recomputed": 7}, 5.0, 1e-9) == "ok"
    assert check_bounds({"status": "ok", "lower_bound": 6, "recomputed": 7}, 5.0, 1e-9) != "ok"
    assert check_bounds({"status": "ok", "lower_bound": 1, "recomputed": 4}, 5.0, 1e-9) != "ok"


def test_reference_optimum_prefers_known_then_proved_then_be() -> None:
    ok_tb2 = {"status": "ok", "proved_optimal": True, "recomputed": 7.0}
    ok_be = {"status": "ok", "recomputed": 7.0}
    assert reference_optimum(5.0, ok_tb2, ok_be) == (5.0, "known")
    assert reference_optimum(None, ok_tb2, {"status": "oom"}) == (7.0, "toulbar2 (proved)")
    unproved = {**ok_tb2, "proved_optimal": False}
    assert reference_optimum(None, unproved, ok_be) == (7.0, "dcop BE")
    assert reference_optimum(None, unproved, {"status": "oot"}) == (None, "none")


def _extra_wcsp_index() -> dict[str, dict[str, str]]:
    import csv

    with (EXTRA_WCSP / "INDEX.tsv").open() as fh:
        return {r["file"]: r for r in csv.DictReader(fh, delimiter="\t")}


def test_extra_wcsp_instances_are_indexed() -> None:
    """Every file of benchmarks/instances/wcsp is in its INDEX.tsv, and every row is a file."""
    files = {f.name for f in EXTRA_WCSP.glob("*.wcsp")}
    assert files and files == set(_extra_wcsp_index())


@pytest.mark.parametrize("name", sorted(f.name for f in EXTRA_WCSP.glob("*.wcsp")))
def test_extra_wcsp_instance_reads_and_matches_its_row(name: str) -> None:
    """One test per file (a few seconds each): they spread over the xdist workers."""
    from dcop.io import read_problem

    row = _extra_wcsp_index()[name]
    problem = read_problem(str(EXTRA_WCSP / name))
    assert problem.n == int(row["n"]), name
    assert problem.max_domain() == int(row["max_domain"]), name


FRODO_OUTPUT = """Starting the algorithm...
var `x1' = 3
var `x0' = 1
Total cost of reported solution: 7
Algorithm finished in 1,234 ms (simulated time)
Number of NCCCs = 2,412
Number of messages sent (by type): \n\t[ALL, DPOP, UTILpropagation, UTIL]:\t13
\t[ALL, DPOP, VALUEpropagation, VALUE]:\t13
\t- Total:\t160
Amount of information sent (by type, in bytes): \n\t[ALL, DPOP, UTILpropagation, UTIL]:\t8,117
\t- Total:\t47,115
Size of the largest message sent (by type, in bytes): \n\t[ALL, DPOP, UTILpropagation, UTIL]:\t831
\t[ALL, DPOP, VALUEpropagation, VALUE]:\t269
\t- Overall maximum:\t900
"""


def test_parse_frodo_statistics() -> None:
    r = parse_frodo(FRODO_OUTPUT)
    assert r["cost"] == 7.0
    assert r["simulated_s"] == pytest.approx(1.234)
    assert r["ncccs"] == 2412
    assert (r["messages"], r["util_messages"]) == (160, 13)
    assert (r["bytes"], r["util_bytes"]) == (47115, 8117)
    assert (r["largest_msg_bytes"], r["largest_util_bytes"]) == (900, 831)
    assert r["labels"] == {"x1": 3, "x0": 1}
    assert not r["timed_out"]
    assert parse_frodo("Timed out after 1000 ms (simulated time)")["timed_out"]


def test_parse_pydcop_keeps_algorithm_messages() -> None:
    doc = json.loads(
        '{"status": "FINISHED", "cost": 12, "time": 0.5, "assignment": {"v0": 1},'
        ' "msg_count": 30, "msg_size": 50, "agt_metrics": {'
        '"a0": {"count_ext_msg": {"_discovery_a0": 9, "v0": 2}, "size_ext_msg": {"v0": 20}},'
        '"a1": {"count_ext_msg": {"v1": 1}, "size_ext_msg": {"_discovery_a1": 0, "v1": 10}}}}'
    )
    r = parse_pydcop(doc)
    assert (r["dpop_messages"], r["dpop_size_units"]) == (3, 30)
    assert (r["cost"], r["solve_s"], r["msg_count_all"]) == (12, 0.5, 30)


def test_max_discsp_model() -> None:
    p = max_discsp(8, 3, 0.4, 0.5, seed=3)
    assert p.n == 8 and len(p.tables) == round(0.4 * 8 * 7 / 2)
    assert all(set(np.unique(t.costs)) <= {0.0, 1.0} for t in p.tables)
    assert len({t.scope for t in p.tables}) == len(p.tables)
    q = max_discsp(8, 3, 0.4, 0.5, seed=3)
    assert all(np.array_equal(a.costs, b.costs) for a, b in zip(p.tables, q.tables, strict=True))
    assert solve_be(p).internal_cost == brute_force(p)


def test_finite_version_keeps_the_optimum() -> None:
    rng = np.random.default_rng(5)
    variables = [Variable.with_size(f"x{i}", 3) for i in range(5)]
    tables = []
    for i in range(4):
        costs = rng.integers(0, 100, (3, 3)).astype(float)
        costs[rng.random((3, 3)) < 0.4] = math.inf
        tables.append(CostTable((f"x{i}", f"x{i + 1}"), costs))
    p = Problem.build(variables, tables)
    f = finite_version(p)
    assert not any(np.isinf(t.costs).any() for t in f.tables)
    best = brute_force(p)
    if math.isfinite(best):
        assert brute_force(f) == best
    with pytest.raises(ValueError):
        finite_version(p, big=10.0)


def test_report_formatting() -> None:
    assert fmt_time(0.01234) == "0.012" and fmt_time(123.4) == "123" and fmt_time("oom") == "oom"
    assert fmt_num(76911689.0) == "76911689" and fmt_num(math.inf) == "inf"
    assert ratio(10.0, 2.0) == 5.0 and ratio("oot", 1.0) is None
    assert geomean([2.0, 8.0]) == pytest.approx(4.0) and geomean([]) is None
