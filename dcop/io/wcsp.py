"""toulbar2's native ``.wcsp`` format (read and write).

Layout (whitespace-separated tokens; a record may span lines, as in toulbar2)::

    name n_vars max_domain n_functions top
    d_0 d_1 ... d_{n-1}
    arity v_1 .. v_k default n_tuples      # one cost function
    a_1 .. a_k cost                        # n_tuples times; value indices from 0

Supported:

* default costs and tuple lists; unlisted tuples cost ``default``;
* ``top`` (the upper bound): every cost ``>= top`` is infeasible and becomes ``+inf`` in the
  table; ``Problem.upper_bound = top`` (an assignment whose total reaches ``top`` is infeasible);
* arity 0 = a constant added to every assignment (``Problem.constant``);
* shared tables: a NEGATIVE arity defines shared table k = 1, 2, ... (in order of appearance) and
  applies it to its own scope as usual; a later function with a NEGATIVE tuple count ``-k``
  reuses shared table k, including its default; the default written on the reusing line is
  ignored (that is what toulbar2 does: queens4-bis.wcsp, oconnell_bayesnet.wcsp);
* integer or decimal costs (read as float64; integer optima stay exact below 2**53).

Refused with a clear error: global cost functions / cost functions in intension (default cost
``-1`` followed by a keyword such as ``salldiff`` or ``>=``), negative domain sizes (interval
variables), anything after the declared number of functions, and declared sizes above the limits
of :mod:`dcop.io._common`. Variables are named ``x0 .. x{n-1}`` and their labels are the value
indices.

The writer emits one function per table (default = the most frequent cost, the other entries
listed), the constant as an arity-0 function, ``+inf`` as ``top``. Without an upper bound in the
Problem, ``top`` is one more than the largest possible finite total, so no feasible assignment
changes status. Variable names and labels are not stored by the format.
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
    format_cost,
    most_common,
)
from dcop.model import CostTable, FloatArray, Problem, Variable


def _is_number(tok: str | None) -> bool:
    if tok is None:
        return False
    try:
        float(tok)
    except ValueError:
        return False
    return True


def read_wcsp(path: str | Path) -> Problem:
    """Read a toulbar2 ``.wcsp`` file into a Problem (see the module docstring)."""
    path = Path(path)
    with Tokens(path, MAX_TEXT_BYTES) as tk:
        return _read(tk, str(path))


def _read(tk: Tokens, file: str) -> Problem:
    if tk.at_end():
        raise InputError("empty file", file, 1)
    name = tk.word("problem name")
    n = tk.integer("number of variables", 0, MAX_VARIABLES)
    tk.integer("maximum domain size")
    m = tk.integer("number of cost functions", 0, MAX_FUNCTIONS)
    top_line = tk.line
    top = tk.number("upper bound (top)")
    if top <= 0:
        raise tk.error(f"upper bound (top) must be positive, got {format_cost(top)}", top_line)
    tk.need(n, "domain sizes")
    sizes: list[int] = []
    for i in range(n):
        pos = tk.line
        d = tk.integer(f"domain size of variable {i}")
        if d < 0:
            raise tk.error(
                f"variable {i} has a negative domain size {d} (interval variables are not "
                "supported)",
                pos,
            )
        if d == 0:
            raise tk.error(f"variable {i} has an empty domain", pos)
        if d > MAX_DOMAIN:
            raise tk.error(f"domain size {d} of variable {i} exceeds the limit {MAX_DOMAIN}", pos)
        sizes.append(d)
    names = [f"x{i}" for i in range(n)]
    variables = [Variable.with_size(names[i], sizes[i]) for i in range(n)]

    budget = SizeBudget(file)
    shared: list[FloatArray] = []
    tables: list[CostTable] = []
    constant = 0.0
    for f in range(m):
        if tk.at_end():
            raise tk.error(f"unexpected end of file: {m} cost functions declared, {f} found")
        head = tk.line
        arity = tk.integer(f"arity of cost function {f}", -n, n)
        k = abs(arity)
        scope: list[int] = []
        for _ in range(k):
            pos = tk.line
            v = tk.integer(f"variable index in the scope of cost function {f}", 0, n - 1)
            if v in scope:
                raise tk.error(f"variable {v} appears twice in the scope of cost function {f}", pos)
            scope.append(v)
        default_pos = tk.line
        default_tok = tk.word(f"default cost of cost function {f}")
        after = tk.peek()
        if not _is_number(default_tok):
            raise tk.error(
                f"expected the default cost of cost function {f} (a number), got "
                f"{default_tok[:40]!r}",
                default_pos,
            )
        if float(default_tok) == -1 and after is not None and not _is_number(after):
            raise tk.error(
                f"cost function {f}: global cost functions / cost functions in intension "
                f"(keyword {after[:40]!r}) are not supported",
                default_pos,
            )
        default = float(default_tok)
        if math.isnan(default):
            raise tk.error(f"default cost of cost function {f} is NaN", default_pos)
        shape = tuple(sizes[v] for v in scope)
        count_pos = tk.line
        count = tk.integer(f"number of tuples of cost function {f}")
        if count < 0:
            ref = -count
            if ref > len(shared):
                raise tk.error(
                    f"cost function {f} reuses shared table {ref}, but only {len(shared)} "
                    "shared tables are defined so far",
                    count_pos,
                )
            source = shared[ref - 1]
            if source.shape != shape:
                raise tk.error(
                    f"cost function {f} reuses shared table {ref} of shape {source.shape} on a "
                    f"scope whose domains give {shape}",
                    count_pos,
                )
            budget.claim(shape, head, f"cost function {f}")
            costs = source.copy()
        else:
            entries = budget.claim(shape, head, f"cost function {f}")
            if count > entries:
                raise tk.error(
                    f"cost function {f} lists {count} tuples but its table has only {entries} "
                    "entries",
                    count_pos,
                )
            rows = tk.numbers(count * (k + 1), f"tuples of cost function {f}").reshape(count, k + 1)
            costs = np.full(shape, default, dtype=np.float64)
            if count:
                index = rows[:, :k]
                bad = (index != np.floor(index)) | (index < 0) | (index >= np.array(shape))
                if bad.any():
                    r, c = (int(x) for x in np.argwhere(bad)[0])
                    raise tk.error(
                        f"cost function {f}: value index {format_cost(float(index[r, c]))} is not "
                        f"in the domain 0..{shape[c] - 1} of variable {scope[c]}",
                        tk.last_lines[r * (k + 1) + c],
                    )
                if k == 0:
                    costs[()] = rows[-1, 0]  # a constant: its (last) listed cost
                else:
                    costs[tuple(index.astype(np.int64).T)] = rows[:, k]
        if np.isneginf(costs).any() or np.isneginf(default):
            raise tk.error(f"cost function {f} holds a cost of -inf", head)
        costs[costs >= top] = np.inf
        if arity < 0:
            shared.append(costs.copy())
        if k == 0:
            constant += float(costs[()])
            continue
        tables.append(CostTable(tuple(names[v] for v in scope), costs, name=f"f{f}"))
    if not tk.at_end():
        raise tk.error(f"unexpected token {tk.peek()!r} after the {m} declared cost functions")
    if constant >= top:
        constant = math.inf
    return build_problem(
        file,
        variables,
        tables,
        name=name,
        constant=constant,
        upper_bound=top,
        meta={"format": "wcsp", "file": file},
    )


def _top_for(problem: Problem, tables: list[tuple[tuple[str, ...], FloatArray, str]]) -> float:
    if problem.upper_bound is not None:
        return float(problem.upper_bound)
    total = max(0.0, problem.constant) if math.isfinite(problem.constant) else 0.0
    for _, costs, _ in tables:
        finite = costs[np.isfinite(costs)]
        if finite.size:
            total += max(0.0, float(finite.max()))
    return float(math.floor(total) + 1)


def write_wcsp(problem: Problem, path: str | Path) -> None:
    """Write a Problem as ``.wcsp`` (variables in ``problem.variables`` order)."""
    names = list(problem.variables)
    index = {name: i for i, name in enumerate(names)}
    tables = effective_tables(problem)
    top = _top_for(problem, tables)
    top_text = format_cost(top)

    def cost_text(c: float) -> str:
        return top_text if c >= top else format_cost(c)

    blocks: list[str] = []
    if problem.constant != 0:
        blocks.append(f"0 {cost_text(problem.constant)} 0")
    for scope, costs, _ in tables:
        if not scope:
            blocks.append(f"0 {cost_text(float(costs[()]))} 0")
            continue
        default = most_common(costs)
        listed = np.argwhere(costs != default)
        head = " ".join([str(len(scope)), *(str(index[v]) for v in scope)])
        lines = [f"{head} {cost_text(default)} {len(listed)}"]
        if len(listed):
            values = costs[tuple(listed.T)]
            texts = {float(c): cost_text(float(c)) for c in np.unique(values)}
            index_text = listed.astype(str)
            lines.extend(
                " ".join((*row, texts[float(c)])) for row, c in zip(index_text, values, strict=True)
            )
        blocks.append("\n".join(lines))
    title = "_".join(problem.name.split()) or "problem"
    sizes = [problem.variables[name].size for name in names]
    header = f"{title} {len(names)} {max(sizes, default=0)} {len(blocks)} {top_text}"
    body = "\n".join([header, " ".join(map(str, sizes)), *blocks])
    Path(path).write_text(body + "\n", encoding="utf-8")
