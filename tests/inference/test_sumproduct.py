"""PR and MAR: exact sum-product elimination equals brute force; bounds bound; the pseudo-tree
steps of the distributed version give the same numbers; the CLI refuses tasks a file cannot have."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.backends import get_backend
from dcop.errors import ModelError
from dcop.generators import ising_grid, random_bayes
from dcop.inference.partition import infer
from dcop.io.uai import condition, write_uai
from dcop.model import CostTable, Problem, Variable
from dcop.orders.choose import choose_order
from dcop.sumproduct import down_messages, log_potentials, marginal, sum_util
from dcop.tables import Table
from dcop.trees.pseudotree import dfs_pseudo_tree
from tests.conftest import joint_costs, random_problem

ORDERINGS = ["minfill", "mindegree", "pseudotree"]


# ---- brute force ------------------------------------------------------------------------------
def brute_force(problem: Problem) -> tuple[float, dict[str, np.ndarray]]:
    """ln Z and every marginal, by enumerating all assignments: the weight of each is
    exp(-cost) (:func:`~tests.conftest.joint_costs`), scaled by the largest before summing."""
    log_w = -joint_costs(problem)
    peak = float(log_w.max())
    if peak == -math.inf:
        return -math.inf, {}
    weights = np.exp(log_w - peak)
    total = float(weights.sum())
    marginals = {}
    for i, v in enumerate(problem.variables):
        others = tuple(k for k in range(weights.ndim) if k != i)
        marginals[v] = weights.sum(axis=others) / total
    return peak + math.log(total), marginals


def random_markov(seed: int, n: int = 6, zeros: float = 0.1, shift: float = 0.0) -> Problem:
    """Random potentials in (0, 3] (some zeros) on mixed arities, as -ln costs; ``shift`` is added
    to every table's log potentials (log Z moves by shift * number of tables)."""
    rng = np.random.default_rng(seed)
    variables = [Variable.with_size(f"x{i}", int(rng.integers(1, 4))) for i in range(n)]
    tables = []
    for k in range(n + 2):
        arity = int(rng.integers(1, 4))
        scope = tuple(f"x{i}" for i in rng.choice(n, size=arity, replace=False))
        shape = tuple(variables[int(v[1:])].size for v in scope)
        potentials = rng.uniform(0.0, 3.0, size=shape)
        potentials[rng.random(shape) < zeros] = 0.0
        with np.errstate(divide="ignore"):
            costs = -np.log(potentials) - shift
        tables.append(CostTable(scope, costs, name=f"f{k}"))
    return Problem.build(variables, tables, name=f"markov{seed}", cost_kind="neg_ln")


def observe(problem: Problem, seed: int, count: int = 2) -> Problem:
    """Condition ``problem`` on random evidence the way the UAI reader does."""
    rng = np.random.default_rng(seed)
    names = list(problem.variables)
    chosen = [names[i] for i in rng.choice(len(names), size=min(count, len(names)), replace=False)]
    observed = {v: int(rng.integers(0, problem.variables[v].size)) for v in chosen}
    variables, tables = condition(list(problem.variables.values()), problem.tables, observed)
    return Problem.build(
        variables, tables, name=problem.name, cost_kind="neg_ln", meta={"evidence": observed}
    )


def assert_matches(problem: Problem, ordering: str = "minfill") -> None:
    ln_z, marginals = brute_force(problem)
    pr = infer(problem, "pr", ordering=ordering)
    mar = infer(problem, "mar", ordering=ordering)
    if ln_z == -math.inf:
        assert pr.status == mar.status == "infeasible"
        assert pr.ln_partition == -math.inf
        return
    assert pr.ln_partition == pytest.approx(ln_z, rel=1e-9, abs=1e-9)
    assert mar.ln_partition == pytest.approx(ln_z, rel=1e-9, abs=1e-9)
    assert mar.marginals is not None
    for v, probs in marginals.items():
        np.testing.assert_allclose(mar.marginals[v], probs, atol=1e-9)
        assert mar.marginals[v].sum() == pytest.approx(1.0, abs=1e-12)


