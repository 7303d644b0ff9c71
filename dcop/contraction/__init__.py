"""Sum-product by tensor contraction: PR and MAR along a contraction tree, in scaled linear space
(BLAS/cuBLAS products) with log space as the fallback, sliced to fit the device's memory.

``engine`` plans and runs; ``tree`` makes and measures trees; ``execute`` runs one;
``memory`` says how much room the run has; ``barren`` prunes barren nodes of Bayesian networks.
"""

from dcop.contraction.engine import (
    SPACES,
    ContractionOutcome,
    ContractionPlan,
    contract,
    default_orders,
    plan_contraction,
)
from dcop.contraction.memory import contraction_room

__all__ = [
    "SPACES",
    "ContractionOutcome",
    "ContractionPlan",
    "contract",
    "contraction_room",
    "default_orders",
    "plan_contraction",
]
