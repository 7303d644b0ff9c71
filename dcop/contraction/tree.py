"""Contraction trees of a sum-product network: where they come from, what they cost, slicing.

A network is the scope of every factor (its leaves ``0 .. m-1``) and the domain size of every
variable; the output is empty (``Z``), so each variable is summed out at the first node whose
subtree holds every leaf that has it. A tree is an SSA path: step ``k`` contracts nodes ``i`` and
``j`` into node ``m + k`` (opt_einsum's and cotengra's ``ssa_path``).

Sources of a tree (none of them a path search of ours):

* an elimination order (:func:`order_path`): bucket elimination as pairwise contractions, the
  tables holding a variable contracted smallest first, in the order's sequence; its largest
  intermediate is the order's largest table. The order comes from :mod:`dcop.orders.greedy` (a
  pluggable provider, see :mod:`dcop.contraction.plan`);
* opt_einsum's optimizers (:func:`optimizer_path`): ``greedy``, or ``random-greedy`` for a count
  of seeded trials.

:func:`analyse` gives each node's variables, the predicted flops (entries touched by every pair),
the largest intermediate and the planned peak; :func:`slice_vars` asks cotengra which variables to
slice so that the largest intermediate shrinks to a target size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Path = list[tuple[int, int]]
#: Most trials of opt_einsum's random-greedy per search (its own default is 32).
RANDOM_REPEATS = 64
#: Passes over each intermediate beyond its product, in flops (see TreeStats.cost).
WRITE_PASSES = 3.0


@dataclass(frozen=True)
class TreeStats:
    """What one tree costs on one network (``sliced`` variables fixed: one slice's cost).

    ``nodes[k]`` is the set of variables of node ``k`` (leaves first, then one per step);
    ``flops`` the entries of every pair's joint scope, summed; ``largest`` the entries of the
    largest intermediate (or leaf); ``peak_pr``/``peak_mar`` the entries live at the worst moment
    of a PR pass (intermediates freed once used) and of a MAR pass (every intermediate kept for
    the backward pass, plus its adjoints).
    """

    nodes: tuple[frozenset[str], ...]
    flops: float
    largest: int
    writes: float
    peak_pr: int
    peak_mar: int
    #: the largest of entries times axes over the intermediates: a table of many small axes is
    #: slow to lay out for a product (a transposed copy is strided on every axis)
    strided: float = 0.0

    @property
    def cost(self) -> float:
        """What the search ranks trees by: the flops, plus a few passes over every intermediate
        (its peak, its tiny entries, copies into a matmul layout)."""
        return self.flops + WRITE_PASSES * self.writes

    def peak(self, task: str) -> int:
        return self.peak_mar if task == "mar" else self.peak_pr


def _entries(
    scope: frozenset[str] | Sequence[str] | Mapping[str, int], sizes: Mapping[str, int]
) -> int:
    return math.prod(sizes[v] for v in scope)


def node_scopes(scopes: Sequence[Sequence[str]], path: Path) -> list[frozenset[str]]:
    """The variables of every node of ``path``: a step keeps a variable while a leaf outside its
    subtree still holds it (the output is empty)."""
    total: dict[str, int] = {}
    for scope in scopes:
        for v in set(scope):
            total[v] = total.get(v, 0) + 1
    nodes: list[frozenset[str]] = [frozenset(s) for s in scopes]
    # per node: how many leaves of its subtree hold each variable
    counts: list[dict[str, int]] = [dict.fromkeys(s, 1) for s in nodes]
    for i, j in path:
        a, b = counts[i], counts[j]
        if len(a) < len(b):
            a, b = b, a
        merged = dict(a)  # the smaller merged into a copy of the larger
        for v, c in b.items():
            merged[v] = merged.get(v, 0) + c
        keep = {v: c for v, c in merged.items() if c < total[v]}
        counts.append(keep)
        nodes.append(frozenset(keep))
    return nodes


def analyse(scopes: Sequence[Sequence[str]], sizes: Mapping[str, int], path: Path) -> TreeStats:
    """Flops, largest intermediate and the planned peaks of ``path`` (see :class:`TreeStats`)."""
    nodes = node_scopes(scopes, path)
    m = len(scopes)
    size = [_entries(n, sizes) for n in nodes]
    flops = 0.0
    writes = 0.0
    live = sum(size[:m])
    peak_pr = live
    kept = live
    largest = max(size, default=1)
    for k, (i, j) in enumerate(path):
        out = m + k
        # the pair's joint scope: its operands' entries over those of the variables they share
        # (exact in integers; no union set built per step)
        flops += float(size[i] * size[j] // _entries(nodes[i] & nodes[j], sizes))
        writes += float(size[out])
        # the pair's operands may be copied into a matmul layout while the output is built
        during = live + size[i] + size[j] + size[out]
        peak_pr = max(peak_pr, during)
        live += size[out] - (size[i] if i >= m else 0) - (size[j] if j >= m else 0)
        kept += size[out]
    # MAR keeps every intermediate; the backward pass holds a parent's adjoint, the sibling's
    # copy and the child's adjoint being built, plus one belief product
    peak_mar = kept + 4 * largest
    strided = max((float(size[k]) * len(nodes[k]) for k in range(m, len(nodes))), default=0.0)
    return TreeStats(tuple(nodes), flops, largest, writes, peak_pr, max(peak_mar, peak_pr), strided)


def order_path(
    scopes: Sequence[Sequence[str]], sizes: Mapping[str, int], order: Sequence[str]
) -> Path:
    """Bucket elimination along ``order`` as an SSA path: for each variable, the nodes that hold
    it are contracted pairwise, the two smallest first; nodes left at the end (0-d results of
    separate components) are contracted last."""
    m = len(scopes)
    total: dict[str, int] = {}
    for scope in scopes:
        for v in set(scope):
            total[v] = total.get(v, 0) + 1
    # per live node: how many leaves of its subtree hold each variable, and its entries (made
    # once per node: the sort keys had recounted them, a third of a 28x28 grid's pass)
    held: dict[int, dict[str, int]] = {k: dict.fromkeys(s, 1) for k, s in enumerate(scopes)}
    entries: dict[int, int] = {k: _entries(h, sizes) for k, h in held.items()}
    # the live nodes that hold each variable (a scan of every node per variable had cost a
    # 40x40 grid's four order trees 1.6 s)
    holding: dict[str, set[int]] = {}
    for k, h in held.items():
        for v in h:
            holding.setdefault(v, set()).add(k)
    path: Path = []
    next_id = m

    def contract(i: int, j: int) -> int:
        nonlocal next_id
        merged = held.pop(i)
        for v, c in held.pop(j).items():
            merged[v] = merged.get(v, 0) + c
        k = next_id
        next_id += 1
        keep = {}
        for v, c in merged.items():
            live = holding[v]
            live.discard(i)
            live.discard(j)
            if c < total[v]:
                keep[v] = c
                live.add(k)
        held[k] = keep
        entries[k] = _entries(keep, sizes)
        del entries[i], entries[j]
        path.append((i, j))
        return k

    for var in order:
        holders = sorted(holding.get(var, ()))  # by id: the order nodes were made in
        while len(holders) > 1:
            holders.sort(key=entries.__getitem__)
            k = contract(holders[0], holders[1])
            holders = [k, *holders[2:]]
    rest = sorted(entries, key=entries.__getitem__)
    while len(rest) > 1:
        k = contract(rest[0], rest[1])
        rest = [k, *rest[2:]]
    return path


def optimizer_path(
    scopes: Sequence[Sequence[str]],
    sizes: Mapping[str, int],
    method: str = "greedy",
    repeats: int = RANDOM_REPEATS,
) -> Path:
    """An SSA path from opt_einsum's ``greedy`` or ``random-greedy`` (``repeats`` trials, each
    seeded by its number: the same path on every call; no clock)."""
    import opt_einsum as oe
    from opt_einsum.paths import linear_to_ssa

    if len(scopes) < 2:
        return []
    inputs = [frozenset(s) for s in scopes]
    if method == "greedy":
        linear = oe.paths.greedy(inputs, frozenset(), dict(sizes))
    elif method == "random-greedy":
        # trial r is seeded by r (opt_einsum), and no max_time: the trials run, whatever the load
        optimizer = oe.RandomGreedy(max_repeats=max(1, repeats))
        linear = optimizer(inputs, frozenset(), dict(sizes))
    else:
        raise ValueError(f"unknown path optimizer {method!r}")
    ssa = [tuple(step) for step in linear_to_ssa(linear)]
    return _complete(len(scopes), [(int(s[0]), int(s[1])) for s in ssa if len(s) == 2], ssa)


def _complete(m: int, pairs: Path, ssa: Sequence[tuple[int, ...]]) -> Path:
    """opt_einsum may emit single-operand or 3+-operand steps; rewrite any path into pairs that
    end in one root."""
    if all(len(s) == 2 for s in ssa) and len(pairs) == m - 1:
        return pairs
    alias: dict[int, int] = {}
    out: Path = []
    next_id = m
    ssa_id = m
    for step in ssa:
        ids = [alias.get(i, i) for i in step]
        while len(ids) > 1:
            out.append((ids[0], ids[1]))
            ids = [next_id, *ids[2:]]
            next_id += 1
        alias[ssa_id] = ids[0]
        ssa_id += 1
    used = {i for pair in out for i in pair}
    roots = [k for k in range(next_id) if k not in used]
    while len(roots) > 1:
        out.append((roots[0], roots[1]))
        roots = [next_id, *roots[2:]]
        next_id += 1
    return out


#: Randomised repeats of cotengra's slice search (its default 16). Each repeat's candidate
#: slicings stay in its cache, and the heap keeps what they took: under a cap near the process's
#: own size the 16 repeats took the run over it (round 4, finding 13: Grids_11 MAR at 60 MiB,
#: 63 MiB). One repeat sliced Grids_11, DBN_11 and Segmentation_11 to a quarter of their peak with
#: at most 1.7 % more flops than 16, in half the search time.
SLICE_REPEATS = 1


def load_slicer() -> None:
    """Load cotengra, :func:`slice_vars`'s library, ahead of a memory reading that must count it."""
    import cotengra  # noqa: F401


def slice_vars(
    scopes: Sequence[Sequence[str]], sizes: Mapping[str, int], path: Path, target: int
) -> tuple[str, ...]:
    """cotengra's choice of variables to slice (sum over outside the contraction) so that no
    intermediate of ``path`` exceeds ``target`` entries."""
    import sys

    import cotengra as ctg

    # cotengra walks the tree recursively: a chain of n steps (an order's tree) is n deep
    depth = sys.getrecursionlimit()
    sys.setrecursionlimit(max(depth, 4 * len(path) + 1000))
    try:
        tree = ctg.ContractionTree.from_path(
            [tuple(s) for s in scopes], (), dict(sizes), ssa_path=[list(p) for p in path]
        )
        sliced = tree.slice(target_size=max(1, int(target)), seed=0, max_repeats=SLICE_REPEATS)
    finally:
        sys.setrecursionlimit(depth)
    return tuple(sorted(sliced.sliced_inds))
