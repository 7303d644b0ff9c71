"""Order files: what ``dcop info --write-order`` writes and ``--ordering FILE`` reads back.

Two formats, told apart by the file's first significant line:

* an order file: ``c`` comment lines, then one variable name per line, first eliminated first;
* a PACE 2017 tree decomposition (``s td ...``), vertex ``i`` being the problem's i-th variable
  (the order of the problem file); its order eliminates each bag's own vertices children first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dcop.errors import InputError
from dcop.orders.greedy import Adjacency
from dcop.orders.treedec import read_td, write_td


def write_order(
    path: Path, order: Sequence[str], adjacency: Adjacency, names: Sequence[str], note: str = ""
) -> None:
    """Write ``order`` to ``path``: PACE ``.td`` text when the name ends in ``.td``, else an
    order file (``note`` becomes its comment line)."""
    if path.suffix == ".td":
        text = f"c {note}\n" if note else ""
        text += write_td(adjacency, order, names)
    else:
        text = f"c dcop elimination order{': ' + note if note else ''}\n"
        text += "".join(f"{v}\n" for v in order)
    path.write_text(text)


def read_order(path: Path, names: Sequence[str]) -> list[str]:
    """The elimination order in ``path`` over the variables ``names`` (in the problem's order);
    a one-line :class:`InputError` naming the file and line when it is malformed or is not a
    permutation of ``names``."""
    where = str(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the order: {exc}", where) from None
    significant = [ln.split() for ln in text.splitlines() if ln.strip()]
    significant = [f for f in significant if f[0] != "c"]
    if significant and significant[0][0] == "s":
        return read_td(text, names, where)
    known = set(names)
    order: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0] == "c":
            continue
        if len(fields) != 1:
            raise InputError("one variable name per line", where, number)
        (name,) = fields
        if name not in known:
            raise InputError(f"{name!r} is not a variable of the problem", where, number)
        if name in seen:
            raise InputError(
                f"{name!r} is listed twice (first on line {seen[name]})", where, number
            )
        seen[name] = number
        order.append(name)
    if len(order) != len(names):
        missing = next(v for v in names if v not in seen)
        raise InputError(
            f"the order misses {missing!r} ({len(order)} of {len(names)} listed)", where
        )
    return order
