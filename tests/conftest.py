"""Shared fixtures: where the reference instances live, and small random problems."""

from __future__ import annotations

import csv
import itertools
import math
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from dcop.model import CostTable, Problem, Variable
from dcop.orders.choose import ChosenOrder
from dcop.results.solve import SolveResult

# Under pytest-xdist, tests marked serial (and the Docker and netns ones) run alone: see serial.py.
from tests.serial import (  # noqa: F401 (pytest finds the hooks here)
    pytest_configure,
    pytest_configure_node,
    pytest_runtest_protocol,
    pytest_unconfigure,
)

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
#: DCOP_INSTANCES points elsewhere (a worktree or a machine without ../shared beside it).
INSTANCES = Path(os.environ.get("DCOP_INSTANCES", SHARED / "instances"))


@pytest.fixture(autouse=True)
def contraction_on_the_device_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's device contraction runs on the device, however small its tree: the engine
    sends trees of at most ``HOST_LARGEST`` entries to the host, which would leave the device
    path of the small test models untested. Tests of that choice set it back."""
    from dcop.contraction import engine

    monkeypatch.setattr(engine, "HOST_LARGEST", 0)


@pytest.fixture(autouse=True)
def no_plan_kept_from_another_test(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test plans afresh: a plan kept by an earlier test in the same worker (dcop.plan.reuse)
    may have been made under constants that test had changed. Reuse is on, as in a user's
    process (a benchmark's main, run in process by its test, turns it off for its process)."""
    from dcop.plan.reuse import REUSE_ENV, clear_all

    clear_all()
    monkeypatch.delenv(REUSE_ENV, raising=False)


def instance_index() -> list[dict[str, str]]:
    """Rows of ../shared/instances/INDEX.tsv (empty when the folder is missing)."""
    index = INSTANCES / "INDEX.tsv"
    if not index.exists():
        return []
    with index.open() as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


#: The most assignments :func:`joint_costs` enumerates (8 bytes each).
JOINT_LIMIT = 1 << 24


def joint_costs(problem: Problem) -> np.ndarray:
    """The internal cost of every assignment, one axis per variable in ``problem.variables``'
    order: what :meth:`Problem.evaluate` gives assignment by assignment (the constant, then
    each table's cost added in the problem's order, +inf at or above its upper bound), built
    by broadcasting each table's dense array over the variables it misses."""
    names = list(problem.variables)
    shape = tuple(problem.variables[v].size for v in names)
    if math.prod(shape) > JOINT_LIMIT:
        raise ValueError(f"{problem.name}: {math.prod(shape)} assignments, too many to enumerate")
    axis = {v: i for i, v in enumerate(names)}
    total = np.full(shape, float(problem.constant))
    for table in problem.tables:
        order = sorted(range(len(table.scope)), key=lambda k: axis[table.scope[k]])
        view = [1] * len(names)
        for k in order:
            view[axis[table.scope[k]]] = shape[axis[table.scope[k]]]
        total += np.transpose(table.costs, order).reshape(view)
    if problem.upper_bound is not None:
        total[total >= problem.upper_bound] = math.inf
    return total


def brute_force(problem: Problem) -> float:
    """Minimum internal cost over all assignments (small problems only)."""
    return float(joint_costs(problem).min())


def small_bayes_net_with_evidence(folder: Path) -> Problem:
    """A 4-variable Bayesian network (domains 2, 3, 2, 2) with variable 3 observed, written to
    ``folder`` as .uai and .evid and read back: MPE with evidence for the exact solvers."""
    from dcop.io import read_problem

    uai = folder / "bn.uai"
    uai.write_text(
        "BAYES\n4\n2 3 2 2\n4\n1 0\n2 0 1\n2 1 2\n3 1 2 3\n"
        "2\n 0.4 0.6\n6\n 0.1 0.5 0.4 0.7 0.2 0.1\n6\n 0.9 0.1 0.3 0.7 0.5 0.5\n"
        "12\n 0.2 0.8 0.6 0.4 0.9 0.1 0.5 0.5 0.3 0.7 0.1 0.9\n"
    )
    evid = folder / "bn.uai.evid"
    evid.write_text("1 3 1\n")
    return read_problem(uai, evidence=evid)


def check_exact_answer(problem: Problem, result: SolveResult, best: float) -> None:
    """An exact solver's ``result`` for ``problem`` whose optimum is ``best`` (inf: infeasible):
    its cost is its assignment's, and both bounds meet the optimum."""
    if math.isinf(best):
        assert result.status == "infeasible"
        return
    cost = problem.evaluate(result.assignment)
    assert result.upper_bound == pytest.approx(cost, abs=1e-9)
    assert result.status == "ok" and result.exact
    assert result.upper_bound == pytest.approx(best, rel=1e-9, abs=1e-9)
    assert result.lower_bound == result.upper_bound


