"""A quick upper bound before the search: iterated conditional modes with random restarts.

Starting from the mini-bucket pass's assignment, each sweep gives every variable its best value
given the others' (ICM) until nothing moves; then a few variables are set at random and the
sweeps run again, keeping the best assignment seen (iterated local search). Compiled with the
search's loops; it works on the search's :class:`~dcop.search.kernel.Model` (the problem tables
are the nodes' labels), so costs are the search's internal costs.
"""

from __future__ import annotations

import math
from collections.abc import Generator

import numpy as np

from dcop.search.jit import jit, jit_inline
from dcop.search.kernel import Model, add_functions


def incidence(model: Model) -> tuple[np.ndarray, np.ndarray]:
    """For each node, the problem tables (label functions) that hold it, in CSR form."""
    n = model.dom.shape[0]
    holders: list[list[int]] = [[] for _ in range(n)]
    for f in model.lab_fun:
        for s in range(model.f_sc[f], model.f_sc[f + 1]):
            holders[int(model.sc_var[s])].append(int(f))
    off = np.array([0, *np.cumsum([len(h) for h in holders])], dtype=np.int32)
    return off, np.array([f for h in holders for f in h], dtype=np.int32)


@jit
def function_value(m: Model, f: int, asg: np.ndarray) -> float:
    """Function ``f`` at the full assignment ``asg``."""
    at = m.f_off[f]
    for s in range(m.f_sc[f], m.f_sc[f + 1]):
        at += asg[m.sc_var[s]] * m.sc_stride[s]
    return float(m.tables[at])


@jit
def total_cost(m: Model, asg: np.ndarray) -> float:
    """The sum of every problem table at the full assignment ``asg``."""
    total = 0.0
    for k in range(m.lab_fun.shape[0]):
        total += function_value(m, m.lab_fun[k], asg)
    return total


@jit
def nodes_cost(m: Model, asg: np.ndarray, nodes: np.ndarray) -> float:
    """The sum of the problem tables in the buckets of ``nodes`` at the full assignment ``asg``."""
    total = 0.0
    for i in range(nodes.shape[0]):
        v = nodes[i]
        for k in range(m.lab_off[v], m.lab_off[v + 1]):
            total += function_value(m, m.lab_fun[k], asg)
    return total


@jit_inline
def _best_mode(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, asg: np.ndarray, buf: np.ndarray, v: int
) -> bool:
    """Node ``v`` of ``asg`` set to its best value given the others (its conditional mode, ties
    to the current value); whether it moved. ``buf``: scratch of at least its domain."""
    d = m.dom[v]
    for x in range(d):
        buf[x] = 0.0
    add_functions(m, inc_fun, inc_off[v], inc_off[v + 1], v, d, asg, buf, 0)
    here = asg[v]
    best = here
    for x in range(d):
        if buf[x] < buf[best] - 1e-9 * (1.0 + abs(buf[best])):
            best = x
    asg[v] = best
    return bool(best != here)


@jit
def _sweeps(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, asg: np.ndarray, buf: np.ndarray,
    max_sweeps: int,
) -> int:  # fmt: skip
    n = m.dom.shape[0]
    done = 0
    for _ in range(max_sweeps):
        done += 1
        moved = False
        for v in range(n):
            if _best_mode(m, inc_off, inc_fun, asg, buf, v):
                moved = True
        if not moved:
            break
    return done


@jit
def sweep_piece(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, asg: np.ndarray, buf: np.ndarray, v: int,
    work: int,
) -> tuple[int, bool]:  # fmt: skip
    """Conditional modes on nodes ``v``, ``v + 1``, ... of ``asg`` (as one sweep of
    :func:`local_search`, in place) until about ``work`` table entries are read (at least one
    node); the next node (``n``: the sweep is over) and whether a node moved. The caller looks
    at its deadline between two pieces: one node of a 200,000-value domain reads 1.2M entries."""
    n = m.dom.shape[0]
    read = 0
    moved = False
    while v < n and (read < work or read == 0):
        if _best_mode(m, inc_off, inc_fun, asg, buf, v):
            moved = True
        read += 1 + m.dom[v] * (inc_off[v + 1] - inc_off[v])
        v += 1
    return v, moved


