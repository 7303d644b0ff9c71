"""Centralized inference: BE (exact), MBE(z) (lower/upper bounds), MPE (BE on -ln p costs).

``solve`` picks the order (``dcop.orders``), runs the (mini-)bucket elimination
(``elimination``) on a table backend (``dcop.backends``), and returns a ``SolveResult``.
"""

from dcop.buckets import partition_minibuckets
from dcop.inference.elimination import eliminate
from dcop.inference.solve import ALGOS, default_max_bytes, solve, solve_be, solve_mbe
from dcop.plan.bucket_plan import MemoryPlan, plan_for, plan_memory
from dcop.results.solve import SolveResult
from dcop.tables import choose_dtype

__all__ = [
    "ALGOS",
    "MemoryPlan",
    "SolveResult",
    "choose_dtype",
    "default_max_bytes",
    "eliminate",
    "partition_minibuckets",
    "plan_for",
    "plan_memory",
    "solve",
    "solve_be",
    "solve_mbe",
]
