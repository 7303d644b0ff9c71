"""Helpers shared by the io tests: comparing problems, writing temporary files."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dcop.model import Problem

DATA = Path(__file__).resolve().parent / "data"
#: Our own small files exercising each format's features (present in every checkout).
SAMPLES = {
    "wcsp": DATA / "features.wcsp",
    "uai": DATA / "features.uai",
    "yaml": DATA / "features.yaml",
    "xml": DATA / "features.xml",
}
EXT = {"wcsp": ".wcsp", "uai": ".uai", "yaml": ".yaml", "xml": ".xml"}


def normal_form(problem: Problem) -> tuple[list[tuple[tuple[int, ...], np.ndarray]], float]:
    """Tables (scopes as variable positions) and the constant, with every table shifted to a
    smallest finite cost of 0 (the .wcsp writer shifts negative costs), arity-0 tables and
    tables that hold one finite cost everywhere folded into the constant (writers may move a
    constant into such a table), and then +inf for every cost that alone takes any total to the
    upper bound (the bound is on totals: with the other tables at 0, a total is at least that
    cost plus the constant; a shifted table's costs move by as much as the constant does)."""
    position = {name: i for i, name in enumerate(problem.variables)}
    constant = problem.constant
    tables = []
    for table in problem.tables:
        costs = np.asarray(table.costs, dtype=np.float64)
        flat = costs.ravel()
        if flat.size and np.all(np.isfinite(flat)) and np.all(flat == flat[0]):
            constant += float(flat[0])
            continue
        finite = flat[np.isfinite(flat)]
        if finite.size:
            low = float(finite.min())
            costs, constant = costs - low, constant + low
        tables.append((tuple(position[v] for v in table.scope), costs))
    if problem.upper_bound is not None:
        tables = [(s, np.where(c + constant >= problem.upper_bound, np.inf, c)) for s, c in tables]
    return tables, constant


def assert_same_problem(a: Problem, b: Problem, exact: bool = True, by_name: bool = True) -> None:
    """Same domains, tables (in order, up to costs >= upper bound), constant and sign."""
    assert a.n == b.n
    assert [v.size for v in a.variables.values()] == [v.size for v in b.variables.values()]
    if by_name:
        assert list(a.variables) == list(b.variables)
    assert a.sign == b.sign
    assert a.cost_kind == b.cost_kind
    ta, ca = normal_form(a)
    tb, cb = normal_form(b)
    assert len(ta) == len(tb)
    for (sx, cx), (sy, cy) in zip(ta, tb, strict=True):
        assert sx == sy
        assert np.array_equal(np.isinf(cx), np.isinf(cy))
        finite = np.isfinite(cx)
        if exact:
            assert np.array_equal(cx[finite], cy[finite])
        else:
            np.testing.assert_allclose(cx[finite], cy[finite], rtol=1e-12, atol=1e-12)
    if np.isfinite(ca) or np.isfinite(cb):
        np.testing.assert_allclose(ca, cb, rtol=1e-12, atol=1e-12)


def write(tmp: Path, name: str, content: str | bytes) -> Path:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path
