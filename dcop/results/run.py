"""The typed result of a distributed run, beside the centralized ``SolveResult``.

Both write the same document (:func:`dcop.results.result_document`): status, cost and bounds in
the file's own sense, the assignment by variable name with the file's labels, times and, here,
the wire metrics, the pseudo-tree and the processes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dcop.model import Problem
from dcop.results.document import Status, result_document, status_of
from dcop.results.partition import PartitionResult
from dcop.sizes import as_count

if TYPE_CHECKING:  # the spec is only read here: a result loads no protocol
    from dcop.protocol.runspec import RunSpec


@dataclass(frozen=True)
class TreeChoice:
    """Which candidate pseudo-tree the coordinator kept and with which z, and why: every
    candidate's largest predicted UTIL (entries) and width, and the chosen tree's largest UTIL for
    each mini-bucket size it was sized for (None: DPOP). Sizes are capped floats
    (:mod:`dcop.sizes`); the document shows them as integers (exact below 2^53)."""

    tree: int
    z: int | None
    largest_entries: list[float]
    widths: list[int]
    predicted: dict[int | None, float]
    predicted_agent: int | None
    #: each candidate's kind: ``dfs`` (built by the agents) or ``elimination`` (the
    #: coordinator's elimination tree), and why the kept one ran
    kinds: list[str] = field(default_factory=list)
    why: str = ""
    #: MB-DPOP: the clusters as Go sent them, and as the document shows them (root, members,
    #: cut variables, contexts, chunk)
    clusters: tuple[Any, ...] = ()
    cuts: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        chosen = self.predicted.get(self.z)
        return {
            "tree": self.tree,
            "kind": self.kinds[self.tree] if self.kinds else "dfs",
            "why": self.why,
            "candidates_kind": self.kinds,
            "z": self.z,
            "cuts": self.cuts,
            "candidates_largest_util_entries": [as_count(n) for n in self.largest_entries],
            "candidates_width": self.widths,
            "predicted_largest_util_entries": None if chosen is None else as_count(chosen),
            "predicted_by_z": {
                ("dpop" if z is None else str(z)): as_count(n) for z, n in self.predicted.items()
            },
        }


@dataclass(frozen=True)
class RunResult:
    """What a distributed DPOP/ADPOP run found and measured.

    ``spec`` is what was asked, ``ran`` what ran (``auto`` becomes DPOP or ADPOP(z)), ``tree``
    the candidate tree kept. ``bound`` is the proved internal (minimised) bound: the optimum for
    DPOP, a lower bound for ADPOP, the sum of the roots' reports; ``internal_cost`` the internal cost
    of ``assignment`` recomputed by the coordinator on its own Problem (never trusted from the
    agents). For PR/MAR ``partition`` holds ``ln Z`` and the marginals, ``bound`` and ``internal_cost``
    are ``-ln Z`` and ``assignment`` is empty.
    """

    problem: Problem
    spec: RunSpec
    ran: RunSpec
    tree: TreeChoice
    assignment: dict[str, int]
    internal_cost: float
    bound: float
    roots: tuple[str, ...]
    agents: dict[str, Any]
    metrics: dict[str, Any]
    dtype: str
    times: dict[str, float] = field(default_factory=dict)
    processes: dict[str, Any] | None = None
    file: str | None = None
    partition: PartitionResult | None = None

    @property
    def exact(self) -> bool:
        """DPOP proves the optimum; ADPOP gives bounds, which prove it too when they meet."""
        return self.ran.exact or (
            self.partition is None
            and math.isfinite(self.internal_cost)
            and self.bound >= self.internal_cost
        )

    @property
    def cost(self) -> float:
        """The value of ``assignment`` in the file's own sense (as the result document says it:
        maximised utilities with their sign, log10 of the probability for MPE);
        ``internal_cost`` is the minimised value."""
        from dcop.results import file_value

        return file_value(self.problem, self.internal_cost)

    @property
    def status(self) -> Status:
        """``ok``, ``infeasible``, or ``error`` when DPOP's bound and the cost disagree (PR/MAR:
        ``infeasible`` when ``Z = 0``, ``error`` on a NaN)."""
        if self.partition is not None:
            return self.partition.status
        return status_of(self.bound, self.exact, self.internal_cost)[0]

    @property
    def feasible(self) -> bool:
        """Whether the returned assignment has a finite cost."""
        return math.isfinite(self.internal_cost)

    @property
    def bound_matches_cost(self) -> bool:
        """Whether the proved bound equals the assignment's recomputed cost."""
        return self.bound == self.internal_cost or math.isclose(
            self.bound, self.internal_cost, rel_tol=1e-9, abs_tol=1e-6
        )

    def to_json(self) -> dict[str, Any]:
        """The result document (see :mod:`dcop.results.document`; PR/MAR: :mod:`dcop.results.partition`
        with the wire metrics and the pseudo-tree)."""
        details = {
            "spec": self.spec.to_dict(),
            "pseudo_tree": self.tree.to_json(),
            "dtype": self.dtype,
            "roots": list(self.roots),
            "agents": self.agents,
            "processes": self.processes,
        }
        if self.partition is not None:
            partition = dataclasses.replace(self.partition, file=self.file)
            doc = partition.to_json() | {"metrics": self.metrics} | details
            del doc["solver"]  # a centralized run's order and backend: the agents had neither
            return doc
        status, message = status_of(self.bound, self.exact, self.internal_cost)
        return result_document(
            problem=self.problem,
            status=status,
            message=message,
            algo=self.ran.algo,
            exact=self.exact,
            z=self.ran.z,
            assignment=self.assignment,
            lower=self.bound,
            upper=self.internal_cost,
            file=self.file,
            times=self.times,
            metrics=self.metrics,
            details=details,
        )
