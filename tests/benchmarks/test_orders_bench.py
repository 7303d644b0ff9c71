"""Smoke test of benchmarks/orders.py on its tiny set: every method measured, consistent with
dcop.orders.greedy and dcop.orders, the report and the plot written."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dcop.generators import grid_network
from dcop.orders.greedy import induced_width, min_fill_order

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import orders  # noqa: E402


def test_quick_run_writes_json_markdown_and_plot(tmp_path: Path) -> None:
    assert orders.main(["--quick", "--out", str(tmp_path), "--note", "a shared machine"]) == 0
    doc = json.loads((tmp_path / "orders_quick.json").read_text())
    rows = {r["instance"]: r for r in doc["rows"]}
    assert set(rows) == {"grid5", "scalefree_n40", "bayes_n40"}
    grid = grid_network(25, 3, 0.3, 1).neighbours()
    assert rows["grid5"]["minfill"]["width"] == induced_width(grid, min_fill_order(grid))
    for row in rows.values():
        for key in ("minfill", "mindegree", "default", "dfs", "run"):
            assert row[key]["width"] >= 1 and row[key]["largest"] >= 1
        # the engine never does worse than min-fill; the run keeps the narrower tree
        assert row["default"]["total"] + row["default"]["largest"] <= (
            row["minfill"]["total"] + row["minfill"]["largest"]
        )
        assert row["run"]["largest"] <= row["dfs"]["largest"]
        assert "run_width_ok" in row["targets"]
        # the ordering time target, against the default order's predicted solve time
        default = row["default"]
        assert default["predicted_solve_s"] > 0 and set(default["tried"]) >= {"minfill"}
        assert row["targets"]["order_time_ok"] == (
            default["seconds"] <= orders.order_time_limit(default["predicted_solve_s"])
        )
    assert doc["note"] == "a shared machine" and doc["command"] == "benchmarks/orders.py --quick"
    text = (tmp_path / "orders_quick.md").read_text()
    assert "a shared machine" in text
    assert "| grid5 | 25 |" in text
    plot = tmp_path / "orders_quick_width_vs_n.png"
    assert not plot.exists() or plot.stat().st_size > 0  # none without matplotlib


def test_order_time_limit() -> None:
    # 0.2 s below 2 s of solve, a tenth of longer ones
    assert orders.order_time_limit(0.01) == 0.2
    assert orders.order_time_limit(1.99) == 0.2
    assert orders.order_time_limit(30.0) == 3.0
