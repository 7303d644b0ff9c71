"""Smoke test of benchmarks/pseudotree.py: one small instance measured, checked against
dcop.orders.greedy, and the report rendered."""

from __future__ import annotations

import sys
from pathlib import Path

from dcop.generators import random_network
from dcop.orders.greedy import induced_width, min_fill_order
from dcop.trees.candidates import Candidate, default_candidates
from dcop.trees.pseudotree import dfs_pseudo_tree

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import pseudotree  # noqa: E402


def test_measure_and_report() -> None:
    problem = random_network(14, 3, 0.3, 0.3, seed=4)
    adjacency = problem.neighbours()
    row = {"family": "random n30", "instance": "tiny", **pseudotree.measure(problem, [1, 3])}
    assert row["minfill"]["width"] == induced_width(adjacency, min_fill_order(adjacency))
    central = dfs_pseudo_tree(adjacency)
    assert row["most_connected_is_central"]
    assert row["central_dfs"] == pseudotree.tree_cost(central, problem.domain_sizes())
    assert row["most-connected restarts"]["1"]["width"] == row["central_dfs"]["width"]
    for name in pseudotree.SERIES:
        one, three = row[name]["1"], row[name]["3"]
        assert three["largest"] <= one["largest"]  # the best of 3 includes the first
        assert three["messages"] == 3 * one["messages"] == 3 * 2 * (problem.n - 1)
    assert pseudotree.series("default", 4) == default_candidates(4)
    assert pseudotree.series("random restarts", 2) == [
        Candidate("random"),
        Candidate("random", "random", 0, 1),
    ]
    report = {
        "command": "benchmarks/pseudotree.py",
        "machine": "test",
        "date": "today",
        "seeds": 1,
        "ks": ["1", "3"],
        "rows": [row],
    }
    report["summary"] = pseudotree.summary(report, [row])
    md = pseudotree.markdown(report)
    assert "| tiny | 14 |" in md and "## Target" in md


def test_frodo_instances_are_readable() -> None:
    rows = list(pseudotree.instances(1))
    assert len(rows) == len(pseudotree.FAMILIES)
    frodo = [p for family, _, p in rows if family.startswith("frodo")]
    assert [p.n for p in frodo] == [30, 30, 30, 50]
