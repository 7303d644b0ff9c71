"""The anytime mode of benchmarks/search.py: models read with their evidence, answers compared."""

from __future__ import annotations

import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import search  # noqa: E402

from dcop.io import read_problem  # noqa: E402


def test_the_better_answer_is_the_lower_cost() -> None:
    assert search.better({"internal": 1.0}, {"internal": 2.0}) == "dcop"
    assert search.better({"internal": 3.0}, {"internal": 2.0}) == "tb2"
    assert search.better({"internal": 2.0}, {"internal": 2.0 + 1e-12}) == "same"
    # an infeasible answer is worse than any feasible one, and no answer worse than any
    assert search.better({"internal": math.inf}, {"internal": 56.5}) == "tb2"
    assert search.better({"internal": 56.5}, {"internal": math.inf}) == "dcop"
    assert search.better({"internal": math.inf}, {"internal": math.inf}) == "same"
    assert search.better({"internal": None}, {"internal": 1.0}) == "tb2"
    assert search.better({"internal": None}, {"internal": None}) == "none"


def test_models_are_written_with_their_evidence(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "bn.uai").write_text(
        "BAYES\n2\n2 2\n2\n1 0\n2 0 1\n2\n 0.4 0.6\n4\n 0.1 0.9 0.7 0.3\n"
    )
    (folder / "bn.uai.evid").write_text("1 1 0\n")
    (folder / "broken.uai").write_text("MARKOV\n1\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    chosen = search.anytime_models(folder, [], scratch)
    assert [name for name, _ in chosen] == ["bn.uai"]  # the broken file is skipped, said so
    problem = read_problem(chosen[0][1])
    assert sorted(problem.domain_sizes().values()) == [1, 2]  # the observed one: 1 value
