"""The compiled depth-first branch and bound over :mod:`.propagate`'s soft arc consistency.

Binary branching, as toulbar2's: at each node a variable ``x`` and its cheapest value ``a`` by
unary cost (ties: the incumbent's value), then the left branch ``x = a`` and, once its subtree
is done, the right branch ``x != a``; a domain of more than DICHOTOMIC live values is split in
halves instead, the half of ``a`` first. Each branch is a trail mark, the decision, and AC* to a
fixpoint against the incumbent's threshold; a branch whose propagation fails is cut. The variable
is the one of most weighted degree per live value (dom/wdeg: a table's weight counts the
failures it caused), ties by the narrowest gap between its two cheapest unary costs.

The walk is resumable: :func:`search` stops after a number of propagations (or on a full trail,
with the pending branch undone, to be applied again once the driver has grown it) with its
stack and registers in :class:`Walk`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dcop.search.jit import jit
from dcop.search.propagate import (
    R_C0,
    R_TOP,
    R_TRAIL,
    TOP,
    Live,
    Net,
    assign,
    diffuse_around,
    leaf_cost,
    node,
    propagate,
    queue_all,
    remove,
    undo,
)

#: What the walk does next.
SELECT, APPLY, BACKTRACK, DONE = 0, 1, 2, 3
#: Registers of Walk.reg: the next step, the depth, propagations run, incumbents found, whether
#: the threshold came down since the last propagation.
W_OP, W_DEPTH, W_EXPANDED, W_FOUND, W_SWEEP, W_ORDER, W_DIFFUSE, W_RADIUS = 0, 1, 2, 3, 4, 5, 6, 7
#: ... the depth the dive started at (it never backtracks above), its backtracks, and the
#: backtracks at which it stops (the driver's best-first step: :mod:`.dfbnb`).
W_FLOOR, W_BACKTRACKS, W_BUDGET = 8, 9, 10
#: Walk.real: the incumbent's real cost (the tables', without the constant), the pruning margin's
#: absolute and relative parts, the integer costs' base and scale.
F_UB, F_EPS_ABS, F_EPS_REL, F_BASE, F_SCALE = 0, 1, 2, 3, 4
#: Variable orders (Walk.reg[W_ORDER]): the least gap between the two cheapest unary costs, or
#: dom/wdeg first, ties by that gap (:data:`dcop.search.dfbnb.ORDER` says which is used).
ORDER_GAP, ORDER_WDEG = 0, 1
#: Decisions (Walk.kind; a left branch's right one is its kind + 1): x = a, then x != a; on a
#: domain of more than DICHOTOMIC live values, a split: x <= a (the half of the cheapest value
#: first), then x > a, or x > a, then x <= a.
KIND_ASSIGN, KIND_REMOVE, KIND_LOW, KIND_HIGH_AFTER, KIND_HIGH, KIND_LOW_AFTER = 0, 1, 2, 3, 4, 5
#: Live values above which a variable's domain is split in halves, not a value tried (as
#: toulbar2's dichotomic branching, its default size 10): on CELAR6-SUB0 (d = 44) toulbar2 under
#: AC* needs 1541 nodes with it, 3401 without.
DICHOTOMIC = 10
#: What :func:`search` returns.
PAUSED, FINISHED, TRAIL_FULL, OVER_BUDGET = 0, 1, -1, 2


class Walk(NamedTuple):
    var: np.ndarray  # int32[levels]: each level's variable
    val: np.ndarray  # int32[levels]: ... and value
    mark: np.ndarray  # int64[levels]: the trail's length before the level's decision
    c0: np.ndarray  # int64[levels]: c0 before it
    kind: np.ndarray  # int8[levels]: the decision (KIND_*): even a left branch, odd a right one
    asg: np.ndarray  # int32[n]: a leaf's values
    best: np.ndarray  # int32[n]: the incumbent
    reg: np.ndarray  # int64[8]
    real: np.ndarray  # float64[8]


def new_walk(dom: np.ndarray, incumbent: np.ndarray, cost: float, base: float, scale: float,
             eps_abs: float, eps_rel: float) -> Walk:  # fmt: skip
    """A walk over domains ``dom`` from ``incumbent`` (its real cost ``cost``; inf: none) at the
    root. Each level removes at least one value: the depth is at most the values less one per
    variable."""
    n = len(dom)
    levels = int(np.sum(dom)) - n + 1
    w = Walk(
        np.zeros(levels, np.int32), np.zeros(levels, np.int32), np.zeros(levels, np.int64),
        np.zeros(levels, np.int64), np.zeros(levels, np.int8), np.zeros(n, np.int32),
        incumbent.astype(np.int32).copy(), np.zeros(16, np.int64), np.zeros(8, np.float64),
    )  # fmt: skip
    w.real[F_UB] = cost
    w.reg[W_BUDGET] = TOP
    w.real[F_EPS_ABS] = eps_abs
    w.real[F_EPS_REL] = eps_rel
    w.real[F_BASE] = base
    w.real[F_SCALE] = scale
    return w


@jit
def threshold(w: Walk) -> int:
    """The integer c0 at which a node is cut: its bound then reaches the incumbent's cost less
    the margin (``eps_abs + eps_rel * |ub|``). A proof is a proof up to that margin: nothing is
    cheaper than the answer by more (toulbar2 cuts at its integer upper bound alike); ties with
    the incumbent are cut, which a search on integer costs needs (a bound equal to the optimum
    would cut nothing)."""
    ub = w.real[F_UB]
    if not np.isfinite(ub):
        return TOP
    room = (ub - w.real[F_EPS_ABS] - w.real[F_EPS_REL] * abs(ub) - w.real[F_BASE]) * w.real[F_SCALE]
    if room <= 0.0:
        return 0
    if room >= 4.0e18:
        return TOP
    return int(np.ceil(room))


@jit
def _choose(m: Net, s: Live, w: Walk) -> int:
    """The variable to branch on; -1 at a leaf. By default (ORDER_GAP) the one whose two
    cheapest live values are the closest in unary cost (the least decided: its refutation costs
    the most); ORDER_WDEG puts the weighted degree per live value first (dom/wdeg), ties by
    the same gap."""
    best = -1
    best_score = -1.0
    best_gap = TOP
    wdeg_first = w.reg[W_ORDER] == ORDER_WDEG
    for v in range(len(m.dom)):
        if s.size[v] <= 1:
            continue
        score = 0.0
        if wdeg_first:
            wdeg = 0
            for k in range(m.inc_off[v], m.inc_off[v + 1]):
                t = m.inc_tab[k]
                for j in range(m.t_sc[t], m.t_sc[t + 1]):
                    u = m.sc_var[j]
                    if u != v and s.size[u] > 1:
                        wdeg += s.weight[t]
                        break
            score = (wdeg + 1) / s.size[v]
        lo = TOP
        lo2 = TOP
        for a in range(m.dom[v]):
            i = m.u_off[v] + a
            if s.alive[i] == 1:
                c = s.un[i]
                if c < lo:
                    lo2 = lo
                    lo = c
                elif c < lo2:
                    lo2 = c
        gap = lo2 - lo
        if score > best_score or (score == best_score and gap < best_gap):
            best, best_score, best_gap = v, score, gap
    return best


@jit
def _value(m: Net, s: Live, w: Walk, v: int) -> int:
    """The live value of least unary cost, ties by the incumbent's."""
    best = -1
    for a in range(m.dom[v]):
        i = m.u_off[v] + a
        if s.alive[i] == 0:
            continue
        if (
            best < 0
            or s.un[i] < s.un[m.u_off[v] + best]
            or (s.un[i] == s.un[m.u_off[v] + best] and a == w.best[v])
        ):
            best = a
    return best


