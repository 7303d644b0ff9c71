"""Command-line edges of security round 4 (finding 8): each is one line and exit 2, or an
answer, never a traceback, and nothing unbounded is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import run_dcop

R = "r 3 2 2 10\n2 2 2\n2 0 1 0 1\n0 0 5\n2 1 2 1 1\n1 1 0\n"


def _one_line_error(done: object, text: str) -> None:
    rc, err = done.returncode, done.stderr  # type: ignore[attr-defined]
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and text in err, err


@pytest.mark.parametrize("command", ["solve", "run"])
@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_a_timeout_that_is_no_number_of_seconds(tmp_path: Path, command: str, value: str) -> None:
    path = tmp_path / "r.wcsp"
    path.write_text(R)
    done = run_dcop(command, str(path), "--timeout", value)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_generate_refuses_a_negative_seed(tmp_path: Path) -> None:
    done = run_dcop(
        "generate", "random", "--n", "5", "--d", "2", "--p1", "0.5", "--p2", "0.5",
        "--seed", "-1", "-o", str(tmp_path / "g.wcsp"),
    )  # fmt: skip
    _one_line_error(done, "--seed")


def test_keys_generate_is_bounded(tmp_path: Path) -> None:
    done = run_dcop("keys", "generate", str(tmp_path / "k"), "--agents", "100000000")
    _one_line_error(done, "--agents must be 1..65534")
    assert not (tmp_path / "k").exists() or not any((tmp_path / "k").iterdir())


@pytest.mark.parametrize("base", ["70000", "65533", "0"])
def test_peers_refuses_ports_past_65535(tmp_path: Path, base: str) -> None:
    out = tmp_path / "p.json"
    done = run_dcop("peers", "--agents", "5", "--base-port", base, "-o", str(out))
    _one_line_error(done, "ports go from 1 to 65535")
    assert not out.exists()


@pytest.mark.parametrize(
    "text", ["z 2 2 0 10\n2 2\n", "z 0 2 0 10\n\n"], ids=["no-functions", "no-variables"]
)
def test_info_on_a_problem_without_cost_functions(tmp_path: Path, text: str) -> None:
    path = tmp_path / "e.wcsp"
    path.write_text(text)
    done = run_dcop("info", str(path), "--json", "-")
    assert done.returncode == 0, done.stderr
    assert '"constraints": 0' in done.stdout  # a .wcsp plans no PR: min-sum's plan only
