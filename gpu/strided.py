"""The contraction engine's device kernels: sums of products of two strided tables, and
whole-array peaks, counts and sums. One CUDA module per dtype, compiled once.

``product_sum(a, sa, b, sb, out)`` is ``Σ a * b`` over every variable of ``sa`` or ``sb`` not in
``out``, written contiguous in ``out``'s axis order: with nothing summed it is a broadcast
product, with ``b`` left out a sum over axes or (nothing summed either) a copy into a new axis
order. ``peak_divide``, ``count_below`` and ``reduce`` are the scaled space's peaks, precision
counts and totals. Every device step of the engine but the matrix product is one of these.

Why our own kernels: CuPy compiles an elementwise or reduction kernel for each number of
dimensions (after merging) an operation meets, and CUB reductions for whole arrays, and a
sum-product tree meets dozens: a fresh process spent 22 s compiling before its first MAR of
Grids_11 (0.09 s warm) on an H100. These read every index from a small metadata table at run
time, so a process compiles one module per dtype, whatever the shapes.

Layout of the metadata (int64): ``[size, magic, magic32, shifts, stride in a, stride in b]`` per
output dimension, then per summed dimension. An output index ``o`` is split into its coordinates
from the last (fastest) dimension up, each ``o % size`` with ``o /= size``, and is at ``Σ
coordinate * stride`` in each operand; a summed index ``r`` adds its own. The divisions are by
magic numbers (:func:`divider`): a multiply-high, an add and two shifts instead of a division,
which a GPU runs as a long software routine. Where every index and offset of a launch fits 31
bits (``_Plan.width`` "i32", nearly always) the kernels index in 32 bits, whose multiply-high is
one instruction (64-bit products take several). On ising28x28's MAR, steps down to a 16-entry
child from two 2^27-entry operands, indexed over 22 summed dimensions, ran 18 ms with
divisions and 12 ms with 64-bit magic numbers; the bandwidth allows about 1 ms. Dimensions
adjacent in the output (or in the summed set) that are adjacent in both operands too are merged
first, so most steps index in two or three dimensions. Each distinct metadata table is uploaded
once per device and kept, with the launch plan of each operand layout: a warm run of the same
tree plans and uploads nothing.

Two shapes of work for a sum of products: ``rows`` (one thread per output entry, looping over
the summed ones) where the output is large or little is summed; ``blocks`` (one block per output
entry and part of the summed range, reduced in shared memory, the parts added by a ``rows``
launch) where a few outputs sum many entries, as a belief or a step down to a small child does.
Whole-array reductions take one block up to SMALL_REDUCE entries (one launch), else a block per
part and one more launch for the parts. Everything adds in a fixed order: a run gives the same
bits every time.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Threads per block.
BLOCK = 256
#: Outputs from which the ``rows`` kernel runs whatever is summed (enough threads to fill a GPU).
ROWS_MIN_OUTPUTS = 1 << 16
#: Summed entries up to which one thread sums an output alone.
ROWS_MAX_SUMMED = 64
#: Summed entries one block of the ``blocks`` kernel takes at least.
BLOCK_MIN_SUMMED = 8 * BLOCK
#: Blocks the ``blocks`` kernel aims for (a few per multiprocessor of a large GPU).
TARGET_BLOCKS = 1024
#: Entries up to which a whole-array reduction runs in one block (one launch).
SMALL_REDUCE = 1 << 16
#: Distinct metadata tables kept on a device.
META_CACHE = 4096

_HELPERS = r"""
// the offsets in a and b of index `idx` over metadata dimensions [first, first + count), the last
// fastest; idx is below their sizes' product, so the first dimension's coordinate is what is left.
// Two widths: I (the index) and O (an offset) 32-bit where every index and offset fits, with a
// one-instruction multiply-high; else 64-bit.
__device__ __forceinline__ unsigned int dcop_mulhi(unsigned int m, unsigned int x) {
    return __umulhi(m, x);
}
__device__ __forceinline__ unsigned long long dcop_mulhi(unsigned long long m, unsigned long long x) {
    return __umul64hi(m, x);
}
template <typename I, typename O>
__device__ __forceinline__ void dcop_offsets(const long long* sm, int first, int count, I idx,
                                             O& ia, O& ib) {
    if (count <= 0) return;
    for (int k = first + count - 1; k > first; --k) {
        const long long* e = sm + @WORDS@ * k;
        const I t = dcop_mulhi((I)e[sizeof(I) == 4 ? 2 : 1], idx);
        const int sh = (int)e[3];
        const I q = (t + ((idx - t) >> (sh & 255))) >> (sh >> 8);
        const O c = (O)(idx - q * (I)e[0]);
        ia += c * (O)e[4];
        ib += c * (O)e[5];
        idx = q;
    }
    const long long* e = sm + @WORDS@ * first;
    ia += (O)idx * (O)e[4];
    ib += (O)idx * (O)e[5];
}

