"""The branch and bound on large domains (dcop.search.dfbnb without diffusion, tables summed per
scope) against brute force, toulbar2's known optimum, and auto's rule."""

from __future__ import annotations

import numpy as np
import pytest

from dcop.inference.anytime import solve_auto
from dcop.io import read_problem
from dcop.model import CostTable, Problem, Variable
from dcop.search import dfbnb
from dcop.search.dfbnb import solve_dfbnb, suits_large
from tests.conftest import INSTANCES, brute_force, check_exact_answer


def large_binary(
    seed: int, n: int = 4, d: int = 24, tables: int = 8, p_inf: float = 0.1
) -> Problem:
    """``n`` variables of up to ``d`` values (one of exactly ``d``), binary tables (some on the
    same pair, in either order: the search sums them), unary tables, +inf entries."""
    rng = np.random.default_rng(seed)
    sizes = [d] + [int(rng.integers(2, d + 1)) for _ in range(n - 1)]
    variables = [Variable.with_size(f"x{i}", s) for i, s in enumerate(sizes)]
    out = []
    for k in range(tables):
        arity = 1 if k % 4 == 3 else 2
        scope = tuple(int(i) for i in rng.choice(n, size=arity, replace=False))
        shape = tuple(sizes[i] for i in scope)
        costs = rng.integers(0, 30, size=shape).astype(float)
        costs[rng.random(shape) < p_inf] = np.inf
        out.append(CostTable(tuple(f"x{i}" for i in scope), costs, name=f"t{k}"))
    # a pair twice, the second transposed
    shape = (sizes[1], sizes[0])
    out.append(CostTable(("x1", "x0"), rng.integers(0, 30, size=shape).astype(float), name="dup"))
    return Problem.build(variables, out, name=f"large{seed}", constant=1.0)


@pytest.mark.parametrize("seed", range(12))
def test_large_domains_equal_brute_force(seed: int) -> None:
    problem = large_binary(seed, p_inf=0.3 if seed % 3 == 0 else 0.05)
    assert dfbnb.large_domains(problem)
    result = solve_dfbnb(problem)
    assert result.algo == "dfbnb"
    check_exact_answer(problem, result, brute_force(problem))


@pytest.mark.parametrize("seed", range(4))
def test_large_domains_with_dives_of_one_backtrack(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every dive's open nodes replayed from the root: the trail undoes every shift exactly
    monkeypatch.setattr(dfbnb, "BACKTRACKS", 1)
    problem = large_binary(50 + seed, n=5, d=12, tables=10)
    check_exact_answer(problem, solve_dfbnb(problem), brute_force(problem))


def test_tables_of_the_same_scope_are_summed() -> None:
    problem = large_binary(7)
    net, _, _, _ = dfbnb.arrays(problem)
    scopes = {tuple(sorted(t.scope)) for t in problem.tables}
    assert len(net.t_off) - 1 == sum(1 for s in scopes if len(s) >= 2)


def test_auto_rule_for_large_binary_domains() -> None:
    assert suits_large(large_binary(1))
    small = Problem.build(
        [Variable.with_size("a", 10), Variable.with_size("b", 10)],
        [CostTable(("a", "b"), np.zeros((10, 10)))],
    )
    assert not suits_large(small)  # the random networks' d = 10: the AND/OR search's
    ternary = large_binary(2)
    ternary = Problem.build(
        list(ternary.variables.values()),
        [*ternary.tables, CostTable(("x0", "x1", "x2"), np.zeros((24, *(
            ternary.variables[v].size for v in ("x1", "x2")))))],
    )  # fmt: skip
    assert not suits_large(ternary)


def test_celar6_sub0_is_proved_at_its_known_optimum() -> None:
    path = INSTANCES / "CELAR6-SUB0.wcsp"
    if not path.exists():
        pytest.skip(f"reference instances not found at {INSTANCES}")
    problem = read_problem(path)
    result = solve_auto(problem, timeout=120)
    assert result.algo == "dfbnb" and "dfbnb" in (result.choice or "")
    assert result.exact and result.upper_bound == 159.0
    assert problem.evaluate(result.assignment) == 159.0


@pytest.mark.parametrize("probe", [1, 1_000_000])
def test_auto_probes_then_falls_back_to_the_and_or_search(
    probe: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dcop.inference import anytime

    monkeypatch.setattr(anytime, "BE_FIRST_S", 0.0)  # BE is not quick: the search's rules run
    monkeypatch.setattr(anytime, "LARGE_PROBE_NODES", probe)
    problem = large_binary(3, n=5, d=20, tables=10)
    result = solve_auto(problem, timeout=60)
    check_exact_answer(problem, result, brute_force(problem))
    if probe == 1:  # the probe ran out of nodes: the AND/OR search proved it
        assert result.algo == "aobb" and "probe of 1 nodes" in (result.choice or "")
    else:
        assert result.algo == "dfbnb"


@pytest.mark.parametrize("seed", range(6))
def test_split_domains_with_hard_zeros_equal_brute_force(seed: int) -> None:
    # domains past DICHOTOMIC live values are split in halves: wipe-outs in either half
    problem = large_binary(200 + seed, n=4, d=30, tables=9, p_inf=0.6)
    check_exact_answer(problem, solve_dfbnb(problem), brute_force(problem))


def test_auto_falls_back_where_the_probe_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from dcop.inference import anytime

    monkeypatch.setattr(anytime, "BE_FIRST_S", 0.0)
    monkeypatch.setattr(dfbnb, "TRAIL_SHARE", 1e-9)  # its integer tables never fit
    problem = large_binary(4, n=5, d=20, tables=10)
    result = solve_auto(problem, timeout=60)
    check_exact_answer(problem, result, brute_force(problem))
    assert result.algo == "aobb" and "was refused" in (result.choice or "")


def test_the_probe_runs_before_a_device_starts() -> None:
    # a small problem under a device backend: its probe runs on the CPU before the start begins
    path = INSTANCES / "CELAR6-SUB0.wcsp"
    if not path.exists():
        pytest.skip(f"reference instances not found at {INSTANCES}")
    result = solve_auto(read_problem(path), timeout=120, backend="auto")
    assert result.algo == "dfbnb" and result.exact and result.upper_bound == 159.0
    assert "before the device's start" in (result.choice or "")
