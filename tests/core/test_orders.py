"""The ordering engine: permutations, never costlier than min-fill, goatd's decompositions as
orders, the PACE .td and order files, and the default budget."""

from __future__ import annotations

import math
import random
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from dcop.errors import InputError
from dcop.generators import grid_network, random_network, scale_free_network
from dcop.inference import solve
from dcop.io import read_problem
from dcop.model import CostTable, Problem, Variable
from dcop.orders import CostModel, best_order, default_budget, engine, order_cost, treedec
from dcop.orders.cost import SECONDS_PER_BUCKET, SECONDS_PER_ENTRY, OrderCost
from dcop.orders.engine import search
from dcop.orders.files import read_order, write_order
from dcop.orders.greedy import induced_width, min_fill_order
from tests.conftest import INSTANCES as SHARED_INSTANCES
from tests.conftest import instance_index

INSTANCES = SHARED_INSTANCES  # ../shared/instances, or DCOP_INSTANCES


def problems() -> list[tuple[str, Problem]]:
    out = [(f"random{s}", random_network(25, 3, 0.15, 0.4, s)) for s in range(3)]
    out += [(f"scalefree{s}", scale_free_network(40, 2, 0.3, s)) for s in range(2)]
    out += [("grid49", grid_network(49, 2, 0.3, 0)), ("grid100", grid_network(100, 2, 0.3, 1))]
    out.append(("components", components(0)))
    return out


def components(seed: int) -> Problem:
    """Two random components and an isolated variable, domains of 2 to 4 values."""
    rng = np.random.default_rng(seed)
    names = [f"v{i}" for i in range(21)]
    variables = {v: Variable.with_size(v, int(rng.integers(2, 5))) for v in names}
    tables = []
    for part in (names[:12], names[12:20]):
        for i, a in enumerate(part):
            for b in part[i + 1 :]:
                if rng.random() < 0.3:
                    shape = (variables[a].size, variables[b].size)
                    tables.append(CostTable((a, b), rng.integers(0, 9, shape).astype(float)))
    tables.append(CostTable(("v20",), rng.integers(0, 9, (variables["v20"].size,)).astype(float)))
    return Problem(variables, tables)


PROBLEMS = problems()


def assert_permutation(order: list[str] | tuple[str, ...], problem: Problem) -> None:
    assert len(order) == problem.n and set(order) == set(problem.variables)


@pytest.mark.parametrize(("name", "problem"), PROBLEMS, ids=[n for n, _ in PROBLEMS])
@pytest.mark.parametrize("budget", [0.0, 0.05, None])
def test_engine_orders_are_permutations_and_never_worse_than_minfill(
    name: str, problem: Problem, budget: float | None
) -> None:
    result = best_order(problem, budget)
    assert_permutation(result.order, problem)
    for tried in result.tried:
        assert_permutation(tried.order, problem)
    adjacency, sizes = problem.neighbours(), problem.domain_sizes()
    mine = order_cost(adjacency, result.order, sizes)
    minfill = order_cost(adjacency, min_fill_order(adjacency), sizes)
    assert mine.key() <= minfill.key()
    assert (mine.width, mine.largest, mine.total) == (
        result.width,
        result.largest_table_entries,
        result.total_entries,
    )
    assert induced_width(adjacency, result.order) == result.width


def test_engine_takes_a_bare_graph_and_a_memory_cap() -> None:
    graph = {str(v): {str(u) for u in g} for v, g in nx.grid_2d_graph(6, 6).adjacency()}
    result = best_order(graph, 0.05)
    assert sorted(result.order) == sorted(graph)
    assert result.width <= 7  # the 6x6 grid's treewidth is 6
    # sizes of the cost model replace the default 2 per variable
    sized = best_order(graph, 0.0, CostModel(sizes={v: 3 for v in graph}))
    assert sized.largest_table_entries == 3 ** (sized.width + 1)