def brute_force_by_evaluate(problem: Problem) -> float:
    """:func:`brute_force` assignment by assignment through :meth:`Problem.evaluate` (slow: it
    checks :func:`joint_costs` on small problems)."""
    names = list(problem.variables)
    best = math.inf
    for values in itertools.product(*(range(problem.variables[v].size) for v in names)):
        best = min(best, problem.evaluate(dict(zip(names, values, strict=True))))
    return best


def random_problem(
    seed: int,
    n: int = 6,
    max_domain: int = 3,
    n_tables: int = 7,
    max_arity: int = 3,
    p_inf: float = 0.1,
    integer: bool = True,
) -> Problem:
    """A small random problem with mixed arities, domains, +inf entries and a constant."""
    rng = np.random.default_rng(seed)
    variables = [
        Variable.with_size(f"v{i}", int(rng.integers(1, max_domain + 1))) for i in range(n)
    ]
    tables = []
    for k in range(n_tables):
        arity = int(rng.integers(0, max_arity + 1))
        scope = tuple(f"v{i}" for i in rng.choice(n, size=arity, replace=False))
        shape = tuple(variables[int(v[1:])].size for v in scope)
        costs = rng.integers(0, 20, size=shape).astype(float) if integer else rng.random(shape) * 5
        costs = np.asarray(costs, dtype=float)
        costs[rng.random(shape) < p_inf] = np.inf
        tables.append(CostTable(scope, costs, name=f"t{k}"))
    return Problem.build(
        variables, tables, name=f"random{seed}", constant=float(rng.integers(0, 3))
    )


@pytest.fixture
def instances_dir() -> Path:
    if not INSTANCES.exists():
        pytest.skip(f"reference instances not found at {INSTANCES}")
    return INSTANCES


#: Marker -> the variable that asks for its tests. They change the machine (Debian packages, a
#: Docker daemon and images, network namespaces), so `make test` skips them unless asked.
SYSTEM_TESTS = {"docker": "DCOP_TEST_DOCKER", "netns": "DCOP_TEST_NETNS"}


def system_tests_skipped(marker: str, environ: dict[str, str] | None = None) -> str | None:
    """Why the tests marked ``marker`` are skipped (None: they run); they run only when their
    variable in :data:`SYSTEM_TESTS` is ``1``."""
    variable = SYSTEM_TESTS.get(marker)
    env = os.environ if environ is None else environ
    if variable is None or env.get(variable) == "1":
        return None
    return f"changes the machine; set {variable}=1 to run it (see CONTRIBUTING.md)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip the Docker and network-namespace tests unless their variable asks for them."""
    for item in items:
        for marker in SYSTEM_TESTS:
            reason = system_tests_skipped(marker) if item.get_closest_marker(marker) else None
            if reason is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


def hub(values: int, leaves: int, seed: int = 0) -> tuple[Problem, ChosenOrder]:
    """A hub of ``values`` values tied to ``leaves`` variables of 10 values, and the order that
    eliminates the hub first: one bucket that joins ``values * 10**leaves`` entries into an
    output of ``10**leaves``, then small ones (the deadline's tests inside one large bucket)."""
    rng = np.random.default_rng(seed)
    variables = [Variable("h", tuple(range(values)))]
    variables += [Variable(f"y{i}", tuple(range(10))) for i in range(leaves)]
    tables = [
        CostTable(("h", f"y{i}"), rng.integers(0, 100, (values, 10)).astype(np.float64))
        for i in range(leaves)
    ]
    order = ChosenOrder("hub first", ["h", *(f"y{i}" for i in range(leaves))])
    return Problem.build(variables, tables, name=f"hub_{values}_{leaves}"), order


def hub_optimum(problem: Problem) -> float:
    """A :func:`hub`'s optimum without its large bucket: the leaves are independent given it."""
    return float(min(sum(t.dense().min(axis=1) for t in problem.tables)))


def garbage_listener(port: int) -> Callable[[], None]:
    """A TCP listener on ``port`` of the loopback that answers every connection with bytes no
    ZMTP peer sends (a squatter that is not ZeroMQ), on a thread; returns its stop."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    listener.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"\x00garbage" * 64)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def leave() -> None:
        stop.set()
        thread.join()
        listener.close()

    return leave
