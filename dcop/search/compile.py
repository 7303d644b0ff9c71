"""From a problem, an order and its mini-bucket pass to the search's flat arrays.

The pseudo-tree is the order's bucket tree: a variable's parent is the first-eliminated variable
of its induced scope (where BE sends its message), and that scope is its *context*: the ancestors
its subproblem depends on, which key its cache. The search visits the tree from the roots (the
last-eliminated variables) down, so every table's scope is assigned by the time its bucket's
variable is, and every mini-bucket message that leaves a subtree can be read by the subtree's
parent.

Each node's AND label is the sum of the problem tables in its bucket; the heuristic of a node
(the cost its subtree will add at least) is the sum of the messages made inside its subtree and
placed in a bucket above it, and of the scalars made inside it: the static mini-bucket
heuristic, a lower bound of the subtree's optimum, and exact where the pass is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dcop.backends.base import TableBackend
from dcop.backends.between import checked_between
from dcop.bucketpass import Buckets
from dcop.host_arrays import touched_empty
from dcop.model import Problem
from dcop.search.kernel import Model, State, own_strides
from dcop.tables import Table
from dcop.trees.induced import induced_scopes

#: Bytes of one cache entry: value and code (two float64).
CACHE_ENTRY_BYTES = 16
#: The largest context table one node may cache (entries): a larger one costs page faults and
#: TLB misses on most lookups, where the subproblem is rarely met twice in the same context.
NODE_CACHE_MAX = 1 << 22


@dataclass(frozen=True)
class Compiled:
    """The search's arrays and what the solver needs beside them."""

    model: Model
    names: list[str]  # node -> variable name (node i is the i-th variable eliminated)
    roots: list[int]  # the pseudo-tree's roots (one per connected part)
    preorder: dict[int, np.ndarray]  # each root's subtree, parents first
    root_h: dict[int, float]  # each root's heuristic (a constant)
    width: int  # the largest domain
    cached_nodes: int
    cache_entries: int
    uncached_inner: int
    heuristic_entries: int
    depth: int


