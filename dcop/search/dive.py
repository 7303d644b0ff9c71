"""A first feasible assignment: a greedy dive down the pseudo-tree that respects hard costs.

Where most assignments break a hard constraint (deterministic gates with evidence: the diagnosis
networks), the mini-bucket pass's own assignment and the local search started from it stay
infeasible, and the walk finds its first solution only with its proof (without an upper bound
an AND/OR branch and bound solves each subproblem to its end before it moves on). The dive finds
one first: it assigns the nodes parents first (every problem table is complete when its bucket's
node is assigned), each its cheapest value by the node's label plus its children's heuristic
(the pass's own decoding), skipping the values that a table makes infinite and those that
*forward checking* removed: when a problem table has one node left unassigned, the values of
that node that the table makes infinite given the others are removed. A node with no value left
sends the dive back chronologically. Compiled with the search's loops, it stops after a number
of assignments and returns whether it reached a full feasible assignment.
"""

from __future__ import annotations

import numpy as np

from dcop.search.jit import jit
from dcop.search.kernel import Model, add_functions

#: Assignments the dive may make (its backtracks included), per node of the problem.
DIVE_TRIES_PER_NODE = 50
#: Tables of at most this many entries are kept arc consistent (a revision reads every entry);
#: a larger one is only checked once all its nodes are assigned.
ARC_ENTRIES = 4096
#: Table entries the dive's revisions may read in all (a few tenths of a second compiled): a
#: large problem of large hard tables gives up rather than hold the search's start.
DIVE_WORK = 100_000_000


@jit
def _revise(
    m: Model, f: int, width: int, removed: np.ndarray, depth: int, trail: np.ndarray,
    tl: np.ndarray, sup: np.ndarray, idx: np.ndarray, changed: np.ndarray,
) -> bool:  # fmt: skip
    """Remove the values of ``f``'s nodes that no tuple of live values with a finite cost
    supports (generalised arc consistency on ``f``), each pushed on ``trail`` (its length in
    ``tl[0]``; ``tl[1]`` counts the entries read); False on a wipe-out. ``changed`` gets a 1 at each scope position whose node lost
    a value."""
    lo = m.f_sc[f]
    k = m.f_sc[f + 1] - lo
    for i in range(k):
        u = m.sc_var[lo + i]
        changed[i] = 0
        idx[i] = 0
        for y in range(m.dom[u]):
            sup[i * width + y] = False
    while True:  # every tuple of the table, last position fastest
        tl[1] += 1
        live = True
        at = m.f_off[f]
        for i in range(k):
            u = m.sc_var[lo + i]
            if removed[u * width + idx[i]] >= 0:
                live = False
                break
            at += idx[i] * m.sc_stride[lo + i]
        if live and np.isfinite(m.tables[at]):
            for i in range(k):
                sup[i * width + idx[i]] = True
        i = k - 1
        while i >= 0:
            idx[i] += 1
            if idx[i] < m.dom[m.sc_var[lo + i]]:
                break
            idx[i] = 0
            i -= 1
        if i < 0:
            break
    for i in range(k):
        u = m.sc_var[lo + i]
        alive = 0
        for y in range(m.dom[u]):
            at = u * width + y
            if removed[at] >= 0:
                continue
            if sup[i * width + y]:
                alive += 1
            else:
                removed[at] = depth
                trail[tl[0]] = at
                tl[0] += 1
                changed[i] = 1
        if alive == 0:
            return False
    return True


@jit
def _propagate(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, hard: np.ndarray, width: int,
    removed: np.ndarray, depth: int, trail: np.ndarray, tl: np.ndarray, queue: np.ndarray,
    queued: np.ndarray, qlen: int, sup: np.ndarray, idx: np.ndarray, changed: np.ndarray,
) -> bool:  # fmt: skip
    """Revise the queued tables (``queue[:qlen]``) until nothing changes; False on a wipe-out
    (the queue is emptied either way)."""
    nf = queue.shape[0]
    head = 0
    ok = True
    while head < qlen:
        f = queue[head % nf]
        head += 1
        queued[f] = False
        if not ok:
            continue
        ok = _revise(m, f, width, removed, depth, trail, tl, sup, idx, changed)
        if not ok:
            continue
        lo = m.f_sc[f]
        for i in range(m.f_sc[f + 1] - lo):
            if changed[i] == 0:
                continue
            qlen = _enqueue(inc_off, inc_fun, hard, m.sc_var[lo + i], queue, queued, qlen)
    return ok


@jit
def _enqueue(
    inc_off: np.ndarray, inc_fun: np.ndarray, hard: np.ndarray, v: int, queue: np.ndarray,
    queued: np.ndarray, qlen: int,
) -> int:  # fmt: skip
    """Queue the hard tables around node ``v`` not queued yet; the queue's new length."""
    nf = queue.shape[0]
    for k in range(inc_off[v], inc_off[v + 1]):
        f = inc_fun[k]
        if hard[f] and not queued[f]:
            queued[f] = True
            queue[qlen % nf] = f
            qlen += 1
    return qlen


