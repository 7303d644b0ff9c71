"""The solver registry: every algorithm name has one row, and the names are spelled once."""

from __future__ import annotations

from typing import get_args

import pytest

from dcop.choices import CentralAlgo, DistributedAlgo
from dcop.cli.batch_rows import ALGOS as BATCH_ALGOS
from dcop.cli.solvers import BATCH, CENTRAL, DISTRIBUTED, Request, needs_z, only_distributed
from dcop.generators import random_network
from dcop.inference import ALGOS as SOLVE_ALGOS
from dcop.protocol.runspec import ALGOS as RUN_ALGOS
from dcop.protocol.runspec import Algo


def test_every_algorithm_name_has_one_solver() -> None:
    assert list(CENTRAL) == [a.value for a in CentralAlgo]
    assert list(DISTRIBUTED) == [a.value for a in DistributedAlgo]
    assert all(name == solver.name for name, solver in {**CENTRAL, **DISTRIBUTED}.items())
    assert (
        BATCH_ALGOS
        == BATCH
        == ("be", "mbe", "aobb", "dfbnb", "planar", "auto", "dpop", "adpop", "mbdpop")
    )


def test_the_other_spellings_follow_the_enums() -> None:
    assert set(get_args(Algo)) == set(RUN_ALGOS) == set(DISTRIBUTED)
    assert set(SOLVE_ALGOS) == set(CENTRAL) - {"auto"}
    assert [n for n in BATCH if needs_z(n)] == ["mbe", "adpop"]
    assert [n for n in ("be", "auto", "dpop", "adpop") if only_distributed(n)] == ["dpop", "adpop"]


@pytest.mark.parametrize("name", ["be", "mbe", "aobb", "dfbnb", "auto"])
def test_each_central_solver_solves(name: str) -> None:
    from dcop.inference import solve

    problem = random_network(8, 3, 0.4, 0.5, seed=3)
    exact = solve(problem).upper_bound
    result = CENTRAL[name].run(problem, Request(z=2 if name == "mbe" else None))
    assert result.lower_bound <= exact + 1e-9 <= result.upper_bound + 2e-9
    if name != "mbe":
        assert result.upper_bound == pytest.approx(exact)
