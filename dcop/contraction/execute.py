"""Running a contraction tree: ``ln Z`` upward, and every marginal from one backward pass.

Two number spaces, one traversal (:func:`run_tree`):

* **scaled linear** (:class:`Scaled`): factors as ``exp(log table - peak)``; each pair is one
  matrix product (``matmul`` of the backend's array module: BLAS on NumPy, cuBLAS on CuPy), and
  its result is divided by its peak, whose log is carried beside it. Nothing overflows, exact
  zeros stay zeros, and ``ln Z`` is the log of the root plus the carried logs. Where an entry
  could have lost its precision (an intermediate whose entries may span more than float's range,
  see :func:`needs_check`, holding an entry below ``tiny / eps`` that is not an exact zero), the
  run is marked ``underflow`` and the caller runs log space instead.
* **log space** (:class:`LogSpace`): the same tree, each pair a fused ``logsumexp`` join+eliminate
  of the table backend (:func:`dcop.sumproduct.marginalize`): slower, never out of range.

MAR is reverse-mode differentiation of ``Z`` over the tree: the adjoint of a child is the
parent's adjoint contracted with the sibling (the same cost as the step upward); a variable's
marginal is the belief ``node * adjoint`` of one node that holds it, summed down to it. Only the
nodes some variable needs (and their ancestors) get an adjoint.

Slices (variables fixed outside the contraction): each slice is one such run on the leaves indexed
at the slice's values; ``ln Z`` and the beliefs add up over slices in log space.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcop.backends.base import Strided, TableBackend, capable
from dcop.contraction.tree import Path
from dcop.sumproduct import marginalize
from dcop.tables import Table


@dataclass
class Node:
    """A tree node's table: its variables in axis order, its data and (scaled space) the log of
    the factor divided out of it."""

    scope: tuple[str, ...]
    data: Any
    ln: Any = 0.0
    lost: int = 0  # scaled space, leaves: entries exp took below tiny (see Scaled)
    #: device scaled space (:class:`DeviceScaled`): the reference of the logs still on the
    #: device that add to ``ln`` (-1: none), and host bounds on the logs of the node's largest
    #: entry and of its least positive one
    ref: int = -1
    hi: float = 0.0
    lo: float = 0.0
    #: device scaled space, small leaves: a host copy of ``data`` (its MAR belief is taken on
    #: the host, from the adjoint brought back with the rest)
    host: np.ndarray | None = None


#: A device backend's ``product_sum(a, sa, b, sb, out)`` (:mod:`dcop.gpu.strided`): ``Σ a * b``
#: over what ``out`` lacks, contiguous over ``out``; ``b`` None: ``a`` alone.
ProductSum = Callable[[Any, tuple[str, ...], Any, tuple[str, ...], tuple[str, ...]], Any]


def _sum_alone(
    xp: Any, data: Any, scope: tuple[str, ...], wanted: set[str], psum: ProductSum | None = None
) -> tuple[Any, tuple[str, ...]]:
    """Sum out the axes of variables nobody else needs."""
    axes = tuple(k for k, v in enumerate(scope) if v not in wanted)
    if not axes:
        return data, scope
    kept = tuple(v for v in scope if v in wanted)
    if psum is not None:
        return psum(data, scope, None, (), kept), kept
    return xp.sum(data, axis=axes), kept


#: Stacks of at most this many matrix products run as one BLAS call each on the host.
BATCH_LOOP = 64
#: Host intermediates are divided by their peak only outside this range (entries then stay far
#: from overflow through the next product, and the bound on tiny entries is absolute).
_DRIFT_LOW, _DRIFT_HIGH = 2.0**-100, 2.0**100
#: Largest relative change of ``Z`` that tiny entries may have made for a scaled run to stand.
MAX_ERROR = 1e-13
#: Phase times of the runs (upward, backward, finish; the backend synchronized at each), kept
#: only while a caller sets a dict here (benchmarks/probes/contraction_ops.py): a run adds its own.
PHASES: dict[str, float] | None = None
#: Host pairs whose operands' sizes multiply to at most this are one ``numpy.einsum``.
SMALL_PAIR = 4096
#: Device pairs whose joint table has at most this many entries are one launch of the strided
#: kernel (dcop.gpu.strided), not a matrix product.
DIRECT_PAIR = 1 << 18
#: Device pairs that sum at most this many entries per output are one launch of the strided
#: kernel too, whatever their size: a matrix product with an inner dimension this small is all
#: memory traffic, and the layout copies before it cost as much again (ising28x28: a 2 x 2
#: factor into a 2^28-entry table took a 3 ms copy and a 10 ms batched product of 2 x 2 by
#: 2 x 2^25 matrices).
DIRECT_SUMMED = 4
#: A pair whose output is this many times smaller than both operands is one elementwise pass.
REDUCE_RATIO = 64
#: Device MAR: tables of at most this many entries are finished on the host, after the run's
#: one transfer: a belief over several variables is split there, and a small leaf's belief is
#: its host copy times its adjoint (a launch costs more than these bytes in that transfer)
HOST_SPLIT = 4096


def _layout(
    scope: tuple[str, ...], lead: Sequence[str], first: Sequence[str], second: Sequence[str]
) -> tuple[list[str], bool]:
    """The axis order to view an operand as a (batch, rows, columns) matrix stack: ``lead`` then
    ``first`` then ``second`` (``False``), or ``lead``, ``second``, ``first`` read transposed
    (``True``), whichever keeps the operand's own last axis last: a copy into that layout is then
    read along memory (a transposed read of a large table was 100x slower), and an operand
    already in either layout is not copied at all."""
    straight = [*lead, *first, *second]
    swapped = [*lead, *second, *first]
    if list(scope) == straight:
        return straight, False
    if list(scope) == swapped:
        return swapped, True
    last = scope[-1] if scope else None
    return (swapped, True) if second and last in first else (straight, False)


def pair_product(
    xp: Any,
    a: Any,
    sa: tuple[str, ...],
    b: Any,
    sb: tuple[str, ...],
    keep: frozenset[str],
    psum: ProductSum | None = None,
) -> tuple[Any, tuple[str, ...]]:
    """``Σ a * b`` over every variable not in ``keep``, as one (batched) matrix product.

    Axes are grouped as ``batch`` (in both, kept), ``a``-only, ``b``-only and ``summed`` (in
    both, not kept); the result's scope is ``batch + a-only + b-only``, so no output transpose.
    Shared axes follow the larger operand's order, so that the smaller one is the one copied.
    ``psum`` (a device backend's ``product_sum``, see :mod:`dcop.gpu.strided`) does every step
    but the matrix product itself: the sums of lone axes, the copies into the product's layout,
    products with nothing to sum and the small outputs of large operands.
    """
    if xp is np and a.size * b.size <= SMALL_PAIR and len(sa) + len(sb) <= len(_LETTERS):
        return _small_pair(a, sa, b, sb, keep)
    in_a, in_b = set(sa), set(sb)
    if psum is not None and (
        not (in_a & in_b) - keep
        or _joint_size(a, sa, b, sb) <= DIRECT_PAIR
        or _summed_size(a, sa, b, sb, keep) <= DIRECT_SUMMED
    ):
        # nothing summed over both (a broadcast product with its lone sums), a small pair or
        # little summed: one launch of the strided kernel, where the matrix product's layout
        # copies and call would be up to three. The output follows the larger operand's
        # layout, so that its reads run along its rows.
        big, small = (sa, sb) if a.size >= b.size else (sb, sa)
        scope = tuple(v for v in dict.fromkeys((*big, *small)) if v in keep)
        return psum(a, sa, b, sb, scope), scope
    if not in_a <= in_b | keep:
        a, sa = _sum_alone(xp, a, sa, in_b | keep, psum)
        in_a = set(sa)
    if not in_b <= in_a | keep:
        b, sb = _sum_alone(xp, b, sb, in_a | keep, psum)
        in_b = set(sb)
    size = _pair_sizes(a, sa, b, sb)
    big_a = a.size >= b.size
    big = sa if big_a else sb
    shared = in_a & in_b
    batch = [v for v in big if v in shared and v in keep]
    summed = [v for v in big if v in shared and v not in keep]
    a_only = [v for v in sa if v not in in_b]
    b_only = [v for v in sb if v not in in_a]
    nb = math.prod([size[v] for v in batch])
    m = math.prod([size[v] for v in a_only])
    k = math.prod([size[v] for v in summed])
    n = math.prod([size[v] for v in b_only])
    scope = (*batch, *a_only, *b_only)
    if nb * m * n * REDUCE_RATIO <= min(a.size, b.size):
        joint = (*sa, *b_only) if big_a else (*sb, *a_only)
        if math.prod([size[v] for v in joint]) <= 2 * max(a.size, b.size):
            # a small output of two large operands (a backward step down to a small child):
            # one elementwise pass in the larger operand's layout, then a sum, instead of
            # copying both into a matmul layout
            if psum is not None:
                out_scope = tuple(v for v in joint if v in keep)
                return psum(a, sa, b, sb, out_scope), out_scope
            product = _aligned(xp, a, sa, joint) * _aligned(xp, b, sb, joint)
            axes = tuple(i for i, v in enumerate(joint) if v not in keep)
            reduced = xp.sum(product, axis=axes) if axes else product
            return xp.asarray(reduced), tuple(v for v in joint if v in keep)
    order_a, swap_a = _layout(sa, batch, a_only, summed)
    order_b, swap_b = _layout(sb, batch, summed, b_only)
    if psum is not None:  # each operand contiguous in its layout: copied by our kernel
        at = (
            a
            if list(sa) == order_a and a.flags.c_contiguous
            else psum(a, sa, None, (), tuple(order_a))
        )
        bt = (
            b
            if list(sb) == order_b and b.flags.c_contiguous
            else psum(b, sb, None, (), tuple(order_b))
        )
    else:
        at = a if list(sa) == order_a else xp.transpose(a, [sa.index(v) for v in order_a])
        bt = b if list(sb) == order_b else xp.transpose(b, [sb.index(v) for v in order_b])
    am = at.reshape(nb, k, m).swapaxes(1, 2) if swap_a else at.reshape(nb, m, k)
    bm = bt.reshape(nb, n, k).swapaxes(1, 2) if swap_b else bt.reshape(nb, k, n)
    if k == 1:  # an outer (or elementwise) product: broadcasting, no BLAS call
        out = am * bm
    elif nb == 1:
        out = xp.matmul(am[0], bm[0])
    elif xp is np and nb > 4 * m * n:  # many tiny matrices: NumPy's loop over BLAS calls is slow
        out = np.einsum("bmk,bkn->bmn", am, bm)
    elif xp is np and nb <= BATCH_LOOP:
        # a few large matrices: one BLAS call each (NumPy's stacked matmul ran 10-40x slower
        # than this on ObjectDetection_56's 16 x (256 x 16 @ 16 x 256))
        out = np.empty((nb, m, n), dtype=np.result_type(am, bm))
        for i in range(nb):
            np.matmul(am[i], bm[i], out=out[i])
    else:
        out = xp.matmul(am, bm)
    return out.reshape(tuple(size[v] for v in scope)), scope


def _pair_sizes(a: Any, sa: tuple[str, ...], b: Any, sb: tuple[str, ...]) -> dict[str, int]:
    """The domain size of every variable of two operands."""
    size = dict(zip(sa, a.shape, strict=True))
    size.update(zip(sb, b.shape, strict=True))
    return size


def _summed_size(
    a: Any, sa: tuple[str, ...], b: Any, sb: tuple[str, ...], keep: frozenset[str]
) -> int:
    """Entries summed into each output entry of a pair: the product of the sizes of every
    variable of either operand not kept."""
    return math.prod(n for v, n in _pair_sizes(a, sa, b, sb).items() if v not in keep)


def _joint_size(a: Any, sa: tuple[str, ...], b: Any, sb: tuple[str, ...]) -> int:
    """Entries of the joint table of two operands."""
    return math.prod(_pair_sizes(a, sa, b, sb).values())


def _small_pair(
    a: np.ndarray, sa: tuple[str, ...], b: np.ndarray, sb: tuple[str, ...], keep: frozenset[str]
) -> tuple[np.ndarray, tuple[str, ...]]:
    """:func:`pair_product` of two small host tables as one ``numpy.einsum`` (its C loop over
    the joint beats the layout and BLAS calls there: 12 against 25 us on GEOM40_3's pairs)."""
    letters: dict[str, str] = {}
    for v in (*sa, *sb):
        if v not in letters:
            letters[v] = _LETTERS[len(letters)]
    scope = tuple(v for v in letters if v in keep)
    eq = "".join(letters[v] for v in sa) + "," + "".join(letters[v] for v in sb) + "->"
    # an array even when 0-d (einsum gives a scalar there): the caller may divide it in place
    return np.asarray(np.einsum(eq + "".join(letters[v] for v in scope), a, b)), scope


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _aligned(xp: Any, data: Any, scope: tuple[str, ...], target: tuple[str, ...]) -> Any:
    """``data`` (over ``scope``, a subset of ``target``) as a view over ``target``'s axes: its
    own axes reordered, size-1 axes for the variables it lacks (broadcast, never copied)."""
    present = [v for v in target if v in scope]
    data = xp.transpose(data, [scope.index(v) for v in present]) if present else data
    if len(present) == len(target):
        return data
    return data.reshape(tuple(data.shape[present.index(v)] if v in scope else 1 for v in target))


def _views(
    nodes: Sequence[Node], flat: Any, shapes: Sequence[tuple[int, ...]] | None = None
) -> None:
    """Point each node's data at its part of ``flat`` (in order; ``shapes`` default: each
    node's current data shape)."""
    start = 0
    for k, node in enumerate(nodes):
        shape = shapes[k] if shapes is not None else node.data.shape
        size = math.prod(shape)
        node.data = flat[start : start + size].reshape(shape)
        start += size


class Scaled:
    """Scaled linear space on a table backend's array module (``backend.xp``).

    Precision: an entry stored below ``tiny = finfo.tiny / eps`` may have lost its digits (or
    flushed to 0). Its true value is below ``tiny`` in its node's frame, and the rest of the
    network multiplies it by at most the product of the domain sizes it still sums over (every
    leaf is at most 1 in its frame), so the ``n`` such entries of a node move ``Z`` by at most
    ``n tiny exp(frame)``, ``frame`` being the logs carried and the sizes left (``h`` of
    :meth:`pair`, computed by the caller). A run whose bounds add up to more than
    :data:`MAX_ERROR` of ``Z`` is marked underflowed. An adjoint's ``n`` such entries move a
    belief's total (``Z`` in the frame of the node times its adjoint) by at most ``n tiny``.
    """

    space = "scaled"

    def __init__(self, backend: TableBackend, dtype: Any, sizes: Mapping[str, int]) -> None:
        self.backend = backend
        self.xp = backend.xp
        self.dtype = np.dtype(dtype)
        info = np.finfo(self.dtype)
        self.tiny = float(info.tiny / info.eps)
        self.ln_tiny = math.log(self.tiny)
        self.sizes = sizes
        #: ``ln`` of each node's bound on what its tiny entries may move ``Z`` by (see above)
        self.errors: list[Any] = []
        self.leaf_errors: list[float] = []
        #: whether :meth:`leaves` on a device keeps small leaves' host copies (``Node.host``)
        self.host_leaves = False

    def leaf(self, scope: tuple[str, ...], logs: np.ndarray) -> Node:
        """A factor ``exp(logs - peak)`` on the backend, its peak carried."""
        return self.leaves([scope], [logs])[0]

    def leaves(self, scopes: Sequence[tuple[str, ...]], logs: Sequence[np.ndarray]) -> list[Node]:
        nodes, flat = self._host_leaves(scopes, logs)
        data = self.backend.asarray(flat, self.dtype) if flat.size else flat
        if data is not flat:  # another backend's copy: views of it instead
            for node in nodes if self.host_leaves else ():
                if node.data.size <= HOST_SPLIT:  # its own copy: a view holds the whole buffer
                    node.host = node.data.copy()
            _views(nodes, data)
        return nodes

    def _host_leaves(
        self, scopes: Sequence[tuple[str, ...]], logs: Sequence[np.ndarray]
    ) -> tuple[list[Node], np.ndarray]:
        """Every leaf ``exp(logs - peak)`` at once, each a view of one host buffer: a dozen array
        calls for all the tables instead of as many per table (GEOM40_3's 78 leaves took a
        third of its contraction one by one)."""
        if not logs:
            return [], np.zeros(0, self.dtype)
        sizes = [x.size for x in logs]
        starts = np.concatenate(([0], np.cumsum(sizes[:-1]))).astype(np.intp)
        flat = np.concatenate([np.asarray(x, np.float64).ravel() for x in logs])
        peaks = np.maximum.reduceat(flat, starts)
        if np.isnan(peaks).any() or (peaks == math.inf).any():
            raise ValueError("a factor holds NaN or an infinite potential")
        positive = flat > -np.inf
        shift = np.repeat(np.where(peaks > -np.inf, peaks, 0.0), sizes)
        data = np.exp(flat - shift).astype(self.dtype, copy=False)
        least = np.minimum.reduceat(np.where(positive, flat, math.inf), starts)
        lost = np.add.reduceat((data < self.tiny) & positive, starts)
        nodes = []
        for k, scope in enumerate(scopes):
            peak = float(peaks[k])
            node = Node(scope, None, peak, int(lost[k]))
            if peak > -math.inf:  # ln(least positive entry / peak): the host bounds' span
                node.lo = float(least[k]) - peak
            nodes.append(node)
        _views(nodes, data, [x.shape for x in logs])
        return nodes, data

    def account_leaf(self, leaf: Node, h: float | None) -> None:
        """Add a leaf's bound (its entries that exp took below ``tiny``), ``h`` its frame."""
        if h is not None and leaf.lost:
            self.leaf_errors.append(math.log(leaf.lost) + self.ln_tiny + leaf.ln + h)

    def _scale(self, data: Any) -> tuple[Any, Any]:
        xp = self.xp
        if xp is np:  # on the host a peak is free to read: divide only when it drifts far
            top = float(data.max()) if data.size else 0.0
            if top == 0.0:
                return data, -math.inf
            if _DRIFT_LOW <= top <= _DRIFT_HIGH:
                return data, 0.0
            data /= top
            return data, math.log(top)
        peak = xp.max(data) if data.size else xp.zeros((), data.dtype)
        data /= xp.where(peak > 0, peak, 1)
        with np.errstate(divide="ignore"):
            return data, xp.log(peak)

    def _count(self, data: Any, offset: Any) -> None:
        xp = self.xp
        if xp is np and (not data.size or float(data.min()) >= self.tiny):
            return  # no tiny entry: nothing to count (one read instead of a mask and a sum)
        with np.errstate(divide="ignore"):
            self.errors.append(xp.log(xp.sum(data < self.tiny).astype(self.dtype)) + offset)

    def pair(self, a: Node, b: Node, keep: frozenset[str], h: float | None) -> Node:
        data, scope = pair_product(self.xp, a.data, a.scope, b.data, b.scope, keep)
        data, ln = self._scale(data)
        node = Node(scope, data, a.ln + b.ln + ln)
        if h is not None:
            self._count(data, node.ln + (self.ln_tiny + h))
        return node

    def adjoint(self, parent: Node, sibling: Node, child: Node) -> Node:
        xp = self.xp
        keep = frozenset(child.scope)
        if not parent.scope and set(sibling.scope) <= keep:
            # below a 0-d parent (the root), a sibling with nothing to sum is the adjoint itself
            # up to the parent's one number: shared, not copied (no step writes into it)
            data, scope, ln = sibling.data, sibling.scope, self._ln_scalar(parent.data)
        else:
            data, scope = pair_product(
                xp, parent.data, parent.scope, sibling.data, sibling.scope, keep
            )
            data, ln = self._scale(data)
        ln = parent.ln + sibling.ln + ln
        self._count(data, ln + child.ln + self.ln_tiny)
        # constant along the child's variables neither operand holds: those stay left out; the
        # rest in the child's own layout, so that the steps below read both alike (a strided
        # belief product or pair copy below cost more than this one copy: Grids_11's backward
        # pass ran slower without it)
        order = tuple(v for v in child.scope if v in scope)
        if order != scope:
            data = xp.ascontiguousarray(xp.transpose(data, [scope.index(v) for v in order]))
        return Node(order, data, ln)

    def _ln_scalar(self, value: Any) -> Any:
        with np.errstate(divide="ignore"):
            return self.xp.log(value)  # a 0-d array: the root's adjoint

    def ones(self, scope: tuple[str, ...]) -> Node:
        shape = tuple(self.sizes[v] for v in scope)
        return Node(scope, self.xp.ones(shape, self.dtype), 0.0)

    def ln_total(self, root: Node) -> Any:
        xp = self.xp
        with np.errstate(divide="ignore"):
            return xp.log(xp.sum(root.data)) + root.ln

    def beliefs(self, node: Node, adj: Node, names: Sequence[str]) -> dict[str, np.ndarray]:
        xp = self.xp
        product = node.data * _aligned(xp, adj.data, adj.scope, node.scope)
        # one pass down to the variables asked for, then each of them from that small table
        wanted = [u for u in node.scope if u in names]
        drop = tuple(k for k, u in enumerate(node.scope) if u not in names)
        belief = xp.sum(product, axis=drop) if drop else product
        out = {}
        for v in names:
            axes = tuple(k for k, u in enumerate(wanted) if u != v)
            vec = self.backend.to_numpy(xp.sum(belief, axis=axes) if axes else belief)
            with np.errstate(divide="ignore"):
                out[v] = np.log(np.asarray(vec, np.float64)) + float(self.host(node.ln + adj.ln))
        return out

    def host(self, value: Any) -> float:
        return float(self.backend.to_numpy(self.xp.asarray(value)))

    def slice_leaf(self, leaf: Node, index: Mapping[str, int]) -> Node:
        if not any(v in index for v in leaf.scope):
            return leaf
        key = tuple(index.get(v, slice(None)) for v in leaf.scope)
        scope = tuple(v for v in leaf.scope if v not in index)
        host = None if leaf.host is None else leaf.host[key]
        return dataclasses.replace(leaf, scope=scope, data=leaf.data[key], host=host)

    def zero(self, total: Any) -> bool:
        """Whether ``Z`` is 0 (read on the host)."""
        return self.host(total) == -math.inf

    def finish(self, total: Any, marginals: dict[str, np.ndarray]) -> TreeRun:
        """The run's outcome from its root's ``ln_total`` and the beliefs gathered."""
        run = TreeRun(ln_z=self.host(total), log_marginals=marginals)
        run.underflow = self.underflowed(run.ln_z)
        return run

    def underflowed(self, ln_z: float) -> bool:
        """Whether the tiny entries of this pass may have moved ``Z`` by more than MAX_ERROR."""
        xp = self.xp
        worst = max(self.leaf_errors, default=-math.inf)
        if self.errors:
            worst = max(worst, self.host(xp.max(xp.stack([xp.asarray(e) for e in self.errors]))))
        self.errors = []
        if ln_z == -math.inf:  # Z = 0, unless tiny entries all flushed to zero
            return worst > -math.inf
        return worst - ln_z > math.log(MAX_ERROR)


@dataclass
class _Belief:
    """A device MAR belief waiting for the run's one transfer: the variables it gives (in
    ``scope``'s order, or ``leaf_scope``'s), the device ``table`` over ``scope``, its host log
    and the references adding to it; for a small leaf, ``table`` is its adjoint and ``leaf`` its
    host copy over ``leaf_scope``, multiplied on the host."""

    names: tuple[str, ...]
    table: Any
    scope: tuple[str, ...]
    ln: float
    refs: tuple[int, ...]
    leaf: np.ndarray | None = None
    leaf_scope: tuple[str, ...] = ()


class DeviceScaled(Scaled):
    """Scaled linear space on a device backend, read on the host once, when the run ends.

    Each read of a device value on the host (CuPy: ``float(x)``, ``x.get()``) waits for the queue
    to drain; :class:`Scaled` reads its peaks and counts at every step, free on NumPy. Here a
    rescaled node is divided by ``c = max + tiny`` (a 0-d device array, never 0: exact zeros stay
    zeros with no ``where``) and ``c`` stays on the device: a node's ``ln`` is a host float (its
    leaves' peaks) plus ``Node.ref``, a reference to the sum of the ``ln c`` below it, added up
    on the host by :meth:`finish`. The precision counts and MAR's belief vectors wait on the
    device too: :meth:`finish` brings everything to the host in one transfer.

    A node is rescaled only where its entries may leave a safe range: host bounds on the logs of
    its largest entry (the logs of the domain sizes summed since the last rescale, ``Node.hi``)
    and of its least positive one (the leaves' spans, ``Node.lo``) need no read. Elsewhere the
    product stands as it is: a reduction, an addition and a division fewer per step.
    """

    #: Logs (float64) beyond which a node is rescaled: far inside float64's range (about +-708)
    #: and above its precision floor (``ln(tiny / eps)``, about -672).
    HI, LO = 200.0, -300.0

    def __init__(self, backend: TableBackend, dtype: Any, sizes: Mapping[str, int]) -> None:
        super().__init__(backend, dtype, sizes)
        self.ln_sizes = {v: math.log(d) for v, d in sizes.items()}
        self.floor = float(np.finfo(self.dtype).tiny)
        # float32: the same shares of its far narrower range
        ratio = -self.ln_tiny / 672.0
        self.hi_limit, self.lo_limit = self.HI * ratio, self.LO * ratio
        #: whether the adjoints' tiny entries are counted (see :func:`run_tree`'s ``checks``)
        self.check_adjoints = True
        #: the backend's own kernels (:class:`dcop.gpu.strided.StridedKernels`; None on NumPy,
        #: whose operations compile nothing): CuPy's operations would compile one kernel per
        #: number of dimensions met (a cold Grids_11 MAR spent 22 s compiling on an H100)
        self.kernels = backend.strided if capable(backend, Strided) else None
        self.psum: ProductSum | None = self.kernels.product_sum if self.kernels else None
        self._reset()

    def _reset(self) -> None:
        #: device 0-d arrays: what the rescaled nodes were divided by
        self.scales: list[Any] = []
        #: per reference: the two references it adds and its own scale's slot (-1: none)
        self.terms: list[tuple[int, int, int]] = []
        #: device 0-d counts of tiny entries, with the references and host offset of their frame
        self.counts: list[tuple[Any, tuple[int, ...], float]] = []
        #: MAR's device beliefs, finished by :meth:`finish`
        self.pending: list[_Belief] = []

    def _term(self, a: int, b: int, slot: int) -> int:
        if a < 0 and b < 0 and slot < 0:
            return -1
        self.terms.append((a, b, slot))
        return len(self.terms) - 1

    def _divide(self, data: Any, count: bool = False) -> tuple[int, Any]:
        """Divide ``data`` in place by its peak plus ``tiny``: the divisor's slot, and with
        ``count`` (on the backend's kernels, in the same pass) how many entries of the result
        are below ``tiny`` (else None)."""
        xp = self.xp
        counted = None
        if not data.size:
            c = xp.ones((), self.dtype)
        elif self.kernels is not None:
            c, counted = self.kernels.peak_divide(data, self.floor, self.tiny if count else None)
        else:
            c = xp.max(data) + self.floor
            data /= c
        self.scales.append(c)
        return len(self.scales) - 1, counted

    def _tally(self, data: Any, refs: tuple[int, ...], offset: float, counted: Any = None) -> None:
        """Record how many entries of ``data`` are below ``tiny`` (``counted``: already counted
        on the device), with the references and host offset of their frame."""
        if counted is not None:
            count = counted
        elif self.kernels is not None:
            count = self.kernels.count_below(data, self.tiny)
        else:
            count = self.xp.sum(data < self.tiny)
        self.counts.append((count, refs, offset))

    def _bounded(
        self, data: Any, a: Node, b: Node, summed: set[str], count: bool = False
    ) -> tuple[int, float, float, Any]:
        """Rescale ``data`` (the product of ``a`` and ``b`` summed over ``summed``) where its host
        bounds leave the safe range: its scale's slot (-1: none), its bounds after, and with
        ``count``, where it was rescaled and may hold entries below ``tiny``, their count from
        the same pass (else None: not counted)."""
        hi = a.hi + b.hi + sum(self.ln_sizes[v] for v in summed)
        lo = a.lo + b.lo
        if hi <= self.hi_limit and lo >= self.lo_limit:
            return -1, hi, lo, None
        # the peak is at most 1 now; the least positive entry was at least e^lo, divided by at
        # most e^hi
        lo -= hi
        slot, counted = self._divide(data, count=count and self._may_be_tiny(lo))
        return slot, 0.0, lo, counted

    def _may_be_tiny(self, lo: float) -> bool:
        """Whether a positive entry may lie below ``tiny`` (none can where ``e^lo`` is above)."""
        return lo < self.ln_tiny + 1.0

    def pair(self, a: Node, b: Node, keep: frozenset[str], h: float | None) -> Node:
        data, scope = pair_product(self.xp, a.data, a.scope, b.data, b.scope, keep, self.psum)
        summed = {*a.scope, *b.scope} - keep
        counted = None
        if h is not None:  # its range may be wider than float's: keep its peak at 1
            hi = a.hi + b.hi + sum(self.ln_sizes[v] for v in summed)
            lo = a.lo + b.lo - hi
            slot, counted = self._divide(data, count=self._may_be_tiny(lo))
            hi = 0.0
        else:
            slot, hi, lo, _ = self._bounded(data, a, b, summed)
        node = Node(scope, data, a.ln + b.ln, ref=self._term(a.ref, b.ref, slot), hi=hi, lo=lo)
        if h is not None and self._may_be_tiny(lo):
            self._tally(data, (node.ref,), node.ln + self.ln_tiny + h, counted)
        return node

    def adjoint(self, parent: Node, sibling: Node, child: Node) -> Node:
        xp = self.xp
        keep = frozenset(child.scope)
        if not parent.scope and set(sibling.scope) <= keep:
            # below a 0-d parent (the root): the sibling itself, shared, times the parent's
            # one number (kept as this node's scale)
            data, scope = sibling.data, sibling.scope
            self.scales.append(parent.data)
            slot, hi, lo, counted = len(self.scales) - 1, sibling.hi, sibling.lo, None
        else:
            data, scope = pair_product(
                xp, parent.data, parent.scope, sibling.data, sibling.scope, keep, self.psum
            )
            summed = {*parent.scope, *sibling.scope} - keep
            # a rescale counts the tiny entries in its own pass: one launch, not two
            slot, hi, lo, counted = self._bounded(
                data, parent, sibling, summed, count=self.check_adjoints
            )
        ln = parent.ln + sibling.ln
        ref = self._term(parent.ref, sibling.ref, slot)
        if self.check_adjoints and self._may_be_tiny(lo):
            # a tiny entry meets the child's entries (at most e^hi each, unscaled) over the
            # child's variables it lacks
            lacks = sum(self.ln_sizes[v] for v in child.scope if v not in scope)
            frame = ln + child.ln + child.hi + lacks + self.ln_tiny
            self._tally(data, (ref, child.ref), frame, counted)
        # left in the product's layout: a copy into the child's (which paid on the host, see
        # Scaled.adjoint) is one more kernel here, and the steps below read any layout
        return Node(scope, data, ln, ref=ref, hi=hi, lo=lo)

    def ones(self, scope: tuple[str, ...]) -> Node:
        shape = tuple(self.sizes[v] for v in scope)
        return Node(scope, self.xp.ones(shape, self.dtype), 0.0)

    def ln_total(self, root: Node) -> Any:
        if self.kernels is not None:
            return (self.kernels.reduce(root.data, 2, 0.0, 0.0), root)
        return (self.xp.sum(root.data), root)

    def zero(self, total: Any) -> bool:
        return False  # not read here: a run with Z = 0 goes on, on zeros, and says so at the end

    def beliefs(self, node: Node, adj: Node, names: Sequence[str]) -> dict[str, np.ndarray]:
        xp = self.xp
        wanted = tuple(u for u in node.scope if u in names)
        frame = (node.ln + adj.ln, (node.ref, adj.ref))
        if node.host is not None and adj.data.size <= HOST_SPLIT:
            # a small leaf: the adjoint comes back with the rest, times the leaf's host copy
            self.pending.append(_Belief(wanted, adj.data, adj.scope, *frame, node.host, node.scope))
            return {}
        psum = self.psum
        # node * adjoint summed down to the variables asked for, in one pass
        if psum is not None:
            belief = psum(node.data, node.scope, adj.data, adj.scope, wanted)
        else:
            product = node.data * _aligned(xp, adj.data, adj.scope, node.scope)
            drop = tuple(k for k, u in enumerate(node.scope) if u not in names)
            belief = xp.sum(product, axis=drop) if drop else product
        if len(wanted) == 1 or belief.size <= HOST_SPLIT:
            # a small table goes to the host whole and is split there
            self.pending.append(_Belief(wanted, belief, wanted, *frame))
            return {}
        for k, v in enumerate(wanted):
            axes = tuple(a for a in range(len(wanted)) if a != k)
            vec = psum(belief, wanted, None, (), (v,)) if psum else xp.sum(belief, axis=axes)
            self.pending.append(_Belief((v,), vec, (v,), *frame))
        return {}  # in finish

    def finish(self, total: Any, marginals: dict[str, np.ndarray]) -> TreeRun:
        """One device->host transfer: the root's sum, every scale, count and belief table (or a
        small leaf's adjoint); then the logs added up along the references, and each table
        split per variable (a leaf's times its host copy first)."""
        xp = self.xp
        root_sum, root = total
        parts = [xp.stack([root_sum, *self.scales])]
        if self.counts:
            parts.append(xp.stack([c for c, _, _ in self.counts]))
        parts.extend(belief.table.reshape(-1) for belief in self.pending)
        host = np.asarray(
            self.backend.to_numpy(
                xp.concatenate(
                    [p.astype(np.float64) if p.dtype != np.float64 else p for p in parts]
                )
            ),
            np.float64,
        )
        n_scales = len(self.scales)
        with np.errstate(divide="ignore"):
            ln_scales = np.log(host[1 : 1 + n_scales])
        dev = [0.0] * (len(self.terms) + 1)  # dev[-1]: the empty reference
        for t, (a, b, slot) in enumerate(self.terms):
            dev[t] = dev[a] + dev[b] + (float(ln_scales[slot]) if slot >= 0 else 0.0)
        with np.errstate(divide="ignore"):
            ln_z = float(np.log(host[0])) + float(root.ln) + dev[root.ref]
        worst = max(self.leaf_errors, default=-math.inf)
        at = 1 + n_scales
        for k, (_, refs, offset) in enumerate(self.counts):
            n = host[at + k]
            if n > 0:
                worst = max(worst, math.log(n) + offset + sum(dev[r] for r in refs))
        at += len(self.counts)
        for pending in self.pending:
            size = int(pending.table.size)
            table = host[at : at + size].reshape(tuple(self.sizes[v] for v in pending.scope))
            at += size
            names, scope = pending.names, pending.scope
            if pending.leaf is not None:  # a small leaf's copy times its adjoint
                scope = pending.leaf_scope
                product = pending.leaf * _aligned(np, table, pending.scope, scope)
                drop = tuple(k for k, u in enumerate(scope) if u not in names)
                table = product.sum(axis=drop) if drop else product
            shift = pending.ln + sum(dev[r] for r in pending.refs)
            for k, v in enumerate(names):
                axes = tuple(a for a in range(len(names)) if a != k)
                with np.errstate(divide="ignore"):
                    marginals[v] = np.log(table.sum(axis=axes) if axes else table) + shift
        self._reset()
        run = TreeRun(ln_z=ln_z, log_marginals=marginals)
        if ln_z == -math.inf:
            run.underflow = worst > -math.inf
        else:
            run.underflow = worst - ln_z > math.log(MAX_ERROR)
        return run


class LogSpace:
    """Log space on the table backend: each pair a fused ``logsumexp`` join+eliminate."""

    space = "log"

    def __init__(self, backend: TableBackend, dtype: Any, sizes: Mapping[str, int]) -> None:
        self.backend = backend
        self.dtype = np.dtype(dtype)
        self.sizes = sizes

    def leaf(self, scope: tuple[str, ...], logs: np.ndarray) -> Node:
        return Node(scope, self.backend.asarray(logs, self.dtype))

    def account_leaf(self, leaf: Node, h: float | None) -> None:
        pass

    def _marg(self, tables: Sequence[Node], keep: tuple[str, ...]) -> Node:
        out = marginalize(self.backend, [Table(t.scope, t.data) for t in tables], keep, self.sizes)
        return Node(out.scope, out.data)

    def pair(self, a: Node, b: Node, keep: frozenset[str], h: float | None) -> Node:
        ordered = tuple(v for v in (*a.scope, *b.scope) if v in keep)
        return self._marg([a, b], tuple(dict.fromkeys(ordered)))

    def adjoint(self, parent: Node, sibling: Node, child: Node) -> Node:
        return self._marg([parent, sibling], child.scope)

    def ones(self, scope: tuple[str, ...]) -> Node:
        shape = tuple(self.sizes[v] for v in scope)
        return Node(scope, self.backend.asarray(np.zeros(shape), self.dtype))

    def ln_total(self, root: Node) -> Any:
        return self._marg([root], ()).data

    def beliefs(self, node: Node, adj: Node, names: Sequence[str]) -> dict[str, np.ndarray]:
        return {
            v: np.asarray(self.backend.to_numpy(self._marg([node, adj], (v,)).data), np.float64)
            for v in names
        }

    def host(self, value: Any) -> float:
        return float(self.backend.to_numpy(value))

    def slice_leaf(self, leaf: Node, index: Mapping[str, int]) -> Node:
        if not any(v in index for v in leaf.scope):
            return leaf
        key = tuple(index.get(v, slice(None)) for v in leaf.scope)
        return Node(tuple(v for v in leaf.scope if v not in index), leaf.data[key])

    def underflowed(self, ln_z: float) -> bool:
        return False

    def leaves(self, scopes: Sequence[tuple[str, ...]], logs: Sequence[np.ndarray]) -> list[Node]:
        return [self.leaf(s, x) for s, x in zip(scopes, logs, strict=True)]

    def zero(self, total: Any) -> bool:
        return self.host(total) == -math.inf

    def finish(self, total: Any, marginals: dict[str, np.ndarray]) -> TreeRun:
        return TreeRun(ln_z=self.host(total), log_marginals=marginals)


Space = Scaled | DeviceScaled | LogSpace


@dataclass
class TreeRun:
    """What :func:`run_tree` found: ``ln Z`` (without the Problem's constant) and, for MAR, each
    variable's unnormalised log marginal (host vectors)."""

    ln_z: float
    log_marginals: dict[str, np.ndarray] = field(default_factory=dict)
    underflow: bool = False


def _sources(
    m: int, path: Path, nodes: Sequence[frozenset[str]], sizes: Mapping[str, int]
) -> dict[int, list[str]]:
    """For every variable, the node whose belief gives its marginal: a child of the step that sums
    it out (an intermediate when one holds it: it needs an adjoint anyway; else the smallest
    leaf), or the root for a variable never summed (a network of one leaf)."""
    out: dict[int, list[str]] = {}
    for k, (i, j) in enumerate(path):
        gone = (nodes[i] | nodes[j]) - nodes[m + k]
        for v in gone:
            holders = [c for c in (i, j) if v in nodes[c]]
            inner = [c for c in holders if c >= m]
            pick = (
                inner[0]
                if inner
                else min(holders, key=lambda c: math.prod(sizes[u] for u in nodes[c]))
            )
            out.setdefault(pick, []).append(v)
    root = m + len(path) - 1
    if nodes[root]:
        out.setdefault(root, []).extend(sorted(nodes[root]))
    return out


def run_tree(
    space: Space,
    leaves: Sequence[Node],
    path: Path,
    nodes: Sequence[frozenset[str]],
    checks: Sequence[float | None],
    mar: bool,
) -> TreeRun:
    """One pass of ``path`` over ``leaves`` in ``space`` (the backward pass too with ``mar``);
    ``checks[k]`` is node ``k``'s frame for the precision bound (None: its range fits)."""
    m = len(leaves)
    _phase(space, "")
    live: dict[int, Node] = dict(enumerate(leaves))
    for k, (i, j) in enumerate(path):
        live[m + k] = space.pair(live[i], live[j], nodes[m + k], checks[m + k])
        if not mar:
            if i >= m:
                del live[i]
            if j >= m:
                del live[j]
    root = m + len(path) - 1
    total = space.ln_total(live[root])
    _phase(space, "upward")
    if not mar or space.zero(total):
        return _finish(space, total, {})
    sizes = space.sizes
    sources = _sources(m, path, nodes, sizes)
    parent: dict[int, tuple[int, int]] = {}
    for k, (i, j) in enumerate(path):
        parent[i] = (m + k, j)
        parent[j] = (m + k, i)
    needed: set[int] = set()
    for node in sources:
        while node not in needed:
            needed.add(node)
            if node not in parent:
                break
            node = parent[node][0]
    marginals: dict[str, np.ndarray] = {}
    adjoints: dict[int, Node] = {root: space.ones(live[root].scope)}
    for k in range(len(path) - 1, -1, -1):
        here = m + k
        if here not in adjoints:
            continue
        adj = adjoints[here]
        i, j = path[k]
        for child, sibling in ((i, j), (j, i)):
            if child in needed:
                adjoints[child] = space.adjoint(adj, live[sibling], live[child])
        if here in sources:
            marginals.update(space.beliefs(live[here], adj, sources[here]))
        del adjoints[here]
        # the step above (where this node was a sibling) has run: freed now, its memory serves
        # the adjoints below instead of fresh pages (DBN_11's MAR, 2^20-entry nodes: 1.5x faster)
        del live[here]
    for leaf in range(m):
        if leaf in sources:
            marginals.update(space.beliefs(live[leaf], adjoints[leaf], sources[leaf]))
    _phase(space, "backward")
    return _finish(space, total, marginals)


_LAST = [0.0]


def _phase(space: Space, name: str) -> None:
    """Add the time since the last mark to ``PHASES[name]`` (none kept while PHASES is None)."""
    if PHASES is None:
        return
    space.backend.synchronize()
    now = time.perf_counter()
    if name:
        PHASES[name] = PHASES.get(name, 0.0) + now - _LAST[0]
    _LAST[0] = now


def _finish(space: Space, total: Any, marginals: dict[str, np.ndarray]) -> TreeRun:
    run = space.finish(total, marginals)
    _phase(space, "finish")
    return run


def run_sliced(
    space: Space,
    leaves: Sequence[Node],
    path: Path,
    nodes: Sequence[frozenset[str]],
    checks: Sequence[float | None],
    mar: bool,
    sliced: Sequence[str],
) -> TreeRun:
    """:func:`run_tree` once per value of the ``sliced`` variables (``nodes`` without them), the
    results added up in log space; a sliced variable's marginal is its slices' ``Z``."""
    if not sliced:
        return run_tree(space, leaves, path, nodes, checks, mar)
    sizes = space.sizes
    total = TreeRun(ln_z=-math.inf)
    if mar:
        total.log_marginals = {v: np.full(sizes[v], -math.inf) for v in sliced}
    for values in itertools.product(*(range(sizes[v]) for v in sliced)):
        index = dict(zip(sliced, values, strict=True))
        part = run_tree(
            space, [space.slice_leaf(x, index) for x in leaves], path, nodes, checks, mar
        )
        total.underflow |= part.underflow
        if part.ln_z == -math.inf:
            continue
        total.ln_z = float(np.logaddexp(total.ln_z, part.ln_z))
        if mar:
            for v, x in index.items():
                total.log_marginals[v][x] = np.logaddexp(total.log_marginals[v][x], part.ln_z)
            for v, vec in part.log_marginals.items():
                old = total.log_marginals.get(v)
                total.log_marginals[v] = vec if old is None else np.logaddexp(old, vec)
    return total
