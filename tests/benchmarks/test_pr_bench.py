"""Smoke tests of benchmarks/pr.py on small sizes: the anchor's einsum network, its PR beside
dcop's (ln Z equal to 1e-9), the summary and the Markdown report."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import pr  # noqa: E402


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "ising5x5", "source": "ising", "side": 5, "coupling": 1.0, "field": 0.1},
        {"name": "bayes", "source": "bayes", "n": 12, "d": 2, "parents": 2, "window": 4},
    ],
)
def test_anchor_and_dcop_agree(spec: dict[str, object]) -> None:
    anchor = pr.run_anchor(spec)
    ours = pr.run_dcop(spec, "pr")
    assert anchor["status"] == ours["status"] == "ok"
    assert pr.agree(ours["ln_z"], anchor["ln_z"], pr.ANCHOR_TOLERANCE)
    assert anchor["largest"] >= 1 and anchor["path_s"] >= 0
    assert ours["path_s"] is not None and ours["contract_s"] is not None
    row: dict[str, object] = {"instance": spec["name"]}
    pr.compare_anchor(row, ours, anchor)
    assert anchor["agrees"] is True and math.isfinite(float(row["speedup_total"]))  # type: ignore[arg-type]


def test_report_of_a_small_run() -> None:
    spec = {"name": "ising4x4", "source": "ising", "side": 4, "coupling": 0.5, "field": 0.0}
    ours = pr.run_dcop(spec, "pr")
    mar = pr.run_dcop(spec, "mar")
    anchor = pr.run_anchor(spec)
    row = {
        "instance": "ising4x4",
        "n": 16,
        "ordering": ours["ordering"],
        "largest_table": ours["largest_table"],
        "slices": 1,
        "dcop": pr._keep(ours, "path_s", "contract_s", "space"),
        "dcop_mar": pr._keep(mar),
        "anchor": anchor,
        "mar_over_pr": mar["seconds"] / ours["seconds"],
    }
    pr.compare_anchor(row, ours, anchor)
    data = {
        "meta": {
            "command": "c",
            "date": "d",
            "machine": pr.machine_info(),
            "limits": "l",
            "gpu": "Fake GPU",
        },
        "rows": [row],
        "summary": pr.summarize([row]),
    }
    assert data["summary"]["agree_1e-9"] == 1
    text = pr.markdown(data, "gpu")
    assert "| ising4x4 |" in text and "GPU: Fake GPU" in text


def test_a_run_cut_short_keeps_the_rows_it_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report is written after every row: a run stopped in its second instance (a device
    lease that ends) leaves the first row on disk, marked partial."""
    specs = [
        {"name": "ising3x3", "source": "ising", "side": 3, "coupling": 0.5, "field": 0.0},
        {"name": "ising4x4", "source": "ising", "side": 4, "coupling": 0.5, "field": 0.0},
    ]
    monkeypatch.setattr(pr, "instances", lambda only, quick: specs)
    real = pr.run_task

    def run_task(task: dict[str, object], timeout: float, mem_gb: float) -> dict[str, object]:
        if task["spec"] is specs[1]:
            raise KeyboardInterrupt  # the run is stopped here
        return real(task, timeout, mem_gb)

    monkeypatch.setattr(pr, "run_task", run_task)
    monkeypatch.setattr(sys, "argv", ["pr.py", "--no-pgmpy", "--out", str(tmp_path)])
    with pytest.raises(KeyboardInterrupt):
        pr.main()
    data = json.loads((tmp_path / "pr.json").read_text())
    assert [r["instance"] for r in data["rows"]] == ["ising3x3"]
    assert data["meta"]["complete"] is False and data["rows"][0]["dcop"]["status"] == "ok"
    assert "Partial" in (tmp_path / "pr.md").read_text()


