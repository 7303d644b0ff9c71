"""A stand-in for CuPy on the host, so that ``CupyBackend``'s host side runs in CI without a GPU.

"Device" arrays are :class:`FakeArray`: NumPy arrays behind a wrapper that, like CuPy, refuses to
turn into a NumPy array implicitly (a missed download fails loudly). Kernels are not compiled: a
:class:`FakeRawKernel` records that it was "compiled" (first ``.kernel`` access or launch) and
launched, and computes what the dcop kernel of that name computes, from its arguments the way the
CUDA code reads them (metadata, device pointers, launch ranges), with NumPy. The results are then
compared with ``NumpyBackend``, an independent computation.

Several devices (``make_module(devices=N, peer=...)``): every array, buffer and pointer
remembers the device that was current when it was made (``with cupy.cuda.Device(i)``); a copy
between devices is counted in ``STATS["peer_copies"]``; ``deviceCanAccessPeer`` answers from
``peer`` and an IPC handle opened on another device without peer access fails, as CUDA's does
(with it, the open counts in ``STATS["peer_opens"]``).

What this checks: planning, metadata with pointers, launch ranges, chunking, casts, warm-up and
prepared kernels, placement, which device holds what. What it cannot check: the CUDA sources
(the GPU tests do that).
"""

from __future__ import annotations

import ctypes
import threading
import types
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from dcop.backends.numpy import _reduce_last

_CTYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


#: Each thread's current device (its innermost ``with FakeDevice(i)``), as a stack: agents of
#: an in-process run are threads, each on its own device, as CUDA's current device is per thread.
_THREAD = threading.local()


def _stack() -> list[int]:
    stack: list[int] | None = getattr(_THREAD, "stack", None)
    if stack is None:
        stack = _THREAD.stack = [0]
    return stack


def current() -> int:
    return _stack()[-1]


