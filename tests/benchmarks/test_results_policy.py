"""The results policy: benchmarks/results/ holds what the registered suites keep, docs/RESULTS.md
names every file there (and nothing that is not there), and only a registered suite writes there,
through the one function that stamps the machine block."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"
sys.path.insert(0, str(BENCH))

import keep  # noqa: E402
import run  # noqa: E402


def kept_on_disk() -> set[str]:
    return {p.name for p in RESULTS.iterdir()}


def named_by_the_page() -> set[str]:
    text = (ROOT / "docs" / "RESULTS.md").read_text()
    return set(re.findall(r"benchmarks/results/([\w.\-]+\.\w+)", text))


def test_the_results_page_names_every_kept_file_and_no_other() -> None:
    on_disk, named = kept_on_disk(), named_by_the_page()
    assert on_disk - named == set(), "kept but not named by docs/RESULTS.md"
    assert named - on_disk == set(), "named by docs/RESULTS.md but not kept"


def test_every_kept_file_belongs_to_a_registered_suite() -> None:
    assert all((RESULTS / name).is_file() for name in kept_on_disk()), "a folder in results/"
    assert kept_on_disk() == set(run.kept_files())


def test_every_script_that_keeps_results_is_registered() -> None:
    registered = {script for script, _ in run.SCRIPT_SUITES.values()}
    assert all((BENCH / script).is_file() for script in registered)
    writers = {
        p.name
        for p in BENCH.glob("*.py")
        if p.name not in ("keep.py", "run.py") and "write_results(" in p.read_text()
    }
    assert writers and writers <= registered  # agent_cpu/agent_memory write through scale.py


def test_a_script_run_on_its_own_may_not_write_there(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(keep.SUITE_ENV, raising=False)
    before = kept_on_disk()
    with pytest.raises(keep.NotASuite):
        keep.write_results(RESULTS, "probe_output", {"rows": []}, "# probe\n")
    assert kept_on_disk() == before


def test_a_registered_suite_writes_stamped_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keep, "RESULTS", tmp_path.resolve())
    monkeypatch.setenv(keep.SUITE_ENV, json.dumps(["work-rate", "--quick"]))
    keep.write_results(tmp_path, "work_rate", {"rows": [1]}, "# Work rate\n")
    doc = json.loads((tmp_path / "work_rate.json").read_text())
    assert doc["rows"] == [1]
    assert doc["kept"]["command"] == "python benchmarks/run.py work-rate --quick"
    assert doc["kept"]["machine"]["cores"] >= 1 and doc["kept"]["written"]
    text = (tmp_path / "work_rate.md").read_text()
    assert (
        text.startswith("# Work rate\n") and "`python benchmarks/run.py work-rate --quick`" in text
    )


def test_elsewhere_files_are_written_as_they_are(tmp_path: Path) -> None:
    keep.write_results(tmp_path, "rows", {"rows": [2]}, "# rows\n")
    assert json.loads((tmp_path / "rows.json").read_text()) == {"rows": [2]}
    assert (tmp_path / "rows.md").read_text() == "# rows\n"


def test_the_changelog_keeps_at_most_ten_lines_a_release() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.split(r"^## .*$", text, flags=re.MULTILINE)[1:]
    assert releases, "no release in CHANGELOG.md"
    long = [
        n for n in (len([ln for ln in r.splitlines() if ln.strip()]) for r in releases) if n > 10
    ]
    assert not long, f"releases of {long} lines (at most 10: the figures are in docs/RESULTS.md)"


def test_the_stamped_command_names_no_folder_of_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keep, "RESULTS", tmp_path.resolve())
    monkeypatch.setenv(keep.SUITE_ENV, json.dumps(["pr", "--instances", "/srv/uai", "--x=/a/b"]))
    keep.write_results(tmp_path, "pr", {"rows": []})
    command = json.loads((tmp_path / "pr.json").read_text())["kept"]["command"]
    assert command == "python benchmarks/run.py pr --instances PATH --x=PATH"
