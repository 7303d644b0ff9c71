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
from pathlib import Path

import numpy as np

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
#: Largest file read by the token formats (.wcsp, .uai: 256 MiB, about 100 bytes of memory per
#: token while parsing), by XML (256 MiB) and by YAML (32 MiB: pure-Python tree building).
MAX_TEXT_BYTES = 1 << 28
MAX_XML_BYTES = 1 << 28
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
    """Counts table entries over a file and refuses tables above the limits."""

    def __init__(self, file: str, table_limit: int = MAX_TABLE_ENTRIES) -> None:
        self.file = file
        self.table_limit = table_limit
        self.total = 0

    def claim(self, shape: Sequence[int], line: int | None, what: str = "table") -> int:
        entries = table_entries(shape)
        if entries > self.table_limit:
            raise InputError(
                f"{what} would have {entries} entries, more than the limit of {self.table_limit}",
                self.file,
                line,
            )
        self.total += entries
        if self.total > MAX_TOTAL_ENTRIES:
            raise InputError(
                f"the tables hold more than {MAX_TOTAL_ENTRIES} entries in all", self.file, line
            )
        return entries


class Tokens:
    """Whitespace-separated tokens of a text with the line number of each.

    toulbar2 and the UAI readers read tokens, not lines, so a record may span lines; errors name
    the line of the offending token (or the last line at end of file).
    """

    def __init__(self, text: str, file: str) -> None:
        self.file = file
        toks: list[str] = []
        lines = array("q")
        for number, line in enumerate(text.split("\n"), start=1):
            parts = line.split()
            if parts:
                toks.extend(parts)
                lines.extend([number] * len(parts))
        self.toks = toks
        self.lines = lines
        self.pos = 0
        self.last_line = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))

    # -- position ------------------------------------------------------------------------------
    def remaining(self) -> int:
        return len(self.toks) - self.pos

    def at_end(self) -> bool:
        return self.pos >= len(self.toks)

    def line_at(self, pos: int) -> int:
        if pos < len(self.lines):
            return self.lines[pos]
        return self.last_line

    @property
    def line(self) -> int:
        """Line of the next token (or of the end of the file)."""
        return self.line_at(self.pos)

    def error(self, reason: str, pos: int | None = None) -> InputError:
        return InputError(reason, self.file, self.line_at(self.pos if pos is None else pos))

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    # -- reading -------------------------------------------------------------------------------
    def word(self, what: str) -> str:
        if self.pos >= len(self.toks):
            raise self.error(f"unexpected end of file, expected {what}")
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def integer(self, what: str, lo: int | None = None, hi: int | None = None) -> int:
        tok = self.word(what)
        try:
            value = int(tok)
        except ValueError:
            raise self.error(
                f"expected {what} (an integer), got {_show(tok)}", self.pos - 1
            ) from None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
            raise self.error(f"{what} {value} is out of range {bounds}", self.pos - 1)
        return value

    def number(self, what: str) -> float:
        tok = self.word(what)
        try:
            value = float(tok)
        except ValueError:
            raise self.error(
                f"expected {what} (a number), got {_show(tok)}", self.pos - 1
            ) from None
        if math.isnan(value):
            raise self.error(f"{what} is NaN", self.pos - 1)
        return value

    def need(self, count: int, what: str) -> None:
        """Refuse a count that the rest of the file cannot possibly hold (cheap size guard)."""
        if count > self.remaining():
            raise self.error(
                f"{what}: {count} tokens are needed but only {self.remaining()} remain in the file"
            )

    def numbers(self, count: int, what: str) -> FloatArray:
        """The next ``count`` tokens as float64 (vectorised; the bad token is named on error)."""
        self.need(count, what)
        chunk = self.toks[self.pos : self.pos + count]
        try:
            values = np.array(chunk, dtype=np.float64)
        except ValueError:
            for i, tok in enumerate(chunk):
                try:
                    float(tok)
                except ValueError:
                    raise self.error(
                        f"{what}: expected a number, got {_show(tok)}", self.pos + i
                    ) from None
            raise  # pragma: no cover - numpy and float() agree on what a number is
        if values.size and np.isnan(values).any():
            bad = int(np.flatnonzero(np.isnan(values))[0])
            raise self.error(f"{what}: NaN is not a valid value", self.pos + bad)
        self.pos += count
        return values


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
    """Tables with costs at or above the problem's upper bound turned into +inf (for writers)."""
    out = []
    for table in problem.tables:
        costs = np.asarray(table.costs, dtype=np.float64)
        if problem.upper_bound is not None:
            costs = np.where(costs >= problem.upper_bound, np.inf, costs)
        out.append((tuple(table.scope), costs, table.name))
    return out


def label_counter(values: Iterable[object]) -> Counter[str]:
    return Counter(str(v) for v in values)
