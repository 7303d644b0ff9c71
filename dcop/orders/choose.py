"""The order a run takes from its ``--ordering``: the engine (``auto``), a named heuristic, or a
file written by ``dcop info --write-order`` (an order file or a PACE ``.td``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from dcop.errors import ModelError
from dcop.model import Problem
from dcop.orders.engine import CostModel, OrderResult, best_order
from dcop.orders.files import read_order
from dcop.orders.greedy import ORDERINGS, elimination_order

AUTO = "auto"


@dataclass(frozen=True)
class ChosenOrder:
    """The order and how a result names it (``auto:goatd``, ``minfill``, ``file:o.td``); the
    engine's full answer where it chose."""

    name: str
    order: list[str]
    engine: OrderResult | None = None


def is_order_name(ordering: str) -> bool:
    """Whether ``ordering`` names a method rather than a file."""
    return ordering == AUTO or ordering in ORDERINGS


def choose_order(
    problem: Problem,
    ordering: str | ChosenOrder = AUTO,
    budget_s: float | None = None,
    cost_model: CostModel | None = None,
    max_budget_s: float = math.inf,
) -> ChosenOrder:
    """The elimination order ``ordering`` asks for: ``auto`` runs :func:`best_order` within
    ``budget_s`` (None: its default budget), a name of :data:`dcop.orders.greedy.ORDERINGS` that
    heuristic, anything else is read as an order or ``.td`` file; a :class:`ChosenOrder` (chosen
    once for several uses) is returned as it is. ``cost_model`` gives the engine the solver's
    speed (default: single-core NumPy's), which sizes its default budget; ``max_budget_s`` caps
    that default (a run with a deadline leaves the time to the solve)."""
    if isinstance(ordering, ChosenOrder):
        return ordering
    if ordering == AUTO:
        result = best_order(problem, budget_s, cost_model, max_budget_s)
        return ChosenOrder(f"{AUTO}:{result.method}", result.order, result)
    if ordering in ORDERINGS:
        return ChosenOrder(ordering, elimination_order(ordering, problem.neighbours()))
    path = Path(ordering)
    if not path.is_file():
        raise ModelError(
            f"unknown ordering {ordering!r}: use auto, one of {', '.join(ORDERINGS)}, or an order "
            "or .td file (dcop info --write-order)"
        )
    return ChosenOrder(f"file:{path.name}", read_order(path, list(problem.variables)))