# ---- the backend step -------------------------------------------------------------------------
def test_logsumexp_join_eliminate_adds_tables_without_the_variable_once() -> None:
    rng = np.random.default_rng(0)
    backend = get_backend("numpy")
    a = backend.table(("x", "y"), rng.normal(size=(3, 4)))
    b = backend.table(("y",), rng.normal(size=4))
    c = backend.table(("y", "x"), np.where(rng.random((4, 3)) < 0.3, -math.inf, 1.0))
    zero = backend.table(("y",), np.array([-math.inf, 0.0, -math.inf, 2.0]))
    out = backend.join_eliminate([a, b, c, zero], "x", "logsumexp", scope=("y",))
    joined = a.data + b.data[None, :] + c.data.T + zero.data[None, :]
    with np.errstate(divide="ignore"):
        expected = np.log(np.exp(joined).sum(axis=0))
    np.testing.assert_allclose(out.data, expected, rtol=1e-12)


# ---- exact PR and MAR -------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(ORDERINGS), st.booleans())
def test_markov_equals_brute_force(seed: int, ordering: str, evidence: bool) -> None:
    problem = random_markov(seed)
    assert_matches(observe(problem, seed) if evidence else problem, ordering)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6), st.sampled_from(ORDERINGS), st.booleans())
def test_bayes_equals_brute_force(seed: int, ordering: str, evidence: bool) -> None:
    problem = random_bayes(7, d=2 + seed % 2, parents=2, seed=seed)
    if not evidence:
        assert infer(problem, "pr", ordering=ordering).ln_partition == pytest.approx(0, abs=1e-12)
    assert_matches(observe(problem, seed, 3) if evidence else problem, ordering)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10**6))
def test_cost_problems_with_constants_and_infinities(seed: int) -> None:
    """Z = Σ exp(-cost) of any Problem: constants, arity-0 tables, +inf costs, unused variables."""
    assert_matches(random_problem(seed, integer=False))


@pytest.mark.parametrize("shift", [-700.0, -120.0, 120.0, 700.0])
def test_log_z_far_from_zero_is_stable(shift: float) -> None:
    """Potentials scaled by e^±700 each (products far beyond float64's range) keep log Z exact."""
    base = random_markov(3, n=7, zeros=0.0)
    scaled = random_markov(3, n=7, zeros=0.0, shift=shift)
    ln_base, marg_base = brute_force(base)
    result = infer(scaled, "mar")
    assert result.ln_partition == pytest.approx(ln_base + shift * len(base.tables), rel=1e-12)
    assert result.marginals is not None
    for v, probs in marg_base.items():
        np.testing.assert_allclose(result.marginals[v], probs, atol=1e-9)


def test_ising_grid_in_both_directions() -> None:
    """A strongly coupled grid (log Z ~ +1e3) and the same with every potential tiny (~ -1e4)."""
    grid = ising_grid(6, coupling=20.0, field=5.0, seed=1)
    tiny = Problem.build(
        grid.variables.values(),
        [CostTable(t.scope, t.costs + 200.0, t.name) for t in grid.tables],
        cost_kind="neg_ln",
    )
    high = infer(grid, "pr").ln_partition
    low = infer(tiny, "pr").ln_partition
    assert high is not None and low is not None
    assert high > 500 and low < -10_000
    assert low == pytest.approx(high - 200.0 * len(grid.tables), rel=1e-12)


def test_zero_model_is_infeasible() -> None:
    variables = [Variable.with_size(f"x{i}", 2) for i in range(3)]
    tables = [
        CostTable(("x0", "x1"), np.full((2, 2), math.inf)),
        CostTable(("x1", "x2"), np.full((2, 2), math.inf)),
    ]
    problem = Problem.build(variables, tables, cost_kind="neg_ln")
    for task in ("pr", "mar"):
        doc = infer(problem, task).to_json()
        assert doc["status"] == "infeasible"
        assert doc["ln_partition"] == doc["log10_partition"] == "-inf"
        assert doc["marginals"] is None
        json.dumps(doc, allow_nan=False)


