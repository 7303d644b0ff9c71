"""The one result document of every command (``solve``, ``run``, ``coordinator``, ``batch``).

A run always ends in a document of this shape, whatever happened: an answer, a proof that there
is none, or a failure (timeout, too large, error, interrupted). Its JSON Schema is
``dcop/schema/result.schema.json``; the README documents it.

* ``status``: ``ok`` (an answer with a finite cost: exact when ``exact``, else bounds),
  ``infeasible`` (proved: no assignment has a finite cost; no assignment and no optimum are
  claimed), ``no_solution`` (a bounding run, MBE or ADPOP, whose assignment breaks a hard
  constraint: its lower bound holds, nothing feasible was found and none was proved impossible),
  ``timeout``, ``too_large`` (a table or message would exceed a memory or message limit),
  ``error``, ``interrupted``.
* Every status but ``infeasible`` keeps the best assignment the run found and both bounds, when
  it had them (a deadline, a signal or a failure after a step of an anytime run): only ``ok``
  answers, and only ``ok`` is ``exact``. An exact run whose proved optimum and recomputed cost
  disagree is refused (``error``) and claims neither.
* Values are in the file's own sense: ``cost`` is the value of the returned assignment (WCSP and
  DCOP costs as written, maximised objectives with their own sign, ``log10`` of the probability for
  UAI MPE), ``lower_bound <= optimum <= upper_bound``. The minimised internal costs are kept in
  ``internal``.
* Infinity is spelled one way: the strings ``"inf"`` and ``"-inf"`` (JSON has no infinity).
* ``assignment`` maps variable names to the file's value labels.

Exit codes (:data:`EXIT_CODES`): 0 for an answer (``ok`` or ``infeasible``), 2 for bad input (the
CLI's usage and input errors), 3 for a run that failed, 4 for one that ran out of time, 5 for one
that ran out of memory or message size, 6 for ``no_solution``, 130 when interrupted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from dcop.model import LN10, Problem

Status = Literal["ok", "infeasible", "no_solution", "timeout", "too_large", "error", "interrupted"]
STATUSES: tuple[Status, ...] = (
    "ok",
    "infeasible",
    "no_solution",
    "timeout",
    "too_large",
    "error",
    "interrupted",
)
EXIT_CODES: dict[str, int] = {
    "ok": 0,
    "infeasible": 0,
    "error": 3,
    "timeout": 4,
    "too_large": 5,
    "no_solution": 6,
    "interrupted": 130,
}
#: Exit code of bad input (usage errors, malformed files): no result document is a run's then.
EXIT_BAD_INPUT = 2
#: Version 2 added ``no_solution`` and the best assignment and bounds kept by every status but
#: ``infeasible`` (version 1: an infeasible MBE/ADPOP assignment was ``ok`` with cost inf).
SCHEMA = "dcop-result/2"
#: Why a ``no_solution`` run ended so.
NO_SOLUTION_MESSAGE = (
    "the assignment found breaks a hard constraint (cost inf): none feasible was found, none "
    "was proved impossible"
)


def json_number(x: float | None) -> float | str | None:
    """A JSON-ready number: ``"inf"`` / ``"-inf"`` for infinities, None stays None."""
    if x is None:
        return None
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if math.isnan(x):
        raise ValueError("a result value is NaN")
    return x


def plain_label(value: object) -> object:
    """A value label as a JSON scalar (NumPy scalars unwrapped, anything else as text)."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def objective(problem: Problem) -> Literal["min", "max"]:
    """Whether the file's own value is minimised (costs) or maximised (utilities, probabilities)."""
    return "max" if problem.cost_kind == "neg_ln" or problem.sign < 0 else "min"


def file_value(problem: Problem, internal: float) -> float:
    """An internal (minimised) cost in the file's own sense."""
    if problem.cost_kind == "neg_ln":
        return -internal / LN10  # log10 of the (unnormalised) probability
    return problem.reported(internal)


