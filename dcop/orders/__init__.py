"""Elimination orders for every engine: the ordering engine (:func:`best_order`), the greedy orders
and an order's induced scopes and width (``greedy``, pure functions of the primal graph), order
costs with the real domain sizes, tree decompositions (goatd, PACE ``.td``) and order files."""

from dcop.orders.cost import OrderCost, order_cost
from dcop.orders.engine import CostModel, MethodResult, OrderResult, best_order, default_budget

__all__ = [
    "CostModel",
    "MethodResult",
    "OrderCost",
    "OrderResult",
    "best_order",
    "default_budget",
    "order_cost",
]