def test_impossible_evidence_is_infeasible() -> None:
    problem = random_bayes(5, parents=2, seed=4)
    root = problem.tables[0]  # P(x0): x0 has no parents
    assert root.scope == ("x0",)
    never = CostTable(root.scope, np.array([math.inf, 0.0]), root.name)
    problem = Problem.build(
        problem.variables.values(), [never, *problem.tables[1:]], cost_kind="neg_ln"
    )
    assert infer(problem, "pr").ln_partition == pytest.approx(0.0, abs=1e-12)
    impossible = observe_exactly(problem, {"x0": 0})
    for task in ("pr", "mar"):
        assert infer(impossible, task).status == "infeasible"


def test_mar_document() -> None:
    problem = random_markov(11)
    doc = infer(problem, "mar").to_json()
    ln_z, marginals = brute_force(problem)
    assert doc["task"] == "mar" and doc["exact"] and doc["status"] == "ok"
    assert doc["log10_partition"] == pytest.approx(ln_z / math.log(10), rel=1e-9)
    assert doc["lower_bound"] == doc["upper_bound"] == doc["log10_partition"]
    assert list(doc["marginals"]) == list(problem.variables)
    for v, probs in doc["marginals"].items():
        assert probs == pytest.approx(list(marginals[v]), abs=1e-9)


def test_observed_variable_marginal_spans_its_file_domain() -> None:
    problem = random_markov(5, zeros=0.0)
    observed = observe(problem, 5, count=1)
    name, value = next(iter(observed.meta["evidence"].items()))  # type: ignore[attr-defined]
    observed.meta["evidence_sizes"] = {name: problem.variables[name].size}
    doc = infer(observed, "mar").to_json()
    expected = [0.0] * problem.variables[name].size
    expected[value] = 1.0
    assert doc["marginals"][name] == expected


# ---- choosing the order ----------------------------------------------------------------------
def test_elimination_cost_and_the_auto_order() -> None:
    from dcop.orders.greedy import cheapest_order, elimination_cost, min_fill_order
    from dcop.trees.induced import induced_scopes

    grid = ising_grid(12, seed=3)
    adjacency, sizes = grid.neighbours(), grid.domain_sizes()
    natural = list(grid.variables)
    expected = sum(
        sizes[v] * math.prod(sizes[u] for u in scope)
        for v, scope in induced_scopes(adjacency, natural).items()
    )
    assert elimination_cost(adjacency, natural, sizes) == expected
    assert elimination_cost(adjacency, natural, sizes, cap=expected / 2) == math.inf
    minfill = min_fill_order(adjacency)
    name, order = cheapest_order(adjacency, sizes, {"minfill": minfill, "natural": natural})
    cheaper = min(
        ("minfill", minfill),
        ("natural", natural),
        key=lambda c: elimination_cost(adjacency, c[1], sizes),
    )
    assert (name, order) == (cheaper[0], cheaper[1])
    picked = choose_order(grid, "auto")
    label, chosen = picked.name, picked.order
    assert label.startswith("auto:")
    assert elimination_cost(adjacency, chosen, sizes) <= min(
        elimination_cost(adjacency, o, sizes) for o in (minfill, natural, natural[::-1])
    )
    result = infer(grid, "pr", method="buckets", order_time=0.0)
    assert result.ordering == choose_order(grid, "auto", 0.0).name
    exact = infer(grid, "pr", ordering="minfill").ln_partition
    assert result.ln_partition == pytest.approx(exact, rel=1e-12)


# ---- bounds ------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.sampled_from(["upper", "weighted"]))
def test_minibucket_bounds_bracket_log_z(seed: int, z: int, upper: str) -> None:
    problem = random_markov(seed, n=7, zeros=0.05)
    ln_z, _ = brute_force(problem)
    result = infer(problem, "pr", z=z, upper=upper)
    assert result.ln_lower <= ln_z + 1e-9
    assert ln_z <= result.ln_upper + 1e-9
    doc = result.to_json()
    assert doc["exact"] is False and doc["ln_partition"] in (None, "-inf")
    assert doc["bounds"]["upper_kind"].startswith("weighted" if upper == "weighted" else "mini")
    if doc["status"] == "ok" and math.isfinite(result.ln_lower):
        assert doc["lower_bound"] <= doc["upper_bound"]


