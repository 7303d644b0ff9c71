"""The result of a PR or MAR run; it writes the shared result document (:mod:`dcop.results.document`).

Fields it adds to the document (``details``):

* ``ln_partition``, ``log10_partition``: ``ln Z`` and ``log10 Z`` (with evidence: of
  ``P(e) Z``); ``null`` when only bounds are known, ``"-inf"`` when ``Z = 0``.
* ``bounds``: for mini-bucket runs, ``{ln_lower, ln_upper, log10_lower, log10_upper, lower_kind,
  upper_kind}`` (the kinds say in words which bound each is); ``null`` for exact runs.
* ``marginals``: MAR only, ``{variable: [p_0, p_1, ...]}`` in the file's value order (an observed
  variable: probability 1 on its observed value, over its whole domain when the reader kept its
  size in ``meta["evidence_sizes"]``); ``null`` otherwise.

The document's ``lower_bound`` / ``upper_bound`` are ``log10`` bounds on ``Z`` (both ``log10 Z``
when exact); ``cost`` and ``assignment`` are ``null`` (no assignment is claimed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.model import LN10, Problem
from dcop.results.document import Status, json_number, problem_size, result_document


@dataclass
class PartitionResult:
    """``ln Z`` (exact when ``ln_lower == ln_upper``, from :func:`infer` without ``z``) or bounds on
    it, and the marginals of a MAR run (host probabilities by variable, in domain order)."""

    problem: Problem
    task: str
    algo: str
    z: int | None
    ordering: str
    induced_width: int
    largest_table: int
    backend: str
    dtype: str
    ln_lower: float = -math.inf
    ln_upper: float = math.inf
    marginals: dict[str, np.ndarray] | None = None
    bound_kinds: dict[str, str] | None = None
    times: dict[str, float] = field(default_factory=dict)
    file: str | None = None
    #: exact runs by contraction: ``scaled`` (linear space, each intermediate scaled by its peak)
    #: or ``log`` (and why); None for bucket elimination and bounds
    space: str | None = None
    #: the contraction tree: its source, flops, largest intermediate, slices, search time
    tree: dict[str, Any] | None = None

    @property
    def exact(self) -> bool:
        """Exact elimination (no mini-buckets)."""
        return self.z is None

    @property
    def ln_partition(self) -> float | None:
        """``ln Z`` when known exactly (``-inf`` also when the bounds prove ``Z = 0``)."""
        if self.exact or self.ln_upper == -math.inf:
            return self.ln_upper
        return None

    @property
    def log10_partition(self) -> float | None:
        """``log10 Z`` when known exactly."""
        ln_z = self.ln_partition
        return None if ln_z is None else ln_z / LN10

    def status_message(self) -> tuple[Status, str | None]:
        """``infeasible`` when ``Z = 0`` is proved; ``error`` when a NaN came out of the
        elimination (a value the result must not claim)."""
        values = [self.ln_lower, self.ln_upper]
        for probs in (self.marginals or {}).values():
            values.extend(float(p) for p in probs)
        if any(math.isnan(v) for v in values):
            return "error", "the elimination produced NaN"
        if self.ln_upper == -math.inf:
            return "infeasible", None
        return "ok", None

    @property
    def status(self) -> Status:
        return self.status_message()[0]

    def file_marginals(self) -> dict[str, list[float]] | None:
        """The marginals in the file's value order, observed variables over their whole domain
        when their size is known."""
        if self.marginals is None:
            return None
        observed = self.problem.meta.get("evidence")
        sizes = self.problem.meta.get("evidence_sizes")
        observed = observed if isinstance(observed, Mapping) else {}
        sizes = sizes if isinstance(sizes, Mapping) else {}
        out: dict[str, list[float]] = {}
        for name in self.problem.variables:
            probs = [float(p) for p in self.marginals[name]]
            if name in observed and name in sizes:
                probs = [1.0 if i == int(observed[name]) else 0.0 for i in range(int(sizes[name]))]
            out[name] = probs
        return out

    def to_json(self) -> dict[str, Any]:
        """The result document (see :mod:`dcop.results.document` and the module docstring)."""
        p = self.problem
        status, message = self.status_message()
        answered = status == "ok"
        bounds = None
        if not self.exact and status != "error":
            bounds = {
                "ln_lower": json_number(self.ln_lower),
                "ln_upper": json_number(self.ln_upper),
                "log10_lower": json_number(self.ln_lower / LN10),
                "log10_upper": json_number(self.ln_upper / LN10),
                "lower_kind": (self.bound_kinds or {}).get("lower"),
                "upper_kind": (self.bound_kinds or {}).get("upper"),
            }
        ln_z = self.ln_partition if status != "error" else None
        neg_ln = p.cost_kind == "neg_ln" and status != "error"
        return result_document(
            problem=p,
            status=status,
            message=message,
            algo=self.algo,
            exact=self.exact,
            z=self.z,
            task=self.task,
            # internal costs are -ln: the document's bounds come out as log10 bounds on Z
            lower=-self.ln_upper if neg_ln else None,
            upper=-self.ln_lower if neg_ln else None,
            file=self.file,
            times=self.times,
            details={
                "ln_partition": json_number(ln_z),
                "log10_partition": json_number(None if ln_z is None else ln_z / LN10),
                "bounds": bounds,
                "marginals": self.file_marginals() if answered else None,
                "solver": {
                    "ordering": self.ordering,
                    "induced_width": self.induced_width,
                    "largest_table": self.largest_table,
                    "backend": self.backend,
                    "dtype": self.dtype,
                    "space": self.space,
                    "tree": self.tree,
                },
                "size": problem_size(p),
            },
        )
