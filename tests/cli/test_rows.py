"""dcop.cli.rows draws a summary exactly as rich draws a headerless table off a terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table

from dcop.cli.rows import Rows, cell_len


def rich_text(title: str, rows: list[tuple[str, str]]) -> str:
    out = io.StringIO()
    table = Table(title=title, show_header=False)
    for name, value in rows:
        table.add_row(name, value)
    Console(file=out, width=10_000, soft_wrap=True).print(table)
    return out.getvalue()


@pytest.mark.parametrize(
    ("title", "rows"),
    [
        ("BE on test_Z", [("optimum", "3.350248018"), ("variables / tables", "5 / 10")]),
        ("a title wider than the whole table", [("a", "1")]),
        ("T", [("assignment", "x0=1 x1=0"), ("bounds so far", "47 .. 261")]),
        ("wide", [("名前", "値 ü"), ("x", "y")]),
        ("empty value", [("status", "")]),
    ],
)
def test_rows_draw_as_rich_does(title: str, rows: list[tuple[str, str]]) -> None:
    table = Rows(title)
    for name, value in rows:
        table.add_row(name, value)
    assert table.text() == rich_text(title, rows)
    assert table.width() == max(cell_len(line) for line in table.text().splitlines()[1:])


def test_rows_print_off_a_terminal() -> None:
    out = io.StringIO()
    table = Rows("t", [("a", "b")])
    table.print(out)
    assert out.getvalue() == table.text()