def test_minibucket_with_a_wide_z_is_exact() -> None:
    problem = random_markov(8, n=7)
    ln_z, _ = brute_force(problem)
    for upper in ("upper", "weighted"):
        result = infer(problem, "pr", z=7, upper=upper)
        assert result.ln_upper == pytest.approx(ln_z, rel=1e-9)
        assert result.ln_lower == pytest.approx(ln_z, rel=1e-9)


def test_minibucket_bounds_on_a_grid() -> None:
    grid = ising_grid(5, seed=2)
    exact = infer(grid, "pr").ln_partition
    assert exact is not None
    for upper in ("upper", "weighted"):
        result = infer(grid, "pr", z=3, upper=upper)
        assert result.ln_lower < exact < result.ln_upper


def test_memory_limit_refuses_before_building_tables() -> None:
    from dcop.errors import TableTooLarge

    problem = ising_grid(6, seed=1)
    for task, match in (("pr", "memory limit"), ("mar", "MAR keeps every message")):
        with pytest.raises(TableTooLarge, match=match):
            infer(problem, task, max_bytes=1.0, method="buckets")
        with pytest.raises(TableTooLarge, match=f"{task.upper()} by contraction.*memory limit"):
            infer(problem, task, max_bytes=1.0)


def test_bad_requests_are_model_errors() -> None:
    problem = random_markov(1)
    with pytest.raises(ModelError, match="MAR needs exact"):
        infer(problem, "mar", z=2)
    with pytest.raises(ModelError, match="unknown inference task"):
        infer(problem, "map")
    with pytest.raises(ModelError, match="mini-bucket size"):
        infer(problem, "pr", z=0)
    top = Problem.build(problem.variables.values(), problem.tables, upper_bound=10.0)
    with pytest.raises(ModelError, match="upper bound"):
        infer(top, "pr")


# ---- the distributed steps on a pseudo-tree ----------------------------------------------------
def simulate_pseudo_tree(problem: Problem) -> tuple[float, dict[str, np.ndarray]]:
    """What the agents compute, in process: each agent owns the tables whose deepest variable it
    is; UTILs go up the DFS pseudo-tree (leaves first), down messages come back (root first)."""
    backend = get_backend("numpy")
    tree = dfs_pseudo_tree(problem.neighbours())
    separators = tree.separators()
    tables, ln_constant = log_potentials(backend, problem)
    own: dict[str, list[Table]] = {v: [] for v in problem.variables}
    for t in tables:
        own[max(t.scope, key=tree.depth.__getitem__)].append(t)
    sizes = problem.domain_sizes()
    utils: dict[str, Table] = {}
    ln_z = ln_constant
    for v in reversed(tree.order):  # children before parents
        bucket = own[v] + [utils[c] for c in tree.children[v]]
        util = sum_util(backend, bucket, v, scope=separators[v], size=sizes[v])
        assert util.scope == separators[v]
        if tree.parent[v] is None:
            ln_z += float(util.data)
        else:
            utils[v] = util
    down: dict[str, Table] = {}
    marginals: dict[str, np.ndarray] = {}
    for v in tree.order:  # parents before children
        children = {c: utils[c] for c in tree.children[v]}
        parent_message = down.pop(v, None)
        messages = down_messages(
            backend, own[v], parent_message, children, {c: separators[c] for c in children}, sizes
        )
        for c, message in messages.items():
            assert message.scope == separators[c]
        down.update(messages)
        marginals[v], ln_z_v = marginal(backend, own[v], parent_message, children, v, sizes[v])
        if math.isfinite(ln_z):  # every belief's normaliser is ln Z of its component
            assert math.isfinite(ln_z_v)
    return ln_z, marginals


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.booleans())
def test_pseudo_tree_steps_equal_brute_force(seed: int, evidence: bool) -> None:
    problem = random_markov(seed, n=7)
    if evidence:
        problem = observe(problem, seed)
    ln_z, marginals = brute_force(problem)
    got_z, got_marginals = simulate_pseudo_tree(problem)
    assert got_z == pytest.approx(ln_z, rel=1e-9, abs=1e-9)
    for v, probs in marginals.items():
        np.testing.assert_allclose(got_marginals[v], probs, atol=1e-9)


