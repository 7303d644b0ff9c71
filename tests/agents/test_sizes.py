"""Predicted UTIL sizes that no integer wire format carries (3^k, 10^k for large k): DPOP is
refused by name, ADPOP runs at the z asked, ``auto`` picks the largest z that fits (in process:
the real agents and coordinator over the in-process transport)."""

from __future__ import annotations

import pytest

from dcop.errors import TableTooLarge
from dcop.generators import random_network
from dcop.protocol import RunSpec
from dcop.sizes import SIZE_CAP, add, as_size, entries
from dcop.trees.dfs import simulate

# as the crash (22 variables of 10 values, 90 % of the pairs linked), a little larger:
# even the best tree's DPOP UTIL would hold ~10^23 entries, beyond 2^64
PROBLEM = random_network(26, 10, 0.9, 0.0, seed=1)


def test_sizes_are_capped_floats_exact_below_2_to_the_53() -> None:
    assert entries([3] * 30) == 3**30 and isinstance(entries([3]), float)
    assert entries([10] * 400) == SIZE_CAP  # not inf: sums stay finite too
    assert add(SIZE_CAP, SIZE_CAP) == SIZE_CAP
    assert as_size(10**400) == SIZE_CAP and as_size(7) == 7.0
    with pytest.raises(ValueError):
        as_size(-1)


def test_the_problem_is_astronomical() -> None:
    ids = {i: f"x{i}" for i in range(PROBLEM.n)}
    index = {v: i for i, v in enumerate(PROBLEM.variables)}
    adjacency: dict[int, set[int]] = {i: set() for i in ids}
    for t in PROBLEM.tables:
        for a in t.scope:
            adjacency[index[a]] |= {index[b] for b in t.scope if b != a}
    run = simulate(adjacency, ids, dict.fromkeys(ids, 10))
    assert run.summary.largest > 2.0**64


def test_dpop_refuses_naming_the_way_out(run_inproc) -> None:
    with pytest.raises(TableTooLarge, match=r"--algo adpop --z \d+"):
        run_inproc(PROBLEM, "dpop")


def test_adpop_runs_at_the_z_asked(run_inproc) -> None:
    result = run_inproc(PROBLEM, "adpop", z=2)
    assert result["status"] == "ok" and result["z"] == 2
    assert result["lower_bound"] <= result["upper_bound"] + 1e-9
    assert result["upper_bound"] == pytest.approx(PROBLEM.evaluate(result["run"].assignment))
    # the sizing predicted exactly what the largest UTIL held (many z = 2 tables, not 10^19)
    sent = result["metrics"]["largest_util_entries"]
    assert result["pseudo_tree"]["predicted_largest_util_entries"] == sent < 10**4


def test_auto_picks_the_largest_z_that_fits(run_inproc) -> None:
    limit = 64 * 1024  # a small message limit: the largest z that fits is small and quick
    with pytest.raises(TableTooLarge, match=r"--algo adpop --z (\d+)") as refused:
        run_inproc(PROBLEM, spec=RunSpec("dpop", max_message_bytes=limit))
    fit = int(str(refused.value).split("--z ")[1].split(",")[0].split(")")[0])
    result = run_inproc(PROBLEM, spec=RunSpec("auto", max_message_bytes=limit))
    assert result["algo"] == "adpop" and result["z"] == fit
    predicted = result["pseudo_tree"]["predicted_by_z"]
    assert predicted["dpop"] > 2**64
