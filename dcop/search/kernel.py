"""The compiled core of the AND/OR branch and bound: one depth-first walk, resumable.

The walk solves the OR node of one pseudo-tree root (``top``) in the context its ancestors'
values give: it returns the subproblem's optimum if that is below the node's *budget*, or else a
lower bound that is at least the budget. Every child gets as budget what its parent can afford
(the parent's best so far, less the costs already counted and the heuristic of the children
still to come), so a parent's bound prunes all the way down.

Data lives in two named tuples of flat arrays (:mod:`dcop.search.compile` builds them):

* ``Model``, read only: the pseudo-tree (``parent``, children in CSR ``ch_off``/``ch_list``), the
  cost functions of each node's bucket (``lab_off``/``lab_fun``: the node's AND label), the
  mini-bucket messages that leave each node's subtree (``cr_off``/``cr_fun``: the node's
  heuristic, read when its parent expands), every function's table offset and scope with strides
  (each table laid out with the variable of its bucket last: the node that prices its d values
  reads adjacent entries; ``lab_sv``/``cr_sv`` hold that stride, 0 for a message that only
  passes through), and the cache layout (each node's context variables and multipliers, its offset, -1: none).
  A node whose whole subtree the pass eliminated exactly (``exact``: each of its buckets one
  mini-bucket) is never walked: its heuristic is its optimum, and a solution's values there are
  read from the labels and the heuristics, as a leaf's.
* ``State``, the walk itself: one frame per node (the path from ``top`` holds each node at most
  once), the cache, and registers that let :func:`search` stop after ``max_steps`` expansions and
  resume where it stopped.

A cache entry is empty, a lower bound, or exact (with the best value of its node); exact entries
never change. An entry's value and code sit side by side in one float64 array, so that a lookup
touches one page of a large, lazily zeroed cache. Pruning keeps a float margin (``eps_abs + eps_rel * |best|``), so that rounding
never cuts a branch that could be better: a proof stays a proof.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dcop.search.jit import jit, jit_inline

ENTER, NEXT_VALUE, NEXT_CHILD, FINISH, RETURN = 0, 1, 2, 3, 4
#: registers of State.reg
R_OP, R_NODE, R_EXACT, R_EXPANDED, R_HITS, R_WORK, R_WORK_LIMIT = 0, 1, 2, 3, 4, 5, 6


class Model(NamedTuple):
    dom: np.ndarray  # int32[n]
    parent: np.ndarray  # int32[n], -1 for a root
    ch_off: np.ndarray  # int32[n + 1]
    ch_list: np.ndarray  # int32[]
    lab_off: np.ndarray  # int32[n + 1]
    lab_fun: np.ndarray  # int32[]
    lab_sv: np.ndarray  # int64[]: the stride of the label's node in each label function
    cr_off: np.ndarray  # int32[n + 1]
    cr_fun: np.ndarray  # int32[]
    # int64[]: the stride of the crossed node's parent in each crossing function, 0 where the
    # function does not depend on it (a message passing through: one entry read, not d)
    cr_sv: np.ndarray
    f_off: np.ndarray  # int64[F]: each function's first entry in tables
    f_sc: np.ndarray  # int32[F + 1]: each function's scope in sc_var / sc_stride
    sc_var: np.ndarray  # int32[]
    sc_stride: np.ndarray  # int64[]
    tables: np.ndarray  # float64[]
    ctx_off: np.ndarray  # int32[n + 1]
    ctx_var: np.ndarray  # int32[]
    ctx_mul: np.ndarray  # int64[]
    ca_off: np.ndarray  # int64[n], -1: not cached
    # int8[n]: 1 where the node's subtree was eliminated exactly by the pass (every bucket in it
    # one mini-bucket), so that its heuristic is its optimum; empty: none known
    exact: np.ndarray = np.zeros(0, dtype=np.int8)


class State(NamedTuple):
    asg: np.ndarray  # int32[n]
    budget: np.ndarray  # float64[n]
    best: np.ndarray  # float64[n]
    bestx: np.ndarray  # int32[n]
    lbmin: np.ndarray  # float64[n]
    vi: np.ndarray  # int32[n]: the rank of the value being tried
    acc: np.ndarray  # float64[n]: the current AND node's cost so far
    remh: np.ndarray  # float64[n]: heuristic of its children still to solve
    ck: np.ndarray  # int32[n]: its next child
    key: np.ndarray  # int64[n]: the node's cache slot in this context, -1: none
    lab: np.ndarray  # float64[n * D]: AND labels per value
    fval: np.ndarray  # float64[n * D]: label + children's heuristic per value
    vals: np.ndarray  # int32[n * D]: values sorted by fval
    hcx: np.ndarray  # float64[n * D]: a node's heuristic per value of its parent
    cache: np.ndarray  # float64[2 C]: (value, code) per slot; code 0 empty, -1 lower, 1 + x exact
    reg: np.ndarray  # int64[8]
    fre: np.ndarray  # float64[2]: the returned value


@jit_inline
def add_functions(
    m: Model, funs: np.ndarray, lo: int, hi: int, v: int, d: int, asg: np.ndarray, out: np.ndarray,
    base_out: int,
) -> None:  # fmt: skip
    """out[base_out + x] += sum of functions funs[lo:hi] at asg with v = x, for x < d."""
    for k in range(lo, hi):
        f = funs[k]
        base = m.f_off[f]
        sv = 0
        for s in range(m.f_sc[f], m.f_sc[f + 1]):
            u = m.sc_var[s]
            if u == v:
                sv = m.sc_stride[s]
            else:
                base += asg[u] * m.sc_stride[s]
        for x in range(d):
            out[base_out + x] += m.tables[base + x * sv]


@jit_inline
def add_strided(
    m: Model, funs: np.ndarray, svs: np.ndarray, lo: int, hi: int, d: int, asg: np.ndarray,
    out: np.ndarray, base_out: int,
) -> float:  # fmt: skip
    """out[base_out + x] += the functions funs[lo:hi] with a stride svs[k] > 0, at ``asg`` with
    the expanded node = x (its entry in ``asg`` must be 0); returns the sum of the others (the
    functions it does not appear in), one entry read each."""
    rest = 0.0
    for k in range(lo, hi):
        f = funs[k]
        base = m.f_off[f]
        for i in range(m.f_sc[f], m.f_sc[f + 1]):
            base += asg[m.sc_var[i]] * m.sc_stride[i]
        sv = svs[k]
        if sv == 0:
            rest += m.tables[base]
        else:
            for x in range(d):
                out[base_out + x] += m.tables[base + x * sv]
    return rest


@jit_inline
def expand(m: Model, s: State, v: int, width: int) -> None:
    """Labels, children's heuristics and the sorted values of node ``v`` in the current context
    (``s.asg[v]`` is left 0: the caller sets it)."""
    d = m.dom[v]
    b = v * width
    s.asg[v] = 0  # the functions' offsets at v = 0; v's own stride steps through its values
    for x in range(d):
        s.lab[b + x] = 0.0
    rest = add_strided(m, m.lab_fun, m.lab_sv, m.lab_off[v], m.lab_off[v + 1], d, s.asg, s.lab, b)
    # the work: functions read (a chain-like tree's heuristic reads thousands a node)
    work = 1 + m.lab_off[v + 1] - m.lab_off[v]
    for x in range(d):
        s.lab[b + x] += rest
        s.fval[b + x] = s.lab[b + x]
    for k in range(m.ch_off[v], m.ch_off[v + 1]):
        c = m.ch_list[k]
        work += m.cr_off[c + 1] - m.cr_off[c]
        hb = c * width
        for x in range(d):
            s.hcx[hb + x] = 0.0
        rest = add_strided(m, m.cr_fun, m.cr_sv, m.cr_off[c], m.cr_off[c + 1], d, s.asg, s.hcx, hb)
        for x in range(d):
            s.hcx[hb + x] += rest
            s.fval[b + x] += s.hcx[hb + x]
    s.reg[R_WORK] += work
    # insertion sort of the values by fval (domains are small); ties keep the value order
    for x in range(d):
        f = s.fval[b + x]
        j = x
        while j > 0 and s.fval[b + s.vals[b + j - 1]] > f:
            s.vals[b + j] = s.vals[b + j - 1]
            j -= 1
        s.vals[b + j] = x


@jit_inline
def cache_slot(m: Model, s: State, v: int) -> int:
    """The cache slot of ``v`` in the current context, -1 if ``v`` has no cache."""
    slot = m.ca_off[v]
    if slot < 0:
        return -1
    for k in range(m.ctx_off[v], m.ctx_off[v + 1]):
        slot += s.asg[m.ctx_var[k]] * m.ctx_mul[k]
    return int(slot)


@jit
def search(
    m: Model, s: State, top: int, max_steps: int, width: int, eps_abs: float, eps_rel: float
) -> bool:
    """Walk from the registers' position until ``top`` returns (True), or ``max_steps`` nodes
    were expanded or the work reached ``reg[R_WORK_LIMIT]`` (when set) (False: call again to go
    on). Start a walk with :func:`start`. The answer is in ``s.fre[0]`` (value) and
    ``s.reg[R_EXACT]`` (1: the optimum, 0: a lower bound >= budget)."""
    op = s.reg[R_OP]
    v = s.reg[R_NODE]
    ret = s.fre[0]
    exact = s.reg[R_EXACT]
    steps = 0
    while True:
        if op == ENTER:
            if v != top and m.exact.shape[0] > 0 and m.exact[v] == 1:
                # its heuristic, priced when its parent expanded, is its optimum: no walk
                ret = s.hcx[v * width + s.asg[m.parent[v]]]
                exact = 1
                op = RETURN
                continue
            if steps >= max_steps:
                break
            if s.reg[R_WORK_LIMIT] > 0 and s.reg[R_WORK] >= s.reg[R_WORK_LIMIT]:
                break
            slot = cache_slot(m, s, v)
            s.key[v] = slot
            if slot >= 0:
                code = s.cache[2 * slot + 1]
                if code > 0.0 or (code < 0.0 and s.cache[2 * slot] >= s.budget[v]):
                    s.reg[R_HITS] += 1
                    ret = s.cache[2 * slot]
                    exact = 0
                    if code > 0.0:
                        exact = 1
                        s.asg[v] = int(code) - 1
                    op = RETURN
                    continue
            steps += 1
            expand(m, s, v, width)
            b = v * width
            if m.ch_off[v] == m.ch_off[v + 1]:  # a leaf: its best value is its optimum
                x = s.vals[b]
                s.asg[v] = x
                s.bestx[v] = x
                ret = s.fval[b + x]
                exact = 1
                op = RETURN
                continue
            s.best[v] = s.budget[v]
            s.bestx[v] = -1
            s.lbmin[v] = np.inf
            s.vi[v] = 0
            op = NEXT_VALUE
        elif op == NEXT_VALUE:
            if s.vi[v] >= m.dom[v]:
                op = FINISH
                continue
            b = v * width
            x = s.vals[b + s.vi[v]]
            f = s.fval[b + x]
            best = s.best[v]
            if f >= best + eps_abs + eps_rel * abs(best):  # sorted: every later value too
                if f < s.lbmin[v]:
                    s.lbmin[v] = f
                op = FINISH
                continue
            s.asg[v] = x
            s.acc[v] = s.lab[b + x]
            s.remh[v] = f - s.lab[b + x]
            s.ck[v] = 0
            op = NEXT_CHILD
        elif op == NEXT_CHILD:
            k = m.ch_off[v] + s.ck[v]
            if k == m.ch_off[v + 1]:  # every child solved: the AND node's value is exact
                if s.acc[v] < s.best[v]:
                    s.best[v] = s.acc[v]
                    s.bestx[v] = s.asg[v]
                elif s.acc[v] < s.lbmin[v]:  # a tie within the margin: still a bound
                    s.lbmin[v] = s.acc[v]
                s.vi[v] += 1
                op = NEXT_VALUE
                continue
            c = m.ch_list[k]
            s.remh[v] -= s.hcx[c * width + s.asg[v]]
            s.budget[c] = s.best[v] - s.acc[v] - s.remh[v]
            v = c
            op = ENTER
        elif op == FINISH:
            if s.best[v] < s.budget[v]:
                ret = s.best[v]
                exact = 1
                s.asg[v] = s.bestx[v]
            else:
                ret = s.lbmin[v]
                exact = 0
            slot = s.key[v]
            if slot >= 0:
                if exact == 1:
                    s.cache[2 * slot] = ret
                    s.cache[2 * slot + 1] = 1.0 + s.bestx[v]
                elif s.cache[2 * slot + 1] == 0.0 or ret > s.cache[2 * slot]:
                    s.cache[2 * slot] = ret
                    s.cache[2 * slot + 1] = -1.0
            op = RETURN
        else:  # RETURN: v answered ret (exact or a lower bound) to its parent
            if v == top:
                s.reg[R_OP] = RETURN
                s.reg[R_NODE] = v
                s.reg[R_EXACT] = exact
                s.reg[R_EXPANDED] += steps
                s.fre[0] = ret
                return True
            p = m.parent[v]
            s.acc[p] += ret
            s.ck[p] += 1
            best = s.best[p]
            lb = s.acc[p] + s.remh[p]
            if exact == 0 or lb >= best + eps_abs + eps_rel * abs(best):
                if lb < s.lbmin[p]:
                    s.lbmin[p] = lb
                s.vi[p] += 1
                v = p
                op = NEXT_VALUE
            else:
                v = p
                op = NEXT_CHILD
    s.reg[R_OP] = op
    s.reg[R_NODE] = v
    s.reg[R_EXACT] = exact
    s.reg[R_EXPANDED] += steps
    s.fre[0] = ret
    return False


def own_strides(
    node_off: np.ndarray, funs: np.ndarray, node_of: np.ndarray, f_sc: np.ndarray,
    sc_var: np.ndarray, sc_stride: np.ndarray,
) -> np.ndarray:  # fmt: skip
    """For each entry k of a CSR list of functions by node (``node_off``, ``funs``), the stride of
    node ``node_of[i]`` (i: the entry's node) in function ``funs[k]``, 0 where it is not in its
    scope: :attr:`Model.lab_sv` (``node_of`` the nodes themselves) and :attr:`Model.cr_sv`
    (``node_of`` the nodes' parents)."""
    off = np.asarray(node_off, dtype=np.int64)
    count = off[1:] - off[:-1]
    who = np.repeat(np.asarray(node_of, dtype=np.int64), count)  # each entry's node
    f = funs.astype(np.int64)
    lo = f_sc[f].astype(np.int64)
    arity = f_sc[f + 1].astype(np.int64) - lo
    out = np.zeros(f.shape[0], dtype=np.int64)
    if sc_var.shape[0] == 0:
        return out
    for j in range(int(arity.max(initial=0))):  # one position of every scope at a time
        at = np.minimum(lo + j, sc_var.shape[0] - 1)
        hit = (j < arity) & (who >= 0) & (sc_var[at] == who)
        out[hit] = sc_stride[at[hit]]
    return out


def start(s: State, top: int, budget: float) -> None:
    """Set the registers for a walk from ``top`` with ``budget``."""
    s.reg[R_OP] = ENTER
    s.reg[R_NODE] = top
    s.budget[top] = budget


@jit
def stack_bound(m: Model, s: State, top: int, width: int, h_top: float) -> float:
    """A lower bound of min(optimum of ``top``, its budget) while a walk is paused (``h_top``,
    the heuristic of ``top``, before it starts): the frames on the path from ``top`` to the node
    about to be entered, folded bottom up."""
    v = s.reg[R_NODE]
    if s.reg[R_OP] != ENTER:
        return float(s.fre[0])
    if v == top:
        return h_top
    lb = s.hcx[v * width + s.asg[m.parent[v]]]
    while v != top:
        p = m.parent[v]
        b = p * width
        best = min(s.best[p], s.lbmin[p], s.acc[p] + lb + s.remh[p])
        nxt = s.vi[p] + 1
        if nxt < m.dom[p]:
            best = min(best, s.fval[b + s.vals[b + nxt]])
        lb = best
        v = p
    return float(lb)


@jit
def solution_of(m: Model, s: State, order: np.ndarray, first: int, width: int) -> int:
    """Write the best values of a subtree whose optimum was just proved into ``s.asg``, from
    exact cache entries and the leaves' labels; ``order`` lists the subtree's nodes parents
    first, its top's value already in ``s.asg``, and the walk starts at ``order[first]``.
    Returns -1 when done, or the position of a node that has no exact entry (an uncached inner
    node): the caller solves that node again and goes on after it."""
    for i in range(first, order.shape[0]):
        v = order[i]
        # a leaf, or a subtree the pass solved exactly: its children's heuristics are their
        # optima, so its best value in this context is the best by its labels and theirs
        if m.ch_off[v] == m.ch_off[v + 1] or (m.exact.shape[0] > 0 and m.exact[v] == 1):
            expand(m, s, v, width)
            s.asg[v] = s.vals[v * width]
            continue
        slot = cache_slot(m, s, v)
        if slot < 0 or s.cache[2 * slot + 1] <= 0.0:
            return i
        s.asg[v] = int(s.cache[2 * slot + 1]) - 1
    return -1


@jit
def tighten(m: Model, s: State, top: int, bound: float) -> None:
    """Lower the budget of a walk paused in ``top``'s subtree to ``bound`` (a better incumbent
    found meanwhile), down the path of open frames: each frame's best drops to its new budget
    (a solution it had found above it becomes one of its lower bounds), and each child on the
    path gets the budget its parent can now afford. The walk then answers as if started with
    that budget: the optimum when it is below, else a lower bound at least the budget."""
    if s.reg[R_OP] != ENTER:
        return
    here = s.reg[R_NODE]
    depth = 0
    v = here
    while v != top:
        depth += 1
        v = m.parent[v]
    path = np.empty(depth + 1, dtype=np.int64)
    v = here
    for i in range(depth, -1, -1):
        path[i] = v
        if i > 0:
            v = m.parent[v]
    for i in range(depth + 1):
        v = path[i]
        if i == 0:
            b = min(s.budget[v], bound)
        else:
            p = path[i - 1]
            b = min(s.budget[v], s.best[p] - s.acc[p] - s.remh[p])
        s.budget[v] = b
        if v != here and s.best[v] > b:  # an open frame
            if s.bestx[v] >= 0 and s.best[v] < s.lbmin[v]:
                s.lbmin[v] = s.best[v]
            s.best[v] = b
            s.bestx[v] = -1


@jit
def price(m: Model, s: State, v: int, width: int) -> None:
    """:func:`expand` called from Python: node ``v``'s labels (``s.lab``), its values' labels
    plus its children's heuristics (``s.fval``) and its values sorted by those (``s.vals``), in
    the context ``s.asg`` holds (the split of :mod:`dcop.search.parallel` prices the top of the
    pseudo-tree with it)."""
    expand(m, s, v, width)


@jit
def descend(m: Model, s: State, order: np.ndarray, first: int, width: int) -> None:
    """A greedy completion in ``s.asg``: each node of ``order[first:]`` (a subtree's preorder,
    the values above ``order[first]`` already in ``s.asg``) takes its best value by its labels
    and its children's heuristics, parents first. Each of the split's subproblems
    (:mod:`dcop.search.parallel`) offers its own as an incumbent before any walk: the threads
    then start with a budget near the optimum's, not the first answer's."""
    for i in range(first, order.shape[0]):
        v = order[i]
        expand(m, s, v, width)
        s.asg[v] = s.vals[v * width]