def compile_search(
    problem: Problem,
    order: Sequence[str],
    buckets: Buckets,
    backend: TableBackend,
    cache_bytes: float,
    check: Callable[[], None] | None = None,
    z: int | None = 0,
) -> Compiled:
    """The search's :class:`Model` for ``problem`` along ``order`` with the heuristic of
    ``buckets`` (a :func:`~dcop.bucketpass.bucket_pass` over ``order``), caching contexts within
    ``cache_bytes`` (smallest contexts first). ``check`` is called before each table is copied (it
    may raise to stop: thousands of buckets take seconds, and the messages of a z = 8 pass on the
    random networks 3 s, many more on a loaded machine; a call costs a clock's read). ``z`` is the pass's mini-bucket size
    (None: exact; 0, the default: not known): a node's subtree whose buckets each joined at most
    ``z`` variables was eliminated exactly, and the walk takes its heuristic as its optimum."""
    names = list(order)
    node = {v: i for i, v in enumerate(names)}
    n = len(names)
    dom = np.array([problem.variables[v].size for v in names], dtype=np.int32)
    scopes = induced_scopes(problem.neighbours(), names)
    context = [[node[u] for u in scopes[v]] for v in names]
    parent = np.array([min(c) if c else -1 for c in context], dtype=np.int32)
    children: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        if parent[v] >= 0:
            children[int(parent[v])].append(v)
    roots = [v for v in range(n) if parent[v] < 0]

    labels: list[list[int]] = [[] for _ in range(n)]
    # one flat array, each table copied into place once (no list of copies to concatenate)
    total_entries = sum(t.size for v in names for t in buckets.tables[v])
    total_entries += sum(1 for x in buckets.scalars.values() if x != 0.0)
    with checked_between(check):  # the pages of a z = 8 pass's messages took seconds
        flat_tables = touched_empty(max(1, total_entries))
    on_host = backend.name == "numpy"
    f_off: list[int] = []
    f_sc: list[int] = [0]
    sc_var: list[int] = []
    sc_stride: list[int] = []
    offset = 0

    def add_function(scope: Sequence[str], data: Any, key: str | None = None) -> int:
        """Copy ``data`` (the backend's array: on a device, it is copied from there straight
        into place) into place with ``key`` (the variable of the bucket it lies in, in its
        scope) as its last axis: the node that reads it at each of its values then reads
        adjacent entries (one or two cache lines), not d entries a large stride apart (a
        message of 1e7 entries: a cache miss each)."""
        nonlocal offset
        if key is not None and len(scope) > 1 and scope[-1] != key:
            moved = (*(u for u in scope if u != key), key)
            if on_host:  # a view: the copy into place below is the only one
                data = np.moveaxis(data, list(scope).index(key), -1)
            else:  # moved where the table lies (a device at its memory's speed)
                data = backend.transpose(Table(tuple(scope), data), moved).data
            scope = moved
        shape = [problem.variables[u].size for u in scope]
        size = math.prod(shape)
        backend.copy_to_host(data, flat_tables[offset : offset + size].reshape(shape))
        f_off.append(offset)
        offset += size
        stride = 1
        strides = []
        for size in reversed(shape):
            strides.append(stride)
            stride *= size
        sc_var.extend(node[u] for u in scope)
        sc_stride.extend(reversed(strides))
        f_sc.append(len(sc_var))
        return len(f_off) - 1

    # messages: (origin, the node of the bucket it lands in, -1 for a scalar, function); each
    # crosses every node on the way up from its origin to (not into) that bucket
    cross_from: list[int] = []
    cross_until: list[int] = []
    cross_fun: list[int] = []

    def cross(origin: int, until: int, f: int) -> None:
        cross_from.append(origin)
        cross_until.append(until)
        cross_fun.append(f)

    # a bucket whose tables' joined scope holds at most z variables is one mini-bucket
    # (buckets.partition_scopes' first fit then never opens a second): eliminated exactly
    exact_bucket = [
        z is None or (z > 0 and len({u for t in buckets.tables[v] for u in t.scope}) <= z)
        for v in names
    ]
    exact = np.zeros(n, dtype=np.int8)
    for v in range(n):  # children come before their parent along the order
        exact[v] = exact_bucket[v] and all(exact[c] == 1 for c in children[v])
    heuristic_entries = 0
    for var in names:
        w = node[var]
        for table, origin in zip(buckets.tables[var], buckets.origins[var], strict=True):
            if check is not None:
                check()
            f = add_function(table.scope, table.data, var)
            if origin is None:
                labels[w].append(f)
            else:
                heuristic_entries += table.size
                cross(node[origin], w, f)
    for var, scalar in buckets.scalars.items():
        if scalar != 0.0:
            cross(node[var], -1, add_function((), np.array(scalar)))
    cr_off, cr_fun = _crossings(parent, cross_from, cross_until, cross_fun)

    # caches: inner nodes, smallest contexts first, within the byte budget
    entries = [math.prod(int(dom[u]) for u in context[v]) if children[v] else 0 for v in range(n)]
    ca_off = np.full(n, -1, dtype=np.int64)
    room = int(cache_bytes // CACHE_ENTRY_BYTES)
    total = 0
    for v in sorted((v for v in range(n) if children[v]), key=entries.__getitem__):
        if total + entries[v] > room or entries[v] > NODE_CACHE_MAX:
            break
        ca_off[v] = total
        total += entries[v]
    ctx_off = [0]
    ctx_var: list[int] = []
    ctx_mul: list[int] = []
    for v in range(n):
        mul = 1
        muls = []
        for u in reversed(context[v]):
            # an uncached node's multipliers are never read: zeros (a wide context's product
            # would overflow int64)
            muls.append(mul if ca_off[v] >= 0 else 0)
            mul *= int(dom[u])
        ctx_var.extend(context[v])
        ctx_mul.extend(reversed(muls))
        ctx_off.append(len(ctx_var))

    lab_off, lab_fun = _offsets(labels), _flat(labels)
    f_sc_a = np.array(f_sc, dtype=np.int32)
    sc_var_a = np.array(sc_var, dtype=np.int32)
    sc_stride_a = np.array(sc_stride, dtype=np.int64)
    model = Model(
        dom=dom,
        parent=parent,
        ch_off=_offsets(children),
        ch_list=_flat(children),
        lab_off=lab_off,
        lab_fun=lab_fun,
        lab_sv=own_strides(lab_off, lab_fun, np.arange(n), f_sc_a, sc_var_a, sc_stride_a),
        cr_off=cr_off,
        cr_fun=cr_fun,
        cr_sv=own_strides(cr_off, cr_fun, parent, f_sc_a, sc_var_a, sc_stride_a),
        f_off=np.array(f_off, dtype=np.int64),
        f_sc=f_sc_a,
        sc_var=sc_var_a,
        sc_stride=sc_stride_a,
        tables=flat_tables,
        ctx_off=np.array(ctx_off, dtype=np.int32),
        ctx_var=np.array(ctx_var, dtype=np.int32),
        ctx_mul=np.array(ctx_mul, dtype=np.int64),
        ca_off=ca_off,
        exact=exact,
    )
    preorder = {r: _preorder(r, children) for r in roots}
    root_h = {
        r: float(sum(model.tables[model.f_off[f]] for f in cr_fun[cr_off[r] : cr_off[r + 1]]))
        for r in roots
    }
    depth = _depth(roots, children)
    return Compiled(
        model=model,
        names=names,
        roots=roots,
        preorder=preorder,
        root_h=root_h,
        width=max(int(dom.max(initial=1)), 1),
        cached_nodes=int((ca_off >= 0).sum()),
        cache_entries=total,
        uncached_inner=sum(1 for v in range(n) if children[v] and ca_off[v] < 0),
        heuristic_entries=heuristic_entries,
        depth=depth,
    )


def new_state(
    model: Model, width: int, cache_entries: int, cache: np.ndarray | None = None
) -> State:
    """A fresh walk's state: empty frames, an empty cache of ``cache_entries`` slots (or
    ``cache``, another walk's, shared)."""
    n = model.dom.shape[0]
    slots = max(cache_entries, 1)
    return State(
        asg=np.zeros(n, dtype=np.int32),
        budget=np.zeros(n),
        best=np.zeros(n),
        bestx=np.zeros(n, dtype=np.int32),
        lbmin=np.zeros(n),
        vi=np.zeros(n, dtype=np.int32),
        acc=np.zeros(n),
        remh=np.zeros(n),
        ck=np.zeros(n, dtype=np.int32),
        key=np.full(n, -1, dtype=np.int64),
        lab=np.zeros(n * width),
        fval=np.zeros(n * width),
        vals=np.zeros(n * width, dtype=np.int32),
        hcx=np.zeros(n * width),
        # zeroed pages: memory is touched only where used
        cache=np.zeros(2 * slots) if cache is None else cache,
        reg=np.zeros(8, dtype=np.int64),
        fre=np.zeros(2),
    )


def _crossings(
    parent: np.ndarray, origins: list[int], untils: list[int], funs: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each node's crossing messages in CSR form (a node's in increasing function order): the
    walks up the tree advance all messages one level at a time, in NumPy (a chain-like tree of
    thousands of nodes has millions of crossings)."""
    n = parent.shape[0]
    at = np.array(origins, dtype=np.int64)
    until = np.array(untils, dtype=np.int64)
    fun = np.array(funs, dtype=np.int64)
    nodes: list[np.ndarray] = []
    fs: list[np.ndarray] = []
    live = at != until
    at, until, fun = at[live], until[live], fun[live]
    while at.size:
        nodes.append(at)
        fs.append(fun)
        at = parent[at].astype(np.int64)
        live = at != until
        at, until, fun = at[live], until[live], fun[live]
    node_all = np.concatenate(nodes) if nodes else np.zeros(0, dtype=np.int64)
    fun_all = np.concatenate(fs) if fs else np.zeros(0, dtype=np.int64)
    order = np.lexsort((fun_all, node_all))
    counts = np.bincount(node_all, minlength=n)
    off = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=off[1:])
    return off, fun_all[order].astype(np.int32)


def _offsets(lists: list[list[int]]) -> np.ndarray:
    return np.array([0, *np.cumsum([len(x) for x in lists])], dtype=np.int32)


def _flat(lists: list[list[int]]) -> np.ndarray:
    return np.array([x for xs in lists for x in xs], dtype=np.int32)


def _preorder(root: int, children: list[list[int]]) -> np.ndarray:
    out = []
    stack = [root]
    while stack:
        v = stack.pop()
        out.append(v)
        stack.extend(reversed(children[v]))
    return np.array(out, dtype=np.int32)


def _depth(roots: list[int], children: list[list[int]]) -> int:
    deepest = 0
    stack = [(r, 1) for r in roots]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children[v])
    return deepest