class FakeArray:
    """A "device" array: a NumPy array that will not convert to NumPy implicitly."""

    def __init__(
        self,
        host: np.ndarray | tuple[int, ...],
        device: int | None = None,
        dtype: Any = None,
        memptr: FakeMemoryPointer | None = None,
    ) -> None:
        if memptr is not None:  # cupy.ndarray(shape, dtype, memptr=...): memory not ours
            shape = tuple(host)  # type: ignore[arg-type]
            n = int(np.prod(shape))
            host = _read(memptr.ptr, n, np.dtype(dtype)).reshape(shape)
            device = memptr.device_id
            STATS["zero_copy"] += 1
        if isinstance(host, np.generic):  # a 0-d result (a scalar comparison) stays an array
            host = np.asarray(host)
        assert isinstance(host, np.ndarray)
        self.a = host
        self.device = types.SimpleNamespace(id=current() if device is None else device)

    # CuPy raises TypeError on implicit conversion; so do we
    def __array__(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise TypeError("implicit conversion of a fake device array to NumPy")

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.a.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.a.dtype

    @property
    def size(self) -> int:
        return int(self.a.size)

    @property
    def ndim(self) -> int:
        return int(self.a.ndim)

    @property
    def nbytes(self) -> int:
        return int(self.a.nbytes)

    @property
    def flags(self) -> Any:
        return self.a.flags

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(self.a.strides)

    def fill(self, value: Any) -> None:
        self.a.fill(value)

    @property
    def data(self) -> FakeMemoryPointer:
        return FakeMemoryPointer(int(self.a.ctypes.data), self.device.id)

    def reshape(self, *shape: Any) -> FakeArray:
        return FakeArray(self.a.reshape(*shape), self.device.id)

    def swapaxes(self, a: int, b: int) -> FakeArray:
        return FakeArray(self.a.swapaxes(a, b), self.device.id)

    def view(self, dtype: Any) -> FakeArray:
        return FakeArray(self.a.view(dtype), self.device.id)

    def __getitem__(self, index: Any) -> FakeArray:
        return FakeArray(np.asarray(self.a[index]), self.device.id)

    def astype(self, dtype: Any) -> FakeArray:
        return FakeArray(self.a.astype(dtype), self.device.id)

    def __add__(self, other: Any) -> FakeArray:
        return FakeArray(self.a + _host(other), self.device.id)

    __radd__ = __add__

    def __sub__(self, other: Any) -> FakeArray:
        return FakeArray(self.a - _host(other), self.device.id)

    def __mul__(self, other: Any) -> FakeArray:
        return FakeArray(self.a * _host(other), self.device.id)

    def __itruediv__(self, other: Any) -> FakeArray:
        self.a /= _host(other)
        return self

    def __lt__(self, other: Any) -> FakeArray:
        return FakeArray(self.a < _host(other), self.device.id)

    def __gt__(self, other: Any) -> FakeArray:
        return FakeArray(self.a > _host(other), self.device.id)

    def __and__(self, other: Any) -> FakeArray:
        return FakeArray(self.a & _host(other), self.device.id)

    def __or__(self, other: Any) -> FakeArray:
        return FakeArray(self.a | _host(other), self.device.id)

    def get(self, stream: Any = None, out: np.ndarray | None = None, blocking: bool = True) -> Any:
        STATS["d2h"] += 1
        if out is None:
            return self.a.copy()
        out[...] = self.a.reshape(out.shape)
        return out

    def set(self, host: np.ndarray, stream: Any = None) -> None:
        STATS["h2d"] += 1
        self.a[...] = np.asarray(host).reshape(self.a.shape)


def _host(value: Any) -> Any:
    """A fake device array's NumPy data (other values as they are)."""
    return value.a if isinstance(value, FakeArray) else value


def _array_function(name: str) -> Any:
    """CuPy's ``name`` as NumPy's on the unwrapped arguments, arrays wrapped back: what the
    contraction engine calls through ``backend.xp`` (matmul, sum, max, where, log, ...)."""
    func = getattr(np, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("out", None)
        if out is not None:
            kwargs["out"] = out.a
        args = tuple([_host(x) for x in a] if isinstance(a, list) else _host(a) for a in args)
        result = func(*args, **{k: _host(v) for k, v in kwargs.items()})
        if out is not None:
            return out
        return (
            FakeArray(np.asarray(result))
            if isinstance(result, (np.ndarray, np.generic))
            else result
        )

    return call


#: NumPy functions the fake module offers under CuPy's names.
ARRAY_FUNCTIONS = (
    "matmul",
    "sum",
    "max",
    "where",
    "log",
    "exp",
    "any",
    "all",
    "stack",
    "concatenate",
    "tensordot",
    "einsum",
    "ones",
    "ones_like",
    "minimum",
    "maximum",
    "less",
    "greater",
    "copyto",
    "packbits",
    "broadcast_to",
)


class FakeMemoryPointer:
    """A "device" pointer (a host address) that copies like CuPy's ``MemoryPointer``."""

    def __init__(self, ptr: int, device_id: int | None = None) -> None:
        self.ptr = ptr
        self.device_id = current() if device_id is None else device_id

    def __add__(self, offset: int) -> FakeMemoryPointer:
        return FakeMemoryPointer(self.ptr + int(offset), self.device_id)

    def copy_from_device_async(self, src: FakeMemoryPointer, size: int, stream: Any = None) -> None:
        if src.device_id != self.device_id:
            STATS["peer_copies"] += 1
            _moved(self.device_id, size)
        ctypes.memmove(self.ptr, src.ptr, size)


class FakeMemory:
    """``cupy.cuda.memory.Memory``: a buffer of its own, exportable by its (fake) IPC handle
    while it lives."""

    def __init__(self, size: int) -> None:
        self.buffer = np.zeros(size, np.uint8)
        self.ptr = int(self.buffer.ctypes.data)
        self.device_id = current()


class FakeCudaError(RuntimeError):
    pass


#: Live exports by fake IPC handle (weak: a freed buffer cannot be opened, as on a GPU).
EXPORTS: weakref.WeakValueDictionary[bytes, FakeMemory] = weakref.WeakValueDictionary()


def _ipc_get(ptr: int) -> bytes:
    for handle, memory in list(EXPORTS.items()):
        if memory.ptr == ptr:
            return handle
    raise FakeCudaError("cudaErrorInvalidValue: not the base of an exportable allocation")


#: Whether device ``a`` can read device ``b``'s memory (``make_module``'s ``peer``).
PEER: dict[str, Any] = {"access": True}


def _can_access_peer(device: int, peer: int) -> int:
    rule = PEER["access"]
    return int(rule(device, peer) if callable(rule) else bool(rule))


def _ipc_open(handle: bytes, flags: int = 1) -> int:
    memory = EXPORTS.get(handle)
    if memory is None:
        raise FakeCudaError("cudaErrorInvalidResourceHandle: invalid resource handle")
    if memory.device_id != current():
        if not _can_access_peer(current(), memory.device_id):
            raise FakeCudaError("cudaErrorPeerAccessUnsupported: peer access is not supported")
        STATS["peer_opens"] += 1  # another device's buffer mapped here, with peer access
    STATS["ipc_open"] += 1
    OPENED[memory.ptr] = memory.device_id
    return memory.ptr


def _ipc_close(ptr: int) -> None:
    STATS["ipc_close"] += 1


def _memory(size: int) -> FakeMemory:
    memory = FakeMemory(size)
    EXPORTS[b"fake-ipc" + memory.ptr.to_bytes(8, "little") + bytes(48)] = memory
    return memory


#: Counters of the fake device: compiles and launches by kernel name, copies each way.
STATS: dict[str, Any] = {}
#: The device that owns each buffer opened by IPC (by the pointer the open returned).
OPENED: dict[int, int] = {}
#: Page-locked host buffers (``alloc_pinned_memory``), kept alive, by their start address.
PINNED: dict[int, bytearray] = {}


def _alloc_pinned(n: int) -> bytearray:
    buffer = bytearray(n)
    PINNED[int(np.frombuffer(buffer, np.uint8).ctypes.data)] = buffer
    return buffer


def _pointer_attributes(ptr: int) -> Any:
    """``cudaPointerGetAttributes``: type 1 (host, page-locked) inside a pinned buffer."""
    pinned = any(start <= ptr < start + len(b) for start, b in PINNED.items())
    return types.SimpleNamespace(type=1 if pinned else 0, devicePointer=ptr, device=current())


COMPILED: list[str] = []
LAUNCHED: list[str] = []
#: Signatures of generated kernels by name (filled by the fixture's wrapper of fused_source).
SIGS: dict[str, Any] = {}


def reset() -> None:
    STATS.clear()
    STATS.update(h2d=0, d2h=0, ipc_open=0, ipc_close=0, peer_copies=0, peer_opens=0, zero_copy=0)
    STATS.update(memcpy=0, moved={})
    OPENED.clear()
    PINNED.clear()
    _stack()[:] = [0]
    COMPILED.clear()
    LAUNCHED.clear()
    SIGS.clear()


def _mulhi64(m: np.uint64, x: np.ndarray) -> np.ndarray:
    """The high 64 bits of ``m * x`` (CUDA's ``__umul64hi``), from 32-bit halves."""
    low = np.uint64(0xFFFFFFFF)
    thirty_two = np.uint64(32)
    m_lo, m_hi = m & low, m >> thirty_two
    x_lo, x_hi = x & low, x >> thirty_two
    lo_lo, hi_lo, lo_hi = m_lo * x_lo, m_hi * x_lo, m_lo * x_hi
    cross = (lo_lo >> thirty_two) + (hi_lo & low) + lo_hi
    return m_hi * x_hi + (hi_lo >> thirty_two) + (cross >> thirty_two)


def _read(ptr: int, n: int, dtype: np.dtype) -> np.ndarray:
    """``n`` elements of ``dtype`` at host address ``ptr`` (a fake device pointer)."""
    if n <= 0:
        return np.empty(0, dtype)
    if dtype == np.dtype(np.int64):
        buf = (ctypes.c_longlong * n).from_address(ptr)
    else:
        buf = (_CTYPES[dtype] * n).from_address(ptr)
    return np.ctypeslib.as_array(buf).view(dtype)


def _combine(values: np.ndarray, op: str) -> np.ndarray:
    return np.asarray(_reduce_last(values, op))


class FakeRawModule:
    """``cupy.RawModule``: its functions are fake kernels by name."""

    def __init__(self, code: str = "", options: tuple[str, ...] = (), **kwargs: Any) -> None:
        self.code = code
        self.options = options

    def get_function(self, name: str) -> FakeRawKernel:
        if f" {name}(" not in self.code:
            raise AssertionError(f"no kernel {name} in the module")
        return FakeRawKernel(self.code, name, self.options)


class FakeRawKernel:
    """Records compile and launch; computes the named dcop kernel with NumPy."""

    def __init__(self, source: str, name: str, options: tuple[str, ...] = ()) -> None:
        self.source = source
        self.name = name
        self.compiled = False

    @property
    def kernel(self) -> FakeRawKernel:
        if not self.compiled:
            self.compiled = True
            COMPILED.append(self.name)
        return self

    def __call__(self, grid: Any, block: Any, args: tuple[Any, ...], shared_mem: int = 0) -> None:
        _ = self.kernel
        LAUNCHED.append(self.name)
        parts = self.name.split("_")
        if self.name.startswith("dcop_join_elim_generic_"):
            self._generic(parts[4], *args)
        elif self.name.startswith("dcop_join_elim_"):
            self._fused(SIGS[self.name], args)
        elif self.name.startswith("dcop_aggregate_"):
            self._aggregate(*args)
        elif self.name.startswith("dcop_eliminate_"):
            self._eliminate(parts[2], *args)
        elif self.name.startswith("dcop_argbest_"):
            self._argbest(parts[2], *args)
        elif self.name.startswith("dcop_psum_"):
            self._psum(parts[2], parts[3], *args)
        elif self.name.startswith("dcop_reduce_final_"):
            partial, n, op, add, slot = args
            values = partial.a.reshape(-1)[: int(n)]
            total = values.max() if int(op) == 0 else values.sum()
            slot.a[...] = total + add
        elif self.name.startswith("dcop_reduce_"):
            x, n, op, below, add, out = args
            values = x.a.reshape(-1)[: int(n)]
            if int(op) == 1:
                values = (values < below).astype(values.dtype)
            total = (values.max() if values.size else -np.inf) if int(op) == 0 else values.sum()
            if int(grid[0]) == 1:
                out.a.reshape(-1)[0] = total + add
            else:  # one part holds it all, the others nothing
                out.a[...] = -np.inf if int(op) == 0 else 0
                out.a.reshape(-1)[0] = total
        elif self.name.startswith("dcop_peak_divide_small_"):
            x, n, floor, count, below, out = args
            values = x.a.reshape(-1)[: int(n)]
            c = values.max() + floor
            values /= c
            out.a[0] = c
            if int(count):
                out.a[1] = np.count_nonzero(values < below)
        elif self.name.startswith("dcop_divide_"):
            x, n, slot = args
            x.a.reshape(-1)[: int(n)] /= slot.a.reshape(())
        elif self.name.startswith("dcop_has_nan_"):
            data, n, flag = args
            if np.isnan(data.a.reshape(-1)[: int(n)]).any():
                flag.a[0] = 1
        else:
            raise AssertionError(f"no fake for kernel {self.name}")

    @staticmethod
    def _generic(
        op: str, dmeta: FakeArray, meta_len: Any, out: FakeArray, lo: Any, hi: Any
    ) -> None:
        meta = dmeta.a.reshape(-1)[: int(meta_len)].astype(np.int64)
        n_tables, ndom = int(meta[0]), int(meta[2])
        rows = np.arange(int(lo), int(hi), dtype=np.int64)
        dtype = out.dtype
        total = np.zeros((rows.size, ndom), dtype)
        pos = 3
        xs = np.arange(ndom, dtype=np.int64)
        for _ in range(n_tables):
            ptr, sx, s = int(meta[pos]), int(meta[pos + 1]), int(meta[pos + 2])
            base = np.zeros(rows.size, np.int64)
            for k in range(s):
                div, mod, mul = (int(e) for e in meta[pos + 3 + 3 * k : pos + 6 + 3 * k])
                base += mul * ((rows // div) % mod)
            index = base[:, None] + xs[None, :] * sx
            table = _read(ptr, int(index.max()) + 1 if index.size else 0, dtype)
            total += table[index] if index.size else 0
            pos += 3 + 3 * s
        out.a.reshape(-1)[: rows.size] = _combine(total, op).astype(dtype)

    @staticmethod
    def _psum(kind: str, width: str, a: FakeArray, b: FakeArray, with_b: Any, out: FakeArray,
              dmeta: FakeArray, nd_out: Any, nd_sum: Any, *rest: Any) -> None:  # fmt: skip
        """gpu/strided.py's kernels: ``rows`` (rest: n_out, n_sum) and ``blocks`` (rest: chunk,
        n_sum, parts; one partial sum per output and part), indexing in ``width`` (i32: the
        32-bit magic numbers, every index and offset checked to fit)."""
        meta = dmeta.a.reshape(-1).astype(np.int64)
        n_o, n_s = int(nd_out), int(nd_sum)

        def offsets(index: np.ndarray, first: int, count: int, col: int) -> np.ndarray:
            # as dcop_offsets does it: coordinates from the last dimension up, each division by
            # the dimension's magic number and shifts, the first dimension taking what is left
            total = np.zeros(index.size, np.int64)
            idx = index.astype(np.uint64)
            narrow = width == "i32"
            if narrow:
                assert not idx.size or int(idx.max()) < 1 << 32, "a 32-bit index overflows"
            for k in range(first + count - 1, first - 1, -1):
                size, magic64, magic32, shifts = (int(e) for e in meta[6 * k : 6 * k + 4])
                if k == first:
                    coordinate = idx
                else:
                    if narrow:
                        t = (np.uint64(magic32) * idx) >> np.uint64(32)
                    else:
                        t = _mulhi64(np.uint64(magic64 % (1 << 64)), idx)
                    q = (t + ((idx - t) >> np.uint64(shifts & 255))) >> np.uint64(shifts >> 8)
                    coordinate, idx = idx - q * np.uint64(size), q
                total += coordinate.astype(np.int64) * int(meta[6 * k + col])
            if narrow:
                assert not total.size or int(total.max()) < 1 << 31, "a 32-bit offset overflows"
            return total

        def operand(x: FakeArray, where: np.ndarray) -> np.ndarray:
            if not where.size:
                return np.zeros(0, x.dtype)
            flat = _read(int(x.a.ctypes.data), int(where.max()) + 1, x.dtype)
            return flat[where]

        if kind == "rows":
            n_out, n_sum = int(rest[0]), int(rest[1])
            outs = np.repeat(np.arange(n_out, dtype=np.int64), n_sum)
            sums = np.tile(np.arange(n_sum, dtype=np.int64), n_out)
            groups, width = n_out, n_sum
        else:
            chunk, n_sum, parts = int(rest[0]), int(rest[1]), int(rest[2])
            n_out = out.size // parts
            outs = np.repeat(np.arange(n_out, dtype=np.int64), n_sum)
            sums = np.tile(np.arange(n_sum, dtype=np.int64), n_out)
            groups, width = n_out * parts, None
        ia = offsets(outs, 0, n_o, 4) + offsets(sums, n_o, n_s, 4)
        terms = operand(a, ia)
        if int(with_b):
            terms = terms * operand(b, offsets(outs, 0, n_o, 5) + offsets(sums, n_o, n_s, 5))
        if width is not None:
            out.a.reshape(-1)[:groups] = terms.reshape(groups, width).sum(axis=1)
        else:  # each output's parts: consecutive chunks of its summed range
            per = terms.reshape(n_out, n_sum)
            for p in range(parts):
                out.a.reshape(n_out, parts)[:, p] = per[:, p * chunk : (p + 1) * chunk].sum(axis=1)

    @staticmethod
    def _fused(sig: Any, args: tuple[Any, ...]) -> None:
        *datas, out, lo, hi = args
        groups = np.arange(int(lo), int(hi), dtype=np.int64)
        digits = []
        q = groups.copy()
        for size in reversed(sig.group_sizes):
            digits.append(q % size)
            q //= size
        digits.reverse()
        dtype = np.dtype(sig.dtype)
        total = np.zeros((groups.size, sig.dy, sig.ndom), dtype)
        ys = np.arange(sig.dy, dtype=np.int64)[None, :, None]
        xs = np.arange(sig.ndom, dtype=np.int64)[None, None, :]
        for tab, data in zip(sig.tables, datas, strict=True):
            assert data.size == tab.size and data.dtype == dtype
            base = np.zeros(groups.size, np.int64)
            for d, stride in zip(digits, tab.group_strides, strict=True):
                base += d * stride
            index = base[:, None, None] + ys * tab.sy + xs * tab.sx
            total += data.a.reshape(-1)[index]
        n = groups.size * sig.dy
        out.a.reshape(-1)[:n] = _combine(total, sig.op).reshape(-1).astype(dtype)

    @staticmethod
    def _aggregate(
        dmeta: FakeArray, meta_len: Any, n_tables: Any, out: FakeArray, n_out: Any
    ) -> None:
        meta = dmeta.a.reshape(-1)[: int(meta_len)].astype(np.int64)
        rows = np.arange(int(n_out), dtype=np.int64)
        acc = np.zeros(rows.size, out.dtype)
        pos = 0
        for _ in range(int(n_tables)):
            ptr, s = int(meta[pos]), int(meta[pos + 1])
            mul = meta[pos + 2 : pos + 2 + s]
            div = meta[pos + 2 + s : pos + 2 + 2 * s]
            mod = meta[pos + 2 + 2 * s : pos + 2 + 3 * s]
            index = np.zeros(rows.size, np.int64)
            for k in range(s):
                index += mul[k] * ((rows // div[k]) % mod[k])
            acc += _read(ptr, int(index.max()) + 1, out.dtype)[index]
            pos += 2 + 3 * s
        out.a.reshape(-1)[:] = acc

    @staticmethod
    def _eliminate(op: str, data: FakeArray, out: FakeArray, n_out: Any, ndom: Any) -> None:
        rows = data.a.reshape(int(n_out), int(ndom))
        out.a.reshape(-1)[:] = _combine(rows, op).astype(out.dtype)

    @staticmethod
    def _argbest(op: str, data: FakeArray, out: FakeArray, n_out: Any, ndom: Any) -> None:
        rows = data.a.reshape(int(n_out), int(ndom))
        pick = np.argmax if op == "max" else np.argmin
        out.a.reshape(-1)[:] = pick(rows, axis=-1)


class _Context:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class FakeStream(_Context):
    ptr = 0

    def __init__(self, non_blocking: bool = False) -> None:
        self.non_blocking = non_blocking

    def synchronize(self) -> None:
        return None

    def record(self) -> object:
        return object()

    def wait_event(self, event: object) -> None:
        return None


class FakeDevice(_Context):
    def __init__(self, ordinal: int = 0) -> None:
        self.id = ordinal

    def __enter__(self) -> None:
        _stack().append(self.id)

    def __exit__(self, *exc: object) -> None:
        _stack().pop()

    def synchronize(self) -> None:
        return None


class _OutOfMemoryError(MemoryError):
    pass


class FakeEvent:
    def record(self, stream: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        return None


def _asarray(array: Any, dtype: Any = None) -> FakeArray:
    if isinstance(array, FakeArray):
        if array.device.id != current():
            STATS["peer_copies"] += 1
            _moved(current(), array.a.nbytes)
        return FakeArray(np.array(array.a, dtype=dtype or array.dtype, order="C"))
    STATS["h2d"] += 1
    out = FakeArray(np.array(array, dtype=dtype, order="C"))
    _moved(current(), out.a.nbytes)
    return out


def _moved(device: int, nbytes: int) -> None:
    """Count ``nbytes`` copied onto ``device`` from elsewhere (host or another device)."""
    STATS["moved"][device] = STATS["moved"].get(device, 0) + int(nbytes)


def _memcpy_async(dst: int, src: int, size: int, kind: int, stream: int) -> None:
    """``cudaMemcpyAsync`` (done at once); counted as moved onto the current device."""
    STATS["memcpy"] += 1
    _moved(current(), size)
    ctypes.memmove(dst, src, size)


def _memcpy_2d_async(
    dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, stream: int
) -> None:
    """``cudaMemcpy2DAsync``: ``height`` rows of ``width`` bytes, pitches apart."""
    assert width <= dpitch and width <= spitch, "a 2-D copy's width exceeds its pitch"
    STATS["memcpy"] += 1
    _moved(current(), width * height)
    for row in range(height):
        ctypes.memmove(dst + row * dpitch, src + row * spitch, width)


def _ascontiguousarray(array: FakeArray, dtype: Any = None) -> FakeArray:
    out = np.ascontiguousarray(array.a, dtype=dtype)
    return array if out is array.a else FakeArray(out, array.device.id)


def _properties(ordinal: int) -> dict[str, Any]:
    """Device ``ordinal``'s properties: its own PCI bus (``ordinal + 1``), as on a real host."""
    return {
        "multiProcessorCount": 2,
        "name": b"Fake GPU",
        "pciDomainID": 0,
        "pciBusID": ordinal + 1,
        "pciDeviceID": 0,
    }


def make_module(devices: int = 1, peer: Any = True, memory: int = 1 << 34) -> types.ModuleType:
    """A module object that stands in for ``cupy`` (install it in ``sys.modules``): ``devices``
    devices of ``memory`` bytes each (all free), of which device ``a`` can read device ``b``'s
    memory where ``peer`` says so (a bool for every pair, or ``peer(a, b)``)."""
    PEER["access"] = peer

    def by_pci(bus_id: str) -> int:
        ordinal = int(bus_id.split(":")[1], 16) - 1
        if not 0 <= ordinal < devices:
            raise FakeCudaError(f"cudaErrorInvalidDevice: no device at {bus_id}")
        return ordinal

    cupy = types.ModuleType("cupy")
    runtime = types.SimpleNamespace(
        getDeviceCount=lambda: devices,
        getDevice=current,
        getDeviceProperties=_properties,
        deviceCanAccessPeer=_can_access_peer,
        deviceGetByPCIBusId=by_pci,
        pointerGetAttributes=_pointer_attributes,
        memGetInfo=lambda: (memory, memory),
        memcpyAsync=_memcpy_async,
        memcpy2DAsync=_memcpy_2d_async,
        memcpyDefault=4,
        runtimeGetVersion=lambda: 0,
        ipcGetMemHandle=_ipc_get,
        ipcOpenMemHandle=_ipc_open,
        ipcCloseMemHandle=_ipc_close,
    )
    cupy.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        runtime=runtime,
        Device=FakeDevice,
        Stream=FakeStream,
        memory=types.SimpleNamespace(OutOfMemoryError=_OutOfMemoryError, Memory=_memory),
        MemoryPointer=lambda mem, offset: FakeMemoryPointer(
            mem.ptr + offset, getattr(mem, "device_id", None)
        ),
        UnownedMemory=lambda ptr, size, owner, device_id=None: types.SimpleNamespace(
            ptr=ptr, device_id=device_id
        ),
        alloc_pinned_memory=_alloc_pinned,
        Event=FakeEvent,
        get_elapsed_time=lambda start, stop: 0.0,
    )
    cupy.__version__ = "fake"  # type: ignore[attr-defined]
    cupy.ndarray = FakeArray  # type: ignore[attr-defined]
    cupy.RawKernel = FakeRawKernel  # type: ignore[attr-defined]
    cupy.RawModule = FakeRawModule  # type: ignore[attr-defined]
    cupy.asarray = _asarray  # type: ignore[attr-defined]
    cupy.ascontiguousarray = _ascontiguousarray  # type: ignore[attr-defined]
    cupy.transpose = lambda a, axes: FakeArray(np.transpose(a.a, axes))  # type: ignore[attr-defined]
    cupy.empty = lambda shape, dtype=np.float64: FakeArray(np.empty(shape, dtype))  # type: ignore[attr-defined]
    cupy.zeros = lambda shape, dtype=np.float64: FakeArray(np.zeros(shape, dtype))  # type: ignore[attr-defined]
    for name in ARRAY_FUNCTIONS:
        setattr(cupy, name, _array_function(name))
    cupy.get_default_memory_pool = lambda: types.SimpleNamespace(  # type: ignore[attr-defined]
        free_bytes=lambda: 0, free_all_blocks=lambda: None
    )
    return cupy


@contextmanager
def installed(
    monkeypatch: Any, devices: int = 1, peer: Any = True, memory: int = 1 << 34
) -> Iterator[types.ModuleType]:
    """Install the fake as ``cupy`` with fresh kernel factories; restore both afterwards."""
    from dcop.gpu import kernels as K
    from dcop.gpu import strided

    factories = [
        K.aggregate_kernel,
        K.eliminate_kernel,
        K.argbest_kernel,
        K.generic_kernel,
        K.fused_kernel,
        strided._module,
        strided._kernel,
    ]
    real_source = K.fused_source

    def recording_source(sig: Any) -> str:
        SIGS[sig.name] = sig
        return real_source(sig)

    reset()
    for factory in factories:
        factory.cache_clear()
    strided.forget()
    module = make_module(devices, peer, memory)
    monkeypatch.setitem(__import__("sys").modules, "cupy", module)
    monkeypatch.setattr(K, "fused_source", recording_source)
    try:
        yield module
    finally:
        # memoized fake kernels must not outlive the fake (a real GPU test may follow)
        for factory in factories:
            factory.cache_clear()
        strided.forget()
