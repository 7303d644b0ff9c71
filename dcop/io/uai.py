"""UAI ``.uai`` graphical models (MARKOV and BAYES), optional ``.evid`` evidence; read and write.

Layout (whitespace-separated tokens)::

    MARKOV | BAYES
    n_vars
    d_0 .. d_{n-1}
    n_functions
    k v_1 .. v_k          # one scope per function (BAYES: the child last)
    n_entries p_1 .. p_n  # one table per function, last scope variable fastest

Conventions:

* costs are ``-ln p`` (natural logarithm, base e): ``Problem.cost_kind = "neg_ln"``; a
  probability of 0 becomes ``+inf``; ``log10 p = -cost / ln 10``. Entries are taken exactly as
  written: no renormalisation of BAYES rows and no per-table shift (toulbar2 does both; we do
  not), so ``exp(-cost)`` of an assignment is the product of the original entries.
* negative or NaN entries are refused; entries above 1 are allowed (MARKOV potentials).
* a scope of arity 0 (one entry) is a constant factor, kept in ``Problem.constant``.
* variables are named ``x0 .. x{n-1}``, labels are the value indices.

Evidence (``evidence=path.evid``): both layouts are read, the UAI-2014 one (``m v_1 e_1 .. v_m
e_m``) and the older one with a leading sample count (``1 m v_1 e_1 ..``; only one sample).
Evidence is applied by conditioning: an observed variable stays in the Problem with a one-value
domain whose only label is the observed value's index in the file, and every table is sliced at
that value along its axis (keeping the axis, of size 1). Scopes therefore do not change,
``Problem.evaluate`` with index 0 for observed variables gives ``-ln`` of the product of the
original entries with the evidence plugged in, and ``Problem.labels`` reports the file's value
indices (observed variables included). The evidence is also in ``Problem.meta["evidence"]``
(name -> value index in the file) and the observed variables' domain sizes in the file in
``Problem.meta["evidence_sizes"]`` (:mod:`dcop.io.solution` writes results with both).

The writer emits MARKOV (``BAYES`` only when the Problem was read from a BAYES file and carries no
evidence), entries ``exp(-cost)`` with ``repr`` precision; a non-zero constant becomes an arity-0
function. Costs at or above ``upper_bound`` are written as 0.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from dcop.errors import InputError
from dcop.io._common import (
    MAX_DOMAIN,
    MAX_FUNCTIONS,
    MAX_TEXT_BYTES,
    MAX_VARIABLES,
    SizeBudget,
    Tokens,
    build_problem,
    effective_tables,
    sized_variables,
)
from dcop.model import CostTable, Problem, Variable

#: Largest evidence file (it is read twice: once to count its tokens).
MAX_EVIDENCE_BYTES = 1 << 24


def read_uai(path: str | Path, evidence: str | Path | None = None) -> Problem:
    """Read a UAI MARKOV/BAYES file (and optionally an ``.evid`` file) as an MPE Problem."""
    path = Path(path)
    with Tokens(path, MAX_TEXT_BYTES) as tk:
        kind, variables, tables, constant = _read(tk, str(path))
    file = str(path)
    meta: dict[str, object] = {"format": "uai", "file": file, "uai_network": kind}
    if evidence is not None:
        names = [v.name for v in variables]
        observed = read_evidence(evidence, [v.size for v in variables])
        meta["evidence"] = {names[v]: e for v, e in observed.items()}
        meta["evidence_sizes"] = {names[v]: variables[v].size for v in observed}
        variables, tables = condition(variables, tables, {names[v]: e for v, e in observed.items()})
        meta["evidence_file"] = str(evidence)
    return build_problem(
        file,
        variables,
        tables,
        name=path.stem,
        constant=constant,
        cost_kind="neg_ln",
        meta=meta,
    )


def _read(tk: Tokens, file: str) -> tuple[str, list[Variable], list[CostTable], float]:
    if tk.at_end():
        raise InputError("empty file", file, 1)
    kind_line = tk.line
    word = tk.word("network type")
    kind = word.upper()
    if kind not in ("MARKOV", "BAYES"):
        raise tk.error(f"expected MARKOV or BAYES, got {word[:40]!r}", kind_line)
    n_line = tk.line
    n = tk.integer("number of variables", 0, MAX_VARIABLES)
    budget = SizeBudget(file)
    budget.declare(n, 0, n_line)
    tk.need(n, "domain sizes")
    sizes: list[int] = []
    for i in range(n):
        sizes.append(tk.integer(f"domain size of variable {i}", 1, MAX_DOMAIN))
    m_line = tk.line
    m = tk.integer("number of functions", 0, MAX_FUNCTIONS)
    budget.declare(n, m, m_line)
    tk.need(m, "function scopes")
    scopes: list[tuple[int, ...]] = []
    heads: list[int] = []
    for f in range(m):
        heads.append(tk.line)
        k = tk.integer(f"arity of function {f}", 0, n)
        scope: list[int] = []
        for _ in range(k):
            pos = tk.line
            v = tk.integer(f"variable index in the scope of function {f}", 0, n - 1)
            if v in scope:
                raise tk.error(f"variable {v} appears twice in the scope of function {f}", pos)
            scope.append(v)
        budget.claim([sizes[v] for v in scope], heads[-1], f"function {f}")
        scopes.append(tuple(scope))
    names = [f"x{i}" for i in range(n)]
    tables: list[CostTable] = []
    constant = 0.0
    with np.errstate(divide="ignore"):
        for f, fscope in enumerate(scopes):
            shape = tuple(sizes[v] for v in fscope)
            expected = math.prod(shape)
            count_pos = tk.line
            count = tk.integer(f"number of entries of function {f}", 0)
            if count != expected:
                raise tk.error(
                    f"function {f} declares {count} entries but its scope gives {expected}",
                    count_pos,
                )
            values = tk.numbers(count, f"table of function {f}")
            wrong = (values < 0) | ~np.isfinite(values)
            if wrong.any():
                bad = int(np.flatnonzero(wrong)[0])
                raise tk.error(
                    f"function {f}: entry {str(values[bad])!r} is not a finite non-negative number",
                    tk.last_lines[bad],
                )
            costs = -np.log(values).reshape(shape)
            if not fscope:
                constant += float(costs[()])
                continue
            tables.append(CostTable(tuple(names[v] for v in fscope), costs, name=f"f{f}"))
    if not tk.at_end():
        raise tk.error(f"unexpected token {tk.peek()!r} after the {m} declared tables")
    variables = sized_variables(file, names, sizes)
    return kind, variables, tables, constant


def read_evidence(path: str | Path, sizes: list[int]) -> dict[int, int]:
    """Observed ``{variable index: value index}`` from a ``.evid`` file."""
    path = Path(path)
    file = str(path)
    with Tokens(path, MAX_EVIDENCE_BYTES) as counter:  # evidence files are small: count first
        total = 0
        while not counter.at_end():
            counter.word("evidence")
            total += 1
    with Tokens(path, MAX_EVIDENCE_BYTES) as tk:
        return _read_evidence(tk, file, total, sizes)


def _read_evidence(tk: Tokens, file: str, total: int, sizes: list[int]) -> dict[int, int]:
    if total == 0:
        raise InputError("empty evidence file", file, 1)
    first = tk.integer("number of observed variables", 0)
    if total == 1 + 2 * first:
        pass  # UAI-2014: m v1 e1 ... vm em
    elif first == 1 and total >= 2:
        # the older layout: a sample count (1), then m and the pairs of that sample
        count = tk.integer("number of observed variables", 0)
        if total != 2 + 2 * count:
            raise tk.error(
                f"evidence declares {count} observed variables but holds {(total - 2) / 2:g} pairs"
            )
        first = count
    else:
        raise tk.error(
            f"evidence declares {first} observed variables but holds {(total - 1) / 2:g} pairs"
        )
    observed: dict[int, int] = {}
    for _ in range(first):
        pos = tk.line
        v = tk.integer("observed variable index", 0, len(sizes) - 1)
        e = tk.integer(f"observed value of variable {v}", 0, sizes[v] - 1)
        if v in observed and observed[v] != e:
            raise tk.error(f"variable {v} is observed twice with different values", pos)
        observed[v] = e
    return observed


def condition(
    variables: list[Variable], tables: list[CostTable], observed: dict[str, int]
) -> tuple[list[Variable], list[CostTable]]:
    """Fix observed variables: a one-value domain whose label is the observed value's index in
    the file (so results name the file's own value), tables restricted with their axes kept."""
    new_vars = [
        Variable(v.name, (int(observed[v.name]),), v.agent) if v.name in observed else v
        for v in variables
    ]
    new_tables = [
        table.restrict(observed, keep_axes=True)
        if any(name in observed for name in table.scope)
        else table
        for table in tables
    ]
    return new_vars, new_tables


def write_uai(problem: Problem, path: str | Path) -> None:
    """Write a Problem as a UAI file with entries ``exp(-cost)`` (see the module docstring)."""
    names = list(problem.variables)
    index = {name: i for i, name in enumerate(names)}
    tables = effective_tables(problem)
    kind = problem.meta.get("uai_network", "MARKOV")
    if kind != "BAYES" or "evidence" in problem.meta:
        kind = "MARKOV"
    functions = [(scope, costs) for scope, costs, _ in tables]
    if problem.constant != 0:
        functions.insert(0, ((), np.asarray(problem.constant, dtype=np.float64)))
    lines = [str(kind), str(len(names))]
    lines.append(" ".join(str(problem.variables[name].size) for name in names))
    lines.append(str(len(functions)))
    for scope, _ in functions:
        lines.append(" ".join([str(len(scope)), *(str(index[v]) for v in scope)]))
    with np.errstate(over="ignore"):
        for _, costs in functions:
            probs = np.exp(-costs).ravel()
            lines.append("")
            lines.append(str(probs.size))
            lines.append(" ".join(repr(float(p)) for p in probs))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
