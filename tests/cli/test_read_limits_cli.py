"""``dcop run`` reads its file within ``--timeout`` (security round 4, finding 2): a header of a
million variables once kept it reading (and then solving) far past the limit."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import run_dcop


def test_run_stops_reading_at_its_timeout(tmp_path: Path) -> None:
    n = 1_000_000  # about 8 s to read on the 2-core VM: well past a 1 s timeout
    path = tmp_path / "many.wcsp"
    path.write_text(f"many {n} 1 0 10\n" + "1 " * n + "\n")
    done = run_dcop("run", str(path), "--timeout", "1", "--json", str(tmp_path / "r.json"))
    assert done.returncode == 4, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"dcop: timeout: {path}: reading the file took longer than --timeout 1 s; "
        "nothing was solved"
    ]
    assert '"status": "timeout"' in (tmp_path / "r.json").read_text()


def test_solve_stops_reading_at_its_timeout(tmp_path: Path) -> None:
    n = 1_000_000
    path = tmp_path / "many.wcsp"
    path.write_text(f"many {n} 1 0 10\n" + "1 " * n + "\n")
    done = run_dcop("solve", str(path), "--timeout", "1", "--json", str(tmp_path / "s.json"))
    assert done.returncode == 4, done.stderr
    assert "reading the file took longer than --timeout 1 s" in done.stderr
    assert '"status": "timeout"' in (tmp_path / "s.json").read_text()
