"""Shared reader plumbing: size limits, file loading, a token stream that knows line numbers.

Every reader turns malformed input into ``InputError(reason, file, line)`` and checks declared
sizes against the limits below *before* allocating anything, so a hostile header (10**12 tuples,
a domain of 10**9 values) fails at once in bounded time and memory.

A caller may also bound one read by its run's own limits (:class:`ReadLimits`, set by
``dcop.io.read_problem``): a deadline, checked as the file streams in (``RunTimeout``), and the
memory the read may still take, against which declared counts are checked before anything is
built (``TableTooLarge``). A file that is not a regular file (a pipe, ``/dev/zero``) is read in
chunks up to the format's size limit, each chunk checked for text before the next is read.
"""

from __future__ import annotations

import codecs
import math
import stat
import time
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from dcop.errors import InputError, ModelError, RunTimeout, TableTooLarge
from dcop.model import CostTable, FloatArray, Problem, Variable

#: Largest domain a reader accepts.
MAX_DOMAIN = 1 << 20
#: Largest single table (entries) a reader builds: 2**27 float64 = 1 GiB.
MAX_TABLE_ENTRIES = 1 << 27
#: Largest sum of table entries over a whole file.
MAX_TOTAL_ENTRIES = 1 << 28
#: Most variables / functions a header may declare.
MAX_VARIABLES = 1 << 24
MAX_FUNCTIONS = 1 << 24
#: Largest file read by the token formats (.wcsp, .uai: 1 GiB, streamed, so memory follows the
#: tables), by XML (64 MiB: a tree and tuple lists in memory, ~25x the file) and by YAML
#: (32 MiB: pure-Python tree building).
MAX_TEXT_BYTES = 1 << 30
MAX_XML_BYTES = 1 << 26
MAX_YAML_BYTES = 1 << 25


#: What reading holds per declared variable and per cost function besides its tables' values
#: (measured: a .wcsp of 10**6 one-value variables took 280 MB to read), and per value.
VARIABLE_BYTES = 320
FUNCTION_BYTES = 480
VALUE_BYTES = 8
#: Tokens (or lines) read between two looks at the clock.
CLOCK_EVERY = 4096
#: Chunks in which a file that is not a regular file is read.
STREAM_CHUNK = 1 << 20


@dataclass(frozen=True)
class ReadLimits:
    """What one read may take besides the fixed caps above: it must end by ``deadline`` (on
    ``time.monotonic``; None: no deadline) and allocate at most ``room_bytes`` (None: no
    check); ``timeout_text`` and ``memory_text`` name them in the one-line errors."""

    deadline: float | None = None
    room_bytes: float | None = None
    timeout_text: str = "the timeout"
    memory_text: str = "the memory limit"


_NO_LIMITS = ReadLimits()
_LIMITS: ContextVar[ReadLimits | None] = ContextVar("dcop_read_limits", default=None)


@contextmanager
def reading_within(limits: ReadLimits | None) -> Iterator[None]:
    """Readers called inside keep to ``limits`` (None: only the fixed caps)."""
    token = _LIMITS.set(limits)
    try:
        yield
    finally:
        _LIMITS.reset(token)


def check_deadline(file: str) -> None:
    """RunTimeout once the read's deadline has passed."""
    limits = _LIMITS.get() or _NO_LIMITS
    if limits.deadline is not None and time.monotonic() > limits.deadline:
        raise RunTimeout(
            f"{file}: reading the file took longer than {limits.timeout_text}; nothing was solved"
        )


def check_room(
    file: str,
    line: int | None,
    *,
    variables: int = 0,
    functions: int = 0,
    values: int = 0,
    text_bytes: int = 0,
) -> None:
    """TableTooLarge when what a file declares (or its text, ``text_bytes`` of a tree-building
    format) would take more memory than the read may have."""
    limits = _LIMITS.get() or _NO_LIMITS
    room = limits.room_bytes
    if room is None:
        return
    need = (
        variables * VARIABLE_BYTES + functions * FUNCTION_BYTES + values * VALUE_BYTES + text_bytes
    )
    if need > room:
        what = (
            f"{variables} variables, {functions} cost functions and {values} table values"
            if text_bytes == 0
            else f"{text_bytes // 1024} KiB of text to parse"
        )
        where = f"{file}:{line}" if line is not None else file
        raise TableTooLarge(
            f"{where}: the file declares {what}: reading it needs about {_mib(need)}, more "
            f"than {limits.memory_text} leaves ({_mib(room)}); nothing was solved"
        )


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n < 1 << 30 else f"{n / (1 << 30):.1f} GiB"