def test_pseudo_tree_agrees_with_centralized_on_a_bayes_net() -> None:
    problem = random_bayes(40, parents=3, window=6, seed=9)
    central = infer(problem, "mar")
    got_z, got_marginals = simulate_pseudo_tree(problem)
    assert got_z == pytest.approx(0.0, abs=1e-9)
    assert central.marginals is not None
    for v, probs in central.marginals.items():
        np.testing.assert_allclose(got_marginals[v], probs, atol=1e-9)


# ---- shared instances ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["test_Z.uai", "pdb1etl.uai", "GEOM40_3.uai", "Promedus_24.uai"])
def test_instances_agree_across_orders(instances_dir: Path, name: str) -> None:
    from dcop.io import read_problem

    problem = read_problem(instances_dir / name)
    results = [infer(problem, "mar", ordering=o) for o in ORDERINGS]
    ln_zs = [r.ln_partition for r in results]
    assert all(z == pytest.approx(ln_zs[0], rel=1e-9) for z in ln_zs)
    for r in results[1:]:
        assert r.marginals is not None and results[0].marginals is not None
        for v, probs in results[0].marginals.items():
            np.testing.assert_allclose(r.marginals[v], probs, atol=1e-9)


def test_bayes_instance_sums_to_one(instances_dir: Path) -> None:
    from dcop.io import read_problem

    assert infer(read_problem(instances_dir / "water.uai"), "pr").ln_partition == pytest.approx(
        0.0, abs=1e-9
    )


# ---- CPU and GPU --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpu() -> Any:
    pytest.importorskip("cupy")
    from dcop.backends import gpu_usable

    if not gpu_usable():
        pytest.skip("no usable CUDA device")
    return get_backend("cupy")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", range(12))
def test_gpu_equals_cpu_on_random_models(gpu: Any, seed: int) -> None:
    """Zeros (-inf in log space) everywhere, evidence, and both signs of log Z."""
    problem = random_markov(seed, n=8, zeros=0.1, shift=(-1) ** seed * 300.0)
    if seed % 3 == 0:
        problem = observe(problem, seed)
    cpu = infer(problem, "mar")
    dev = infer(problem, "mar", backend=gpu)
    assert dev.backend == "cupy" and dev.status == cpu.status
    if cpu.status == "infeasible":
        return
    assert dev.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12, abs=1e-9)
    assert dev.marginals is not None and cpu.marginals is not None
    for v, probs in cpu.marginals.items():
        np.testing.assert_allclose(dev.marginals[v], probs, atol=1e-12)
    for upper in ("upper", "weighted"):
        a, b = (
            infer(problem, "pr", z=2, upper=upper),
            infer(problem, "pr", z=2, upper=upper, backend=gpu),
        )
        assert b.ln_upper == pytest.approx(a.ln_upper, rel=1e-12, abs=1e-9)
        assert (
            b.ln_lower == pytest.approx(a.ln_lower, rel=1e-12, abs=1e-9) or a.ln_lower == b.ln_lower
        )


@pytest.mark.gpu
@pytest.mark.parametrize("task", ["pr", "mar"])
def test_gpu_device_space_on_a_range_wider_than_float(gpu: Any, task: str) -> None:
    """A grid whose range (about e^1000) is wider than float64's: the device space rescales
    where its host bounds require, checks its tiny entries, and reads the device once; it
    equals log space on the host."""
    from dcop.generators import ising_grid

    problem = ising_grid(8, 6.0, 1.0, seed=3)
    cpu = infer(problem, task, space="log")
    dev = infer(problem, task, backend=gpu)
    assert dev.space == "scaled"
    assert dev.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
    if task == "mar":
        assert dev.marginals is not None and cpu.marginals is not None
        for v, probs in cpu.marginals.items():
            np.testing.assert_allclose(dev.marginals[v], probs, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "name", ["water.uai", "Promedus_24.uai", "grid10x10.f10.uai", "CSP_12.uai"]
)
def test_gpu_equals_cpu_on_instances(gpu: Any, instances_dir: Path, name: str) -> None:
    from dcop.io import read_problem

    problem = read_problem(instances_dir / name)
    cpu = infer(problem, "mar")
    dev = infer(problem, "mar", backend=gpu)
    assert dev.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-10, abs=1e-9)
    assert dev.marginals is not None and cpu.marginals is not None
    for v, probs in cpu.marginals.items():
        np.testing.assert_allclose(dev.marginals[v], probs, atol=1e-9)