// op 0: max, otherwise a sum
__device__ __forceinline__ T dcop_fold(int op, T acc, T v) {
    return op == 0 ? (v > acc ? v : acc) : acc + v;
}

// a block's values folded in a fixed order; every thread gets the result
__device__ __forceinline__ T dcop_block_fold(int op, T acc, T* buf) {
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) buf[threadIdx.x] = dcop_fold(op, buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    return buf[0];
}

// the metadata table into shared memory
__device__ __forceinline__ void dcop_load_meta(long long* sm, const long long* meta, int words) {
    for (int i = threadIdx.x; i < words; i += blockDim.x) sm[i] = meta[i];
    __syncthreads();
}
"""

_SOURCE = r"""
extern "C" __global__ void dcop_psum_rows_@W@_@SUF@(
        const T* __restrict__ a, const T* __restrict__ b, int with_b, T* __restrict__ out,
        const long long* __restrict__ meta, int nd_out, int nd_sum,
        unsigned long long n_out, unsigned long long n_sum) {
    extern __shared__ long long sm[];
    dcop_load_meta(sm, meta, @WORDS@ * (nd_out + nd_sum));
    for (@I@ o = blockIdx.x * (@I@)blockDim.x + threadIdx.x; o < n_out;
         o += (@I@)gridDim.x * blockDim.x) {
        @O@ ba = 0, bb = 0;
        dcop_offsets<@I@, @O@>(sm, 0, nd_out, o, ba, bb);
        T acc = 0;
        for (@I@ r = 0; r < n_sum; ++r) {
            @O@ ia = ba, ib = bb;
            dcop_offsets<@I@, @O@>(sm, nd_out, nd_sum, r, ia, ib);
            acc += with_b ? a[ia] * b[ib] : a[ia];
        }
        out[o] = acc;
    }
}

extern "C" __global__ void dcop_psum_blocks_@W@_@SUF@(
        const T* __restrict__ a, const T* __restrict__ b, int with_b, T* __restrict__ out,
        const long long* __restrict__ meta, int nd_out, int nd_sum,
        unsigned long long chunk, unsigned long long n_sum, unsigned int parts) {
    extern __shared__ long long sm[];
    __shared__ T partial[@BLOCK@];
    dcop_load_meta(sm, meta, @WORDS@ * (nd_out + nd_sum));
    const @I@ o = blockIdx.x / parts;
    const @I@ p = blockIdx.x % parts;
    @O@ ba = 0, bb = 0;
    dcop_offsets<@I@, @O@>(sm, 0, nd_out, o, ba, bb);
    const @I@ begin = p * (@I@)chunk;
    const @I@ end = begin + chunk < n_sum ? begin + (@I@)chunk : (@I@)n_sum;
    T acc = 0;
    for (@I@ r = begin + threadIdx.x; r < end; r += blockDim.x) {
        @O@ ia = ba, ib = bb;
        dcop_offsets<@I@, @O@>(sm, nd_out, nd_sum, r, ia, ib);
        acc += with_b ? a[ia] * b[ib] : a[ia];
    }
    const T total = dcop_block_fold(2, acc, partial);
    if (threadIdx.x == 0) out[blockIdx.x] = total;
}
"""

#: The index widths of the psum kernels: name, index type, offset type.
_WIDTHS = (("i32", "unsigned int", "int"), ("i64", "unsigned long long", "long long"))

_REDUCE = r"""
// Whole-array reductions of a contiguous x: op 0 max, 1 count of entries below `below`, 2 sum.
// Pass 1: each block its partial over a grid-stride range; pass 2 (one block): the partials,
// plus `add`, into slot[0]. A fixed order: the same bits every run.
// one block (gridDim.x == 1): the whole result, plus `add`, goes to out[0] at once
extern "C" __global__ void dcop_reduce_@SUF@(const T* __restrict__ x, unsigned long long n, int op,
                                           T below, T add, T* __restrict__ out) {
    __shared__ T buf[@BLOCK@];
    T acc = op == 0 ? -DCOP_INF : (T)0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const T v = x[i];
        acc = dcop_fold(op, acc, op == 1 ? (T)(v < below ? 1 : 0) : v);
    }
    const T total = dcop_block_fold(op, acc, buf);
    if (threadIdx.x == 0) out[blockIdx.x] = gridDim.x == 1 ? total + add : total;
}

