"""Solution files: toulbar2's ``-w`` format and the UAI inference competition's result formats.

* toulbar2 (``toulbar2 problem.wcsp -w=sol``): one line, the value index of every variable in
  variable (file) order, separated by spaces. :func:`write_solution` with ``kind="wcsp"``;
  :func:`read_solution` reads it back (the reference ``*.sol`` files of the shared instances
  have this layout, for ``.wcsp`` and ``.uai`` models alike).
* UAI 2014 inference competition result files: a first line naming the task, then the solution
  (``-BEGIN-`` may separate several solutions; readers take the last):

  - ``MPE``: ``n v_1 .. v_n``, the number of variables and the value index of each;
  - ``PR``: ``log10`` of the partition function (with evidence: ``log10 Pr(e)``);
  - ``MAR``: ``n`` then, per variable, its cardinality and the probability of each value.

Value indices are those of the *file* the problem was read from: a variable observed through an
``.evid`` file has a one-value domain in the Problem (index 0), but its solution entry is the
observed value's index in the model file (``Problem.meta["evidence"]``), and its MAR line spans
its full domain (``Problem.meta["evidence_sizes"]``), with probability 1 on the observed value.
The functions take plain data (a Problem, an assignment of value indices by variable name, a
number, marginals by variable name) so the CLI can write what a solver returned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from dcop.errors import InputError, ModelError
from dcop.io._common import read_text
from dcop.model import Problem

#: Largest solution file read (a few values per variable).
MAX_SOLUTION_BYTES = 1 << 26
#: Solution kinds of :func:`write_solution`.
KINDS = ("wcsp", "mpe")


def _evidence(problem: Problem) -> tuple[dict[str, int], dict[str, int]]:
    observed = problem.meta.get("evidence")
    sizes = problem.meta.get("evidence_sizes")
    return (
        dict(observed) if isinstance(observed, Mapping) else {},
        dict(sizes) if isinstance(sizes, Mapping) else {},
    )


def file_indices(problem: Problem, assignment: Mapping[str, int]) -> list[int]:
    """The value index of every variable in the problem's file, in variable order (observed
    variables: their evidence value). Raises ModelError if a variable is missing or out of range.
    """
    observed, _ = _evidence(problem)
    out = []
    for name, var in problem.variables.items():
        if name not in assignment:
            raise ModelError(f"the assignment misses variable {name!r}")
        index = int(assignment[name])
        if not 0 <= index < var.size:
            raise ModelError(f"value index {index} out of range for {name!r}")
        out.append(observed.get(name, index))
    return out


def write_solution(
    path: str | Path,
    problem: Problem,
    assignment: Mapping[str, int],
    kind: str | None = None,
) -> None:
    """Write an assignment (value indices by variable name) as a solution file.

    ``kind`` is ``"wcsp"`` (toulbar2's ``-w`` line) or ``"mpe"`` (a UAI competition MPE result);
    by default ``"mpe"`` for problems read from ``.uai`` files and ``"wcsp"`` otherwise.
    """
    if kind is None:
        kind = "mpe" if problem.meta.get("format") == "uai" else "wcsp"
    if kind not in KINDS:
        raise ModelError(f"unknown solution kind {kind!r}; use one of {', '.join(KINDS)}")
    values = " ".join(str(i) for i in file_indices(problem, assignment))
    if kind == "wcsp":
        text = values + "\n"
    else:
        text = f"MPE\n{problem.n}{' ' if values else ''}{values}\n"
    Path(path).write_text(text, encoding="utf-8")


def write_pr(path: str | Path, log10_z: float) -> None:
    """Write a UAI ``PR`` result: log10 of the partition function (``-inf`` when it is 0)."""
    if math.isnan(log10_z) or log10_z == math.inf:
        raise ModelError(f"log10 Z must be a number below +inf, not {log10_z}")
    Path(path).write_text(f"PR\n{_number(log10_z)}\n", encoding="utf-8")


def write_mar(path: str | Path, problem: Problem, marginals: Mapping[str, Sequence[float]]) -> None:
    """Write a UAI ``MAR`` result: the marginal of every variable, in variable order.

    ``marginals[name]`` holds one probability per value of the variable's domain in the Problem;
    an observed variable (one value in the Problem) is written over its full domain in the file
    with probability 1 on the observed value.
    """
    observed, sizes = _evidence(problem)
    parts = [str(problem.n)]
    for name, var in problem.variables.items():
        if name not in marginals:
            raise ModelError(f"the marginals miss variable {name!r}")
        probs = [float(p) for p in marginals[name]]
        if len(probs) != var.size:
            raise ModelError(
                f"variable {name!r} has {var.size} values but {len(probs)} marginal probabilities"
            )
        if any(math.isnan(p) or p < 0 for p in probs):
            raise ModelError(f"the marginal of {name!r} holds a NaN or negative probability")
        if name in observed and name in sizes:
            probs = [1.0 if i == observed[name] else 0.0 for i in range(int(sizes[name]))]
        parts.append(str(len(probs)))
        parts.extend(_number(p) for p in probs)
    Path(path).write_text("MAR\n" + " ".join(parts) + "\n", encoding="utf-8")


def write_answer(
    path: str | Path,
    problem: Problem,
    task: str,
    *,
    assignment: Mapping[str, int] | None = None,
    ln_z: float | None = None,
    marginals: Mapping[str, Sequence[float]] | None = None,
) -> None:
    """Write what a run of ``task`` answered (``--solution``): an assignment (``min``/``mpe``:
    :func:`write_solution`), ``ln Z`` (``pr``: :func:`write_pr`, as log10) or the marginals
    (``mar``: :func:`write_mar`). Raises ModelError when the answer for the task is missing."""
    if task in ("min", "mpe"):
        if assignment is None:
            raise ModelError("no assignment to write")
        write_solution(path, problem, assignment)
    elif task == "pr":
        if ln_z is None:
            raise ModelError("no partition function to write")
        write_pr(path, ln_z / math.log(10))
    elif task == "mar":
        if marginals is None:
            raise ModelError("no marginals to write")
        write_mar(path, problem, marginals)
    else:
        raise ModelError(f"unknown task {task!r}")


def read_solution(path: str | Path, problem: Problem) -> dict[str, int]:
    """An assignment (value indices of ``problem``) from a toulbar2 ``-w`` line or a UAI ``MPE``
    result file (the last solution when several are given)."""
    path = Path(path)
    file = str(path)
    lines = read_text(path, MAX_SOLUTION_BYTES).splitlines()
    # '#' lines are comments (dcop marks an infeasible assignment with one)
    numbered = [
        (i + 1, ln.split()) for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#")
    ]
    if not numbered:
        raise InputError("empty solution file", file, 1)
    expect_count = False
    if numbered[0][1] == ["MPE"] or numbered[0][1] == ["MAP"]:
        starts = [k for k, (_, words) in enumerate(numbered) if words == ["-BEGIN-"]]
        numbered = numbered[(starts[-1] if starts else 0) + 1 :]
        expect_count = True
        if not numbered:
            raise InputError("the MPE result holds no solution", file, len(lines))
    tokens = [(line, word) for line, words in numbered for word in words]
    numbers: list[tuple[int, int]] = []
    for line, word in tokens:
        try:
            numbers.append((line, int(word)))
        except ValueError:
            raise InputError(f"expected a value index, got {word[:40]!r}", file, line) from None
    if expect_count:
        line, count = numbers[0]
        if count != problem.n:
            raise InputError(
                f"the MPE result is for {count} variables, the problem has {problem.n}", file, line
            )
        numbers = numbers[1:]
    if len(numbers) != problem.n:
        where = numbers[-1][0] if numbers else numbered[-1][0]
        raise InputError(
            f"{len(numbers)} values for a problem of {problem.n} variables", file, where
        )
    observed, sizes = _evidence(problem)
    assignment: dict[str, int] = {}
    for (line, value), (name, var) in zip(numbers, problem.variables.items(), strict=True):
        if name in observed:
            size = int(sizes.get(name, observed[name] + 1))
            if value != observed[name]:
                raise InputError(
                    f"variable {name!r} is observed with value {observed[name]}, the solution "
                    f"gives {value}" + ("" if value < size else f" (its domain is 0..{size - 1})"),
                    file,
                    line,
                )
            value = 0
        elif not 0 <= value < var.size:
            raise InputError(
                f"value index {value} of {name!r} is not in 0..{var.size - 1}", file, line
            )
        assignment[name] = value
    return assignment


def _number(value: float) -> str:
    """Shortest text that reads back to the same float."""
    if value == -math.inf:
        return "-inf"
    return repr(float(value))
