"""``dcop info`` in seconds (issue 48): it plans only the tasks the file allows, every planner
within a budget; ``--evidence`` and ``-q``. No timing asserts: each case asserts that the command
completes and says what it should."""

from __future__ import annotations

import json
from pathlib import Path

from dcop.generators import grid_network, random_bayes, scale_free_network
from dcop.io.uai import write_uai
from dcop.io.wcsp import write_wcsp
from tests.cli.conftest import run_dcop

CONTRACTION_KEYS = ("contraction_tree", "contraction_flops", "memory_bytes_contraction_pr")


def test_a_wcsp_gets_no_contraction_plan(tmp_path: Path) -> None:
    """A .wcsp has no PR or MAR: no contraction tree is planned for it (on a 300-variable
    scale-free network, planning one had taken 22-38 s to end in a refusal)."""
    model = tmp_path / "sf300.wcsp"
    write_wcsp(scale_free_network(300, 10, 0.5, 1), model)
    run = run_dcop("info", str(model), "--json", "-")
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["variables"] == 300 and info["induced_width_auto"] >= 1
    assert not any(key in info for key in CONTRACTION_KEYS)
    assert info["order_work"] >= 0 and info["order_budget_s"] >= 0


def test_a_uai_model_far_beyond_memory_is_refused_in_its_plan(tmp_path: Path) -> None:
    """A UAI model has PR: its tree is planned, and one far over any memory is refused at once
    (no slicing can fit a tree over MAX_SLICES times the room)."""
    model = tmp_path / "sf200.uai"
    write_uai(scale_free_network(200, 10, 0.5, 1), model)
    run = run_dcop("info", str(model), "--json", "-")
    assert run.returncode == 0, run.stderr
    info = json.loads(run.stdout)
    assert info["contraction_tree"].startswith("refused: PR by contraction")


def test_a_grid_gets_every_row(tmp_path: Path) -> None:
    model = tmp_path / "grid20.wcsp"
    write_wcsp(grid_network(400, 10, 0.5, 1), model)
    run = run_dcop("info", str(model))
    assert run.returncode == 0, run.stderr
    for row in ("induced_width_auto", "order minfill", "memory limit (default)"):
        assert row in run.stdout


def test_quiet_prints_nothing_and_still_writes(tmp_path: Path) -> None:
    model = tmp_path / "grid.wcsp"
    write_wcsp(grid_network(25, 3, 0.3, 0), model)
    out, order = tmp_path / "info.json", tmp_path / "auto.order"
    run = run_dcop("info", str(model), "-q", "--json", str(out), "--write-order", str(order))
    assert run.returncode == 0 and run.stdout == "" and run.stderr == ""
    assert json.loads(out.read_text())["variables"] == 25
    assert len(order.read_text().split()) >= 25


def test_evidence_conditions_the_model(tmp_path: Path) -> None:
    """``--evidence`` reads the .evid file as solve does: the observed variables are fixed, and
    the contraction tree of the conditioned model is planned."""
    model, evid = tmp_path / "net.uai", tmp_path / "net.uai.evid"
    write_uai(random_bayes(12, d=2, parents=2, seed=6), model)
    evid.write_text("2 1 0 5 1\n")
    plain = json.loads(run_dcop("info", str(model), "--json", "-").stdout)
    run = run_dcop("info", str(model), "--evidence", str(evid), "--json", "-")
    assert run.returncode == 0, run.stderr
    given = json.loads(run.stdout)
    assert given["variables"] == plain["variables"]
    assert given["contraction_flops"] < plain["contraction_flops"]  # two variables observed
    bad = run_dcop("info", str(model), "--evidence", str(tmp_path / "missing.evid"))
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