// One block over a small x: c = max + lift, x /= c, and with `count` the entries of the result
// below `below`: out[0] = c, out[1] = that count. One launch where the large path takes four.
extern "C" __global__ void dcop_peak_divide_small_@SUF@(T* __restrict__ x, unsigned long long n,
                                                      T lift, int count, T below,
                                                      T* __restrict__ out) {
    __shared__ T buf[@BLOCK@];
    T acc = -DCOP_INF;
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) acc = dcop_fold(0, acc, x[i]);
    const T c = dcop_block_fold(0, acc, buf) + lift;
    __syncthreads();  // every thread has read buf[0] before the count reuses buf
    T k = 0;
    for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) {
        const T v = x[i] / c;
        x[i] = v;
        k += (T)(v < below ? 1 : 0);
    }
    if (count) {
        const T total = dcop_block_fold(2, k, buf);
        if (threadIdx.x == 0) out[1] = total;
    }
    if (threadIdx.x == 0) out[0] = c;
}

extern "C" __global__ void dcop_reduce_final_@SUF@(const T* __restrict__ partial, int parts, int op,
                                                 T add, T* __restrict__ slot) {
    __shared__ T buf[@BLOCK@];
    T acc = op == 0 ? -DCOP_INF : (T)0;
    for (int i = threadIdx.x; i < parts; i += blockDim.x) acc = dcop_fold(op, acc, partial[i]);
    const T total = dcop_block_fold(op, acc, buf);
    if (threadIdx.x == 0) slot[0] = total + add;
}