def test_a_pruned_pr_is_timed_whole_for_mar_over_pr() -> None:
    """A BAYES network without evidence: PR drops every table (no work), so the bench also times
    the whole network's PR, equal in ln Z, and MAR / PR is taken against it (marked *)."""
    spec = {"name": "bayes", "source": "bayes", "n": 12, "d": 2, "parents": 2, "window": 4}
    ours = pr.run_dcop(spec, "pr")
    mar = pr.run_dcop(spec, "mar")
    assert ours["pruned"] and ours["unpruned_seconds"] > 0 and ours["unpruned_agrees"] is True
    row: dict[str, object] = {"instance": "bayes", "pruned": ours["pruned"]}
    pr.mar_over_pr(row, ours, mar)
    # from MAR's own process, its calls alternating with the whole network's PR
    assert row["mar_over_pr"] == pytest.approx(mar["mar_alongside_s"] / mar["pr_alongside_s"])
    del mar["pr_alongside_s"]  # a result without them: the two processes' bests
    pr.mar_over_pr(row, ours, mar)
    assert row["mar_over_pr"] == pytest.approx(mar["seconds"] / ours["unpruned_seconds"])
    summary = pr.summarize(
        [{**row, "dcop": ours, "anchor": {"status": "skipped"}, "dcop_mar": mar, "n": 12}]
    )
    assert summary["mar_over_pr_max"] == row["mar_over_pr"] and summary["pr_pruned"] == ["bayes"]
    unpruned = pr.run_dcop({**spec, "name": "ising3x3", "source": "ising", "side": 3,
                            "coupling": 0.5, "field": 0.0}, "pr")  # fmt: skip
    assert not unpruned["pruned"] and "unpruned_seconds" not in unpruned


def test_a_cold_first_call_is_timed_apart_from_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    # a fake clock: the first call takes 3 s (a CuPy compile, past REPEAT_BUDGET_S), then 0.2 s
    clock = [0.0]
    calls: list[int] = []
    compiled = [False]

    def run() -> int:
        calls.append(len(calls))
        clock[0] += 0.2 if compiled[0] else 3.0
        compiled[0] = True
        return len(calls)

    monkeypatch.setattr(pr.time, "perf_counter", lambda: clock[0])
    result, seconds, cold_s = pr.warm_best_time(run, cold=True)
    assert cold_s == pytest.approx(3.0) and seconds == pytest.approx(0.2)
    assert len(calls) == 1 + pr.DEVICE_REPEATS and result == len(calls)
    calls.clear()
    compiled[0] = False
    _, seconds, cold_s = pr.warm_best_time(run, cold=False)  # the compile is the time taken
    assert cold_s is None and seconds == pytest.approx(3.0) and len(calls) == 1
    calls.clear()  # compiled: 0.2 s a call, so calls repeat until they total SHORT_TOTAL_S
    pr.best_time(run)
    assert len(calls) == max(pr.REPEATS, math.ceil(pr.SHORT_TOTAL_S / 0.2 - 1e-9))


def test_mar_and_pr_alongside_alternate_and_pr_keeps_every_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # rounds call the runs in turn; each run's best is its own
    clock = [0.0]
    order: list[str] = []

    def timed(name: str, seconds: list[float]) -> Any:
        def run() -> None:
            order.append(name)
            clock[0] += seconds[sum(1 for o in order if o == name) - 1]

        return run

    monkeypatch.setattr(pr.time, "perf_counter", lambda: clock[0])
    best = pr.alternating_best([timed("pr", [0.3, 0.1, 0.2]), timed("mar", [0.5, 0.6, 0.2])], 3)
    assert order == ["pr", "mar"] * 3 and best == pytest.approx([0.1, 0.2])
    monkeypatch.undo()
    # the PR beside MAR is the whole network's where PR drops barren tables, else infer's
    from dcop.generators import ising_grid, random_bayes

    seen: list[Any] = []

    def first_only(runs: Any, repeats: int) -> list[float]:
        seen.append(runs[0]())
        return [1.0, 2.0]

    monkeypatch.setattr(pr, "alternating_best", first_only)
    bayes = random_bayes(12, 2, 2, 4, seed=0)
    assert pr.mar_and_pr_alongside(bayes, "numpy") == (1.0, 2.0)
    assert seen[-1].pruned == 0 and seen[-1].ln_z == pytest.approx(0.0, abs=1e-9)
    pr.mar_and_pr_alongside(ising_grid(3, 0.5, 0.0, seed=0), "numpy")
    assert seen[-1].tree is not None and not seen[-1].tree.get("pruned_tables")