def _regular(path: Path) -> tuple[bool, int]:
    """Whether ``path`` is a regular file, and its size (InputError: missing, a directory)."""
    name = str(path)
    try:
        info = path.stat()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", name) from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError("is a directory, not an instance file", name)
    return stat.S_ISREG(info.st_mode), info.st_size


def _stream_text(fh: IO[bytes], limit: int, name: str) -> str:
    """The UTF-8 text of a stream (a pipe, a device) read in chunks up to ``limit`` bytes: a
    NUL byte, bytes that are not UTF-8, the limit or the read's deadline end it at once, so an
    endless stream (``/dev/zero``, ``/dev/urandom``) is refused within one chunk."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    parts: list[str] = []
    total = 0
    lines = 0
    while True:
        check_deadline(name)
        chunk = fh.read(STREAM_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise InputError(f"more than the limit of {limit} bytes (not a regular file)", name)
        check_room(name, None, text_bytes=total)
        if b"\x00" in chunk:
            raise InputError(
                "NUL byte in a text file", name, lines + chunk.count(b"\n", 0, chunk.index(0)) + 1
            )
        try:
            parts.append(decoder.decode(chunk))
        except UnicodeDecodeError as exc:
            line = lines + chunk.count(b"\n", 0, max(0, exc.start)) + 1
            raise InputError("not a UTF-8 text file", name, line) from None
        lines += chunk.count(b"\n")
    try:
        parts.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        raise InputError("not a UTF-8 text file (it ends inside a character)", name) from None
    return "".join(parts)


def read_text(path: Path, limit: int, expansion: int = 1) -> str:
    """The file's text (UTF-8), or InputError when it is missing, too large or not text.
    ``expansion``: the bytes of memory that parsing takes per byte of text, checked against the
    read's room (:class:`ReadLimits`) before the file is read."""
    name = str(path)
    regular, size = _regular(path)
    if not regular:
        try:
            with path.open("rb") as fh:
                text = _stream_text(fh, limit, name)
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror or exc}", name) from None
        check_room(name, None, text_bytes=len(text) * expansion)
        return text
    if size > limit:
        raise InputError(f"file is {size} bytes, more than the limit of {limit}", name)
    check_room(name, None, text_bytes=size * expansion)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"not a UTF-8 text file (byte {exc.start})", name, line) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise InputError("NUL byte in a text file", name, line)
    return text


def table_entries(shape: Sequence[int]) -> int:
    """Number of entries of a table with that shape (Python int: never overflows)."""
    return math.prod(int(s) for s in shape)


class SizeBudget:
    """Counts the values a file's tables hold in memory and refuses them above the limits.

    A dense table claims its entries (and may not exceed ``table_limit``); a sparse table (a
    default cost plus listed tuples) claims only what it stores, ``tuples * (arity + 1)`` values,
    however large its dense form would be. Both count against ``MAX_TOTAL_ENTRIES``.
    """

    def __init__(self, file: str, table_limit: int = MAX_TABLE_ENTRIES) -> None:
        self.file = file
        self.table_limit = table_limit
        self.total = 0
        self.variables = 0
        self.functions = 0

    def declare(self, variables: int, functions: int, line: int | None) -> None:
        """The counts a header declares, checked with the values claimed so far against the
        read's memory room (:func:`check_room`) before anything is built for them."""
        self.variables, self.functions = variables, functions
        self._check_room(line)

    def _check_room(self, line: int | None) -> None:
        check_room(
            self.file, line, variables=self.variables, functions=self.functions, values=self.total
        )

    def claim(self, shape: Sequence[int], line: int | None, what: str = "table") -> int:
        """Claim a dense table of that shape; returns its number of entries."""
        entries = table_entries(shape)
        if entries > self.table_limit:
            raise InputError(
                f"{what} would have {entries} entries, more than the limit of {self.table_limit}",
                self.file,
                line,
            )
        self._add(entries, line)
        return entries

    def claim_listed(self, tuples: int, arity: int, line: int | None) -> None:
        """Claim a sparse table that lists ``tuples`` tuples of ``arity`` value indices."""
        self._add(tuples * (arity + 1), line)

    def claim_stored(self, table: CostTable, line: int | None, what: str = "table") -> None:
        """Claim what an existing table stores (a reused shared table, say)."""
        form = table.sparse_form()
        if form is None:
            self.claim(table.shape, line, what)
        else:
            self.claim_listed(len(form[2]), table.arity, line)

    def _add(self, values: int, line: int | None) -> None:
        self.total += values
        if self.total > MAX_TOTAL_ENTRIES:
            raise InputError(
                f"the tables hold more than {MAX_TOTAL_ENTRIES} entries in all", self.file, line
            )
        self._check_room(line)