@jit
def decide(m: Net, s: Live, v: int, a: int, kind: int) -> int:
    """Apply a decision of KIND_* on ``v`` at value ``a`` (as :func:`.propagate.remove`)."""
    if kind == KIND_ASSIGN:
        return assign(m, s, v, a)
    if kind == KIND_REMOVE:
        return remove(m, s, v, a)
    low = kind == KIND_LOW or kind == KIND_LOW_AFTER  # keep the values up to a
    for b in range(m.dom[v]):
        if s.alive[m.u_off[v] + b] == 1 and (b > a if low else b <= a):
            r = remove(m, s, v, b)
            if r != 1:
                return r
    return 1


@jit
def _split(m: Net, s: Live, v: int, best: int) -> tuple[int, int]:
    """Where a domain of more than DICHOTOMIC live values is cut (the live value at the middle:
    both halves hold one at least) and the left branch's kind: the half of ``best`` first."""
    half = (s.size[v] - 1) // 2
    seen = 0
    mid = 0
    for b in range(m.dom[v]):
        if s.alive[m.u_off[v] + b] == 1:
            if seen == half:
                mid = b
                break
            seen += 1
    return mid, KIND_LOW if best <= mid else KIND_HIGH


@jit
def _leaf(m: Net, s: Live, w: Walk) -> None:
    """Every variable has one value left: its real cost, the incumbent where cheaper."""
    for v in range(len(m.dom)):
        for a in range(m.dom[v]):
            if s.alive[m.u_off[v] + a] == 1:
                w.asg[v] = a
                break
    cost = leaf_cost(m, w.asg)
    if cost < w.real[F_UB]:
        w.real[F_UB] = cost
        for v in range(len(m.dom)):
            w.best[v] = w.asg[v]
        w.reg[W_FOUND] += 1
        top = threshold(w)
        if top < s.reg[R_TOP]:
            s.reg[R_TOP] = top
            w.reg[W_SWEEP] = 1


@jit
def root(m: Net, s: Live, w: Walk) -> int:
    """The root's propagation: PAUSED (the walk may start), FINISHED (nothing below the
    incumbent), TRAIL_FULL (undone: grow the trail and call again)."""
    s.reg[R_TOP] = threshold(w)
    queue_all(m, s)
    r = propagate(m, s, True)
    w.reg[W_EXPANDED] += 1
    if r == -1:
        undo(m, s, 0)
        s.reg[R_C0] = 0
        return TRAIL_FULL
    w.reg[W_DEPTH] = 0
    w.reg[W_OP] = SELECT if r == 1 else DONE
    return PAUSED if r == 1 else FINISHED