def test_search_beats_minfill_on_a_grid() -> None:
    if not treedec.available():
        pytest.skip("goatd is not installed on this platform")
    problem = grid_network(196, 3, 0.3, 1)
    adjacency = problem.neighbours()
    assert induced_width(adjacency, min_fill_order(adjacency)) >= 17
    result = best_order(problem, 0.2)
    assert result.width <= 15 and result.method == "goatd"


def test_restarts_without_goatd(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(treedec, "goatd", None)
    problem = random_network(30, 2, 0.2, 0.3, 3)
    result = best_order(problem, 0.05)
    assert [t.method for t in result.tried][-1] == "minfill-restarts"
    assert_permutation(result.order, problem)
    adjacency, sizes = problem.neighbours(), problem.domain_sizes()
    assert result.total_entries <= order_cost(adjacency, min_fill_order(adjacency), sizes).total
    order = engine.randomized_min_fill(adjacency, random.Random(1))
    assert sorted(order) == sorted(adjacency)


def test_randomized_min_fill_breaks_only_ties_at_random() -> None:
    adjacency = {str(v): {str(u) for u in g} for v, g in nx.grid_2d_graph(6, 6).adjacency()}
    orders = {tuple(engine.randomized_min_fill(adjacency, random.Random(s))) for s in range(5)}
    assert len(orders) > 1  # a grid is all ties

    def key(graph: dict[str, set[str]], v: str) -> tuple[int, int]:
        ns = sorted(graph[v])
        fill = sum(1 for i, a in enumerate(ns) for b in ns[i + 1 :] if b not in graph[a])
        return fill, len(ns)

    for order in orders:
        # each step eliminates a variable of least (fill, degree) in the graph left
        graph = {v: set(ns) for v, ns in adjacency.items()}
        for v in order:
            assert key(graph, v) == min(key(graph, u) for u in graph)
            ns = graph.pop(v)
            for a in ns:
                graph[a].discard(v)
                graph[a].update(ns - {a})


def test_bags_to_order_keeps_the_decomposition_width() -> None:
    if not treedec.available():
        pytest.skip("goatd is not installed on this platform")
    import goatd

    for seed in range(5):
        g = nx.gnp_random_graph(30, 0.15, seed=seed)
        graph = goatd.Graph(30, list(g.edges()))
        td = goatd.decompose(graph, order="minfill", seed=seed)
        order = treedec.bags_to_order(30, td.bags, td.edges)
        assert sorted(order) == list(range(30))
        adjacency = {str(v): {str(u) for u in g[v]} for v in g}
        assert induced_width(adjacency, [str(v) for v in order]) <= td.treewidth


def test_order_cost_cut_short() -> None:
    adjacency = {str(v): {str(u) for u in g} for v, g in nx.grid_2d_graph(5, 5).adjacency()}
    order = list(adjacency)
    sizes = {v: 2 for v in adjacency}
    full = order_cost(adjacency, order, sizes)
    assert math.isfinite(full.total)
    assert order_cost(adjacency, order, sizes, cap=full.total / 2).total == math.inf


@pytest.mark.parametrize(
    ("budget", "default", "expected"),
    [
        (None, 1.0, 1.0 - 2 * engine.GREEDY_S_PER_ELEMENT * 65),  # the greedy orders' share off
        (None, 0.04, 0.04),  # a budget under SMALL_S stays whole
        (0.5, 9.0, 0.5),  # --order-time: the search's own budget
    ],
)
def test_default_budget_bounds_the_whole_engine(
    monkeypatch: pytest.MonkeyPatch, budget: float | None, default: float, expected: float
) -> None:
    # the predicted cost of the greedy orders comes off the default budget (a 5x5 grid: 25
    # variables and 40 edges, elements()), whatever a clock says
    asked: list[float] = []
    real_plan = engine.search_plan

    def plan(size: int, budget_s: float, goatd: bool) -> engine.SearchPlan:
        asked.append(budget_s)
        return real_plan(size, budget_s, goatd)

    monkeypatch.setattr(engine, "default_budget", lambda predicted, n: default)
    monkeypatch.setattr(engine, "search_plan", plan)
    problem = grid_network(25, 2, 0.3, 0)
    assert engine.elements(problem.neighbours()) == 65
    result = best_order(problem, budget)
    assert asked == [pytest.approx(expected)]
    assert result.budget_s == (default if budget is None else budget)


def test_a_budget_buys_runs_by_the_graphs_size_alone() -> None:
    """The budget is spent as a count of runs from a cost model of the graph's size: the
    portfolio where it affords one, else sampled min-fills, else (goatd missing) restarts."""
    size = 1000
    portfolio = engine.PORTFOLIO_S + engine.PORTFOLIO_S_PER_ELEMENT * size
    assert engine.search_plan(size, 0.0, True).runs == 0
    assert engine.search_plan(size, 3 * portfolio, True).rounds == 3
    few = engine.search_plan(size, 0.5 * portfolio, True)
    assert few.rounds == 0 and few.samples == min(
        engine.MAX_SAMPLES, int(0.5 * portfolio / (engine.SAMPLE_S_PER_ELEMENT * size))
    )
    assert engine.search_plan(size, 0.05, False).restarts == int(
        0.05 / (engine.RESTART_S_PER_ELEMENT * size)
    )
    assert engine.search_plan(size, 1e9, True).rounds == engine.MAX_ROUNDS


def test_the_default_budget_follows_the_solvers_speed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A solver 1000x faster per entry (a GPU's contraction) predicts a thousandth of the solve:
    the default budget is sized from that, and the portfolio rounds' stop too."""
    seen: list[float] = []

    def record(predicted: float, n: int) -> float:
        seen.append(predicted)
        return 0.0  # no search: only the prediction is looked at here

    monkeypatch.setattr(engine, "default_budget", record)
    graph = grid_network(144, 2, 0.3, 0)
    best_order(graph)
    best_order(graph, cost_model=CostModel(seconds_per_entry=SECONDS_PER_ENTRY / 1000))
    base = len(graph.variables) * SECONDS_PER_BUCKET
    assert seen[1] - base == pytest.approx((seen[0] - base) / 1000)
    monkeypatch.setattr(engine, "default_budget", lambda predicted, n: 5.0)
    assert engine.best_order(graph, budget_s=0.0, max_budget_s=0.02).budget_s == 0.0  # its own
    capped = engine.best_order(graph, max_budget_s=0.02)  # the default, at most what is left
    assert capped.budget_s == pytest.approx(0.02)

    # the rounds' stop: SHARE of the best order's predicted solve at the given speed, counted
    # in the rounds' predicted seconds. Each round halves the best order's work and more.
    rounds: list[int] = []
    order = min_fill_order(graph.neighbours())

    class Decomposer:
        def __init__(self, adjacency: object) -> None:
            pass

        def run(self, method: str, seed: int = 0, sample: bool = False) -> int:
            rounds.append(seed)
            return seed

        def order(self, td: object) -> list[str]:
            return order

    monkeypatch.setattr(treedec, "Decomposer", Decomposer)
    monkeypatch.setattr(
        engine, "order_cost", lambda *args: OrderCost(3, 1e6, 1e12 / 4 ** len(rounds))
    )
    incumbent = OrderCost(3, 1e6, 2e12)
    adjacency, sizes = graph.neighbours(), graph.domain_sizes()
    plan = engine.SearchPlan(rounds=32, run_s=1.0)
    search(adjacency, sizes, plan, True, incumbent, SECONDS_PER_ENTRY)
    slow = len(rounds)  # a BE solve of ~1e4 s: rounds until a fifth of the best one's is spent
    rounds.clear()
    search(adjacency, sizes, plan, True, incumbent, 1e-13)
    assert slow >= 4 and len(rounds) == 1  # a 0.1 s solve: its fifth is gone after one round
    rounds.clear()
    # a round starts only where it fits the share with what the engine spent before the rounds
    # (the greedy orders): here they took it all, so only the budget's first round runs
    search(adjacency, sizes, plan, True, incumbent, SECONDS_PER_ENTRY, already_s=1e9)
    assert len(rounds) == 1
    rounds.clear()
    # each round is checked ahead: the rounds stop one short of the share, not one past it
    search(adjacency, sizes, plan, True, incumbent, SECONDS_PER_ENTRY, already_s=slow - 1.5)
    assert len(rounds) < slow
    rounds.clear()
    search(adjacency, sizes, plan, False, incumbent, 1e-13)
    assert len(rounds) == 32  # an explicit budget: every round it bought


def test_default_budget() -> None:
    assert default_budget(0.0005, 100) == 0.0  # instant problems keep the greedy order
    assert default_budget(0.002, 100) == pytest.approx(0.008)  # four times the predicted solve
    assert default_budget(0.04, 100) == pytest.approx(0.05)  # up to SMALL_S
    assert default_budget(0.5, 1000) == pytest.approx(0.1)  # then a fifth
    assert default_budget(20.0, 1000) == pytest.approx(4.0)
    assert default_budget(1e9, 10**6) == pytest.approx(10.0)  # the cap
    assert default_budget(1e9, 16) == pytest.approx(0.16)  # a small graph's cap


def jumping_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clock a planner could read jumps by a second at each reading: a machine so loaded
    that any search on the clock would stop at once."""
    import time

    ticks = [0.0]

    def tick() -> float:
        ticks[0] += 1.0
        return ticks[0]

    for name in ("perf_counter", "process_time", "monotonic", "time"):
        monkeypatch.setattr(time, name, tick)


@pytest.mark.parametrize(
    "problem",
    [grid_network(100, 3, 0.3, 1), scale_free_network(120, 3, 0.3, 2), components(1)],
    ids=["grid10", "scalefree120", "components"],
)
def test_the_same_input_gets_the_same_order_on_every_call_and_under_load(
    monkeypatch: pytest.MonkeyPatch, problem: Problem
) -> None:
    """The search's budget is work: repeated calls, a CPU-bound thread beside the search, and
    clocks that jump a second at every reading all give the same order."""
    import threading

    first = best_order(problem, 0.2)
    assert first.work > 0  # a search ran
    assert best_order(problem, 0.2).order == first.order
    stop = threading.Event()

    def spin() -> None:  # holds the interpreter between the search's steps
        while not stop.is_set():
            sum(range(1000))

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        loaded = best_order(problem, 0.2)
    finally:
        stop.set()
        spinner.join()
    assert loaded.order == first.order
    jumping_clocks(monkeypatch)
    assert best_order(problem, 0.2).order == first.order
    assert best_order(problem).order == best_order(problem).order  # the default budget too


@pytest.mark.parametrize("suffix", [".order", ".td"])
def test_written_orders_read_back(tmp_path: Path, suffix: str) -> None:
    problem = scale_free_network(40, 3, 0.3, 2)
    adjacency, names = problem.neighbours(), list(problem.variables)
    result = best_order(problem, 0.05)
    path = tmp_path / f"o{suffix}"
    write_order(path, result.order, adjacency, names, "test")
    back = read_order(path, names)
    if suffix == ".order":
        assert back == result.order
    else:  # the same decomposition: the width is kept (the order within a bag may differ)
        assert induced_width(adjacency, back) == result.width
    assert_permutation(back, problem)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x0\nx1\nzz\n", "o.order:3: 'zz' is not a variable"),
        ("x0\nx1\nx0\n", "o.order:3: 'x0' is listed twice (first on line 1)"),
        ("c a comment\nx0\n", "o.order: the order misses 'x1'"),
        ("x0 x1\n", "o.order:1: one variable name per line"),
        ("s td 1 2 3\nb 1 1 2\n", "o.order: vertex 3 (x2) is in no bag"),
        ("s td 1 2 3\nb 1 1 9\n", "o.order:2: a vertex outside 1..3"),
        ("s td 1 2 4\n", "o.order:1: the decomposition has 4 vertices, the problem 3"),
        ("s td 1 2 3\nb 1 1 2 3\n1 x\n", "o.order:3: not a number"),
    ],
)
def test_bad_order_files(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "o.order"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read_order(path, ["x0", "x1", "x2"])
    assert str(info.value).endswith(message) or message in str(info.value)


@pytest.mark.skipif(not INSTANCES.exists(), reason="shared instances absent")
@pytest.mark.parametrize("name", ["Segmentation_11.uai", "pedigree1.wcsp", "Grids_11.uai"])
def test_default_order_beats_minfill_on_structured_files(name: str) -> None:
    if not treedec.available():
        pytest.skip("goatd is not installed on this platform")
    problem = read_problem(INSTANCES / name)
    adjacency = problem.neighbours()
    result = best_order(problem)
    assert result.width < induced_width(adjacency, min_fill_order(adjacency))


@pytest.mark.parametrize(("name", "problem"), PROBLEMS, ids=[n for n, _ in PROBLEMS])
def test_elimination_pseudo_tree_keeps_every_constraint_on_a_branch(
    name: str, problem: Problem
) -> None:
    from dcop.trees.induced import induced_scopes, order_pseudo_tree

    adjacency = problem.neighbours()
    result = best_order(problem, 0.05)
    tree = order_pseudo_tree(adjacency, result.order)

    def ancestors(v: str) -> set[str]:
        out, p = set(), tree.parent[v]
        while p is not None:
            out.add(p)
            p = tree.parent[p]
        return out

    for table in problem.tables:
        for i, a in enumerate(table.scope):
            for b in table.scope[i + 1 :]:
                assert a in ancestors(b) or b in ancestors(a), (table.scope, a, b)
    separators = tree.separators()
    scopes = induced_scopes(adjacency, result.order)
    assert {v: set(s) for v, s in separators.items()} == {v: set(s) for v, s in scopes.items()}
    assert max((len(s) for s in separators.values()), default=0) == result.width


ROWS = [r for r in instance_index() if float(r["max_table_entries"]) <= 3e7]


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_be_along_the_engine_order_reaches_known_optimum(row: dict[str, str]) -> None:
    problem = read_problem(SHARED_INSTANCES / row["file"])
    result = solve(problem, "be")
    assert result.ordering.startswith("auto:")
    expected = float(row["optimum" if row["format"] == "wcsp" else "neg_ln_optimum"])
    assert result.lower_bound == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert result.induced_width <= int(row["induced_width_minfill"])


def test_the_engine_is_charged_the_work_it_did() -> None:
    """``work_s`` is the predicted seconds of what the engine ran (its greedy orders, and the
    rounds it made, not the ones its budget bought: an adaptive portfolio stops once it settles)
    and ``known`` greedy orders are taken as given."""
    problem = grid_network(144, 2, 0.0, 1)
    adjacency = problem.neighbours()
    size = engine.elements(adjacency)
    found = best_order(problem, cost_model=CostModel(seconds_per_entry=1e-6))
    plan = engine.search_plan(size, found.budget_s, treedec.available())
    assert 0 < found.work <= plan.runs
    assert found.work_s == pytest.approx(
        2 * engine.GREEDY_S_PER_ELEMENT * size + found.work * plan.run_s
    )
    given = list(adjacency)[::-1]
    taken = best_order(adjacency, 0.0, known={"minfill": given})
    assert taken.tried[0].method == "minfill" and list(taken.tried[0].order) == given
    assert taken.work == 0 and taken.work_s == pytest.approx(2 * engine.GREEDY_S_PER_ELEMENT * size)


@pytest.mark.parametrize("seed", range(3))
def test_a_solve_reports_its_orders_own_width_and_largest_table(seed: int) -> None:
    """BE takes the width and largest table the engine walked (no walk of its own): they are
    those of the order it ran, with the real domain sizes."""
    from dcop.orders.greedy import largest_table

    problem = random_network(30, 4, 0.15, 0.3, seed) if seed else grid_network(64, 3, 0.3, 1)
    result = solve(problem)
    chosen = best_order(problem, cost_model=CostModel())  # the order the solve ran
    adjacency = problem.neighbours()
    assert result.induced_width == induced_width(adjacency, chosen.order)
    assert result.largest_table == largest_table(adjacency, chosen.order, problem.domain_sizes())
