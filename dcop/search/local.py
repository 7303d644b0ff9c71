"""A quick upper bound before the search: iterated conditional modes with random restarts.

Starting from the mini-bucket pass's assignment, each sweep gives every variable its best value
given the others' (ICM) until nothing moves; then a few variables are set at random and the
sweeps run again, keeping the best assignment seen (iterated local search). Compiled with the
search's loops; it works on the search's :class:`~dcop.search.kernel.Model` (the problem tables
are the nodes' labels), so costs are the search's internal costs.
"""

from __future__ import annotations

import numpy as np

from dcop.search.jit import jit
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
            d = m.dom[v]
            for x in range(d):
                buf[x] = 0.0
            add_functions(m, inc_fun, inc_off[v], inc_off[v + 1], v, d, asg, buf, 0)
            here = asg[v]
            best = here
            for x in range(d):
                if buf[x] < buf[best] - 1e-9 * (1.0 + abs(buf[best])):
                    best = x
            if best != here:
                asg[v] = best
                moved = True
        if not moved:
            break
    return done


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