@jit
def local_search(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, start: np.ndarray, max_sweeps: int,
    seed: int,
) -> np.ndarray:  # fmt: skip
    """The best assignment found from ``start`` within about ``max_sweeps`` sweeps."""
    np.random.seed(seed)
    n = m.dom.shape[0]
    width = 1
    for v in range(n):
        width = max(width, m.dom[v])
    buf = np.zeros(width)
    best = start.copy()
    left = max_sweeps - _sweeps(m, inc_off, inc_fun, best, buf, max_sweeps)
    best_cost = total_cost(m, best)
    asg = best.copy()
    kick = max(1, n // 20)
    while left > 0 and n > 0:
        asg[:] = best
        for _ in range(kick):
            v = np.random.randint(0, n)
            asg[v] = np.random.randint(0, m.dom[v])
        left -= _sweeps(m, inc_off, inc_fun, asg, buf, left)
        cost = total_cost(m, asg)
        if cost < best_cost:
            best_cost = cost
            best[:] = asg
    return best


def neighbours(
    model: Model, inc_off: np.ndarray, inc_fun: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each node's neighbours (the other nodes of its problem tables), in CSR form."""
    n = model.dom.shape[0]
    out: list[list[int]] = []
    for v in range(n):
        seen: set[int] = set()
        for f in inc_fun[inc_off[v] : inc_off[v + 1]]:
            for s in range(model.f_sc[f], model.f_sc[f + 1]):
                u = int(model.sc_var[s])
                if u != v:
                    seen.add(u)
        out.append(sorted(seen))
    off = np.array([0, *np.cumsum([len(h) for h in out])], dtype=np.int32)
    return off, np.array([u for h in out for u in h], dtype=np.int32)


@jit
def _local_costs(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, asg: np.ndarray, v: int, buf: np.ndarray
) -> None:
    d = m.dom[v]
    for x in range(d):
        buf[x] = 0.0
    add_functions(m, inc_fun, inc_off[v], inc_off[v + 1], v, d, asg, buf, 0)


@jit
def perturb_search(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, nb_off: np.ndarray, nb: np.ndarray,
    asg: np.ndarray, kicks: int, block: int, seed: int,
) -> float:  # fmt: skip
    """Iterated local search on ``asg`` (changed in place, never for the worse): ``kicks`` times,
    give a block of up to ``block`` neighbouring nodes (a breadth-first ball around a random
    node) random values, repair by conditional modes from the nodes touched outwards, and keep
    the result when it costs no more (else undo it). Returns the cost change (<= 0). Work per
    kick is local: a sweep never runs over all nodes."""
    np.random.seed(seed)
    n = m.dom.shape[0]
    if n == 0:
        return 0.0
    width = 1
    for v in range(n):
        width = max(width, m.dom[v])
    buf = np.zeros(width)
    old = np.full(n, -1, dtype=np.int32)  # a changed node's value before the kick, -1: unchanged
    changed = np.zeros(n, dtype=np.int32)
    queued = np.zeros(n, dtype=np.bool_)
    queue = np.zeros(n, dtype=np.int32)
    ball = np.zeros(max(block, 1), dtype=np.int32)
    in_ball = np.zeros(n, dtype=np.bool_)
    total = 0.0
    for _ in range(kicks):
        nchanged = 0
        delta = 0.0
        # the ball, breadth first
        ball[0] = np.random.randint(0, n)
        in_ball[ball[0]] = True
        size = 1
        head = 0
        while head < size and size < block:
            v = ball[head]
            head += 1
            for k in range(nb_off[v], nb_off[v + 1]):
                u = nb[k]
                if not in_ball[u] and size < block:
                    in_ball[u] = True
                    ball[size] = u
                    size += 1
        qlen = 0
        for i in range(size):
            v = ball[i]
            in_ball[v] = False
            if m.dom[v] < 2:
                continue
            _local_costs(m, inc_off, inc_fun, asg, v, buf)
            x = np.random.randint(0, m.dom[v])
            if old[v] < 0:
                old[v] = asg[v]
                changed[nchanged] = v
                nchanged += 1
            delta += buf[x] - buf[asg[v]]
            asg[v] = x
            if not queued[v]:
                queued[v] = True
                queue[qlen] = v
                qlen += 1
        # repair: conditional modes on the queue, a node's neighbours queued when it moves
        head = 0
        while head < qlen:
            v = queue[head % n]
            head += 1
            queued[v] = False
            _local_costs(m, inc_off, inc_fun, asg, v, buf)
            here = asg[v]
            best = here
            for x in range(m.dom[v]):
                if buf[x] < buf[best] - 1e-9 * (1.0 + abs(buf[best])):
                    best = x
            if best == here:
                continue
            if old[v] < 0:
                old[v] = here
                changed[nchanged] = v
                nchanged += 1
            delta += buf[best] - buf[here]
            asg[v] = best
            for k in range(nb_off[v], nb_off[v + 1]):
                u = nb[k]
                if not queued[u]:
                    queued[u] = True
                    queue[qlen % n] = u
                    qlen += 1
        keep = delta <= 0.0
        if keep:
            total += delta
        for i in range(nchanged):
            v = changed[i]
            if not keep:
                asg[v] = old[v]
            old[v] = -1
    return total


def penalised(model: Model) -> Model:
    """The problem tables of ``model`` alone (its labels; no heuristic), each infinite cost
    replaced by a penalty above every finite total: a local search then prefers fewer broken
    hard constraints, then a lower cost, with no inf - inf. Where every cost is finite that is
    ``model`` itself: no copy (a copy of a problem with 10M entries took 0.5-2 s of the first
    answer's 0.5-2.8 s)."""
    pieces = penalised_pieces(model)
    while True:
        try:
            next(pieces)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def penalised_pieces(model: Model, chunk: int = 1 << 18) -> Generator[None, None, Model]:
    """:func:`penalised` in pieces of about ``chunk`` entries, a yield between two (the caller
    looks at its deadline there); its return value is the model."""
    funs = [int(f) for f in np.unique(model.lab_fun)]
    spans = [_span(model, f) for f in funs]
    finite = True
    for lo, hi in spans:
        for a in range(lo, hi, chunk):
            piece = model.tables[a : min(hi, a + chunk)]
            finite = finite and bool(np.isfinite(piece.min())) and bool(np.isfinite(piece.max()))
            yield
        if not finite:
            break
    if finite:
        return model
    # the penalty: above twice the finite spread plus the sum of every finite magnitude
    spread = 0.0
    magnitude = 0.0
    for lo, hi in spans:
        low, high = math.inf, -math.inf
        for a in range(lo, hi, chunk):
            piece = model.tables[a : min(hi, a + chunk)]
            kept = piece[np.isfinite(piece)]
            if kept.size:
                low, high = min(low, float(kept.min())), max(high, float(kept.max()))
                magnitude += float(np.abs(kept).sum())
            yield
        if low <= high:
            spread += high - low
    penalty = 2.0 * spread + 1.0 + magnitude
    f_off = np.zeros(model.f_off.shape[0], dtype=np.int64)
    tables = np.empty(max(1, sum(hi - lo for lo, hi in spans)))
    at = 0
    for f, (lo, hi) in zip(funs, spans, strict=True):
        f_off[f] = at
        for a in range(lo, hi, chunk):
            b = min(hi, a + chunk)
            piece = tables[at + a - lo : at + b - lo]
            piece[:] = model.tables[a:b]
            piece[~np.isfinite(piece)] = penalty
            yield
        at += hi - lo
    return model._replace(tables=tables, f_off=f_off)


def _span(model: Model, f: int) -> tuple[int, int]:
    """Where table ``f``'s entries lie in ``model.tables``: [start, end)."""
    lo = int(model.f_off[f])
    size = 1
    for s in range(model.f_sc[f], model.f_sc[f + 1]):
        size *= int(model.dom[model.sc_var[s]])
    return lo, lo + size
