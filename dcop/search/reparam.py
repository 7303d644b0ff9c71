"""An exact reparameterisation before the mini-bucket pass: min-sum diffusion (cost shifting
between each variable and its tables), the costs of every assignment unchanged.

Each sweep visits every variable ``v``: each table ``f`` of ``v`` gives up its min-marginal
``m_f(x_v)`` (the least cost of ``f`` per value of ``v``), which joins ``v``'s unary costs; the
sum is then spread in equal shares over ``v``'s unary table and its tables. A shift moves a
finite vector from one table to another (``f(x) - m_f(x_v)`` in one, ``+ m_f(x_v)`` in the
other): every assignment keeps its cost, and the sum of each table's least cost, a lower bound,
rises towards the bound of the local-polytope LP relaxation (Schlesinger's diffusion; daoopt
runs MPLP, a relative, before its mini-buckets). The mini-bucket heuristic built on the shifted
tables is the tighter for it: on the Promedas networks, whose mini-buckets split chains of
deterministic gates, the root bound climbs well above the plain pass's.

A variable whose min-marginal is infinite for some value (a hard zero arc consistency did not
remove) is skipped: its shifts would be ``inf - inf``. The sweeps are compiled with the search's
loops (:mod:`dcop.search.jit`), over flat copies of the tables.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from dcop.model import CostTable, Problem
from dcop.search.jit import jit

#: Sweeps at most, and the least gain of the bound (relative to its size) over PATIENCE sweeps
#: that goes on (the first sweeps often gain little: the shifts travel a chain a link a sweep).
SWEEPS = 2000
MIN_GAIN = 1e-4
PATIENCE = 20
#: Sweeps run between two looks at the clock.
CHUNK = 10


@jit
def _sweeps(
    count: int, dom: np.ndarray, tab: np.ndarray, t_off: np.ndarray, t_sc: np.ndarray,
    sc_stride: np.ndarray, inc_off: np.ndarray, inc_tab: np.ndarray, inc_axis: np.ndarray,
    unary: np.ndarray, u_off: np.ndarray, width: int,
) -> float:  # fmt: skip
    """``count`` sweeps over the variables in order; the bound after them (without the
    constant): every table's least cost plus every unary's."""
    n = len(dom)
    most = 1
    for v in range(n):
        most = max(most, inc_off[v + 1] - inc_off[v])
    marg = np.empty((most, width))
    total = np.empty(width)
    for _ in range(count):
        for v in range(n):
            k = inc_off[v + 1] - inc_off[v]
            if k == 0:
                continue
            d = dom[v]
            for y in range(d):
                total[y] = unary[u_off[v] + y]
            for j in range(k):
                t = inc_tab[inc_off[v] + j]
                stride = sc_stride[t_sc[t] + inc_axis[inc_off[v] + j]]
                for y in range(d):
                    marg[j, y] = np.inf
                for e in range(t_off[t + 1] - t_off[t]):
                    y = (e // stride) % d
                    c = tab[t_off[t] + e]
                    if c < marg[j, y]:
                        marg[j, y] = c
                for y in range(d):
                    total[y] += marg[j, y]
            finite = True
            for y in range(d):
                if not np.isfinite(total[y]):
                    finite = False
            if not finite:
                continue
            for y in range(d):
                total[y] /= k + 1
                unary[u_off[v] + y] = total[y]
            for j in range(k):
                t = inc_tab[inc_off[v] + j]
                stride = sc_stride[t_sc[t] + inc_axis[inc_off[v] + j]]
                for e in range(t_off[t + 1] - t_off[t]):
                    y = (e // stride) % d
                    tab[t_off[t] + e] += total[y] - marg[j, y]
    bound = 0.0
    for t in range(len(t_off) - 1):
        low = np.inf
        for e in range(t_off[t], t_off[t + 1]):
            low = min(low, tab[e])
        bound += low
    for v in range(n):
        low = np.inf
        for y in range(dom[v]):
            low = min(low, unary[u_off[v] + y])
        bound += low
    return bound


def diffuse(
    problem: Problem, deadline: float | None = None, sweeps: int = SWEEPS
) -> tuple[Problem, float]:
    """The problem with its tables shifted (same variables, the same cost for every assignment,
    one unary table per variable that has tables) and its proved bound (the constant plus every
    table's least cost). Stops after ``sweeps``, when PATIENCE sweeps gain less than MIN_GAIN,
    or at ``deadline`` (:func:`time.monotonic`)."""
    names = list(problem.variables)
    index = {v: i for i, v in enumerate(names)}
    dom = np.array([problem.variables[v].size for v in names], dtype=np.int64)
    u_off = np.concatenate(([0], np.cumsum(dom))).astype(np.int64)
    unary = np.zeros(int(u_off[-1]))
    constant = float(problem.constant)
    scopes: list[tuple[int, ...]] = []
    flats: list[np.ndarray] = []
    for table in problem.tables:
        scope = tuple(index[v] for v in table.scope)
        costs = np.array(table.costs, dtype=np.float64)
        if len(scope) == 0:
            constant += float(costs)
        elif len(scope) == 1:
            unary[u_off[scope[0]] : u_off[scope[0] + 1]] += costs
        else:
            scopes.append(scope)
            flats.append(costs.ravel())
    t_off = np.concatenate(([0], np.cumsum([len(f) for f in flats]))).astype(np.int64)
    t_sc = np.concatenate(([0], np.cumsum([len(s) for s in scopes]))).astype(np.int64)
    strides: list[int] = []
    incidence: list[list[tuple[int, int]]] = [[] for _ in names]
    for t, scope in enumerate(scopes):
        shape = [int(dom[u]) for u in scope]
        for axis, v in enumerate(scope):
            strides.append(math.prod(shape[axis + 1 :]))
            incidence[v].append((t, axis))
    inc_off = np.concatenate(([0], np.cumsum([len(i) for i in incidence]))).astype(np.int64)
    inc_tab = np.array([t for i in incidence for t, _ in i], dtype=np.int64)
    inc_axis = np.array([a for i in incidence for _, a in i], dtype=np.int64)
    tab = np.concatenate(flats) if flats else np.zeros(0)
    sc_stride = np.array(strides, dtype=np.int64)
    width = int(dom.max()) if len(dom) else 1
    arrays = (dom, tab, t_off, t_sc, sc_stride, inc_off, inc_tab, inc_axis, unary, u_off, width)
    history = [constant + _sweeps(0, *arrays)]
    done = 0
    while done < sweeps:
        if deadline is not None and time.monotonic() >= deadline:
            break
        step = min(CHUNK, sweeps - done)
        now = constant + _sweeps(step, *arrays)
        done += step
        if not math.isfinite(now):
            break
        history.append(now)
        back = max(1, PATIENCE // CHUNK)
        if len(history) > back and now - history[-1 - back] <= MIN_GAIN * max(1.0, abs(now)):
            break
    out = [
        CostTable(
            tuple(names[u] for u in scope),
            tab[t_off[t] : t_off[t + 1]].reshape([int(dom[u]) for u in scope]).copy(),
            f"r{t}",
        )
        for t, scope in enumerate(scopes)
    ]
    out += [
        CostTable((names[v],), unary[u_off[v] : u_off[v + 1]].copy(), f"u{v}")
        for v in range(len(names))
        if inc_off[v + 1] > inc_off[v] or unary[u_off[v] : u_off[v + 1]].any()
    ]
    shifted = dataclasses.replace(
        problem,
        variables=dict(problem.variables),
        tables=out,
        constant=constant,
        meta=dict(problem.meta),
    )
    finite = [h for h in history if math.isfinite(h)]
    return shifted, max(finite) if finite else history[0]