@jit
def search(m: Net, s: Live, w: Walk, steps: int) -> int:
    """Walk for at most ``steps`` propagations: PAUSED, FINISHED (the incumbent is optimal, or
    none exists), TRAIL_FULL (the pending branch undone; grow the trail and call again)."""
    while steps > 0:
        op = w.reg[W_OP]
        if op == DONE:
            return FINISHED
        if op == SELECT:
            if w.reg[W_BACKTRACKS] >= w.reg[W_BUDGET]:
                return OVER_BUDGET
            v = _choose(m, s, w)
            if v < 0:
                _leaf(m, s, w)
                w.reg[W_OP] = BACKTRACK
                continue
            d = w.reg[W_DEPTH]
            w.var[d] = v
            w.val[d] = _value(m, s, w, v)
            w.kind[d] = KIND_ASSIGN
            if s.size[v] > DICHOTOMIC:
                w.val[d], w.kind[d] = _split(m, s, v, w.val[d])
            w.mark[d] = s.reg[R_TRAIL]
            w.c0[d] = s.reg[R_C0]
            w.reg[W_DEPTH] = d + 1
            w.reg[W_OP] = APPLY
        elif op == APPLY:
            d = w.reg[W_DEPTH] - 1
            v = w.var[d]
            r = decide(m, s, v, w.val[d], w.kind[d])
            if r == 1:
                r = node(m, s, v)
            if r == 1:
                r = propagate(m, s, w.reg[W_SWEEP] == 1)
            if r == 1 and w.reg[W_DIFFUSE] > 0:
                r = diffuse_around(m, s, w.mark[d], w.reg[W_RADIUS], w.reg[W_DIFFUSE])
            if r == -1:
                undo(m, s, w.mark[d])
                s.reg[R_C0] = w.c0[d]
                return TRAIL_FULL
            w.reg[W_SWEEP] = 0
            w.reg[W_EXPANDED] += 1
            steps -= 1
            w.reg[W_OP] = SELECT if r == 1 else BACKTRACK
        else:  # BACKTRACK: the deepest left branch not yet followed by its right one
            w.reg[W_BACKTRACKS] += 1
            while w.reg[W_DEPTH] > w.reg[W_FLOOR]:
                d = w.reg[W_DEPTH] - 1
                undo(m, s, w.mark[d])
                s.reg[R_C0] = w.c0[d]
                if w.kind[d] % 2 == 0:
                    w.kind[d] += 1
                    w.reg[W_OP] = APPLY
                    # the threshold may have come down under the level's decision
                    w.reg[W_SWEEP] = 1
                    break
                w.reg[W_DEPTH] = d
            if w.reg[W_DEPTH] == w.reg[W_FLOOR]:
                w.reg[W_OP] = DONE
                return FINISHED
    return PAUSED


@jit
def replay(m: Net, s: Live, w: Walk, var: np.ndarray, val: np.ndarray, kind: np.ndarray) -> int:
    """From the root's state (the caller's undo), apply the decisions of an open node (kind 0:
    ``var = val``, 1: ``var != val``), each with its propagation, and make it the floor of the
    next dive: PAUSED (the dive may start), FINISHED (nothing below the incumbent there),
    TRAIL_FULL (grow the trail, undo to the root and call again)."""
    w.reg[W_DEPTH] = 0
    w.reg[W_FLOOR] = 0
    for d in range(len(var)):
        w.var[d] = var[d]
        w.val[d] = val[d]
        w.kind[d] = KIND_REMOVE  # closed (odd): the dive never comes back above its floor
        w.mark[d] = s.reg[R_TRAIL]
        w.c0[d] = s.reg[R_C0]
        w.reg[W_DEPTH] = d + 1
        r = decide(m, s, var[d], val[d], kind[d])
        if r == 1:
            r = node(m, s, var[d])
        if r == 1:
            r = propagate(m, s, True)
        if r == 1 and w.reg[W_DIFFUSE] > 0:
            r = diffuse_around(m, s, w.mark[d], w.reg[W_RADIUS], w.reg[W_DIFFUSE])
        w.reg[W_EXPANDED] += 1
        if r == -1:
            return TRAIL_FULL
        if r == 0:
            w.reg[W_OP] = DONE
            return FINISHED
    w.reg[W_FLOOR] = len(var)
    w.reg[W_SWEEP] = 0
    w.reg[W_OP] = SELECT
    return PAUSED


@jit
def open_bound(w: Walk) -> int:
    """The least integer bound over what the walk has not yet ruled out: the c0 before the
    shallowest left branch whose right branch is still to come (that level's whole subtree is
    open), else the current node's. TOP once the walk is done."""
    if w.reg[W_OP] == DONE:
        return TOP
    for d in range(w.reg[W_FLOOR], w.reg[W_DEPTH]):
        if w.kind[d] % 2 == 0:
            return int(w.c0[d])
    return -1  # the caller reads the current node's c0
