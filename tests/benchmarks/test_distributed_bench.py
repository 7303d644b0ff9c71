"""The distributed benchmarks' pure parts: per-n figures and the 2x target of distributed.py,
liveness.py's old/new summary, serving.py's table, the FRODO suite's agent files, families, kept-tree fields and
wall-time target, and the placeholders that keep outside folders out of the results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH / "probes"))

import distributed  # noqa: E402
import liveness  # noqa: E402
import serving  # noqa: E402
from compare.context import Context  # noqa: E402
from compare.distributed_cmp import (  # noqa: E402
    FRODO_GENERATED,
    _frodo_report,
    agree,
    frodo_generated_family,
    min_fill_width,
    tree_fields,
)
from compare.external import frodo_agent_config  # noqa: E402
from run import public_command  # noqa: E402


def _dpop_row(n: int, seed: int, wall: float, solve: float, run_s: float, solve_s: float) -> Any:
    return {
        "algo": "dpop",
        "n": n,
        "seed": seed,
        "run": {
            "finished": True,
            "wall_s": wall,
            "solve_wall_s": solve,
            "startup_s": wall - solve,
            "simulated_s": 0.01,
            "heartbeat_messages": 2 * seed,
            "heartbeat_bytes": 50 * seed,
            "algorithm_messages": 100,
            "algorithm_bytes": 1000,
            "util_messages": n - 1,
            "messages": 150,
            "bytes": 2000,
        },
        "cli": {"run_wall_s": run_s, "solve_wall_s": solve_s, "ratio": run_s / solve_s},
    }


def test_by_n_means_over_seeds_and_the_target_reads_the_largest_n() -> None:
    rows = [
        _dpop_row(10, 0, 1.0, 0.2, 1.2, 0.6),
        _dpop_row(10, 1, 2.0, 0.4, 1.6, 0.8),
        _dpop_row(30, 0, 3.0, 1.0, 2.0, 1.0),
        _dpop_row(30, 1, 3.0, 1.0, 3.0, 1.0),
        {"algo": "adpop(2)", "n": 30, "seed": 0, "run": {"finished": False}},
    ]
    table = distributed.by_n(rows)
    assert [r["n"] for r in table] == [10, 30]
    ten = table[0]
    assert ten["startup_s"] == pytest.approx(1.2) and ten["solve_wall_s"] == pytest.approx(0.3)
    assert ten["cli_ratio"] == pytest.approx(2.0) and ten["heartbeat_messages"] == 1
    line = distributed.target_line(table)
    assert "n = 30" in line and "2.50x" in line and "worst seed 3.00x" in line
    assert "**not met**" in line
    rows[3]["cli"] = {"run_wall_s": 1.5, "solve_wall_s": 1.0, "ratio": 1.5}
    assert "**met**" in distributed.target_line(distributed.by_n(rows))
    assert "not measured" in distributed.target_line([])


def test_liveness_summary_is_old_over_new() -> None:
    def row(version: str, hb: int, total: int, wall: float) -> dict[str, Any]:
        result = {
            "status": "ok",
            "heartbeat_messages": hb,
            "heartbeat_bytes": 25 * hb,
            "total_messages": total,
            "total_bytes": 10 * total,
            "command_wall_s": wall,
            "solve_wall_s": wall / 2,
        }
        return {"instance": "a", "version": version, "result": result}

    rows = [row("old", 800, 1000, 40.0), row("new", 40, 250, 20.0)]
    rows.append({"instance": "a", "version": "new", "result": {"status": "error"}})
    (s,) = liveness.summarise(rows)
    assert (s["heartbeats_old"], s["heartbeats_new"]) == (800, 40)
    assert s["messages_ratio"] == pytest.approx(4.0) and s["command_wall_ratio"] == 2.0


def test_frodo_agent_file_counts_only_in_the_stats_run(tmp_path: Path) -> None:
    frodo = tmp_path / "frodo"
    (frodo / "agents" / "DPOP").mkdir(parents=True)
    (frodo / "agents" / "DPOP" / "DPOPagent.xml").write_text(
        '<agent measureTime = "true" measureMsgs = "true" >\n'
        '<dfs displayGraph = "true" countNCCCs = "false" />\n'
    )
    work = tmp_path / "work"
    work.mkdir()
    plain = frodo_agent_config(frodo, work).read_text()
    stats = frodo_agent_config(frodo, work, stats=True).read_text()
    assert 'measureMsgs = "false"' in plain and 'countNCCCs = "false"' in plain
    assert 'measureMsgs = "true"' in stats and 'countNCCCs = "true"' in stats
    assert 'displayGraph = "false"' in plain and 'displayGraph = "false"' in stats
    (frodo / "agents" / "DPOP" / "DPOPagent.xml").write_text("<agent />")
    with pytest.raises(ValueError, match="measureMsgs"):
        frodo_agent_config(frodo, tmp_path, stats=True)


def test_frodo_generated_instances_have_families() -> None:
    files = sorted(FRODO_GENERATED.glob("*.xml"))
    assert len(files) == 20
    families = {frodo_generated_family(f.stem) for f in files}
    assert len(families) == 4 and "FRODO-generated" not in families


def test_tree_fields_and_min_fill_width() -> None:
    tree = {"tree": 2, "candidates_width": [5, 4, 3], "candidates_largest_util_entries": [9, 8, 7]}
    assert tree_fields(tree) == {
        "tree_width": 3,
        "tree_largest_util_entries": 7,
        "candidate_widths": [5, 4, 3],
    }
    assert tree_fields(None) == {} and tree_fields({"tree": None}) == {}
    from dcop.generators import random_network

    assert min_fill_width(random_network(8, 2, 1.0, 0.3, seed=1)) == 7  # a clique of 8


def _frodo_row(name: str, dcop_wall: float, frodo_wall: float | None) -> dict[str, Any]:
    frodo: dict[str, Any] = (
        {"status": "ok", "wall_s": frodo_wall} if frodo_wall else {"status": "oot"}
    )
    return {
        "instance": name,
        "family": "f",
        "n": 3,
        "d": 2,
        "be": {"status": "ok", "total_s": 0.01},
        "dcop": {"status": "ok", "wall_s": dcop_wall},
        "frodo": frodo,
        "optimum": 1.0,
        "check": "ok",
        "ratio_simulated": None,
        "ratio_wall": frodo_wall / dcop_wall if frodo_wall else None,
    }


def test_frodo_report_names_the_instances_where_dcop_is_not_faster(tmp_path: Path) -> None:
    from compare.machine import machine_info

    ctx = Context(out_dir=tmp_path, command="x", _machine=machine_info())
    rows = [_frodo_row("a", 1.0, 2.0), _frodo_row("b", 2.0, 1.0), _frodo_row("c", 1.0, None)]
    summary = _frodo_report(ctx, rows)
    assert (summary["both_finished"], summary["dcop_wall_lower"]) == (2, 1)
    assert summary["dcop_wall_not_lower"] == ["b"] and summary["dcop_only_finished"] == ["c"]
    text = (tmp_path / "dpop_vs_frodo.md").read_text()
    assert "**not met** (not lower on: b)" in text
    summary = _frodo_report(ctx, [rows[0], rows[2]])
    assert "**met**" in (tmp_path / "dpop_vs_frodo.md").read_text()


def test_results_name_placeholders_for_outside_folders() -> None:
    cmd = public_command(["dpop-vs-frodo", "--frodo", "/somewhere/frodo", "--pydcop=/x/venv"])
    assert "/somewhere" not in cmd and "/x/venv" not in cmd
    assert "--frodo FRODO_DIR" in cmd and "--pydcop=PYDCOP_VENV" in cmd
    assert public_command(["wcsp", "--time-limit", "5"]).endswith("wcsp --time-limit 5")


def test_agree_counts_an_infeasible_optimum_and_flags_a_wrong_cost() -> None:
    ok = {"status": "ok"}
    assert agree({"dcop": ok | {"recomputed": "inf"}}, "inf") == "ok"  # every assignment costs inf
    assert agree({"dcop": ok | {"recomputed": 12.0}}, 12) == "ok"
    assert agree({"dcop": ok | {"recomputed": 13.0}}, 12).startswith("DIFFER")
    assert agree({"dcop": ok | {"recomputed": "inf"}}, 12).startswith("DIFFER")
    assert agree({"dcop": ok | {"recomputed": 12.0}}, "inf").startswith("DIFFER")
    assert agree({"dcop": {"status": "oot"}}, 12) == "-"


def test_the_serving_table_compares_warm_cold_and_frodo() -> None:
    row = {"instance": "a.xml", "n": 8, "warm_coordinator_s": 0.25, "cold_run_s": 0.3,
           "frodo_wall_s": 0.5, "same": True}  # fmt: skip
    report = {
        "meta": {"command": "c", "date": "d", "machine": {}, "reps": 3, "agents": 8},
        "rows": [row, {**row, "instance": "b.yaml", "frodo_wall_s": None, "same": False}],
    }
    text = serving.markdown(report)
    assert "| a.xml | 8 | 0.250 | 0.300 | 0.500 | 2.00x | yes |" in text
    assert "| b.yaml | 8 | 0.250 | 0.300 | - | - | NO |" in text