// x /= slot[0], in place
extern "C" __global__ void dcop_divide_@SUF@(T* __restrict__ x, unsigned long long n,
                                           const T* __restrict__ slot) {
    const T c = slot[0];
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) x[i] /= c;
}
"""

_INF = {
    "float32": "__int_as_float(0x7f800000)",
    "float64": "__longlong_as_double(0x7ff0000000000000LL)",
}

_CTYPE = {"float32": "float", "float64": "double"}
_SUFFIX = {"float32": "f32", "float64": "f64"}


def source(dtype_name: str) -> str:
    """CUDA C of every kernel here for ``dtype_name`` (float32 or float64): one module, so one
    compile per dtype."""
    psums = "".join(
        _SOURCE.replace("@W@", w).replace("@I@", i).replace("@O@", o) for w, i, o in _WIDTHS
    )
    code = (
        (_HELPERS + psums + _REDUCE)
        .replace("@SUF@", _SUFFIX[dtype_name])
        .replace("@BLOCK@", str(BLOCK))
        .replace("@WORDS@", str(_WORDS))
    )
    return f"typedef {_CTYPE[dtype_name]} T;\n#define DCOP_INF {_INF[dtype_name]}\n{code}"


def kernel_name(kind: str, dtype_name: str) -> str:
    """``dcop_<kind>_<f32|f64>``: kind ``psum_rows_<i32|i64>``, ``psum_blocks_<i32|i64>``,
    ``reduce``, ``reduce_final``, ``divide`` or ``peak_divide_small``."""
    return f"dcop_{kind}_{_SUFFIX[dtype_name]}"


@functools.cache
def _module(device: int, dtype_name: str) -> Any:
    import cupy

    return cupy.RawModule(code=source(dtype_name), options=("-std=c++17",))


@functools.cache
def _kernel(device: int, kind: str, dtype_name: str) -> Any:
    return _module(device, dtype_name).get_function(kernel_name(kind, dtype_name))


def index_dims(
    sizes: Sequence[int], strides_a: Sequence[int], strides_b: Sequence[int]
) -> list[tuple[int, int, int]]:
    """``(size, stride in a, stride in b)`` of a run of dimensions (last fastest), each merged
    into the one before it where both operands step over it as one longer dimension."""
    merged: list[list[int]] = []
    for n, sa, sb in zip(sizes, strides_a, strides_b, strict=True):
        if n == 1:
            continue  # one value: no index
        if merged:
            prev = merged[-1]
            if prev[1] == sa * n and prev[2] == sb * n:
                prev[0] *= n
                prev[1], prev[2] = sa, sb
                continue
        merged.append([n, sa, sb])
    return [(n, sa, sb) for n, sa, sb in merged]


def divider(d: int, bits: int = 64) -> tuple[int, int]:
    """``(magic, shifts)`` with which the kernels divide any ``bits``-bit ``x`` (64 or 32) by
    ``d`` (1 <= d < 2^bits): ``t = mulhi(magic, x)``, ``x / d = (t + ((x - t) >> (shifts &
    255))) >> (shifts >> 8)`` (Granlund and Montgomery, "Division by invariant integers using
    multiplication", 1994, fig. 4.1). A 64-bit ``magic`` is given as the int64 of the same bits
    (the metadata's type); ``shifts`` depend on ``d`` only."""
    if not 1 <= d < 1 << bits:
        raise ValueError(f"divider: {d} is not a {bits}-bit divisor")
    ell = (d - 1).bit_length()  # ceil(log2 d)
    magic = ((1 << bits) * ((1 << ell) - d)) // d + 1
    shifts = min(ell, 1) | (max(ell - 1, 0) << 8)
    return (magic - (1 << 64) if magic >= 1 << 63 else magic), shifts


def divide(x: int, magic: int, shifts: int, bits: int = 64) -> int:
    """``x / d`` as the kernels compute it from :func:`divider`'s ``(magic, shifts)`` (tests)."""
    t = ((magic % (1 << bits)) * x) >> bits
    return (t + ((x - t) >> (shifts & 255))) >> (shifts >> 8)


def metadata(
    dims_out: list[tuple[int, int, int]], dims_sum: list[tuple[int, int, int]]
) -> tuple[int, ...]:
    """The kernels' metadata table (see the module's docstring)."""
    words: list[int] = []
    for dims in (dims_out, dims_sum):
        for n, sa, sb in dims:
            magic, shifts = divider(n)
            narrow = divider(n, 32)[0] if n < 1 << 32 else 0
            words.extend((n, magic, narrow, shifts, sa, sb))
    return tuple(words)


_ZERO, _ONE = np.int32(0), np.int32(1)
#: Metadata words per dimension (see the module's docstring).
_WORDS = 6
#: Per device: its metadata tables (by content) and launch plans (by operand layout).
_SHARED: dict[int, tuple[OrderedDict[tuple[int, ...], Any], dict[tuple[Any, ...], Any]]] = {}


def forget() -> None:
    """Drop every device's cached metadata and plans (tests that swap CuPy for a fake)."""
    _SHARED.clear()


@dataclass
class _Plan:
    """A :meth:`StridedKernels.product_sum` launch, kept per operand layout (a warm run of the
    same tree plans nothing): output shape, counts, metadata on the device, and for the
    ``blocks`` kernel its parts (``parts`` 0: the ``rows`` kernel)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    n_out: int
    n_sum: int
    meta: Any = None
    shared: int = 0
    nd: tuple[Any, Any] = (_ZERO, _ZERO)
    n_sum_arg: Any = None
    parts: int = 0
    parts_arg: Any = None
    chunk: Any = None
    sum_meta: Any = None
    #: the kernels' index width: "i32" where every index and offset fits 31 bits, else "i64"
    width: str = "i64"


def _narrow(n_out: int, n_sum: int, dims: Sequence[tuple[int, int, int]]) -> bool:
    """Whether a launch's indices (``n_out``, ``n_sum``) and every offset it reads in either
    operand (strides from ``dims``) fit 31 bits: its kernels may index in 32."""
    limit = (1 << 31) - 1
    if n_out > limit or n_sum > limit or any(sa < 0 or sb < 0 for _, sa, sb in dims):
        return False
    reach_a = sum((n - 1) * sa for n, sa, _ in dims)
    reach_b = sum((n - 1) * sb for n, _, sb in dims)
    return max(reach_a, reach_b) <= limit


def _on_stream(method: Any) -> Any:
    """Run a :class:`StridedKernels` method with its backend's device and stream current."""

    @functools.wraps(method)
    def wrapped(self: StridedKernels, *args: Any, **kwargs: Any) -> Any:
        if self.current is not None and self.current() is self.stream:
            return method(self, *args, **kwargs)  # inside on() already (the engine's run)
        with self.on():
            return method(self, *args, **kwargs)

    return wrapped


class StridedKernels:
    """The kernels on one device for one backend (its stream), with the device's launch plans
    and uploaded metadata tables.

    ``xp`` is CuPy (or a stand-in with its interface); ``upload`` puts a host int64 array on
    the device, on the stream ``on()`` makes current."""

    def __init__(
        self,
        xp: Any,
        device: int,
        upload: Any,
        on: Any = contextlib.nullcontext,
        stream: Any = None,
    ) -> None:
        self.xp = xp
        self.device = device
        self.upload = upload
        #: a context making the backend's device and stream current: every upload and launch
        #: here queues on that stream (on CuPy's legacy default stream a kernel would not wait
        #: for its metadata's upload on the backend's non-blocking one)
        self.on = on
        #: the stream ``on()`` makes current (after a metadata upload it is synchronized, so
        #: that any backend of the device, on another stream, reads the table complete from the
        #: shared cache), and CuPy's reader of the current one: a call made where it is current
        #: already enters nothing (a few microseconds a call)
        self.stream = stream
        self.current = getattr(getattr(xp, "cuda", None), "get_current_stream", None)
        if stream is None:
            self.current = None
        # shared by every backend of the device in this process: `dcop solve` and `infer`
        # make a backend per call, and a warm call should plan and upload nothing
        self._meta, self._plans = _SHARED.setdefault(device, (OrderedDict(), {}))
        #: metadata tables uploaded so far (a warm run of the same tree adds none)
        self.uploads = 0

    def _device_meta(self, words: tuple[int, ...]) -> Any:
        got = self._meta.get(words)
        if got is None:
            got = self.upload(np.asarray(words or (0,), np.int64))
            if self.stream is not None:
                self.stream.synchronize()
            self.uploads += 1
            self._meta[words] = got
            if len(self._meta) > META_CACHE:
                self._meta.popitem(last=False)
        else:
            self._meta.move_to_end(words)
        return got

    @_on_stream
    def product_sum(
        self,
        a: Any,
        sa: tuple[str, ...],
        b: Any | None,
        sb: tuple[str, ...],
        out: tuple[str, ...],
    ) -> Any:
        """``Σ a * b`` over the variables of ``sa`` and ``sb`` not in ``out`` (``b`` None: ``a``
        alone), a new contiguous array over ``out`` (every variable of ``out`` is in ``a`` or
        ``b``)."""
        key = (
            a.dtype.char, a.shape, a.strides, sa, None if b is None else (b.shape, b.strides), sb, out
        )  # fmt: skip
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(a, sa, b, sb, out)
            if len(self._plans) >= META_CACHE:
                self._plans.clear()
            self._plans[key] = plan
        result = self.xp.empty(plan.shape, plan.dtype)
        if plan.n_out == 0:
            return result
        if plan.n_sum == 0:
            result.fill(0)
            return result
        other = b if b is not None else a
        with_b = _ONE if b is not None else _ZERO
        if plan.parts == 0:
            self._rows(a, other, with_b, result, plan.meta, plan.nd, plan.n_out, plan.n_sum, plan.shared, plan.dtype, plan.width)  # fmt: skip
            return result
        target = result if plan.parts == 1 else self.xp.empty((plan.n_out, plan.parts), plan.dtype)
        _kernel(self.device, f"psum_blocks_{plan.width}", plan.dtype.name)(
            (plan.n_out * plan.parts,),
            (BLOCK,),
            (a, other, with_b, target, plan.meta, *plan.nd, plan.chunk, plan.n_sum_arg, plan.parts_arg),
            shared_mem=plan.shared,
        )  # fmt: skip
        if plan.parts > 1:  # the parts of each output, added in order
            self._rows(
                target, target, _ZERO, result, plan.sum_meta, (_ONE, _ONE), plan.n_out,
                plan.parts, 8 * _WORDS * 2, plan.dtype, plan.width,
            )  # fmt: skip
        return result

    def _plan(
        self, a: Any, sa: tuple[str, ...], b: Any | None, sb: tuple[str, ...], out: tuple[str, ...]
    ) -> _Plan:
        """How :meth:`product_sum` runs for operands of these shapes, strides and scopes."""
        dtype = np.dtype(a.dtype)
        item = dtype.itemsize
        size: dict[str, int] = dict(zip(sa, (int(n) for n in a.shape), strict=True))
        stride_a = {v: int(s) // item for v, s in zip(sa, a.strides, strict=True)}
        stride_b: dict[str, int] = {}
        if b is not None:
            size.update(zip(sb, (int(n) for n in b.shape), strict=True))
            stride_b = {v: int(s) // item for v, s in zip(sb, b.strides, strict=True)}
        summed = [v for v in dict.fromkeys((*sa, *(sb if b is not None else ()))) if v not in out]

        def dims(names: Sequence[str]) -> list[tuple[int, int, int]]:
            return index_dims(
                [size[v] for v in names],
                [stride_a.get(v, 0) for v in names],
                [stride_b.get(v, 0) for v in names],
            )

        dims_out, dims_sum = dims(out), dims(summed)
        n_out = math.prod(size[v] for v in out)
        n_sum = math.prod(size[v] for v in summed)
        plan = _Plan(tuple(size[v] for v in out), dtype, n_out, n_sum)
        if n_out == 0 or n_sum == 0:
            return plan
        plan.meta = self._device_meta(metadata(dims_out, dims_sum))
        plan.shared = 8 * _WORDS * (len(dims_out) + len(dims_sum))
        plan.nd = (np.int32(len(dims_out)), np.int32(len(dims_sum)))
        plan.n_sum_arg = np.uint64(n_sum)
        plan.width = "i32" if _narrow(n_out, n_sum, dims_out + dims_sum) else "i64"
        if n_out >= ROWS_MIN_OUTPUTS or n_sum <= ROWS_MAX_SUMMED:
            return plan  # parts 0: the rows kernel
        parts = max(1, min(-(-TARGET_BLOCKS // n_out), n_sum // BLOCK_MIN_SUMMED))
        plan.parts, plan.parts_arg = parts, np.uint32(parts)
        plan.chunk = np.uint64(-(-n_sum // parts))
        if parts > 1:
            plan.sum_meta = self._device_meta(metadata([(n_out, parts, 0)], [(parts, 1, 0)]))
        return plan

    @_on_stream
    def peak_divide(self, data: Any, floor: float, below: float | None = None) -> tuple[Any, Any]:
        """Divide contiguous ``data`` in place by ``c = max + floor``; ``c`` (a 0-d device
        array) and, with ``below``, how many entries of the result are below it (else None).
        A small array (at most SMALL_REDUCE entries) is one launch; a large one four."""
        if not data.flags.c_contiguous:
            raise ValueError("peak_divide divides a contiguous array in place")
        n = int(data.size)
        dtype = np.dtype(data.dtype)
        if n <= SMALL_REDUCE:
            out = self.xp.empty((2,), dtype)
            _kernel(self.device, "peak_divide_small", dtype.name)(
                (1,),
                (BLOCK,),
                (data, np.uint64(n), dtype.type(floor), _ONE if below is not None else _ZERO,
                 dtype.type(below or 0.0), out),
            )  # fmt: skip
            return out[0], (out[1] if below is not None else None)
        slot = self.reduce(data, 0, 0.0, floor)
        _kernel(self.device, "divide", dtype.name)(
            (self._grid(n),), (BLOCK,), (data, np.uint64(n), slot)
        )
        return slot, (self.count_below(data, below) if below is not None else None)

    @_on_stream
    def count_below(self, data: Any, below: float) -> Any:
        """How many entries of contiguous ``data`` are below ``below`` (a 0-d device array of
        ``data``'s dtype)."""
        return self.reduce(data, 1, below, 0.0)

    @_on_stream
    def reduce(self, data: Any, op: int, below: float, add: float) -> Any:
        """``op`` 0: max, 1: count below ``below``, 2: sum of ``data``, plus ``add``, as a 0-d
        device array (the max of nothing is -inf): one launch up to SMALL_REDUCE entries, two
        above."""
        if not data.flags.c_contiguous:  # a sliced leaf: read through a contiguous copy
            axes = tuple(str(k) for k in range(data.ndim))
            data = self.product_sum(data, axes, None, (), axes)
        dtype = np.dtype(data.dtype)
        n = int(data.size)
        scalar = dtype.type
        slot = self.xp.empty((), dtype)
        if n <= SMALL_REDUCE:
            _kernel(self.device, "reduce", dtype.name)(
                (1,), (BLOCK,), (data, np.uint64(n), np.int32(op), scalar(below), scalar(add), slot)
            )
            return slot
        parts = max(2, min(self._grid(n), TARGET_BLOCKS))
        partial = self.xp.empty((parts,), dtype)
        _kernel(self.device, "reduce", dtype.name)(
            (parts,),
            (BLOCK,),
            (data, np.uint64(n), np.int32(op), scalar(below), scalar(0.0), partial),
        )
        _kernel(self.device, "reduce_final", dtype.name)(
            (1,), (BLOCK,), (partial, np.int32(parts), np.int32(op), scalar(add), slot)
        )
        return slot

    @staticmethod
    def _grid(n: int) -> int:
        return max(1, min(-(-n // BLOCK), 65535))

    def _rows(
        self,
        a: Any,
        b: Any,
        with_b: Any,
        out: Any,
        meta: Any,
        nd: tuple[Any, Any],
        n_out: int,
        n_sum: int,
        shared: int,
        dtype: np.dtype,
        width: str,
    ) -> None:
        grid = self._grid(n_out)
        _kernel(self.device, f"psum_rows_{width}", dtype.name)(
            (grid,),
            (BLOCK,),
            (a, b, with_b, out, meta, *nd, np.uint64(n_out), np.uint64(n_sum)),
            shared_mem=shared,
        )


def reference_product_sum(
    xp: Any, a: Any, sa: tuple[str, ...], b: Any | None, sb: tuple[str, ...], out: tuple[str, ...]
) -> Any:
    """What :meth:`StridedKernels.product_sum` computes, with ``xp.einsum`` (tests)."""
    letters: dict[str, str] = {}
    for v in (*sa, *sb):
        if v not in letters:
            letters[v] = _LETTERS[len(letters)]
    spec = "".join(letters[v] for v in sa)
    operands = [a]
    if b is not None:
        spec += "," + "".join(letters[v] for v in sb)
        operands.append(b)
    result = xp.einsum(spec + "->" + "".join(letters[v] for v in out), *operands)
    return xp.array(result, order="C")  # contiguous, and 0-d stays 0-d


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