# ---- command line --------------------------------------------------------------------------------
def dcop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcop", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_pr_and_mar_with_evidence(tmp_path: Path) -> None:
    problem = random_bayes(8, parents=2, seed=3)
    model = tmp_path / "net.uai"
    write_uai(problem, model)
    evid = tmp_path / "net.uai.evid"
    evid.write_text("2 1 0 5 1\n")
    expected, marginals = brute_force(observe_exactly(problem, {"x1": 0, "x5": 1}))
    run = dcop("solve", str(model), "--task", "pr", "--evidence", str(evid), "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["task"] == "pr" and doc["status"] == "ok"
    assert doc["ln_partition"] == pytest.approx(expected, rel=1e-9)
    run = dcop("solve", str(model), "--task", "mar", "--evidence", str(evid), "--json", "-", "-q")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert doc["marginals"]["x3"] == pytest.approx(list(marginals["x3"]), abs=1e-9)


def observe_exactly(problem: Problem, observed: dict[str, int]) -> Problem:
    variables, tables = condition(list(problem.variables.values()), problem.tables, observed)
    return Problem.build(variables, tables, cost_kind="neg_ln")


def test_cli_refuses_tasks_a_file_cannot_have(tmp_path: Path, instances_dir: Path) -> None:
    wcsp = instances_dir / "queens4.wcsp"
    for task in ("pr", "mar", "mpe"):
        run = dcop("solve", str(wcsp), "--task", task)
        assert run.returncode == 2
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and "--task" in lines[0] and "uai" in lines[0]
    run = dcop(
        "solve", str(instances_dir / "test_Z.uai"), "--task", "mar", "--algo", "mbe", "--z", "2"
    )
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1
    run = dcop("solve", str(instances_dir / "test_Z.uai"), "--task", "bogus")
    assert run.returncode == 2
    assert "bogus" in run.stderr


def test_cli_zero_markov_model_is_infeasible(tmp_path: Path) -> None:
    model = tmp_path / "zero.uai"
    model.write_text("MARKOV\n3\n2 2 3\n2\n2 0 1\n2 1 2\n4\n0 0 0 0\n6\n0 0 0 0 0 0\n")
    for task in ("pr", "mar"):
        run = dcop("solve", str(model), "--task", task, "--json", "-", "-q")
        assert run.returncode == 0, run.stderr
        doc = json.loads(run.stdout)
        assert doc["status"] == "infeasible" and doc["ln_partition"] == "-inf"
        assert doc["marginals"] is None and doc["task"] == task


def test_results_feed_the_uai_pr_and_mar_writers(tmp_path: Path) -> None:
    from dcop.io.solution import write_mar, write_pr
    from dcop.io.uai import read_uai

    model, evid = tmp_path / "net.uai", tmp_path / "net.uai.evid"
    write_uai(random_bayes(6, d=3, parents=2, seed=2), model)
    evid.write_text("1 4 2\n")
    problem = read_uai(model, evid)
    result = infer(problem, "mar")
    assert result.marginals is not None and result.log10_partition is not None
    write_pr(tmp_path / "out.PR", result.log10_partition)
    write_mar(tmp_path / "out.MAR", problem, result.marginals)
    assert float((tmp_path / "out.PR").read_text().split()[1]) == result.log10_partition
    tokens = (tmp_path / "out.MAR").read_text().split()
    assert tokens[:2] == ["MAR", "6"]
    doc = result.to_json()
    assert doc["marginals"]["x4"] == [0.0, 0.0, 1.0]  # observed: its whole domain in the file
    values = [float(t) for t in tokens[2:]]
    expected = [x for name in problem.variables for x in [3, *doc["marginals"][name]]]
    assert values == pytest.approx(expected, abs=1e-15)
