"""The one owner of a run's memory plan: :func:`plan_for` (issue 31, step 3).

``dcop solve`` (BE/MBE), PR/MAR (:mod:`dcop.inference.partition`), ``dcop batch --algo auto``
and ``dcop info`` all plan a problem's peak here, from the problem, the elimination order, z,
the dtype and the backend, so that what ``info`` and auto's choice promise is exactly what the
solve checks before it builds any table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from dcop.backend import get_backend
from dcop.model import Problem
from dcop.plan.memory import (
    MemoryPlan,
    WorkModel,
    device_model_of,
    plan_memory,
    resident_bytes,
    work_model_of,
)
from dcop.tables import choose_dtype

#: The tasks that sum (sum-product) rather than minimise.
SUMMING_TASKS = ("pr", "mar")


def summing_work(work: WorkModel) -> WorkModel:
    """Sum-product's working memory: min-sum's, plus a linear-space (``exp``) copy of every
    member table of a mini-bucket (``tables._logsumexp_linear``): planned as min-sum, PR peaked
    11 % over --max-memory on Grids_11 (issue 33, item 5)."""
    return dataclasses.replace(work, copy_below=1 << 62)


def plan_for(
    problem: Problem,
    order: Sequence[str],
    z: int | None = None,
    dtype: Any = "auto",
    backend: str | Any = "numpy",
    *,
    task: str = "min",
    resident: int | None = None,
) -> MemoryPlan:
    """The planned peak of eliminating ``problem`` along ``order`` with mini-bucket size ``z``
    (None: BE) in ``dtype`` (a dtype, or a name :func:`dcop.tables.choose_dtype` resolves) on
    ``backend`` (a name or a backend object), for ``task`` (min/mpe, or pr/mar: sum-product's
    work). ``resident``: bytes the process already holds (default: measured now). A backend
    over several GPUs (:func:`~dcop.plan.memory.device_model_of`) is planned device by
    device: only what lands in host memory counts against the host limit."""
    engine = get_backend(backend) if isinstance(backend, str) else backend
    chosen = np.dtype(choose_dtype(problem, dtype) if isinstance(dtype, str) else dtype)
    work = work_model_of(engine)
    if task in SUMMING_TASKS:
        work = summing_work(work)
    return plan_memory(
        [t.scope for t in problem.tables],
        problem.domain_sizes(),
        order,
        z,
        chosen.itemsize,
        resident=resident_bytes() if resident is None else resident,
        work=work,
        devices=device_model_of(engine),
    )
