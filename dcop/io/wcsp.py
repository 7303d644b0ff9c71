"""toulbar2's native ``.wcsp`` format (read and write).

Layout (whitespace-separated tokens; a record may span lines, as in toulbar2)::

    name n_vars max_domain n_functions top
    d_0 d_1 ... d_{n-1}
    arity v_1 .. v_k default n_tuples      # one cost function
    a_1 .. a_k cost                        # n_tuples times; value indices from 0

Supported:

* default costs and tuple lists; unlisted tuples cost ``default``. A function whose dense table
  would be much larger than its tuple list stays sparse (:class:`dcop.model.CostTable`), so a
  tiny file declaring a huge default-cost function allocates nothing large; the listed tuples
  still count against the reader's budget;
* ``top`` (the upper bound): every cost ``>= top`` is infeasible and becomes ``+inf`` in the
  table; ``Problem.upper_bound = top`` (an assignment whose total reaches ``top`` is infeasible);
* arity 0 = a constant added to every assignment (``Problem.constant``);
* shared tables: a NEGATIVE arity defines shared table k = 1, 2, ... (in order of appearance) and
  applies it to its own scope as usual; a later function with a NEGATIVE tuple count ``-k``
  reuses shared table k, including its default; the default written on the reusing line is
  ignored (that is what toulbar2 does: queens4-bis.wcsp, oconnell_bayesnet.wcsp);
* integer or decimal costs (read as float64; integer optima stay exact below 2**53);
* a problem name ending in ``#scale=S#shift=H`` (what our writer records, see below): costs are
  divided by ``S`` and ``H / S`` is subtracted from the constant and the upper bound, which
  gives back the problem that was written.

Refused with a clear error: global cost functions / cost functions in intension (default cost
``-1`` followed by a keyword such as ``salldiff`` or ``>=``), negative domain sizes (interval
variables), anything after the declared number of functions, and declared sizes above the limits
of :mod:`dcop.io._common`. Variables are named ``x0 .. x{n-1}`` and their labels are the value
indices.

The writer makes a file that toulbar2 reads to the same optimum. toulbar2 reads costs as
integers (``long long``; a decimal point ends the number, so ``1.5`` derails the rest of the
file: "EOF reached ...") and wants every cost >= 0 (it misreads negative ones). So:

* every cost is written as an integer: costs are multiplied by the smallest power of ten
  ``S = 10**p`` that makes all of them integers exactly (``S = 1`` for integer costs); when
  that needs more than ``MAX_EXACT_DECIMALS`` decimals, ``write_wcsp`` refuses with a
  ModelError unless a ``precision`` is given, which then caps ``p`` and rounds the scaled costs
  (each cost moves by at most ``0.5 / S``);
* a function with a negative cost is shifted so that its smallest finite cost is 0, and a
  negative constant is dropped; the total ``H`` of these shifts (in file units) is recorded;
* ``S`` and ``H`` go into the problem name (toulbar2 reads it as one word and ignores it):
  ``title#scale=S#shift=H``, written only when ``S != 1`` or ``H != 0``. Any file total ``T``
  (toulbar2's optimum included) maps back to ``(T - H) / S`` in the problem's own costs.

Otherwise it emits one function per table (default = the most frequent cost, or a sparse table's
own default, the other entries listed), a positive constant as an arity-0 function, ``+inf`` as
``top``. ``top`` is one more than the largest possible finite total, or the Problem's upper bound
(scaled and shifted) when that is smaller; totals must stay below 2**53. Variable names, labels
and the maximisation sign are not stored by the format.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from dcop.errors import InputError, ModelError
from dcop.io._common import (
    MAX_DOMAIN,
    MAX_FUNCTIONS,
    MAX_TEXT_BYTES,
    MAX_VARIABLES,
    Listing,
    SizeBudget,
    Tokens,
    build_problem,
    format_cost,
    listed_table,
    listings,
    sized_variables,
    table_entries,
)
from dcop.model import CostTable, FloatArray, Problem


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
    m_line = tk.line
    m = tk.integer("number of cost functions", 0, MAX_FUNCTIONS)
    budget = SizeBudget(file)
    budget.declare(n, m, m_line)
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
    variables = sized_variables(file, names, sizes)

    shared: list[CostTable] = []
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
        scope_names = tuple(names[v] for v in scope)
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
            budget.claim_stored(source, head, f"cost function {f}")
            table = source.on_scope(scope_names, name=f"f{f}")  # immutable: arrays are shared
        else:
            entries = table_entries(shape)
            if count > entries:
                raise tk.error(
                    f"cost function {f} lists {count} tuples but its table has only {entries} "
                    "entries",
                    count_pos,
                )
            rows = tk.numbers(count * (k + 1), f"tuples of cost function {f}").reshape(count, k + 1)
            index = rows[:, :k]
            if count and k:
                bad = (index != np.floor(index)) | (index < 0) | (index >= np.array(shape))
                if bad.any():
                    r, c = (int(x) for x in np.argwhere(bad)[0])
                    raise tk.error(
                        f"cost function {f}: value index {format_cost(float(index[r, c]))} is not "
                        f"in the domain 0..{shape[c] - 1} of variable {scope[c]}",
                        tk.last_lines[r * (k + 1) + c],
                    )
            if np.isneginf(default) or np.isneginf(rows[:, k]).any():
                raise tk.error(f"cost function {f} holds a cost of -inf", head)
            table = listed_table(
                scope_names,
                shape,
                default,
                index.astype(np.int64),
                rows[:, k].copy(),
                f"f{f}",
                budget,
                head,
            )
            table = table.map_costs(lambda c: np.where(c >= top, np.inf, c))
        if arity < 0:
            shared.append(table)
        if k == 0:
            constant += table.cost_of({})  # a constant: its (last) listed cost, or the default
            continue
        tables.append(table)
    if not tk.at_end():
        raise tk.error(f"unexpected token {tk.peek()!r} after the {m} declared cost functions")
    if constant >= top:
        constant = math.inf
    meta: dict[str, object] = {"format": "wcsp", "file": file}
    upper_bound = top
    title, scale, shift = split_title(name)
    if scale != 1 or shift != 0:
        # written by write_wcsp: file costs = scale * cost, totals shifted up by ``shift``
        tables = [t.map_costs(lambda c: c / scale) for t in tables]
        constant = (constant - shift) / scale
        upper_bound = (top - shift) / scale
        name = title
        meta.update(wcsp_scale=scale, wcsp_shift=shift)
    return build_problem(
        file,
        variables,
        tables,
        name=name,
        constant=constant,
        upper_bound=upper_bound,
        meta=meta,
    )


_MARK = re.compile(
    r"^(?P<title>.*)#scale=(?P<scale>[1-9][0-9]{0,17})#shift=(?P<shift>[0-9]{1,18})$"
)

#: Most decimals the writer tries when looking for a scale that keeps every cost exact.
MAX_EXACT_DECIMALS = 9
#: Most decimals a precision may ask for (float64 holds 15 to 17 significant digits).
MAX_PRECISION = 15
#: Largest total a written file may reach: integers stay exact in float64 below it, and it is
#: far below toulbar2's own limit (MAX_COST = 2**63 / 18 with long long costs).
MAX_FILE_COST = 2**53


def split_title(token: str) -> tuple[str, int, int]:
    """``(title, scale, shift)`` of a problem-name token; scale 1 and shift 0 when unmarked."""
    match = _MARK.match(token)
    if match is None:
        return token, 1, 0
    return match["title"], int(match["scale"]), int(match["shift"])


def join_title(title: str, scale: int, shift: int) -> str:
    """The problem-name token recording ``scale`` and ``shift`` (see the module docstring)."""
    title = "_".join(title.split()) or "problem"
    if scale == 1 and shift == 0:
        return title
    return f"{title}#scale={scale}#shift={shift}"


def choose_scale(values: FloatArray, precision: int | None, what: str) -> int:
    """The smallest power of ten that makes every finite cost in ``values`` an integer exactly,
    trying up to ``precision`` decimals (``MAX_EXACT_DECIMALS`` when None). With a precision,
    costs that need more decimals are rounded to it; without one they are refused."""
    if np.isneginf(values).any():
        raise ModelError(f"{what}: a cost of -inf cannot be written to a .wcsp file")
    finite = values[np.isfinite(values)]
    if finite.size and float(np.abs(finite).max()) >= MAX_FILE_COST:
        raise ModelError(
            f"{what}: costs up to {float(np.abs(finite).max()):.3g} cannot be written exactly "
            "to a .wcsp file (limit 2**53)"
        )
    most = MAX_EXACT_DECIMALS if precision is None else precision
    if not 0 <= most <= MAX_PRECISION:
        raise ModelError(f"precision must be 0..{MAX_PRECISION} decimals, not {precision}")
    for p in range(most + 1):
        scale = int(10**p)
        scaled = np.round(finite * scale)
        if np.all(np.abs(scaled) < MAX_FILE_COST) and np.array_equal(scaled / scale, finite):
            return scale
    if precision is not None:
        return int(10**precision)
    inexact = finite[np.round(finite * 10**most) / 10**most != finite]
    example = repr(float(inexact[0])) if inexact.size else "a cost"
    raise ModelError(
        f"{what}: costs such as {example} cannot be written exactly with at most {most} "
        "decimals, and toulbar2 reads integer costs only; pass a precision (the decimals to "
        "keep: costs are scaled by 10**precision and rounded, the file records the scale)"
    )


def write_wcsp(problem: Problem, path: str | Path, precision: int | None = None) -> None:
    """Write a Problem as ``.wcsp`` (variables in ``problem.variables`` order) that toulbar2 reads
    with the same optimum: integer costs, each function shifted to a minimum of 0 when it has
    negative costs, non-integer costs scaled by a power of ten; ``precision`` is the number of
    decimals kept when costs need more (default: refuse them). See the module docstring."""
    names = list(problem.variables)
    position = {name: i for i, name in enumerate(names)}
    tables = listings(problem)
    constant = problem.constant + sum(t.default for t in tables if not t.scope)
    tables = [t for t in tables if t.scope]
    pieces = [np.array([constant])]
    pieces += [np.append(t.values, t.default) for t in tables]
    scale = choose_scale(np.concatenate(pieces), precision, problem.name or "problem")

    # integer file costs; each function with a negative cost is shifted up to a minimum of 0
    shift = 0
    written: list[tuple[Listing, float, FloatArray]] = []
    worst = 0.0  # the largest finite total of the file's functions
    for t in tables:
        default = _scaled(t.default, scale)
        values = np.round(t.values * scale)
        finite = np.concatenate([values[np.isfinite(values)], [default]])
        finite = finite[np.isfinite(finite)]
        low = float(finite.min()) if finite.size else 0.0
        if low < 0:
            shift += int(-low)
            default, values = default - low, values - low
        worst += float(finite.max()) - min(low, 0.0) if finite.size else 0.0
        written.append((t, default, values))
    head_cost = _scaled(constant, scale)
    if math.isfinite(head_cost) and head_cost < 0:
        shift += int(-head_cost)
        head_cost = 0.0
    if math.isfinite(head_cost):
        worst += head_cost
    top = float(math.floor(worst) + 1)
    bound = math.inf if problem.upper_bound is None else problem.upper_bound * scale + shift
    if math.isfinite(bound):
        top = min(top, float(math.ceil(bound)))
    if top < 1:  # every total reaches the bound: all infeasible, which top 1 cannot say alone
        top, head_cost = 1.0, math.inf
    if not top < MAX_FILE_COST:
        raise ModelError(
            f"{problem.name or 'problem'}: costs scaled by {scale} reach {top:.3g}, which cannot "
            f"be written exactly (limit 2**53); choose a smaller precision"
        )
    top_text = format_cost(top)

    def cost_text(c: float) -> str:
        return top_text if c >= top else format_cost(c)

    blocks: list[str] = []
    if head_cost != 0:
        blocks.append(f"0 {cost_text(head_cost)} 0")
    for t, default, values in written:
        head = " ".join([str(len(t.scope)), *(str(position[v]) for v in t.scope)])
        lines = [f"{head} {cost_text(default)} {len(values)}"]
        if len(values):
            texts = {float(c): cost_text(float(c)) for c in np.unique(values)}
            index_text = np.asarray(t.index).astype(str)
            lines.extend(
                " ".join((*row, texts[float(c)])) for row, c in zip(index_text, values, strict=True)
            )
        blocks.append("\n".join(lines))
    sizes = [problem.variables[name].size for name in names]
    title = join_title(problem.name, scale, shift)
    header = f"{title} {len(names)} {max(sizes, default=0)} {len(blocks)} {top_text}"
    body = "\n".join([header, " ".join(map(str, sizes)), *blocks])
    Path(path).write_text(body + "\n", encoding="utf-8")


def _scaled(cost: float, scale: int) -> float:
    return float(np.round(cost * scale)) if math.isfinite(cost) else cost
