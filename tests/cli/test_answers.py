"""An answer on every exit, statuses that mean one thing, and summaries titled by the file
(issue 48, items 1, 2 and 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dcop.generators import random_network
from dcop.io import write_problem
from tests.cli.conftest import assert_valid, run_dcop
from tests.conftest import random_problem


@pytest.fixture
def no_solution_file(tmp_path: Path) -> Path:
    """A feasible WCSP (BE's optimum is 100) on which MBE(z=1) along min-fill builds an
    assignment that breaks a hard constraint; its header names it ``random289``."""
    path = tmp_path / "feasible.wcsp"
    write_problem(random_problem(289, n=6, max_domain=3, n_tables=9, max_arity=2, p_inf=0.4), path)
    return path


MBE_Z1 = ["--algo", "mbe", "--z", "1", "--ordering", "minfill"]


def test_an_infeasible_mbe_assignment_is_no_solution_not_ok(
    tmp_path: Path, no_solution_file: Path
) -> None:
    """``ok`` means a finite answer: MBE's infeasible assignment is ``no_solution`` (exit 6),
    with its lower bound, the assignment and its infinite cost kept; the solution file is
    marked infeasible. BE on the same file is ``ok`` with a finite optimum."""
    out, sol = tmp_path / "r.json", tmp_path / "r.sol"
    run = run_dcop(
        "solve", str(no_solution_file), *MBE_Z1, "--json", str(out), "--solution", str(sol)
    )
    assert run.returncode == 6, run.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] == "no_solution" and not doc["exact"] and doc["message"]
    assert doc["cost"] == "inf" and doc["upper_bound"] == "inf" and doc["gap"] is None
    assert isinstance(doc["lower_bound"], float) and doc["lower_bound"] <= 100
    assert doc["assignment"] is not None and len(doc["assignment"]) == 6
    assert sol.read_text().startswith("# infeasible")
    assert "no_solution" in run.stdout and "82 .. inf" in run.stdout
    exact = run_dcop("solve", str(no_solution_file), "--json", "-", "-q")
    assert exact.returncode == 0 and json.loads(exact.stdout)["cost"] == 100


def test_a_no_solution_document_must_keep_its_assignment(no_solution_file: Path) -> None:
    from tests.cli.conftest import RESULT_VALIDATOR

    doc = json.loads(run_dcop("solve", str(no_solution_file), *MBE_Z1, "--json", "-").stdout)
    assert RESULT_VALIDATOR.is_valid(doc)
    assert not RESULT_VALIDATOR.is_valid(doc | {"assignment": None})
    assert not RESULT_VALIDATOR.is_valid(doc | {"cost": 3.0})
    assert not RESULT_VALIDATOR.is_valid(doc | {"exact": True})
    assert not RESULT_VALIDATOR.is_valid(doc | {"schema": "dcop-result/1"})


@pytest.mark.parametrize(
    "command",
    [
        ["solve", "{missing}"],
        ["solve", "{directory}"],
        ["solve", "{uai}", "--evidence", "{missing_evid}"],
        ["run", "{missing}"],
        ["coordinator", "--peers", "{missing_peers}", "--problem", "{present}"],
        ["coordinator", "--peers", "{missing_peers}", "--problem", "{missing}"],
    ],
)
def test_a_missing_or_unreadable_input_still_writes_the_error_document(
    tmp_path: Path, instances_dir: Path, command: list[str]
) -> None:
    """The reader checks the input inside the run: one line, exit 2, and with ``--json`` the
    ``error`` document naming the path (click's own check exited before any document)."""
    directory = tmp_path / "folder.wcsp"
    directory.mkdir()
    present = tmp_path / "present.wcsp"
    write_problem(random_network(4, 2, 0.5, 0.0, seed=1), present)
    paths = {
        "missing": str(tmp_path / "nothing.wcsp"),
        "directory": str(directory),
        "uai": str(instances_dir / "test_Z.uai"),
        "missing_evid": str(tmp_path / "nothing.evid"),
        "missing_peers": str(tmp_path / "nothing.json"),
        "present": str(present),
    }
    args = [part.format(**paths) for part in command]
    out = tmp_path / "out.json"
    run = run_dcop(*args, "--json", str(out))
    assert run.returncode == 2, run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("dcop: error: ")
    doc = json.loads(out.read_text())
    assert_valid(doc)
    named = [p for p in args if "nothing" in p or p == str(directory)]
    assert doc["status"] == "error" and any(p in doc["message"] for p in named)


def test_a_memory_refusal_is_too_large_with_or_without_timeout(tmp_path: Path) -> None:
    """A plan over ``--max-memory`` is ``too_large`` (exit 5) with ``--timeout`` too: it was a
    ``timeout`` (exit 4) in under a second, its message a memory refusal."""
    big = tmp_path / "big.wcsp"
    write_problem(random_network(12, 6, 0.6, 0.2, seed=1), big)
    for algo in (["--algo", "be"], ["--algo", "mbe", "--z", "3"]):
        for deadline in ([], ["--timeout", "20"]):
            run = run_dcop("solve", str(big), *algo, *deadline, "--max-memory", "1K", "--json", "-")
            doc = json.loads(run.stdout)
            assert run.returncode == 5, (algo, deadline, run.stderr)
            assert doc["status"] == "too_large" and "memory limit" in doc["message"]


def _patched_dcop(patch: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``dcop ARGV`` in a subprocess after ``patch`` (Python) ran: a fault at a chosen moment."""
    script = f"import sys\n{patch}\nsys.argv = ['dcop', *{argv!r}]\nimport dcop.cli.entry\n"
    script += "dcop.cli.entry.main()\n"
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=180
    )


def test_a_signal_after_the_answer_of_solve_keeps_it(tmp_path: Path, instances_dir: Path) -> None:
    """A SIGINT that lands while the solution file is written (the answer is known): status
    ``interrupted``, exit 130, and the document keeps the assignment, its cost and the bounds."""
    out = tmp_path / "r.json"
    patch = (
        "import dcop.cli.solving as s\n"
        "def cut(*a, **k):\n"
        "    raise KeyboardInterrupt('signal SIGINT')\n"
        "s.write_answer_file = cut\n"
    )
    argv = ["solve", str(instances_dir / "warehouse.wcsp"), "--json", str(out)]
    run = _patched_dcop(patch, [*argv, "--solution", str(tmp_path / "r.sol"), "-q"])
    assert run.returncode == 130, run.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] == "interrupted" and "SIGINT" in doc["message"] and not doc["exact"]
    assert run.stderr == "dcop: interrupted (signal SIGINT)\n"  # not "interrupted: interrupted"
    assert doc["assignment"] and doc["cost"] == doc["lower_bound"] == doc["upper_bound"]


def test_a_signal_while_the_agents_exit_keeps_the_answer(
    tmp_path: Path, instances_dir: Path
) -> None:
    """``dcop run``: the coordinator has the answer and the agents are exiting when a signal
    lands (here: while the summary is written off a terminal): the document keeps the answer."""
    out = tmp_path / "r.json"
    patch = (
        "import dcop.cli.report as r\n"
        "def cut(*a, **k):\n"
        "    raise KeyboardInterrupt('signal SIGTERM')\n"
        "r.write_summary = cut\n"
    )
    run = _patched_dcop(patch, ["run", str(instances_dir / "warehouse.wcsp"), "--json", str(out)])
    assert run.returncode == 130, run.stderr
    doc = json.loads(out.read_text())
    assert_valid(doc)
    assert doc["status"] == "interrupted" and "SIGTERM" in doc["message"]
    assert doc["assignment"] and doc["cost"] == doc["lower_bound"] == doc["upper_bound"]
    assert doc["algo"] == "dpop" and doc["metrics"]["total_messages"] > 0


def test_summaries_are_titled_with_the_file_name(
    tmp_path: Path, no_solution_file: Path, instances_dir: Path
) -> None:
    """SPOT5's header names ``../spot5/404.spot``; titles name the file as given instead."""
    solved = run_dcop("solve", str(instances_dir / "spot5-404.wcsp"), "--algo", "mbe", "--z", "2")
    assert solved.returncode == 0, solved.stderr
    assert "MBE(z=2) on spot5-404.wcsp" in solved.stdout and "404.spot" not in solved.stdout
    ran = run_dcop("run", str(no_solution_file), "--algo", "dpop")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("DPOP on feasible.wcsp: 6 agents, candidate tree ")
    assert "random289" not in ran.stdout
    summed = run_dcop("solve", str(instances_dir / "test_Z.uai"), "--task", "pr")
    assert "PR: BE on test_Z.uai" in summed.stdout  # the header-less .uai was named test_Z
    marginals = run_dcop("run", str(instances_dir / "test_Z.uai"), "--task", "mar")
    assert marginals.returncode == 0, marginals.stderr
    assert "DPOP MAR on test_Z.uai: 5 agents" in marginals.stdout
    assert "MAR: DPOP on test_Z.uai" in marginals.stdout


def test_mar_shows_a_few_marginals_and_where_the_rest_are(
    tmp_path: Path, instances_dir: Path
) -> None:
    """MAR's summary printed no marginal past 20 variables and no pointer to them: now the
    first five, and a line that says where every one is."""
    out = tmp_path / "m.json"
    run = run_dcop("solve", str(instances_dir / "network.uai"), "--task", "mar", "--json", str(out))
    assert run.returncode == 0, run.stderr
    marginals = json.loads(out.read_text())["marginals"]
    shown = [line for line in run.stdout.splitlines() if "P(" in line]
    assert len(shown) == 5 and len(marginals) == 120
    first = next(iter(marginals))
    assert f"P({first})" in shown[0]
    assert f"{marginals[first][0]:.4g}" in shown[0]
    assert "(the other 115)" in run.stdout and "--json" in run.stdout
    assert "--solution" in run.stdout


def test_distributed_auto_names_the_algorithm_and_z_it_chose(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--algo auto`` whose DPOP does not fit the message limit, nor MB-DPOP the time, runs
    ADPOP(z): the summary says which (it said ``AUTO on ...``), and so do the document's ``algo``
    and ``z``; the summary's tree count is the candidates', as the progress counts them (``trees
    9/9`` beside ``1 tree(s)``). Where MB-DPOP's work fits, the summary names it."""
    from dcop.cli.live import _line
    from dcop.cli.report import summarize
    from dcop.coordinator.driver import Progress
    from dcop.protocol import RunSpec
    from dcop.trees import cutset
    from tests.agents.conftest import run_in_process

    problem = random_network(12, 4, 0.6, 0.0, seed=4)
    dpop_bytes = int(run_in_process(problem)["run"].tree.predicted[None]) * 4
    # cuts to the width (a message limit alone would send DPOP's UTILs in parts, no cut)
    spec = RunSpec("auto", max_message_bytes=max(4096, dpop_bytes // 4 + 4096), width=1)
    cut = run_in_process(problem, spec=spec)["run"]
    assert cut.to_json()["algo"] == "mbdpop"
    assert summarize(cut).head[0].startswith("[bold]AUTO (chose MB-DPOP)[/bold] on ")
    monkeypatch.setattr(cutset, "CUT_ENTRIES_PER_S", 1e-6)  # every cut predicted far too long
    run = run_in_process(problem, spec=spec)["run"]
    doc = run.to_json()
    assert doc["algo"] == "adpop" and doc["z"] is not None and doc["spec"]["algo"] == "auto"
    head = summarize(run).head[0]
    assert head.startswith(f"[bold]AUTO (chose ADPOP, z={doc['z']})[/bold] on ")
    candidates = len(doc["pseudo_tree"]["candidates_width"])
    assert f"candidate tree {doc['pseudo_tree']['tree'] + 1} of {candidates} " in head
    assert "1 root(s): " in head
    progress = _line(Progress(trees=candidates, trees_expected=candidates))
    assert f"candidate trees {candidates}/{candidates}" in progress


def test_batch_rows_exclude_the_fork_servers_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A centralized row's ``wall_s`` counts from its fork: the first row used to carry the
    fork server's start (an interpreter importing dcop), so BE read as 7x slower than MBE. The
    server's start is simulated by a clock that jumps 100 s inside ``Process.start``."""
    import time

    from dcop.cli import batch_rows as batch

    clock = [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    path = tmp_path / "p.wcsp"
    write_problem(random_network(4, 2, 0.5, 0.0, seed=1), path)
    job = batch.Job(path, "be", None)
    answer = ({"status": "ok"}, 0)

    class FakePipe:
        def poll(self, _timeout: float) -> bool:
            return True

        def recv(self) -> tuple[str, dict[str, str], int]:
            clock[0] += 0.25  # the row's own work
            return ("done", *answer)

        def close(self) -> None:
            pass

    class FakeProcess:
        pid = None
        exitcode = 0

        def __init__(self, target: object, args: object) -> None:
            pass

        def start(self) -> None:
            clock[0] += 100.0  # the fork server starts and imports dcop

        def is_alive(self) -> bool:
            return False

        def join(self, _timeout: float | None = None) -> None:
            pass

    class Context:
        def Pipe(self, duplex: bool) -> tuple[FakePipe, FakePipe]:
            return FakePipe(), FakePipe()

        Process = FakeProcess

    monkeypatch.setattr(batch, "_forkserver", lambda: Context())
    row = batch.run_row(job, batch.BatchSettings(("be",), (), 60.0))
    assert row.document == answer[0] and row.wall_s == 0.25


def test_a_batch_row_that_fails_after_its_answer_keeps_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A dpop row whose agents fail to exit after the coordinator had the answer: the row is the
    failure, with the answer's assignment and bounds kept (it was a bare error row)."""
    import dcop.coordinator
    from dcop.cli import batch_rows as batch
    from dcop.errors import PeerTimeout
    from tests.agents.conftest import run_in_process

    path = tmp_path / "p.wcsp"
    problem = random_network(5, 3, 0.5, 0.0, seed=3)
    write_problem(problem, path)
    answer = run_in_process(problem)["run"]

    def run_local(*args: object, on_answer: object = None, **kwargs: object) -> None:
        on_answer(answer)  # type: ignore[operator]
        raise PeerTimeout("agent x2 did not exit")

    monkeypatch.setattr(dcop.coordinator, "run_local", run_local)
    row = batch.run_row(batch.Job(path, "dpop", None), batch.BatchSettings(("dpop",), (), 60.0))
    doc = row.document
    assert_valid(doc)
    assert doc["status"] == "error" and "did not exit" in doc["message"] and row.exit_code == 3
    assert doc["assignment"] == answer.to_json()["assignment"] and doc["file"] == str(path)
    assert doc["cost"] == doc["lower_bound"] == doc["upper_bound"]


@pytest.mark.parametrize(
    "args",
    [
        ["run", "{file}"],
        ["solve", "{file}", "--algo", "mbe", "--z", "2", "--timeout", "60"],
        ["coordinator", "--peers", "{file}.peers", "--problem", "{file}", "--hello-timeout", "1"],
    ],
)
def test_a_closed_stdout_and_stderr_do_not_lose_the_document(
    tmp_path: Path, instances_dir: Path, args: list[str]
) -> None:
    """``dcop run FILE --json out 2>&1 | head -1``: the reader went away, so every later line on
    stdout and stderr fails (EPIPE). The progress and the summary are dropped; the run goes on
    and writes its document (it ended with exit 1, a traceback nobody saw, and no document)."""
    import os

    file = tmp_path / "w.wcsp"
    file.write_bytes((instances_dir / "warehouse.wcsp").read_bytes())
    if args[0] == "coordinator":
        from dcop.coordinator import free_ports

        (port,) = free_ports(1)
        made = run_dcop("peers", str(file), "-o", f"{file}.peers", "--base-port", str(port))
        assert made.returncode == 0, made.stderr
    out = tmp_path / "r.json"
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody reads: a write fails with EPIPE
    argv = [part.format(file=file) for part in args]
    run = subprocess.run(
        [sys.executable, "-m", "dcop", *argv, "--json", str(out)],
        stdout=write_end,
        stderr=write_end,
        timeout=180,
    )
    os.close(write_end)
    doc = json.loads(out.read_text())
    assert_valid(doc)
    expected = {"run": ("ok", 0), "solve": ("ok", 0), "coordinator": ("timeout", 4)}[args[0]]
    assert (doc["status"], run.returncode) == expected


def test_an_infeasible_adpop_assignment_is_no_solution(tmp_path: Path) -> None:
    """ADPOP's side of ``ok`` means a finite answer: an assignment that breaks a hard constraint
    is ``no_solution`` in the document and the summary, and its solution file is marked (it was
    ``ok`` with upper bound inf, and the file unmarked)."""
    from dcop.cli.distributed import _write_answer
    from dcop.cli.report import summarize
    from dcop.results import EXIT_CODES
    from tests.agents.conftest import run_in_process

    run = run_in_process(random_network(10, 3, 0.5, 0.5, seed=0), "adpop", z=1)["run"]
    doc = run.to_json()
    assert_valid(doc)
    assert doc["status"] == "no_solution" and EXIT_CODES[doc["status"]] == 6
    assert doc["cost"] == doc["upper_bound"] == "inf" and isinstance(doc["lower_bound"], float)
    assert doc["assignment"] is not None and not doc["exact"]
    assert any(line.startswith("[bold red]no_solution[/bold red]") for line in summarize(run).head)
    solution = tmp_path / "a.sol"
    _write_answer(solution, run)
    assert solution.read_text().startswith("# infeasible")
