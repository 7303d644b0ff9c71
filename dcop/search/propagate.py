"""Soft arc consistency (AC*) kept incrementally along a depth-first search, compiled.

The costs live as integers (:func:`build`): each table less its least cost, times a power of
two ``scale``, rounded down, so that every projection and its undo are exact (toulbar2 works in
integers the same way). Rounding down only lowers costs: a bound of the integer problem, over
``scale``, plus the tables' least costs (``base``), is a bound of the real one. An entry of at
least TOP is infinite (a hard zero); finite costs stay far below it (``scale`` is chosen so).

The state (:class:`Live`) holds the working tables and unary costs, each value's liveness, the
lower bound ``c0`` and a trail of what changed. The consistency (:func:`propagate`):

* **projection** of a table onto each of its variables: a value's least cost over the table's
  live tuples moves into the value's unary cost (a value without a finite tuple is removed: arc
  consistency on the hard zeros);
* **node consistency (NC*)**: a variable's least unary cost moves into ``c0``, and a value whose
  unary cost plus ``c0`` reaches the pruning threshold ``top`` (the incumbent's) is removed.

AC* alone leaves costs where no projection gathers them; :func:`diffuse_around` adds integer
min-sum diffusion around a node's changes: each variable's tables projected onto it, its unary
costs shared back out equally (extensions: a projection of a negative amount), its least into
``c0``.

Every change is a row of the trail: a removal, a projection or extension (table, axis, value,
amount) or a unary shift; :func:`undo` replays them backwards to a mark. A table's projection and its undo
touch the live tuples only; the domains at the undo are those of the projection (last in, first
out), so the undo is the projection's exact inverse.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from dcop.search.jit import jit

#: An integer cost at least this is infinite.
TOP = 1 << 62
#: The integer costs' total stays below this (``scale`` is chosen so): no sum reaches TOP.
ROOM = float(1 << 52)
#: A propagation checks every value against the threshold again once c0 has risen by this
#: share (1/SWEEP_GAP) of its gap to the threshold since the last check.
SWEEP_GAP = 8
#: Trail rows: a removal (var, value), a projection (table, axis, value, amount), a unary shift
#: (var, value, amount added).
OP_REMOVE, OP_PROJ, OP_UNARY = 0, 1, 2
#: Registers of Live.reg: c0, the trail's length, the pruning threshold, the queue's first slot
#: and its length (a ring of one slot per table: a table is queued at most once).
R_C0, R_TRAIL, R_TOP, R_QHEAD, R_QLEN = 0, 1, 2, 3, 4


class Net(NamedTuple):
    """The problem, read only: domains, tables (flat, row-major over their scopes), incidence."""

    dom: np.ndarray  # int32[n]
    u_off: np.ndarray  # int64[n + 1]: each variable's first value in the unary arrays
    t_off: np.ndarray  # int64[T + 1]: each table's first entry
    t_sc: np.ndarray  # int64[T + 1]: each table's scope in sc_var / sc_stride
    sc_var: np.ndarray  # int32[]
    sc_stride: np.ndarray  # int64[]
    inc_off: np.ndarray  # int64[n + 1]: each variable's tables in inc_tab
    inc_tab: np.ndarray  # int32[]
    ftab: np.ndarray  # float64[]: the tables' real costs (a leaf's cost)
    funary: np.ndarray  # float64[]: the unary real costs
    c_off: np.ndarray  # int64[T + 1]: each table's entries' values in coord
    coord: np.ndarray  # int32[]: per entry, each scope variable's value (no divisions in the loops)


class Live(NamedTuple):
    """What the search changes: integer costs, liveness, the trail, the queue, registers."""

    tab: np.ndarray  # int64[]: the tables' working costs
    un: np.ndarray  # int64[]: unary working costs
    alive: np.ndarray  # int8[]: per value
    size: np.ndarray  # int32[n]: live values per variable
    trail: np.ndarray  # int64[cap, 5]
    queue: np.ndarray  # int32[T]: tables to project
    queued: np.ndarray  # int8[T]
    weight: np.ndarray  # int64[T]: failures caused (the variable order's weighted degree)
    mins: np.ndarray  # int64[width]: scratch
    vals: np.ndarray  # int32[width]: scratch (a binary table's other variable's live values)
    reg: np.ndarray  # int64[8]
    region: np.ndarray  # int32[n]: the variables a node's diffusion sweeps
    inreg: np.ndarray  # int8[n]


def build(
    dom: np.ndarray,
    scopes: list[tuple[int, ...]],
    tables: list[np.ndarray],
    unary: np.ndarray,
    u_off: np.ndarray,
    trail_rows: int,
) -> tuple[Net, Live, float, float]:
    """The arrays of a problem of ``len(dom)`` variables, its tables of two or more variables
    (``scopes``, float ``tables`` shaped by the domains) and its flat unary costs; the trail's
    capacity. Returns the net, its state, ``base`` (the least costs' sum) and ``scale``."""
    n = len(dom)
    base = 0.0
    shifted: list[np.ndarray] = []
    biggest = 0.0
    for c in tables:
        finite = c[np.isfinite(c)]
        least = float(finite.min()) if finite.size else 0.0
        base += least
        s = np.where(np.isfinite(c), c - least, np.inf).ravel()
        shifted.append(s)
        if finite.size:
            biggest = max(biggest, float(finite.max() - least))
    us = np.empty_like(unary)
    for v in range(n):
        c = unary[u_off[v] : u_off[v + 1]]
        finite = c[np.isfinite(c)]
        least = float(finite.min()) if finite.size else 0.0
        base += least
        us[u_off[v] : u_off[v + 1]] = np.where(np.isfinite(c), c - least, np.inf)
        if finite.size:
            biggest = max(biggest, float(finite.max() - least))
    total = max(1.0, biggest * (len(tables) + n))
    scale = float(2.0 ** min(40, math.floor(math.log2(ROOM / total))))

    def integer(c: np.ndarray) -> np.ndarray:
        finite = np.isfinite(c)
        out = np.floor(np.where(finite, c, 0.0) * scale).astype(np.int64)
        out[~finite] = TOP
        return out

    t_off = np.concatenate(([0], np.cumsum([len(s) for s in shifted]))).astype(np.int64)
    t_sc = np.concatenate(([0], np.cumsum([len(s) for s in scopes]))).astype(np.int64)
    sc_var = np.array([v for s in scopes for v in s], dtype=np.int32)
    strides = []
    incident: list[list[int]] = [[] for _ in range(n)]
    for t, scope in enumerate(scopes):
        shape = [int(dom[v]) for v in scope]
        for axis, v in enumerate(scope):
            strides.append(math.prod(shape[axis + 1 :]))
            incident[v].append(t)
    inc_off = np.concatenate(([0], np.cumsum([len(i) for i in incident]))).astype(np.int64)
    inc_tab = np.array([t for i in incident for t in i], dtype=np.int32)
    coords = [
        np.stack(np.unravel_index(np.arange(len(sh)), [int(dom[v]) for v in scope]), axis=1)
        .astype(np.int32)
        .ravel()
        for sh, scope in zip(shifted, scopes, strict=True)
    ]
    c_off = np.concatenate(([0], np.cumsum([len(c) for c in coords]))).astype(np.int64)
    coord = np.concatenate(coords) if coords else np.zeros(0, dtype=np.int32)
    flat = np.concatenate(shifted) if shifted else np.zeros(0)
    ftab = np.concatenate([c.ravel() for c in tables]) if tables else np.zeros(0)
    net = Net(
        dom.astype(np.int32), u_off.astype(np.int64), t_off, t_sc, sc_var,
        np.array(strides, dtype=np.int64), inc_off, inc_tab, ftab.astype(np.float64),
        unary.astype(np.float64), c_off, coord.astype(np.int32),
    )  # fmt: skip
    width = int(dom.max()) if n else 1
    live = Live(
        integer(flat), integer(us), np.ones(int(u_off[-1]), dtype=np.int8),
        dom.astype(np.int32).copy(), np.zeros((max(1, trail_rows), 5), dtype=np.int64),
        np.zeros(max(1, len(scopes)), dtype=np.int32), np.zeros(max(1, len(scopes)), np.int8),
        np.ones(max(1, len(scopes)), dtype=np.int64), np.zeros(width, dtype=np.int64),
        np.zeros(width, dtype=np.int32), np.zeros(8, dtype=np.int64), np.zeros(max(1, n), dtype=np.int32),
        np.zeros(max(1, n), dtype=np.int8),
    )  # fmt: skip
    live.reg[R_TOP] = TOP
    return net, live, base, scale


@jit
def _push(s: Live, op: int, a: int, b: int, c: int, d: int) -> bool:
    k = s.reg[R_TRAIL]
    if k >= s.trail.shape[0]:
        return False
    s.trail[k, 0] = op
    s.trail[k, 1] = a
    s.trail[k, 2] = b
    s.trail[k, 3] = c
    s.trail[k, 4] = d
    s.reg[R_TRAIL] = k + 1
    return True


@jit
def _enqueue_tables(m: Net, s: Live, v: int) -> None:
    for k in range(m.inc_off[v], m.inc_off[v + 1]):
        t = m.inc_tab[k]
        if s.queued[t] == 0:
            s.queued[t] = 1
            s.queue[(s.reg[R_QHEAD] + s.reg[R_QLEN]) % len(s.queue)] = t
            s.reg[R_QLEN] += 1


@jit
def remove(m: Net, s: Live, v: int, a: int) -> int:
    """Remove value ``a`` of ``v``: 1, 0 where the domain is left empty, -1 on a full trail."""
    if s.alive[m.u_off[v] + a] == 0:
        return 1
    if not _push(s, OP_REMOVE, v, a, 0, 0):
        return -1
    s.alive[m.u_off[v] + a] = 0
    s.size[v] -= 1
    _enqueue_tables(m, s, v)
    return 1 if s.size[v] > 0 else 0


@jit
def assign(m: Net, s: Live, v: int, a: int) -> int:
    """Keep only value ``a`` of ``v`` (as :func:`remove`)."""
    for b in range(m.dom[v]):
        if b != a and s.alive[m.u_off[v] + b] == 1:
            r = remove(m, s, v, b)
            if r != 1:
                return r
    return 1


@jit
def _all_live(m: Net, s: Live, t: int) -> bool:
    """Whether every variable of table ``t`` has its whole domain."""
    for k in range(m.t_sc[t], m.t_sc[t + 1]):
        v = m.sc_var[k]
        if s.size[v] != m.dom[v]:
            return False
    return True


@jit
def _shift_table(m: Net, s: Live, t: int, k: int, a: int, amount: int) -> None:
    """Add ``amount`` to the finite live entries of table ``t`` whose axis ``k`` is ``a``: only
    those entries are visited (by the axis's stride: ``entries / dom`` of them, not every entry,
    which made a projection cost d^3 on a binary table of domain d: CELAR6-SUB0, d = 44; on a
    binary table, the other variable's live values only)."""
    k0 = m.t_sc[t]
    ar = m.t_sc[t + 1] - k0
    stride = m.sc_stride[k]
    if ar == 2:
        o = 2 * k0 + 1 - k  # the other axis
        u = m.sc_var[o]
        other = m.sc_stride[o]
        row = m.t_off[t] + a * stride
        for b in range(m.dom[u]):
            if s.alive[m.u_off[u] + b] == 1:
                x = row + b * other
                if s.tab[x] < TOP:
                    s.tab[x] += amount
        return
    block = stride * m.dom[m.sc_var[k]]
    blocks = (m.t_off[t + 1] - m.t_off[t]) // block
    full = _all_live(m, s, t)
    for h in range(blocks):
        first = h * block + a * stride
        for e in range(first, first + stride):
            x = m.t_off[t] + e
            if s.tab[x] >= TOP:
                continue
            if not full:  # the tuple's values all live (inlined: see propagate)
                base = m.c_off[t] + e * ar
                live = True
                for q in range(ar):
                    if s.alive[m.u_off[m.sc_var[k0 + q]] + m.coord[base + q]] == 0:
                        live = False
                        break
                if not live:
                    continue
            s.tab[x] += amount


@jit
def _binary_mins(m: Net, s: Live, t: int, k: int) -> None:
    """s.mins of a binary table ``t`` on its axis ``k``: each live value's least cost over the
    other variable's live values (visited through a list of them: deep in the search most
    domains are small, and the table's other entries are never read)."""
    v = m.sc_var[k]
    o = 2 * m.t_sc[t] + 1 - k
    u = m.sc_var[o]
    stride = m.sc_stride[k]
    other = m.sc_stride[o]
    count = 0
    for b in range(m.dom[u]):
        if s.alive[m.u_off[u] + b] == 1:
            s.vals[count] = b
            count += 1
    for a in range(m.dom[v]):
        low = TOP
        if s.alive[m.u_off[v] + a] == 1:
            row = m.t_off[t] + a * stride
            for q in range(count):
                c = s.tab[row + s.vals[q] * other]
                if c < low:
                    low = c
        s.mins[a] = low


@jit
def _node(m: Net, s: Live, v: int) -> int:
    """NC* on ``v``: its least unary cost into c0, values at the threshold removed (1, 0 for a
    wipe-out or c0 at the threshold, -1 on a full trail)."""
    lo = TOP
    for a in range(m.dom[v]):
        if s.alive[m.u_off[v] + a] == 1 and s.un[m.u_off[v] + a] < lo:
            lo = s.un[m.u_off[v] + a]
    if lo >= TOP:
        return 0
    if lo > 0:
        for a in range(m.dom[v]):
            i = m.u_off[v] + a
            if s.alive[i] == 1 and s.un[i] < TOP:
                if not _push(s, OP_UNARY, v, a, int(-lo), 0):
                    return -1
                s.un[i] -= lo
        s.reg[R_C0] += lo
        if s.reg[R_C0] >= s.reg[R_TOP]:
            return 0
    return _prune(m, s, v)


@jit
def node(m: Net, s: Live, v: int) -> int:
    """NC* on ``v`` (after a decision on it: a variable in no table has no projection to
    call it)."""
    return _node(m, s, v)


@jit
def _prune(m: Net, s: Live, v: int) -> int:
    """Remove the values of ``v`` whose unary cost plus c0 reaches the threshold."""
    for a in range(m.dom[v]):
        i = m.u_off[v] + a
        if s.alive[i] == 1 and (s.un[i] >= TOP or s.un[i] + s.reg[R_C0] >= s.reg[R_TOP]):
            r = remove(m, s, v, a)
            if r != 1:
                return r
    return 1


@jit
def _project_axis(m: Net, s: Live, t: int, k: int) -> int:
    """Project table ``t`` onto its axis ``k`` (a global scope index): each live value's least
    cost over the live tuples into its unary cost; a value without a finite tuple is removed.
    1 where something moved, 2 where nothing did, 0 on a wipe-out, -1 on a full trail."""
    v = m.sc_var[k]
    d = m.dom[v]
    k0 = m.t_sc[t]
    ar = m.t_sc[t + 1] - k0
    j = k - k0
    if ar == 2:
        _binary_mins(m, s, t, k)
    else:
        full = _all_live(m, s, t)
        for a in range(d):
            s.mins[a] = TOP
        for e in range(m.t_off[t + 1] - m.t_off[t]):
            c = s.tab[m.t_off[t] + e]
            base = m.c_off[t] + e * ar
            a = m.coord[base + j]
            if c >= s.mins[a]:
                continue
            live = True
            if not full:  # the tuple's values all live (inlined: see propagate)
                for q in range(ar):
                    if s.alive[m.u_off[m.sc_var[k0 + q]] + m.coord[base + q]] == 0:
                        live = False
                        break
            if live:
                s.mins[a] = c
    moved = 2
    for a in range(d):
        i = m.u_off[v] + a
        if s.alive[i] == 0:
            continue
        low = s.mins[a]
        if low >= TOP:  # no finite live tuple: the value goes
            r = remove(m, s, v, a)
            if r != 1:
                return r
        elif low > 0:
            if not _push(s, OP_PROJ, t, k, a, low):
                return -1
            _shift_table(m, s, t, k, a, -low)
            if s.un[i] < TOP:
                s.un[i] += low
            moved = 1
    if moved == 2:  # a removal of v may have left its live unary costs all positive
        for a in range(d):
            i = m.u_off[v] + a
            if s.alive[i] == 1 and s.un[i] == 0:
                return 2
        return 1
    return moved


@jit
def _project(m: Net, s: Live, t: int) -> int:
    """Project table ``t`` onto each of its variables, then NC* on them (1, 0, -1 as _node)."""
    for k in range(m.t_sc[t], m.t_sc[t + 1]):
        r = _project_axis(m, s, t, k)
        if r == 1:
            r = _node(m, s, m.sc_var[k])
        if r != 1 and r != 2:
            return r
    return 1


@jit
def _spread(m: Net, s: Live, v: int) -> int:
    """One step of min-sum diffusion at ``v``: every table of ``v`` projected onto it, then each
    live value's unary cost shared out equally (rounded down) between its tables and itself
    (extensions), the rest's least into c0 (NC*). 1, 0, -1 as _node."""
    k0 = m.inc_off[v]
    k1 = m.inc_off[v + 1]
    if k1 == k0:
        return 1
    for j in range(k0, k1):
        t = m.inc_tab[j]
        k = m.t_sc[t]
        while m.sc_var[k] != v:
            k += 1
        r = _project_axis(m, s, t, k)
        if r != 1 and r != 2:
            return r
    parts = k1 - k0 + 1
    for a in range(m.dom[v]):
        i = m.u_off[v] + a
        if s.alive[i] == 0 or s.un[i] >= TOP:
            continue
        share = s.un[i] // parts
        if share <= 0:
            continue
        for j in range(k0, k1):
            t = m.inc_tab[j]
            k = m.t_sc[t]
            while m.sc_var[k] != v:
                k += 1
            if not _push(s, OP_PROJ, t, k, a, -share):
                return -1
            _shift_table(m, s, t, k, a, share)
            s.un[i] -= share
    return _node(m, s, v)


@jit
def diffuse_around(m: Net, s: Live, mark: int, radius: int, sweeps: int) -> int:
    """Up to ``sweeps`` sweeps of :func:`_spread` over the variables within ``radius`` tables of
    those whose domains changed since trail row ``mark`` (elsewhere the parent's diffusion
    stands), stopped early by a sweep that raises nothing; then AC* over their tables. 1, 0, -1
    as :func:`propagate`. On the Promedas networks a node's AC* bound stays near the root's
    where a few local sweeps put it past the incumbent."""
    count = 0
    for r in range(mark, s.reg[R_TRAIL]):
        if s.trail[r, 0] == OP_REMOVE:
            v = s.trail[r, 1]
            if s.inreg[v] == 0:
                s.inreg[v] = 1
                s.region[count] = v
                count += 1
    lo = 0
    for _ in range(radius):
        hi = count
        for i in range(lo, hi):
            v = s.region[i]
            for j in range(m.inc_off[v], m.inc_off[v + 1]):
                t = m.inc_tab[j]
                for k in range(m.t_sc[t], m.t_sc[t + 1]):
                    u = m.sc_var[k]
                    if s.inreg[u] == 0:
                        s.inreg[u] = 1
                        s.region[count] = u
                        count += 1
        lo = hi
    result = 1
    for _ in range(sweeps):
        before = s.reg[R_C0]
        for i in range(count):
            result = _spread(m, s, s.region[i])
            if result != 1:
                break
        if result != 1 or s.reg[R_C0] == before:
            break
    for i in range(count):
        v = s.region[i]
        s.inreg[v] = 0
        if result == 1:
            _enqueue_tables(m, s, v)
    if result != 1:
        _clear(s)
        return result
    return propagate(m, s, True)


@jit
def diffuse(m: Net, s: Live, sweeps: int) -> int:
    """Up to ``sweeps`` sweeps of :func:`_spread` over every variable (stopped early by a sweep
    that raises nothing), then AC* over every table (the tables' least costs into c0). 1, 0, -1
    as :func:`propagate`. A tighter bound than AC* alone where it pays: on the Promedas networks,
    a node's AC* bound stays near the root's where two sweeps put it past the incumbent."""
    for _ in range(sweeps):
        before = s.reg[R_C0]
        for v in range(len(m.dom)):
            r = _spread(m, s, v)
            if r != 1:
                _clear(s)
                return r
        if s.reg[R_C0] == before:
            break
    queue_all(m, s)
    return propagate(m, s, True)


@jit
def propagate(m: Net, s: Live, sweep: bool) -> int:
    """AC* to a fixpoint from the queued tables (``sweep``: every variable's values checked
    against the threshold first, which has come down): 1, 0 where it proves that nothing below
    the threshold is left (the queue emptied), -1 on a full trail."""
    n = len(m.dom)
    swept = s.reg[R_C0]
    while True:
        if sweep:
            swept = s.reg[R_C0]
            # _prune inlined: a call passes both tuples of arrays by value (180 ns a variable)
            for v in range(n):
                for a in range(m.dom[v]):
                    i = m.u_off[v] + a
                    if s.alive[i] == 1 and s.un[i] >= s.reg[R_TOP] - s.reg[R_C0]:
                        r = remove(m, s, v, a)
                        if r != 1:
                            _clear(s)
                            return r
        c0 = s.reg[R_C0]
        while s.reg[R_QLEN] > 0:
            t = s.queue[s.reg[R_QHEAD]]
            s.reg[R_QHEAD] = (s.reg[R_QHEAD] + 1) % len(s.queue)
            s.reg[R_QLEN] -= 1
            s.queued[t] = 0
            r = _project(m, s, t)
            if r != 1:
                if r == 0:
                    s.weight[t] += 1
                _clear(s)
                return r
        s.reg[R_QLEN] = 0
        if s.reg[R_C0] == c0:
            return 1
        # c0 rose: every value is checked against the threshold again, once c0 has closed a
        # share of the gap to it since the last check (each check is a pass over all values;
        # one per rise cost 0.6 ms a node on or_chain_41, twenty times the propagation)
        sweep = s.reg[R_C0] - swept >= (s.reg[R_TOP] - swept) // SWEEP_GAP
        if not sweep:
            return 1


@jit
def _clear(s: Live) -> None:
    """Empty the queue."""
    for j in range(s.reg[R_QLEN]):
        s.queued[s.queue[(s.reg[R_QHEAD] + j) % len(s.queue)]] = 0
    s.reg[R_QLEN] = 0


@jit
def undo(m: Net, s: Live, mark: int) -> None:
    """Undo the trail back to ``mark`` (c0 is the caller's to restore)."""
    k = s.reg[R_TRAIL]
    while k > mark:
        k -= 1
        op = s.trail[k, 0]
        if op == OP_REMOVE:
            v = s.trail[k, 1]
            s.alive[m.u_off[v] + s.trail[k, 2]] = 1
            s.size[v] += 1
        elif op == OP_PROJ:
            t = s.trail[k, 1]
            axis = s.trail[k, 2]
            a = s.trail[k, 3]
            amount = s.trail[k, 4]
            _shift_table(m, s, t, axis, a, amount)
            i = m.u_off[m.sc_var[axis]] + a
            if s.un[i] < TOP:
                s.un[i] -= amount
        else:
            v = s.trail[k, 1]
            s.un[m.u_off[v] + s.trail[k, 2]] -= s.trail[k, 3]
    s.reg[R_TRAIL] = mark


@jit
def queue_all(m: Net, s: Live) -> None:
    """Queue every table (the root's first propagation)."""
    for t in range(len(m.t_off) - 1):
        if s.queued[t] == 0:
            s.queued[t] = 1
            s.queue[(s.reg[R_QHEAD] + s.reg[R_QLEN]) % len(s.queue)] = t
            s.reg[R_QLEN] += 1


@jit
def leaf_cost(m: Net, asg: np.ndarray) -> float:
    """The real cost (without the constant) of a full assignment ``asg``."""
    total = 0.0
    for t in range(len(m.t_off) - 1):
        e = 0
        for k in range(m.t_sc[t], m.t_sc[t + 1]):
            e += asg[m.sc_var[k]] * m.sc_stride[k]
        total += m.ftab[m.t_off[t] + e]
    for v in range(len(m.dom)):
        total += m.funary[m.u_off[v] + asg[v]]
    return total
