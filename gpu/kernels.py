"""CUDA C sources of the dcop kernels and their memoized factories (CuPy RawKernel).

Three families, all named ``dcop_*``:

* ``dcop_aggregate_<T>``: the paper's aggregation. One thread per row of the joined table; the row
  index of every input table comes from per-dimension ``mul``/``div``/``mod`` arrays (Eq. 1 of the
  paper), held in shared memory. All tables of a bucket are summed in one launch (the paper's
  unrolled loop over the mini-bucket).
* ``dcop_eliminate_<op>_<T>`` / ``dcop_argbest_<min|max>_<T>``: the paper's elimination. One thread
  per output row, reducing ``|D_x|`` contiguous entries (the eliminated variable is last).
* ``dcop_join_elim_*``: the fused join+eliminate that writes only the eliminated output.
  ``dcop_join_elim_generic_<op>_<T>`` reads strides from a metadata array at run time (one build per
  op and dtype; used for small buckets, where compiling a kernel would cost more than running it).
  :func:`fused_source` generates a kernel per bucket *signature*: domain sizes and strides are
  compile-time constants, small tables are copied to shared memory, indices are 32-bit, each thread
  computes all rows that differ only in the last output variable (so terms without that variable are
  loaded once), terms without the eliminated variable are hoisted out of its loop, and a warp's rows
  are staged in shared memory so that the output is written coalesced.

Which the product uses: every join+eliminate of BE, MBE, MPE and the agents runs a fused kernel
(generic or generated), and ``best_value`` (the value phase) runs the generic one. Aggregation,
elimination and argbest serve ``CupyBackend.join``/``eliminate``/``argbest``, which no algorithm
calls; they stay because every table backend offers the same methods (the backend interface of
:mod:`dcop.tables`), and they are the paper's two-kernel pipeline that the kernel benchmark
compares the fused kernel with.

Nothing here imports CuPy at module level: ``import dcop.gpu`` works without CUDA. Compiled kernels
are cached on disk by CuPy; :func:`use_cache_dir` (or ``DCOP_KERNEL_CACHE``) says where.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from typing import Any

from dcop.errors import BackendUnavailable

#: Threads per block of every kernel here.
BLOCK = 256
#: Shared memory one block of a generated kernel may use (no opt-in needed up to 48 KiB).
SHARED_BUDGET = 48 * 1024
#: The eliminated domain up to which a thread keeps one partial sum per value in registers.
MAX_REGISTER_DOMAIN = 32
#: Largest unrolled body (output rows x eliminated values) of a generated kernel.
MAX_UNROLL = 1024

_PRELUDE = r"""
#define DCOP_INF_F __int_as_float(0x7f800000)
#define DCOP_INF_D __longlong_as_double(0x7ff0000000000000LL)
"""

_CTYPE = {"float32": "float", "float64": "double"}
_SUFFIX = {"float32": "f32", "float64": "f64"}


def ctype(dtype_name: str) -> str:
    """The CUDA C type of a NumPy dtype name (float32 or float64 only)."""
    return _CTYPE[dtype_name]


def _inf(dtype_name: str) -> str:
    return "DCOP_INF_F" if dtype_name == "float32" else "DCOP_INF_D"


# ---- reduction snippets ----------------------------------------------------------------------
def _op_code(op: str, dtype_name: str) -> tuple[str, str, str]:
    """C code for one reduction: declare/initialise the accumulator, fold value ``v`` into it,
    and the reduced value (without the hoisted term)."""
    inf = _inf(dtype_name)
    t = ctype(dtype_name)
    if op == "min":
        return f"{t} acc = {inf};", "acc = fmin(acc, v);", "acc"
    if op == "max":
        return f"{t} acc = -{inf};", "acc = fmax(acc, v);", "acc"
    if op == "sum":
        return f"{t} acc = 0;", "acc += v;", "acc"
    if op == "logsumexp":
        # online log-sum-exp: m is the running peak, s the sum of exp(v - m); an infinite peak is
        # kept. A -inf value adds nothing (skipped: with m = -inf too, exp(v - m) would be NaN).
        return (
            f"{t} m = -{inf}; {t} s = 0;",
            "if (v > m) { s = s * exp(m - v) + 1; m = v; } "
            f"else if (v > -{inf}) {{ s += exp(v - m); }}",
            "(isfinite(m) ? m + log(s) : m)",
        )
    raise ValueError(op)


def combine(op: str, hoisted: str | None, reduced: str, ndom: str, dtype_name: str) -> str:
    """The output from the hoisted term (added to every value of the eliminated variable) and the
    reduction of the rest: ``op_x(c + v_x)`` is ``c + op_x(v_x)``, except ``sum``: ``n c + sum``."""
    if hoisted is None:
        return reduced
    if op == "sum":
        return f"{hoisted} * ({ctype(dtype_name)}){ndom} + {reduced}"
    return f"{hoisted} + {reduced}"


# ---- paper kernels: aggregation, elimination, argbest ---------------------------------------
_AGGREGATE = r"""
// meta (int64): per table [pointer, s, mul[0..s), div[0..s), mod[0..s)]; copied to shared memory
extern "C" __global__ void dcop_aggregate_@SUF@(const long long* __restrict__ meta, int meta_len,
                                             int n_tables, T* __restrict__ out,
                                             unsigned long long n_out) {
    extern __shared__ long long smeta[];
    for (int i = threadIdx.x; i < meta_len; i += blockDim.x) smeta[i] = meta[i];
    __syncthreads();
    for (unsigned long long r = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         r < n_out; r += (unsigned long long)gridDim.x * blockDim.x) {
        T acc = 0;
        int pos = 0;
        for (int j = 0; j < n_tables; ++j) {
            const T* tab = reinterpret_cast<const T*>(smeta[pos]);
            const int s = (int)smeta[pos + 1];
            const long long* mul = smeta + pos + 2;
            unsigned long long rj = 0;
            for (int k = 0; k < s; ++k) {
                rj += mul[k] * ((r / (unsigned long long)mul[s + k]) % (unsigned long long)mul[2 * s + k]);
            }
            acc += tab[rj];
            pos += 2 + 3 * s;
        }
        out[r] = acc;
    }
}
"""

_ELIMINATE = r"""
extern "C" __global__ void dcop_eliminate_@OP@_@SUF@(const T* __restrict__ in, T* __restrict__ out,
                                                unsigned long long n_out, int NDOM) {
    for (unsigned long long r = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         r < n_out; r += (unsigned long long)gridDim.x * blockDim.x) {
        const T* row = in + r * NDOM;
        const T c = 0;
        @INIT@
        for (int x = 0; x < NDOM; ++x) {
            const T v = row[x];
            @FOLD@
        }
        out[r] = @FINAL@;
    }
}
"""

_ARGBEST = r"""
extern "C" __global__ void dcop_argbest_@OP@_@SUF@(const T* __restrict__ in, long long* __restrict__ out,
                                              unsigned long long n_out, int NDOM) {
    for (unsigned long long r = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         r < n_out; r += (unsigned long long)gridDim.x * blockDim.x) {
        const T* row = in + r * NDOM;
        T best = row[0];
        int arg = 0;
        for (int x = 1; x < NDOM; ++x) {
            const T v = row[x];
            if (v @CMP@ best) { best = v; arg = x; }   // strict: the first best index, as NumPy
        }
        out[r] = arg;
    }
}
"""

# Generic fused join+eliminate, strides read at run time. One thread per output row.
# meta (int64): [n_tables, n_hoisted, NDOM, then per table: pointer, sx, s, (div, mod, mul) * s]
# Tables without the eliminated variable (sx == 0) come first (n_hoisted of them).
_GENERIC = r"""
#define DCOP_MAX_TABLES 32
extern "C" __global__ void dcop_join_elim_generic_@OP@_@SUF@(const long long* __restrict__ meta,
                                                        int meta_len, T* __restrict__ out,
                                                        unsigned int r_begin, unsigned int r_end) {
    extern __shared__ long long smeta[];
    for (int i = threadIdx.x; i < meta_len; i += blockDim.x) smeta[i] = meta[i];
    __syncthreads();
    const int n_tables = (int)smeta[0];
    const int n_hoisted = (int)smeta[1];
    const int NDOM = (int)smeta[2];
    for (unsigned int r = r_begin + blockIdx.x * blockDim.x + threadIdx.x; r < r_end;
         r += gridDim.x * blockDim.x) {
        const T* tab[DCOP_MAX_TABLES];
        // offsets into an input are 64-bit: an input table may hold 2^32 entries or more
        // (a 16 GiB float32 table), though the output rows of one launch stay 32-bit
        unsigned long long base[DCOP_MAX_TABLES];
        unsigned long long sx[DCOP_MAX_TABLES];
        int pos = 3;
        for (int j = 0; j < n_tables; ++j) {
            tab[j] = reinterpret_cast<const T*>(smeta[pos]);
            sx[j] = (unsigned long long)smeta[pos + 1];
            const int s = (int)smeta[pos + 2];
            unsigned long long b = 0;
            for (int k = 0; k < s; ++k) {
                const long long* e = smeta + pos + 3 + 3 * k;
                b += (unsigned long long)e[2] * ((r / (unsigned int)e[0]) % (unsigned int)e[1]);
            }
            base[j] = b;
            pos += 3 + 3 * s;
        }
        T c = 0;
        for (int j = 0; j < n_hoisted; ++j) c += tab[j][base[j]];
        @INIT@
        for (int x = 0; x < NDOM; ++x) {
            T v = 0;
            for (int j = n_hoisted; j < n_tables; ++j) v += tab[j][base[j] + x * sx[j]];
            @FOLD@
        }
        out[r - r_begin] = @FINAL@;
    }
}
"""

#: The most tables (and int64 metadata words) the generic fused kernel takes.
GENERIC_MAX_TABLES = 32
GENERIC_MAX_META = 4096


def _fill(template: str, dtype_name: str, op: str | None = None) -> str:
    code = _PRELUDE + "#define T " + ctype(dtype_name) + "\n" + template
    code = code.replace("@SUF@", _SUFFIX[dtype_name])
    if op is not None:
        init, fold, reduced = _op_code(op, dtype_name)
        code = code.replace("@INIT@", init).replace("@FOLD@", fold)
        code = code.replace("@FINAL@", combine(op, "c", reduced, "NDOM", dtype_name))
        code = code.replace("@OP@", op)
    return code


def aggregate_source(dtype_name: str) -> str:
    """CUDA source of ``dcop_aggregate_<T>`` (the paper's aggregation) for ``dtype_name``."""
    return _fill(_AGGREGATE, dtype_name)


def eliminate_source(op: str, dtype_name: str) -> str:
    """CUDA source of ``dcop_eliminate_<op>_<T>`` (the paper's elimination; ``op``: min or max)."""
    return _fill(_ELIMINATE, dtype_name, op)


def argbest_source(op: str, dtype_name: str) -> str:
    """CUDA source of ``dcop_argbest_<op>_<T>``: the best value index per row (``op``: min or max)."""
    code = _PRELUDE + "#define T " + ctype(dtype_name) + "\n" + _ARGBEST
    code = code.replace("@SUF@", _SUFFIX[dtype_name]).replace("@CMP@", ">" if op == "max" else "<")
    return code.replace("@OP@", "max" if op == "max" else "min")


def generic_source(op: str, dtype_name: str) -> str:
    """CUDA source of ``dcop_join_elim_generic_<op>_<T>`` (strides read at run time)."""
    return _fill(_GENERIC, dtype_name, op)


# ---- generated fused kernels -----------------------------------------------------------------
@dataclass(frozen=True)
class TableSig:
    """One input table of a bucket, as the generated kernel sees it (strides in elements)."""

    size: int
    group_strides: tuple[int, ...]  # stride per group variable (0: not in the table)
    sy: int  # stride of the row variable (last output variable), 0 if absent
    sx: int  # stride of the eliminated variable, 0 if absent
    shared: bool  # copied to shared memory (else read through the read-only cache)


@dataclass(frozen=True)
class FusedSig:
    """Everything a generated join+eliminate kernel is specialised on."""

    dtype: str
    op: str
    group_sizes: tuple[int, ...]  # output variables except the last
    dy: int  # size of the last output variable (1 when the output is a scalar)
    ndom: int  # size of the eliminated variable
    tables: tuple[TableSig, ...]
    stage: bool  # stage a warp's outputs in shared memory for coalesced stores

    @functools.cached_property
    def name(self) -> str:  # cached: the hash of the repr took tens of microseconds a call
        digest = hashlib.sha1(repr(self).encode()).hexdigest()[:16]
        return f"dcop_join_elim_{self.op}_{_SUFFIX[self.dtype]}_{digest}"

    @property
    def n_groups(self) -> int:
        n = 1
        for s in self.group_sizes:
            n *= s
        return n

    @property
    def wide_groups(self) -> bool:
        """Whether the group counter is 64-bit (``g_begin``/``g_end`` are ``uint64``): a bucket
        of 2^32 output groups or more (a float32 output of 16 GiB or more with a small last
        variable)."""
        return self.n_groups >= 1 << 32

    @property
    def dyp(self) -> int:
        """Row pitch of the staging buffer: odd, so that lanes hit different banks."""
        return self.dy if self.dy % 2 else self.dy + 1

    def shared_layout(self) -> tuple[list[int], int, int]:
        """Offsets (elements) of shared tables, staging offset, and total shared bytes."""
        offsets = []
        pos = 0
        for t in self.tables:
            offsets.append(pos if t.shared else -1)
            if t.shared:
                pos += t.size
        item = 4 if self.dtype == "float32" else 8
        stage_off = pos
        if self.stage:
            pos += (BLOCK // 32) * 32 * self.dyp
        return offsets, stage_off, pos * item


def stage_bytes(dtype_name: str, dy: int) -> int:
    """Shared memory a block uses to stage its warps' output rows before a coalesced write
    (``dy`` rows per thread, padded to an odd count against bank conflicts)."""
    item = 4 if dtype_name == "float32" else 8
    dyp = dy if dy % 2 else dy + 1
    return (BLOCK // 32) * 32 * dyp * item


def fused_source(sig: FusedSig) -> str:
    """CUDA C of the join+eliminate kernel for one bucket signature."""
    t = ctype(sig.dtype)
    ndom, dy = sig.ndom, sig.dy
    offsets, stage_off, _ = sig.shared_layout()
    tabs = sig.tables
    # offsets into the inputs: 32-bit (faster) unless an input holds 2^32 entries or more, where
    # they would wrap and read the wrong entries
    wide = any(tab.size >= 1 << 32 for tab in tabs)
    index, u = ("unsigned long long", "ull") if wide else ("unsigned int", "u")
    lines: list[str] = [
        _PRELUDE,
        f"#define NDOM {ndom}",
        f"#define DY {dy}",
        f"#define DYP {sig.dyp}",
    ]
    params = ", ".join(f"const {t}* __restrict__ t{j}" for j in range(len(tabs)))
    # the group counter: 32-bit unless the bucket has 2^32 groups or more (one launch covers
    # at most 2^30 of them, so the count within a launch stays 32-bit)
    gtype, gu = ("unsigned long long", "ull") if sig.wide_groups else ("unsigned int", "u")
    lines.append(
        f'extern "C" __global__ void __launch_bounds__({BLOCK}) {sig.name}({params}, '
        f"{t}* __restrict__ out, {gtype} g_begin, {gtype} g_end) {{"
    )
    lines.append("    extern __shared__ __align__(16) unsigned char dcop_smem[];")
    lines.append(f"    {t}* sm = reinterpret_cast<{t}*>(dcop_smem);")
    for j, tab in enumerate(tabs):
        if tab.shared:
            lines.append(
                f"    for (unsigned int i = threadIdx.x; i < {tab.size}u; i += {BLOCK}u) "
                f"sm[{offsets[j]} + i] = t{j}[i];"
            )
    if any(tab.shared for tab in tabs):
        lines.append("    __syncthreads();")

    def load(j: int, index: str) -> str:
        if tabs[j].shared:
            return f"sm[{offsets[j]} + {index}]"
        return f"__ldg(t{j} + {index})"

    # classify: hoisted out of the x loop (no eliminated variable) / out of the y loop (no row var)
    b0 = [j for j, tab in enumerate(tabs) if tab.sx == 0 and tab.sy == 0]
    by = [j for j, tab in enumerate(tabs) if tab.sx == 0 and tab.sy != 0]
    registers = ndom <= MAX_REGISTER_DOMAIN
    a0 = [j for j, tab in enumerate(tabs) if tab.sx != 0 and tab.sy == 0] if registers else []
    ay = [j for j, tab in enumerate(tabs) if tab.sx != 0 and j not in a0]

    lines.append("    const unsigned int lane = threadIdx.x & 31u;")
    lines.append(f"    const unsigned int warp = (blockIdx.x * {BLOCK}u + threadIdx.x) >> 5;")
    lines.append(f"    const unsigned int nwarps = (gridDim.x * {BLOCK}u) >> 5;")
    lines.append("    const unsigned int n = (unsigned int)(g_end - g_begin);")
    if sig.stage:
        lines.append(f"    {t}* stage = sm + {stage_off} + (threadIdx.x >> 5) * (32 * DYP);")
    lines.append("    for (unsigned int tile = warp; tile < (n + 31u) / 32u; tile += nwarps) {")
    lines.append("        const unsigned int local = tile * 32u + lane;")
    lines.append("        const bool valid = local < n;")
    lines.append(f"        {gtype} q = g_begin + (valid ? local : n - 1u);")
    # digits of the group index, last group variable fastest
    ng = len(sig.group_sizes)
    used = {i for tab in tabs for i, s in enumerate(tab.group_strides) if s}
    for i in reversed(range(ng)):
        if not any(k <= i for k in used):
            break  # no digit at or before this one is read
        size = sig.group_sizes[i]
        if i == 0:
            lines.append(f"        const unsigned int d{i} = (unsigned int)q;")
        else:
            if i in used:
                lines.append(f"        const unsigned int d{i} = (unsigned int)(q % {size}{gu});")
            lines.append(f"        q /= {size}{gu};")
    lines.append("        (void)q;")
    for j, tab in enumerate(tabs):
        terms = [f"d{i} * {s}{u}" for i, s in enumerate(tab.group_strides) if s]
        lines.append(f"        const {index} b{j} = {' + '.join(terms) if terms else '0' + u};")
    # hoisted constant of the group
    if b0 or by:
        cg = " + ".join(load(j, f"b{j}") for j in b0) or "0"
        lines.append(f"        const {t} cg = {cg};")
    if a0:
        lines.append(f"        {t} sa[NDOM];")
        lines.append("        #pragma unroll")
        sums = " + ".join(load(j, f"b{j} + x * {tabs[j].sx}{u}") for j in a0)
        lines.append(f"        for (int x = 0; x < NDOM; ++x) sa[x] = {sums};")
    init, fold, reduced = _op_code(sig.op, sig.dtype)

    def x_loop(indent: str, per_row: bool) -> list[str]:
        def idx(j: int) -> str:
            yterm = f" + y * {tabs[j].sy}{u}" if per_row and tabs[j].sy else ""
            return f"b{j}{yterm} + x * {tabs[j].sx}{u}"

        terms = (["sa[x]"] if a0 else []) + [load(j, idx(j)) for j in ay]
        body = ndom * (dy if per_row else 1)
        unroll = "#pragma unroll" if registers or body <= MAX_UNROLL else "#pragma unroll 4"
        return [
            f"{indent}{init}",
            f"{indent}{unroll}",
            f"{indent}for (int x = 0; x < NDOM; ++x) {{",
            f"{indent}    const {t} v = {' + '.join(terms)};",
            f"{indent}    {fold}",
            f"{indent}}}",
        ]

    per_row = bool(ay)
    hoisted = bool(b0 or by)
    if not per_row:
        # nothing under the x loop depends on y: reduce once per group
        lines.extend(x_loop("        ", False))
        lines.append(f"        const {t} red = {reduced};")
    y_body = ndom if per_row else 1
    y_unroll = "#pragma unroll" if dy * y_body <= MAX_UNROLL else "#pragma unroll 1"
    lines.append(f"        {y_unroll}")
    lines.append("        for (int y = 0; y < DY; ++y) {")
    if hoisted:
        yterms = "".join(f" + {load(j, f'b{j} + y * {tabs[j].sy}{u}')}" for j in by)
        lines.append(f"            const {t} c = cg{yterms};")
    if per_row:
        lines.extend(x_loop("            ", True))
        lines.append(f"            const {t} red = {reduced};")
    res = combine(sig.op, "c" if hoisted else None, "red", "NDOM", sig.dtype)
    lines.append(f"            const {t} res = {res};")
    if sig.stage:
        lines.append("            stage[lane * DYP + y] = res;")
    else:
        lines.append("            if (valid) out[(size_t)local * DY + y] = res;")
    lines.append("        }")
    if sig.stage:
        lines.append("        __syncwarp();")
        lines.append("        const size_t obase = (size_t)tile * 32u * DY;")
        lines.append("        const unsigned int rows = min(32u, n - tile * 32u) * DY;")
        lines.append(
            "        for (unsigned int i = lane; i < rows; i += 32u) "
            "out[obase + i] = stage[(i / DY) * DYP + i % DY];"
        )
        lines.append("        __syncwarp();")
    lines.append("    }")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---- factories (CuPy imported lazily) --------------------------------------------------------
#: Environment variable naming the directory of compiled kernels (sets CuPy's ``CUPY_CACHE_DIR``).
CACHE_ENV = "DCOP_KERNEL_CACHE"


def use_cache_dir(path: str | os.PathLike[str] | None = None) -> str | None:
    """Keep compiled kernels in ``path`` (default: ``$DCOP_KERNEL_CACHE``), so that a restarted
    process loads them instead of compiling again; a deployment mounts it as a volume.

    It sets ``CUPY_CACHE_DIR``, which CuPy reads each time it compiles; call it before the first
    compile. With neither ``path`` nor ``DCOP_KERNEL_CACHE``, CuPy's own setting stays
    (``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``). Returns the directory in use, or None
    for CuPy's default.
    """
    chosen = os.fspath(path) if path is not None else os.environ.get(CACHE_ENV) or None
    if chosen:
        chosen = os.path.abspath(os.path.expanduser(chosen))
        try:
            os.makedirs(chosen, exist_ok=True)
        except OSError as exc:
            raise BackendUnavailable(f"kernel cache directory {chosen}: {exc}") from exc
        os.environ["CUPY_CACHE_DIR"] = chosen
        return chosen
    return os.environ.get("CUPY_CACHE_DIR") or None


def nan_source(dtype_name: str) -> str:
    """Raise ``*flag`` when any of the ``n`` entries is NaN (a grid-stride loop)."""
    t = ctype(dtype_name)
    return (
        f'extern "C" __global__ void {nan_name(dtype_name)}(const {t}* x, '
        "unsigned long long n, int* flag) {\n"
        "  const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;\n"
        "  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;"
        " i < n; i += step) {\n"
        "    if (x[i] != x[i]) { *flag = 1; return; }\n"
        "  }\n"
        "}\n"
    )


def nan_name(dtype_name: str) -> str:
    """Name of the NaN test kernel for ``dtype_name``."""
    return f"dcop_has_nan_{_SUFFIX[dtype_name]}"


def generic_name(op: str, dtype_name: str) -> str:
    """Name of the generic fused kernel for ``op`` and ``dtype_name``."""
    return f"dcop_join_elim_generic_{op}_{_SUFFIX[dtype_name]}"


def _compile(source: str, name: str) -> Any:
    import cupy

    return cupy.RawKernel(source, name, options=("-std=c++17",))


@functools.cache
def aggregate_kernel(device: int, dtype_name: str) -> Any:
    return _compile(aggregate_source(dtype_name), f"dcop_aggregate_{_SUFFIX[dtype_name]}")


@functools.cache
def eliminate_kernel(device: int, op: str, dtype_name: str) -> Any:
    return _compile(eliminate_source(op, dtype_name), f"dcop_eliminate_{op}_{_SUFFIX[dtype_name]}")


@functools.cache
def argbest_kernel(device: int, op: str, dtype_name: str) -> Any:
    which = "max" if op == "max" else "min"
    return _compile(argbest_source(op, dtype_name), f"dcop_argbest_{which}_{_SUFFIX[dtype_name]}")


@functools.cache
def generic_kernel(device: int, op: str, dtype_name: str) -> Any:
    return _compile(generic_source(op, dtype_name), generic_name(op, dtype_name))


@functools.cache
def nan_kernel(device: int, dtype_name: str) -> Any:
    # one kernel of our own, loaded at warm-up: CuPy's isnan + count_nonzero compiled a
    # reduction for each new table shape inside the solve (measured: up to 5.7 s on one table)
    return _compile(nan_source(dtype_name), nan_name(dtype_name))


@functools.lru_cache(maxsize=4096)
def fused_kernel(device: int, sig: FusedSig) -> Any:
    return _compile(fused_source(sig), sig.name)
