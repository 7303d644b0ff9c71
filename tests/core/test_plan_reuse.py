"""Plans kept within a process (dcop.plan.reuse): the next call on the same structure takes the
plan the first one made, a different structure or budget plans afresh, and the plan is the one
a fresh search makes."""

from __future__ import annotations

from typing import Any

import pytest

from dcop.contraction import engine as contraction_engine
from dcop.generators import ising_grid, spin_glass
from dcop.inference.partition import infer
from dcop.orders import choose
from dcop.orders.choose import choose_order
from dcop.plan.reuse import PlanMemo, clear_all, structure_key


def test_the_memo_keeps_the_most_recently_used_plans() -> None:
    kept: PlanMemo[str] = PlanMemo(size=2)
    kept.put("a", "plan a")
    kept.put("b", "plan b")
    assert kept.get("a") == "plan a"  # a is now the most recent
    kept.put("c", "plan c")
    assert kept.get("b") is None and kept.get("a") == "plan a" and kept.get("c") == "plan c"
    assert len(kept) == 2
    kept.clear()
    assert kept.get("a") is None


def test_the_structure_key_holds_the_order_sizes_and_scopes() -> None:
    sizes = {"x": 2, "y": 3}
    key = structure_key(["x", "y"], sizes, [("x", "y"), ("y",)])
    assert key == structure_key(["x", "y"], dict(sizes), [["x", "y"], ["y"]])
    assert key != structure_key(["y", "x"], sizes, [("x", "y"), ("y",)])
    assert key != structure_key(["x", "y"], {"x": 2, "y": 4}, [("x", "y"), ("y",)])
    assert key != structure_key(["x", "y"], sizes, [("y", "x"), ("y",)])


def counting(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Calls of ``module.name`` from now on, counted."""
    calls: list[int] = []
    inner = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return inner(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_the_engines_order_is_reused_for_the_same_structure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    problem = spin_glass(10, 1)
    searches = counting(monkeypatch, choose, "best_order")
    first = choose_order(problem)
    again = choose_order(problem)
    assert len(searches) == 1 and again.order == first.order and again.name == first.name
    again.order.reverse()  # a caller's copy: the kept plan is not touched
    assert choose_order(problem).order == first.order
    choose_order(problem, budget_s=0.0)  # another budget: another plan
    choose_order(spin_glass(10, 2))  # other couplings, the same structure: the same plan
    assert len(searches) == 2
    choose_order(spin_glass(11, 1))  # another structure
    assert len(searches) == 3
    clear_all()
    assert choose_order(problem).order == first.order and len(searches) == 4


def test_a_pr_on_the_same_structure_takes_the_kept_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = ising_grid(9, seed=0)
    trees = counting(monkeypatch, contraction_engine, "order_path")
    first = infer(problem, "pr")
    made = len(trees)
    assert made > 0
    again = infer(problem, "pr")
    assert len(trees) == made  # no tree made again
    assert again.tree == {**first.tree, "search_s": again.tree["search_s"]}
    assert again.ln_partition == first.ln_partition
    other = infer(ising_grid(9, seed=1), "pr")  # other potentials, the same structure
    assert len(trees) == made and other.tree["source"] == first.tree["source"]
    clear_all()
    fresh = infer(problem, "pr")
    assert len(trees) == 2 * made and fresh.tree["source"] == first.tree["source"]


def test_reuse_is_off_with_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A benchmark timing several calls in one process as fresh processes sets it to 0."""
    from dcop.plan.reuse import REUSE_ENV

    monkeypatch.setenv(REUSE_ENV, "0")
    kept: PlanMemo[str] = PlanMemo()
    kept.put("a", "plan a")
    assert kept.get("a") is None and len(kept) == 0
    problem = spin_glass(10, 1)
    searches = counting(monkeypatch, choose, "best_order")
    assert choose_order(problem).order == choose_order(problem).order
    assert len(searches) == 2
