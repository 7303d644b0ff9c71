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
from dcop.plan.reuse import PlanMemo, memo, structure_key

AUTO = "auto"
#: The engine's orders kept for reuse: a later call on the same structure, budget and cost
#: model takes the order the engine found (the same it would find again) without searching.
_ORDERS: PlanMemo[OrderResult] = memo()


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
    that default budget (a run's share of its time left). The engine's answer is kept for the
    process's next call on the same structure (:mod:`dcop.plan.reuse`)."""
    if isinstance(ordering, ChosenOrder):
        return ordering
    if ordering == AUTO:
        model = cost_model or CostModel()
        names = list(problem.variables)
        key = (
            structure_key(names, problem.domain_sizes(), (t.scope for t in problem.tables)),
            budget_s,
            max_budget_s,
            model.max_entries,
            model.seconds_per_entry,
            None if model.sizes is None else tuple(model.sizes.items()),
        )
        result = _ORDERS.get(key)
        if result is None:
            result = best_order(problem, budget_s, model, max_budget_s)
            _ORDERS.put(key, result)
        return ChosenOrder(f"{AUTO}:{result.method}", list(result.order), result)
    if ordering in ORDERINGS:
        return ChosenOrder(ordering, elimination_order(ordering, problem.neighbours()))
    path = Path(ordering)
    if not path.is_file():
        raise ModelError(
            f"unknown ordering {ordering!r}: use auto, one of {', '.join(ORDERINGS)}, or an order "
            "or .td file (dcop info --write-order)"
        )
    return ChosenOrder(f"file:{path.name}", read_order(path, list(problem.variables)))