#: Dense tables up to this many entries are built at once, whatever they list (they are small).
DENSE_SLACK = 1 << 16


def listed_table(
    scope: Sequence[str],
    shape: Sequence[int],
    default: float,
    index: npt.NDArray[np.int64],
    values: FloatArray,
    name: str,
    budget: SizeBudget,
    line: int | None,
) -> CostTable:
    """A table given by a default cost and listed tuples (index rows, checked by the caller),
    claimed against ``budget``. It is built dense when that is about as small as the listing
    (at most ``DENSE_SLACK`` entries more than the values listed), else kept sparse, so a short
    file never allocates a huge table."""
    shape = tuple(int(s) for s in shape)
    k = len(shape)
    entries = table_entries(shape)
    if entries <= min(budget.table_limit, len(values) * (k + 1) + DENSE_SLACK):
        budget.claim(shape, line)
        costs = np.full(shape, default, dtype=np.float64)
        if len(values) and k == 0:
            costs[()] = values[-1]
        elif len(values):
            costs[tuple(index.T)] = values
        return CostTable(tuple(scope), costs, name)
    budget.claim_listed(len(values), k, line)
    return CostTable.sparse(tuple(scope), shape, default, index, values, name)


class Tokens:
    """Whitespace-separated tokens of a text file, read line by line, with line numbers.

    toulbar2 and the UAI readers read tokens, not lines, so a record may span lines; errors name
    the line of the offending token (or the last line at end of file). The file is streamed, so
    memory stays near the size of the largest table rather than a multiple of the file size.
    """

    def __init__(self, path: Path, limit: int = MAX_TEXT_BYTES) -> None:
        self.file = str(path)
        self._regular, size = _regular(path)
        self._fh: IO[str]
        try:
            if not self._regular:  # a stream: read whole, in checked chunks, up to the limit
                with path.open("rb") as raw:
                    self._fh = StringIO(_stream_text(raw, limit, self.file), newline="")
                size = len(self._fh.getvalue().encode("utf-8"))
            elif size > limit:
                raise InputError(f"file is {size} bytes, more than the limit of {limit}", self.file)
            else:
                self._fh = path.open(encoding="utf-8", newline="")
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror or exc}", self.file) from None
        self._ticks = CLOCK_EVERY
        self._size = size
        self._chars = 0  # characters read so far (<= bytes read)
        self._buf: list[str] = []
        self._at = 0
        self._line = 0  # line number of the tokens in _buf
        self._eof = False
        #: line of each value returned by the last call of numbers()
        self.last_lines: array[int] = array("q")

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Tokens:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- position ------------------------------------------------------------------------------
    def _fill(self) -> bool:
        """Make sure a token is buffered; False at the end of the file."""
        while self._at >= len(self._buf):
            if self._eof:
                return False
            try:
                text = self._fh.readline()
            except UnicodeDecodeError:
                raise InputError(
                    "not a UTF-8 text file", self.file, self._bad_byte_line()
                ) from None
            if not text:
                self._eof = True
                self._buf, self._at = [], 0
                return False
            self._line += 1
            self._chars += len(text)
            self._tick()
            if "\x00" in text:
                raise InputError("NUL byte in a text file", self.file, self._line)
            self._buf, self._at = text.split(), 0
        return True

    def _tick(self) -> None:
        """Look at the clock every CLOCK_EVERY tokens or lines (see :class:`ReadLimits`)."""
        self._ticks -= 1
        if self._ticks <= 0:
            self._ticks = CLOCK_EVERY
            check_deadline(self.file)

    def _bad_byte_line(self) -> int:
        """Line of the first byte that is not UTF-8 (the decoder reads ahead in blocks)."""
        data = Path(self.file).read_bytes()  # a regular file: a stream was checked whole
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return data.count(b"\n", 0, exc.start) + 1
        return self._line + 1  # pragma: no cover - the file changed while we read it

    def at_end(self) -> bool:
        return not self._fill()

    @property
    def line(self) -> int:
        """Line of the next token (or the last line at the end of the file)."""
        self._fill()
        return max(self._line, 1)

    def error(self, reason: str, line: int | None = None) -> InputError:
        return InputError(reason, self.file, self.line if line is None else line)

    def peek(self) -> str | None:
        return self._buf[self._at] if self._fill() else None

    # -- reading -------------------------------------------------------------------------------
    def word(self, what: str) -> str:
        if not self._fill():
            raise self.error(f"unexpected end of file, expected {what}")
        tok = self._buf[self._at]
        self._at += 1
        self._ticks -= 1  # (_tick inlined: this runs once per token)
        if self._ticks <= 0:
            self._tick()
        return tok

    def integer(self, what: str, lo: int | None = None, hi: int | None = None) -> int:
        line = self.line
        tok = self.word(what)
        try:
            value = int(tok)
        except ValueError:
            raise self.error(f"expected {what} (an integer), got {_show(tok)}", line) from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
            raise self.error(f"{what} {value} is out of range {bounds}", line)
        return value

    def number(self, what: str) -> float:
        line = self.line
        tok = self.word(what)
        try:
            value = float(tok)
        except ValueError:
            raise self.error(f"expected {what} (a number), got {_show(tok)}", line) from None
        if math.isnan(value):
            raise self.error(f"{what} is NaN", line)
        return value

    def most_remaining(self) -> int:
        """An upper bound on the tokens left: each needs a character and a separator."""
        buffered = len(self._buf) - self._at if self._at < len(self._buf) else 0
        return buffered + max(0, self._size - self._chars + 1) // 2

    def need(self, count: int, what: str) -> None:
        """Refuse a count that the rest of the file cannot possibly hold (cheap size guard)."""
        room = self.most_remaining()
        if count > room:
            raise self.error(
                f"{what}: {count} values are declared but the rest of the file can hold at "
                f"most {room}"
            )

    def numbers(self, count: int, what: str) -> FloatArray:
        """The next ``count`` tokens as float64, converted in chunks (the bad token is named).

        ``last_lines`` receives the line of each value, for errors found by the caller.
        """
        self.need(count, what)
        out = np.empty(count, dtype=np.float64)
        lines = array("q")
        done = 0
        while done < count:
            # gather up to 64k tokens over as many lines as needed, then convert them at once
            want = min(count - done, 1 << 16)
            check_deadline(self.file)
            chunk: list[str] = []
            while len(chunk) < want and self._fill():
                take = min(want - len(chunk), len(self._buf) - self._at)
                chunk.extend(self._buf[self._at : self._at + take])
                lines.extend([self._line] * take)
                self._at += take
            if not chunk:
                raise self.error(
                    f"unexpected end of file: {what}: {count} values expected, {done} found"
                )
            try:
                values = np.array(chunk, dtype=np.float64)
            except ValueError:
                for i, tok in enumerate(chunk):
                    try:
                        float(tok)
                    except ValueError:
                        raise self.error(
                            f"{what}: expected a number, got {_show(tok)}", lines[done + i]
                        ) from None
                raise  # pragma: no cover - numpy and float() agree on what a number is
            if np.isnan(values).any():
                bad = int(np.flatnonzero(np.isnan(values))[0])
                raise self.error(f"{what}: NaN is not a valid value", lines[done + bad])
            out[done : done + len(chunk)] = values
            done += len(chunk)
        self.last_lines = lines
        return out