def problem_size(problem: Problem) -> dict[str, int]:
    """The document's ``size``: variables, tables and the largest domain."""
    return {
        "variables": problem.n,
        "tables": len(problem.tables),
        "max_domain": problem.max_domain(),
    }


def status_of(lower: float, exact: bool, upper: float) -> tuple[Status, str | None]:
    """``infeasible`` when the bound proves it; ``no_solution`` when a bounding run's assignment
    has an infinite cost (``ok`` means a finite answer); ``error`` when an exact run's proved
    optimum and the recomputed cost of its assignment disagree (never call a wrong answer
    exact)."""
    if math.isinf(lower) and lower > 0:
        return "infeasible", None
    if not exact and math.isinf(upper) and upper > 0:
        return "no_solution", NO_SOLUTION_MESSAGE
    if exact and not (math.isclose(lower, upper, rel_tol=1e-9, abs_tol=1e-6) or lower == upper):
        return "error", (
            f"the proved optimum {lower:.10g} differs from the recomputed cost {upper:.10g} of "
            "the returned assignment"
        )
    return "ok", None


def result_document(
    *,
    problem: Problem | None,
    status: Status,
    algo: str,
    exact: bool,
    z: int | None = None,
    task: str = "min",
    assignment: Mapping[str, int] | None = None,
    lower: float | None = None,
    upper: float | None = None,
    message: str | None = None,
    file: str | None = None,
    times: Mapping[str, float] | None = None,
    metrics: Mapping[str, Any] | None = None,
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a result document. ``lower``/``upper`` are internal (minimised) bounds: the proved
    bound (the optimum when ``exact``) and the recomputed cost of ``assignment``. Only ``ok`` is an
    answer (and ``exact``); every other status keeps the assignment and the bounds it is given,
    except ``infeasible`` (no assignment) and an exact run's ``error`` (its optimum and its cost
    disagree: :func:`status_of` refuses both)."""
    answered = status == "ok"
    refused = status == "error" and exact
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "status": status,
        "message": message,
        "problem": problem.name if problem is not None else None,
        "file": file,
        "task": task,
        "algo": algo,
        "z": z,
        "exact": bool(exact and answered),
        "objective": objective(problem) if problem is not None else None,
        "cost": None,
        "lower_bound": None,
        "upper_bound": None,
        "gap": None,
        "assignment": None,
        "internal": None,
        "times": {k: round(float(v), 6) for k, v in (times or {}).items()},
        "metrics": dict(metrics) if metrics is not None else None,
    }
    if problem is not None and lower is not None and upper is not None:
        if not refused:
            ends = sorted((file_value(problem, lower), file_value(problem, upper)))
            doc["lower_bound"] = json_number(ends[0])
            doc["upper_bound"] = json_number(ends[1])
            if math.isfinite(ends[0]) and math.isfinite(ends[1]):
                doc["gap"] = ends[1] - ends[0]
        doc["internal"] = {
            "kind": problem.cost_kind,
            "lower_bound": json_number(lower),
            "upper_bound": json_number(upper),
        }
    kept = status != "infeasible" and not refused
    if kept and problem is not None and assignment is not None and upper is not None:
        doc["cost"] = json_number(file_value(problem, upper))
        doc["assignment"] = {
            name: plain_label(problem.variables[name].values[int(i)])
            for name, i in assignment.items()
        }
    if details:
        doc.update(details)
    return doc


def after_answer(doc: Mapping[str, Any], status: Status, message: str) -> dict[str, Any]:
    """The document of a run that failed (``status``: interrupted, error, ...) after it had an
    answer ``doc``, e.g. a signal while its agents exit or while its solution file is written:
    the answer's assignment, cost and bounds are kept, nothing is claimed exact, and the status
    and message say what ended the run."""
    return {**doc, "status": status, "message": message, "exact": False}
