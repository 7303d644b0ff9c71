"""A run's two-column summary, drawn as rich draws a headerless table, without importing rich.

rich's import is some 60 ms, a fifth of a small solve's wall time (benchmarks/startup.py); the
summary of ``dcop solve`` needs none of it: off a terminal rich writes the title and a box of
plain characters, which :meth:`Rows.text` writes alike. On a terminal too narrow for the box,
rich draws it, wrapping the cells as it always has.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import TextIO


def cell_len(text: str) -> int:
    """Terminal cells of ``text``: wide (East Asian) characters take two, combining ones none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


@dataclass
class Rows:
    """A titled table of (name, value) rows, the shape of every solve summary."""

    title: str
    rows: list[tuple[str, str]] = field(default_factory=list)

    def add_row(self, name: str, value: str) -> None:
        self.rows.append((name, value))

    def text(self) -> str:
        """The table as rich draws ``Table(title=..., show_header=False)`` off a terminal."""
        left = max((cell_len(n) for n, _ in self.rows), default=0)
        right = max((cell_len(v) for _, v in self.rows), default=0)
        lines = [self.title, f"┌{'─' * (left + 2)}┬{'─' * (right + 2)}┐"]
        for name, value in self.rows:
            lines.append(
                f"│ {name}{' ' * (left - cell_len(name))} │ {value}"
                f"{' ' * (right - cell_len(value))} │"
            )
        lines.append(f"└{'─' * (left + 2)}┴{'─' * (right + 2)}┘")
        return "\n".join(lines) + "\n"

    def width(self) -> int:
        """Cells of the table's widest line."""
        left = max((cell_len(n) for n, _ in self.rows), default=0)
        right = max((cell_len(v) for _, v in self.rows), default=0)
        return left + right + 7

    def print(self, stream: TextIO) -> None:
        """Write the table to ``stream``: as text, or through rich on a terminal too narrow."""
        if stream.isatty() and self.width() > _columns():
            from rich.console import Console
            from rich.markup import escape
            from rich.table import Table

            table = Table(title=escape(self.title), show_header=False)
            for name, value in self.rows:
                table.add_row(escape(name), escape(value))
            Console(file=stream).print(table)
            return
        stream.write(self.text())
        stream.flush()


def _columns() -> int:
    """The terminal's width (shutil, imported here: it loads the archive modules, which a
    summary off a terminal need not)."""
    import shutil

    return shutil.get_terminal_size().columns