def _show(tok: str) -> str:
    return repr(tok if len(tok) <= 40 else tok[:37] + "...")


def sized_variables(file: str, names: Sequence[str], sizes: Sequence[int]) -> list[Variable]:
    """``Variable.with_size`` for each name, looking at the read's deadline as it goes (a
    header may declare millions)."""
    out: list[Variable] = []
    step = 1 << 16
    for start in range(0, len(names), step):
        check_deadline(file)
        out.extend(
            Variable.with_size(names[i], sizes[i])
            for i in range(start, min(start + step, len(names)))
        )
    return out


def build_problem(
    file: str, variables: Iterable[Variable], tables: Sequence[CostTable], **kwargs: object
) -> Problem:
    """Problem.build, with a ModelError reported as an InputError on the file."""
    check_deadline(file)
    try:
        problem = Problem.build(variables, tables, **kwargs)
    except ModelError as exc:
        raise InputError(str(exc), file) from None
    check_total_range(file, problem)
    return problem


def check_total_range(file: str, problem: Problem) -> None:
    """InputError when the finite costs (those below the upper bound) of one assignment could
    add up past the largest float: such a total reads as infinite, that is infeasible (two
    costs of 1e308 were claimed to have no solution)."""
    bound = problem.upper_bound if problem.upper_bound is not None else math.inf
    total = abs(problem.constant)
    for table in problem.tables:
        form = table.sparse_form()
        if form is not None:
            total += _largest_finite(np.append(form[2], form[0]), bound)
        else:
            flat = np.asarray(table.costs).reshape(-1)
            step = 1 << 16  # in chunks: no temporary the size of a large table
            total += max(
                (_largest_finite(flat[k : k + step], bound) for k in range(0, flat.size, step)),
                default=0.0,
            )
        if not math.isfinite(total):
            raise InputError(
                "the finite costs of one assignment can add up past the largest float "
                "(about 1.8e308), which would read as infeasible; scale the costs down",
                file,
            )