@jit
def dive(
    m: Model, inc_off: np.ndarray, inc_fun: np.ndarray, hard: np.ndarray, out: np.ndarray,
    max_tries: int, max_work: int,
) -> bool:  # fmt: skip
    """Fill ``out`` with a feasible assignment (finite cost) found within ``max_tries``
    assignments and ``max_work`` table entries read; False (``out`` left as it was) when none
    was found within them, or when the
    whole space was searched (every assignment is infeasible). ``hard[f]``: function ``f`` is a
    problem table small enough to keep arc consistent and holds an infinite cost."""
    n = m.dom.shape[0]
    if n == 0:
        return True
    width = 1
    for v in range(n):
        width = max(width, m.dom[v])
    arity = 1
    nf = m.f_sc.shape[0] - 1
    for f in range(nf):
        arity = max(arity, m.f_sc[f + 1] - m.f_sc[f])
    asg = np.zeros(n, dtype=np.int32)
    # removed[u * width + x]: the depth that removed value x of u (-1: none)
    removed = np.full(n * width, -1, dtype=np.int32)
    trail = np.zeros(n * width, dtype=np.int32)  # removed (u * width + x), in order
    trail_at = np.zeros(n + 1, dtype=np.int32)  # trail length on entering each depth
    fval = np.zeros(n * width)
    vals = np.zeros(n * width, dtype=np.int32)
    nvals = np.zeros(n, dtype=np.int32)
    rank = np.zeros(n, dtype=np.int32)  # the next value to try at each depth
    queue = np.zeros(max(nf, 1), dtype=np.int32)
    queued = np.zeros(max(nf, 1), dtype=np.bool_)
    sup = np.zeros(arity * width, dtype=np.bool_)
    idx = np.zeros(arity, dtype=np.int32)
    changed = np.zeros(arity, dtype=np.int32)
    # the problem as given made arc consistent first (removals at depth n: never undone)
    qlen = 0
    for f in range(nf):
        if hard[f]:
            queued[f] = True
            queue[qlen] = f
            qlen += 1
    tl = np.zeros(2, dtype=np.int64)  # the trail's length, the entries read
    if not _propagate(m, inc_off, inc_fun, hard, width, removed, n, trail, tl, queue, queued,
                      qlen, sup, idx, changed):  # fmt: skip
        return False
    trail_at[0] = tl[0]
    depth = 0  # nodes are assigned n - 1 down to 0: parents before children
    entering = True
    tries = 0
    while True:
        if depth == n:
            out[:] = asg
            return True
        v = n - 1 - depth
        b = v * width
        d = m.dom[v]
        if entering:
            trail_at[depth] = tl[0]
            for x in range(d):
                fval[b + x] = 0.0
            add_functions(m, m.lab_fun, m.lab_off[v], m.lab_off[v + 1], v, d, asg, fval, b)
            for k in range(m.ch_off[v], m.ch_off[v + 1]):
                c = m.ch_list[k]
                add_functions(m, m.cr_fun, m.cr_off[c], m.cr_off[c + 1], v, d, asg, fval, b)
            cnt = 0
            for x in range(d):
                if removed[b + x] >= 0 or not np.isfinite(fval[b + x]):
                    continue
                j = cnt  # insertion by fval, ties in value order
                while j > 0 and fval[b + vals[b + j - 1]] > fval[b + x]:
                    vals[b + j] = vals[b + j - 1]
                    j -= 1
                vals[b + j] = x
                cnt += 1
            nvals[v] = cnt
            rank[v] = 0
            entering = False
        # undo what this depth's last value removed
        while tl[0] > trail_at[depth]:
            tl[0] -= 1
            removed[trail[tl[0]]] = -1
        spent = tries >= max_tries or tl[1] >= max_work
        if rank[v] >= nvals[v] or spent:
            if depth == 0 or spent:
                return False
            depth -= 1
            continue
        x = vals[b + rank[v]]
        rank[v] += 1
        tries += 1
        asg[v] = x
        # v = x: its other values removed, then the tables around it made arc consistent
        for y in range(d):
            if y != x and removed[b + y] < 0:
                removed[b + y] = depth
                trail[tl[0]] = b + y
                tl[0] += 1
        qlen = _enqueue(inc_off, inc_fun, hard, v, queue, queued, 0)
        if _propagate(m, inc_off, inc_fun, hard, width, removed, depth, trail, tl, queue,
                      queued, qlen, sup, idx, changed):  # fmt: skip
            depth += 1
            entering = True


def dive_tries(nodes: int) -> int:
    """The dive's budget of assignments for a problem of ``nodes`` nodes."""
    return max(1000, DIVE_TRIES_PER_NODE * nodes)


def hard_tables(model: Model) -> np.ndarray:
    """For each function of ``model``: whether it is a problem table (a label) of at most
    ARC_ENTRIES entries that holds an infinite cost (the tables the dive keeps arc consistent)."""
    hard = np.zeros(model.f_sc.shape[0] - 1, dtype=np.bool_)
    for f in np.unique(model.lab_fun):
        size = 1
        for s in range(model.f_sc[f], model.f_sc[f + 1]):
            size *= int(model.dom[model.sc_var[s]])
        lo = int(model.f_off[f])
        hard[f] = size <= ARC_ENTRIES and bool(np.isinf(model.tables[lo : lo + size]).any())
    return hard


def first_feasible(
    model: Model, inc_off: np.ndarray, inc_fun: np.ndarray, start: np.ndarray
) -> np.ndarray | None:
    """The dive's assignment, or None where it found none within its budget."""
    out = start.copy()
    tries = dive_tries(int(model.dom.shape[0]))
    found = dive(model, inc_off, inc_fun, hard_tables(model), out, tries, DIVE_WORK)
    return out if found else None
