"""Numbers past float range (security round 4, finding 8): a YAML integer of hundreds of digits
is one line of bad input, not a traceback, and finite costs whose total would overflow are
refused instead of claimed infeasible."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcop.errors import InputError
from dcop.io import agent_placement, read_problem

BIG = "9" * 400
YAML = (
    "name: b\nobjective: {objective}\ndomains:\n  d: {{values: [0, 1]}}\nvariables:\n"
    "  x: {{domain: d}}\n  y: {{domain: d}}\n{extra}constraints:\n  c:\n    type: extensional\n"
    "    variables: [x, y]\n    default: {default}\n    values: {{{key}: '0 1'}}\n"
)


@pytest.mark.parametrize(
    ("key", "default", "objective"),
    [(BIG, "0", "min"), ("1", BIG, "min"), ("-" + BIG, "0", "min"), (BIG, "0", "max")],
    ids=["cost", "default", "negative", "max"],
)
def test_a_yaml_integer_beyond_float_range_is_bad_input(
    tmp_path: Path, key: str, default: str, objective: str
) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(YAML.format(objective=objective, extra="", default=default, key=key))
    with pytest.raises(InputError, match=r"\(40[01] digits\) is beyond the range of a float"):
        read_problem(path)


def test_a_huge_hosting_cost_is_the_largest_there_is(tmp_path: Path) -> None:
    extra = (
        "agents:\n  a1: {capacity: 1}\n  a2: {capacity: 1}\n"
        f"hosting_costs:\n  a1: {{default: {BIG}}}\n"
    )
    path = tmp_path / "host.yaml"
    path.write_text(YAML.format(objective="min", extra=extra, default="0", key="1"))
    placement, _ = agent_placement(read_problem(path))
    assert sorted(placement.values()) == ["a1", "a2"]


def test_finite_costs_whose_total_overflows_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "o.wcsp"
    path.write_text("z 2 2 2 1e309\n2 2\n1 0 1e308 0\n1 1 1e308 0\n")
    with pytest.raises(InputError, match="can add up past the largest float"):
        read_problem(path)
    path.write_text("z 2 2 2 1e309\n2 2\n1 0 1e307 0\n1 1 1e307 0\n")
    assert read_problem(path).n == 2  # a total below float max: taken
    path.write_text("z 2 2 2 1e308\n2 2\n1 0 1e308 0\n1 1 1e308 0\n")
    assert read_problem(path).n == 2  # costs at top are infeasible: no finite total overflows
