"""Shared reader plumbing: size limits, file loading, a token stream that knows line numbers.

Every reader turns malformed input into ``InputError(reason, file, line)`` and checks declared
sizes against the limits below *before* allocating anything, so a hostile header (10**12 tuples,
a domain of 10**9 values) fails at once in bounded time and memory.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dcop.errors import InputError, ModelError
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


def read_text(path: Path, limit: int) -> str:
    """The file's text (UTF-8), or InputError when it is missing, too large or not text."""
    name = str(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror or exc}", name) from None
    if path.is_dir():
        raise InputError("is a directory, not an instance file", name)
    if size > limit:
        raise InputError(f"file is {size} bytes, more than the limit of {limit}", name)
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
        try:
            size = path.stat().st_size
            if path.is_dir():
                raise InputError("is a directory, not an instance file", self.file)
            if size > limit:
                raise InputError(f"file is {size} bytes, more than the limit of {limit}", self.file)
            self._fh = path.open(encoding="utf-8", newline="")
        except OSError as exc:
            raise InputError(f"cannot read file: {exc.strerror or exc}", self.file) from None
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
            if "\x00" in text:
                raise InputError("NUL byte in a text file", self.file, self._line)
            self._buf, self._at = text.split(), 0
        return True

    def _bad_byte_line(self) -> int:
        """Line of the first byte that is not UTF-8 (the decoder reads ahead in blocks)."""
        data = Path(self.file).read_bytes()
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


def build_problem(
    file: str, variables: Iterable[Variable], tables: Sequence[CostTable], **kwargs: object
) -> Problem:
    """Problem.build, with a ModelError reported as an InputError on the file."""
    try:
        return Problem.build(variables, tables, **kwargs)
    except ModelError as exc:
        raise InputError(str(exc), file) from None


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