def _largest_finite(values: FloatArray, bound: float) -> float:
    """The largest magnitude among ``values`` that are finite and below ``bound`` (0: none)."""
    keep = np.isfinite(values) & (values < bound)
    return float(np.abs(values, where=keep, out=np.zeros_like(values)).max(initial=0.0))


def format_cost(value: float) -> str:
    """Shortest text that reads back to the same float (integers without a decimal point)."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**63:
        return str(int(value))
    return repr(float(value))


def most_common(costs: FloatArray) -> float:
    """The most frequent entry of a table (used as the default cost when writing)."""
    if costs.size == 0:
        return 0.0
    flat = costs.ravel()
    values, counts = np.unique(flat, return_counts=True)
    return float(values[int(np.argmax(counts))])


def effective_tables(problem: Problem) -> list[tuple[tuple[str, ...], FloatArray, str]]:
    """Tables with costs at or above the problem's upper bound turned into +inf (for writers of
    dense formats: this builds the dense array of a sparse table; see :func:`listings`)."""
    out = []
    for table in problem.tables:
        costs = np.asarray(table.costs, dtype=np.float64)
        if problem.upper_bound is not None:
            costs = np.where(costs >= problem.upper_bound, np.inf, costs)
        out.append((tuple(table.scope), costs, table.name))
    return out


@dataclass(frozen=True)
class Listing:
    """A table as a writer of default-plus-tuples formats needs it: every tuple costs
    ``default`` except the rows of ``index`` (value indices), which cost ``values``."""

    scope: tuple[str, ...]
    shape: tuple[int, ...]
    default: float
    index: npt.NDArray[np.integer[Any]]
    values: FloatArray
    name: str


def listings(problem: Problem) -> list[Listing]:
    """Every table as a :class:`Listing`, costs at or above the upper bound as +inf. A sparse
    table keeps its own default and lists its other tuples (it is never built densely); a dense
    table takes its most frequent cost as the default."""
    bound = problem.upper_bound

    def effective(costs: FloatArray) -> FloatArray:
        costs = np.asarray(costs, dtype=np.float64)
        return costs if bound is None else np.where(costs >= bound, np.inf, costs)

    out = []
    for table in problem.tables:
        form = table.sparse_form()
        if form is None:
            costs = effective(table.costs)
            default = most_common(costs)
            index = np.argwhere(costs != default)
            values = costs[tuple(index.T)] if table.arity else costs.reshape(-1)[:0]
        else:
            default = float(effective(np.array([form[0]]))[0])
            values = effective(form[2])
            keep = values != default
            index, values = form[1][keep], values[keep]
        out.append(Listing(table.scope, table.shape, default, index, values, table.name))
    return out


def label_counter(values: Iterable[object]) -> Counter[str]:
    return Counter(str(v) for v in values)
