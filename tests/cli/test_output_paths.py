"""No answer is lost to an output path (issue 33, item 9): every output path of every command is
checked before any work (one line, exit 2), and a write that still fails at the end prints what
it would have written on stdout."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from dcop.cli.common import write_answer_file, write_json
from dcop.generators import random_network
from dcop.io import read_problem, write_problem
from tests.cli.conftest import run_dcop

BAD = "/proc/nope/out"


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "r.wcsp"
    write_problem(random_network(6, 3, 0.5, 0.2, seed=1), path)
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["solve", "{f}", "--json", BAD + ".json"],
        ["solve", "{f}", "--solution", BAD + ".sol"],
        ["solve", "{f}", "--json", "{d}"],  # a directory
        ["info", "{f}", "--json", BAD + ".json"],
        ["run", "{f}", "--json", BAD + ".json"],
        ["run", "{f}", "--solution", BAD + ".sol"],
        ["batch", "{f}", "--csv", BAD + ".csv"],
        ["batch", "{f}", "--jsonl", BAD + ".jsonl"],
        ["batch", "{f}", "--json", BAD + ".json"],
        ["generate", "random", "-o", BAD + ".wcsp"],
        ["peers", "{f}", "-o", BAD + ".json"],
        ["deploy", "compose", "{f}", "-o", BAD],
        ["deploy", "hosts", "{f}", "--hosts", "a,b", "-o", BAD],
        ["keys", "generate", BAD, "--agents", "2"],
    ],
    ids=lambda a: "-".join(x for x in a if x.startswith("-") or x.isalpha()),
)
def test_an_unwritable_output_path_is_refused_before_any_work(
    small: Path, tmp_path: Path, args: list[str]
) -> None:
    argv = [a.format(f=small, d=tmp_path) for a in args]
    start = time.monotonic()
    done = run_dcop(*argv, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert ("nope" in lines[0] or str(tmp_path) in lines[0]) and "dcop" in lines[0]
    assert not list(tmp_path.glob("dcop-run-*"))
    assert time.monotonic() - start < 60  # nothing was solved (a guard against a hang only)


def test_a_json_write_that_fails_at_the_end_prints_the_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def full(self: Path, *_a: object, **_k: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    write_json({"status": "ok", "cost": 7.0}, tmp_path / "r.json")
    out = capsys.readouterr()
    assert json.loads(out.out) == {"status": "ok", "cost": 7.0}
    assert "No space left on device" in out.err


def test_a_solution_write_that_fails_at_the_end_prints_the_answer(
    small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import dcop.io

    problem = read_problem(small)
    real = dcop.io.write_answer
    target = tmp_path / "blocked.sol"

    def flaky(path: Path, *a: object, **k: object) -> None:
        if Path(path) == target:
            raise OSError(28, "No space left on device")
        real(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(dcop.io, "write_answer", flaky)
    assignment = dict.fromkeys(problem.variables, 0)
    write_answer_file(target, problem, "min", answered=True, assignment=assignment)
    out = capsys.readouterr()
    assert out.out.split() == ["0"] * problem.n
    assert "cannot write --solution" in out.err
