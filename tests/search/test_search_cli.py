"""``dcop solve --algo aobb`` and ``dcop batch --algo aobb`` as a user runs them."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path

from dcop.generators import random_network
from dcop.inference import solve
from dcop.io import read_problem, write_problem
from tests.cli.conftest import assert_valid, assert_valid_batch, run_dcop


def hard_file(tmp_path: Path) -> Path:
    """A dense random network the search does not prove in a second (BE: 10^9 joined entries)."""
    path = tmp_path / "hard.wcsp"
    write_problem(random_network(26, 10, 0.3, 0.0, seed=1), path)
    return path


def test_aobb_proves_what_be_proves(tmp_path: Path) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(14, 4, 0.4, 0.2, seed=5), path)
    be = solve(read_problem(path), "be")
    out = tmp_path / "a.json"
    proc = run_dcop("solve", str(path), "--algo", "aobb", "--z", "2", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["algo"] == "aobb" and doc["z"] == 2 and doc["exact"]
    assert doc["cost"] == be.to_json()["cost"]
    assert "AOBB(z=2)" in proc.stdout


def test_a_timeout_keeps_the_best_assignment_and_both_bounds(tmp_path: Path) -> None:
    path = hard_file(tmp_path)
    out = tmp_path / "t.json"
    proc = run_dcop("solve", str(path), "--algo", "aobb", "--timeout", "2", "--json", str(out))
    assert proc.returncode == 4, proc.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] == "timeout" and not doc["exact"] and doc["assignment"]
    assert doc["lower_bound"] <= doc["cost"] == doc["upper_bound"]
    problem = read_problem(path)
    values = {v: problem.variables[v].values.index(x) for v, x in doc["assignment"].items()}
    assert math.isclose(problem.evaluate(values), doc["cost"])
    assert doc["search"]["trace"][-1]["upper_bound"] == doc["upper_bound"]


def test_an_interrupt_keeps_the_best_assignment_and_both_bounds(tmp_path: Path) -> None:
    path = hard_file(tmp_path)
    out = tmp_path / "i.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "dcop", "solve", str(path), "--algo", "aobb", "--json", str(out)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stderr is not None
    # the first bounds line: the search runs (off a terminal, lines come as bounds improve)
    deadline = time.monotonic() + 120
    line = ""
    while "dcop: search: bounds" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    doc = json.loads(out.read_text())
    assert_valid(doc)
    if proc.returncode == 0:  # proved before the signal came: nothing to keep
        assert doc["exact"]
        return
    assert proc.returncode == 130 and doc["status"] == "interrupted"
    assert doc["assignment"] and doc["lower_bound"] <= doc["cost"] == doc["upper_bound"]


def test_batch_runs_the_search_within_the_row_timeout(tmp_path: Path) -> None:
    small = tmp_path / "s.wcsp"
    write_problem(random_network(12, 3, 0.4, 0.0, seed=2), small)
    out = tmp_path / "b.json"
    # 10 s: at load 17 on 2 cores, the small row's start alone ran past 4 s
    proc = run_dcop(
        "batch", str(small), str(hard_file(tmp_path)), "--algo", "aobb", "--timeout", "10",
        "--json", str(out),
    )  # fmt: skip
    doc = json.loads(out.read_text())
    assert_valid_batch(doc)
    rows = {Path(r["file"]).name: r for r in doc["rows"]}
    assert rows["s.wcsp"]["status"] == "ok" and rows["s.wcsp"]["exact"], proc.stderr
    assert rows["hard.wcsp"]["status"] in ("timeout", "ok")


def test_info_names_the_search_heuristic_that_would_fit(tmp_path: Path) -> None:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(14, 4, 0.4, 0.2, seed=5), path)
    proc = run_dcop("info", str(path), "--json", "-", "-q")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["search_ibound"] >= 1 and info["search_heuristic_bytes"] > 0
    # z = induced width + 1 is the exact pass: the largest that can make sense
    assert info["search_ibound"] <= info["induced_width_auto"] + 1


def test_auto_that_runs_be_loads_no_compiled_search() -> None:
    code = (
        "import sys; from dcop.generators import random_network;"
        "from dcop.inference.anytime import solve_auto;"
        "r = solve_auto(random_network(10, 3, 0.4, 0.2, 1), timeout=60);"
        "print(r.algo, 'numba' in sys.modules, 'dcop.search.solver' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["be", "False", "False"]
