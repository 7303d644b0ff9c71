"""Format features, checked on small hand-written files against values computed by hand."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from dcop.errors import InputError, ModelError
from dcop.io import FORMATS, detect_format, read_problem, write_problem
from dcop.io.uai import read_uai
from dcop.model import CostTable, Problem, Variable
from tests.conftest import brute_force, random_problem
from tests.io.helpers import DATA, EXT, SAMPLES, assert_same_problem, write

# ---- format selection ------------------------------------------------------------------------


def test_format_by_extension_and_name(tmp_path: Path) -> None:
    assert FORMATS == ("wcsp", "uai", "yaml", "xml")
    assert detect_format("a.WCSP") == "wcsp"
    assert detect_format("a.yml") == "yaml"
    assert detect_format("a.txt", "xml") == "xml"
    with pytest.raises(InputError, match="extension"):
        read_problem(write(tmp_path, "a.txt", "x"))
    with pytest.raises(InputError, match="unknown format"):
        read_problem(SAMPLES["wcsp"], format="cfn")
    # an explicit format overrides the extension
    copy = write(tmp_path, "model.txt", SAMPLES["wcsp"].read_text())
    assert read_problem(copy, format="wcsp").n == 4
    with pytest.raises(InputError, match="only apply to UAI"):
        read_problem(SAMPLES["wcsp"], evidence=DATA / "features.evid")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_problem(tmp_path / "none.wcsp")
    folder = tmp_path / "dir.uai"
    folder.mkdir()
    with pytest.raises(InputError, match="directory"):
        read_problem(folder)


# ---- wcsp --------------------------------------------------------------------------------------


def test_wcsp_features() -> None:
    p = read_problem(SAMPLES["wcsp"])
    assert list(p.variables) == ["x0", "x1", "x2", "x3"]
    assert p.upper_bound == 50
    # arity-0 functions: 4 (default, no tuple) and 6 (its one listed "tuple"), default 3 unused
    assert p.constant == 10
    shared = [[5, 0], [0, 5], [0, math.inf]]  # 60 >= top is infeasible
    assert p.tables[0].scope == ("x0", "x1")
    assert p.tables[0].costs.tolist() == shared
    # reusing shared table 1 copies it with ITS default 0, not the 7 written on the line
    assert p.tables[1].scope == ("x2", "x1")
    assert p.tables[1].costs.tolist() == shared
    assert p.tables[2].costs.tolist() == [10, 2]
    assert p.tables[3].costs.tolist() == [[0, 9, 0], [0, 0, 1]]  # tuples span lines
    assert p.tables[4].costs.tolist() == [0, 0, math.inf]  # 55 >= top
    assert brute_force(p) == 10 + 2  # x0=0, x1=1, x2=0, x3=1
    assert p.evaluate({"x0": 0, "x1": 0, "x2": 0, "x3": 0}) == 10 + 5 + 5 + 10


def test_wcsp_top_makes_totals_infeasible(tmp_path: Path) -> None:
    path = write(tmp_path, "t.wcsp", "t 2 2 2 10\n2 2\n1 0 6 1\n0 0\n1 1 5 1\n0 0\n")
    p = read_problem(path)
    assert p.evaluate({"x0": 0, "x1": 1}) == 5
    assert p.evaluate({"x0": 1, "x1": 0}) == 6
    # both tables are finite there, but 6 + 5 reaches top = 10
    assert p.evaluate({"x0": 1, "x1": 1}) == math.inf
    assert brute_force(p) == 0


def test_wcsp_writer_round_trip_without_upper_bound(tmp_path: Path) -> None:
    v = [Variable.with_size("a", 2), Variable.with_size("b", 3)]
    costs = np.array([[0.0, 2.5, np.inf], [7.0, 7.0, 7.0]])
    p = Problem.build(v, [CostTable(("a", "b"), costs)], constant=1.5)
    out = tmp_path / "p.wcsp"
    write_problem(p, out)
    text = out.read_text().split()
    top = float(text[4])
    assert top > 1.5 + 7  # above every finite total
    q = read_problem(out)
    assert_same_problem(p, q, by_name=False)
    assert brute_force(q) == brute_force(p) == 1.5
    assert q.evaluate({"x0": 0, "x1": 1}) == 1.5 + 2.5
    assert q.evaluate({"x0": 0, "x1": 2}) == math.inf


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("fmt", ["wcsp", "uai", "yaml", "xml"])
def test_random_problems_round_trip(seed: int, fmt: str, tmp_path: Path) -> None:
    integer = seed % 2 == 0
    p = random_problem(seed, integer=integer)
    out = tmp_path / f"p{EXT[fmt]}"
    precision = None
    if fmt == "wcsp" and not integer:  # toulbar2 reads integers: refused unless a precision is set
        with pytest.raises(ModelError, match="pass a precision"):
            write_problem(p, out)
        precision = 12
    write_problem(p, out, precision=precision)
    q = read_problem(out)
    if fmt == "uai":
        assert q.cost_kind == "neg_ln"
        q.cost_kind = "cost"
    exact = fmt != "uai" and precision is None
    assert_same_problem(p, q, exact=exact, by_name=fmt in ("yaml", "xml"))
    if fmt in ("yaml", "xml"):  # one agent per variable, as pyDCOP and FRODO expect
        assert [v.agent for v in q.variables.values()] == [f"a_{name}" for name in p.variables]
    expected = brute_force(p)
    got = brute_force(q)
    if fmt == "wcsp" and integer:
        assert got == expected
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-9) or (got == expected == math.inf)


# ---- uai ---------------------------------------------------------------------------------------


def _all(problem: Problem) -> list[dict[str, int]]:
    names = list(problem.variables)
    sizes = [problem.variables[n].size for n in names]
    return [
        dict(zip(names, combo, strict=True))
        for combo in itertools.product(*(range(s) for s in sizes))
    ]


def test_uai_costs_are_neg_ln_without_renormalisation() -> None:
    p = read_problem(DATA / "bayes.uai")
    assert p.cost_kind == "neg_ln"
    assert p.meta["uai_network"] == "BAYES"
    # the last CPT row 0.5 0.6 does not sum to 1 and must stay as written
    assert p.tables[2].costs[1].tolist() == pytest.approx([-math.log(0.5), -math.log(0.6)])
    cost = p.evaluate({"x0": 1, "x1": 1, "x2": 1})
    assert cost == pytest.approx(-math.log(0.4 * 0.8 * 0.6))
    assert p.log10_probability(cost) == pytest.approx(math.log10(0.4 * 0.8 * 0.6))


def test_uai_zero_is_infeasible_and_constant() -> None:
    p = read_problem(SAMPLES["uai"])
    assert p.tables[1].costs[0, 2] == math.inf
    assert p.constant == pytest.approx(-math.log(1.5))
    assert p.evaluate({"x0": 0, "x1": 2, "x2": 0, "x3": 0}) == math.inf


def test_uai_evidence_conditions_consistently() -> None:
    full = read_problem(SAMPLES["uai"])
    cond = read_problem(SAMPLES["uai"], evidence=DATA / "features.evid")
    assert cond.meta["evidence"] == {"x1": 2, "x3": 0}
    assert cond.variables["x1"].values == (2,)
    assert cond.variables["x3"].values == (0,)
    assert [t.scope for t in cond.tables] == [t.scope for t in full.tables]
    for a in _all(cond):
        original = dict(a, x1=2, x3=0)
        assert cond.evaluate(a) == pytest.approx(full.evaluate(original))
    assert cond.labels({"x0": 1, "x1": 0, "x2": 0, "x3": 0}) == {"x0": 1, "x1": 2, "x2": 0, "x3": 0}


def test_uai_old_evidence_layout(tmp_path: Path) -> None:
    evid = write(tmp_path, "old.evid", "1\n2 1 2 3 0\n")
    cond = read_problem(SAMPLES["uai"], evidence=evid)
    assert cond.meta["evidence"] == {"x1": 2, "x3": 0}
    evid = write(tmp_path, "none.evid", "0\n")
    assert read_problem(SAMPLES["uai"], evidence=evid).n == 4


def test_uai_writer_keeps_bayes_and_probabilities(tmp_path: Path) -> None:
    p = read_problem(DATA / "bayes.uai")
    out = tmp_path / "b.uai"
    write_problem(p, out)
    assert out.read_text().startswith("BAYES")
    q = read_uai(out)
    assert_same_problem(p, q, exact=False)


# ---- pyDCOP yaml ------------------------------------------------------------------------------


def test_yaml_features() -> None:
    p = read_problem(SAMPLES["yaml"])
    assert p.sign == 1
    assert p.variables["a"].values == ("R", "G", "B")
    assert p.variables["c"].values == (0, 1, 2, 3)
    assert p.variables["a"].agent == "ag_a"
    assert p.variables["b"].agent == "ag_b"
    assert p.variables["c"].agent == "ag_c"  # no hint: the first free agent, in file order
    assert p.meta["agent_properties"] == {"ag_a": {"capacity": 10}}
    assert p.variables["d"].agent == "ag_d"
    assert p.meta["placement_warnings"] == []
    assert p.meta["initial_values"] == {"a": "G"}
    by_name = {t.name: t for t in p.tables}
    assert by_name["c_cost"].costs.tolist() == [0, 0.5, 1, 1.5]
    assert by_name["ab_differ"].costs.tolist() == (10 * np.eye(3)).tolist()
    gap = by_name["cd_gap"].costs
    assert gap[0, 0] == 3 and gap[0, 1] == 1 and gap[0, 3] == 6
    bc = by_name["bc_table"].costs
    assert bc[0, 0] == 0 and bc[1, 2] == 0 and bc[2, 3] == 1.5 and bc[1, 0] == math.inf
    assert bc[2, 0] == 4
    assert by_name["a_unary"].costs.tolist() == [1, 2, 2]


def test_yaml_max_objective_is_negated(tmp_path: Path) -> None:
    text = SAMPLES["yaml"].read_text().replace("objective: min", "objective: max")
    text = text.replace(".inf: G 0", "-.inf: G 0")
    p = read_problem(write(tmp_path, "m.yaml", text))
    assert p.sign == -1
    mins = read_problem(SAMPLES["yaml"])
    assert p.tables[1].costs.tolist() == (-mins.tables[1].costs).tolist()
    out = tmp_path / "again.yaml"
    write_problem(p, out)
    assert "objective: max" in out.read_text()
    assert_same_problem(p, read_problem(out))


def test_yaml_agents_by_order_and_writer_hints(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "name: t",
            "objective: min",
            "domains: {d: {values: [1, 2]}}",
            "variables: {x: {domain: d}, y: {domain: d}}",
            "constraints:",
            "  c: {type: intention, function: 'x + 2 * y if x != y else -1'}",
            "agents: [p, q]",
        ]
    )
    p = read_problem(write(tmp_path, "t.yaml", text))
    assert [v.agent for v in p.variables.values()] == ["p", "q"]
    assert p.tables[0].costs.tolist() == [[-1, 5], [4, -1]]
    out = tmp_path / "w.yaml"
    write_problem(p, out)
    assert "type: discrete" in out.read_text()
    # more agents than variables: still the file order, the idle agent is named; fewer agents:
    # the first variables get them, the others agents named after them, with a warning
    more = read_problem(write(tmp_path, "more.yaml", text.replace("[p, q]", "[p, q, r]")))
    assert [v.agent for v in more.variables.values()] == ["p", "q"]
    assert more.meta["placement_warnings"] == [
        "agents that host no variable: 'r' (3 agents for 2 variables)"
    ]
    fewer = read_problem(write(tmp_path, "fewer.yaml", text.replace("[p, q]", "[p]")))
    assert [v.agent for v in fewer.variables.values()] == ["p", "a_y"]
    assert fewer.meta["placement_warnings"] == [
        "1 agent for 2 variables: agents named after them (a_<variable>) run 'y'"
    ]
    # pyDCOP 0.1.1 refuses a domain without a type
    q = read_problem(out)
    assert [v.agent for v in q.variables.values()] == ["p", "q"]
    assert_same_problem(p, q)


def test_yaml_writer_falls_back_to_indices_for_awkward_labels(tmp_path: Path) -> None:
    v = [Variable("a", ("x y", "z|w", "")), Variable("b", (True, "True"))]
    p = Problem.build(v, [CostTable(("a", "b"), np.arange(6.0).reshape(3, 2))])
    out = tmp_path / "w.yaml"
    write_problem(p, out)
    q = read_problem(out)
    assert q.variables["a"].values == (0, 1, 2)
    assert_same_problem(p, q)


def test_yaml_constant_needs_a_variable(tmp_path: Path) -> None:
    with pytest.raises(ModelError):
        write_problem(Problem.build([], [], constant=2.0), tmp_path / "c.yaml")


# ---- FRODO xml --------------------------------------------------------------------------------


def test_xml_features() -> None:
    p = read_problem(SAMPLES["xml"])
    assert [v.agent for v in p.variables.values()] == ["a_x", "a_y", "a_z"]
    assert p.variables["y"].values == (1, 3, 5)
    xy, z, yz = (t.costs for t in p.tables)
    inf = math.inf
    # "0: 1 1 | 2 3 | 5: 3 5 | infinity: 1 5 | 1 3": the prefix carries over; default 2
    assert xy.tolist() == [[0, inf, inf], [2, 0, 2], [2, 2, 5]]
    assert z.tolist() == [inf, 1, 3]
    assert yz.tolist() == [[0, 0, 0], [0, 0, 0], [0, inf, 0]]  # conflicts: (5, 2)


def test_xml_maximize_and_writer(tmp_path: Path) -> None:
    text = SAMPLES["xml"].read_text().replace('maximize="false"', 'maximize="true"')
    text = text.replace("infinity", "-infinity").replace(
        'semantics="conflicts"', 'semantics="soft"'
    )
    text = text.replace(">5 2</relation>", ">-7: 5 2</relation>")
    p = read_problem(write(tmp_path, "m.xml", text))
    assert p.sign == -1
    assert p.tables[0].costs[0, 2] == math.inf  # -infinity utility = infeasible
    assert p.tables[2].costs[2, 1] == 7
    out = tmp_path / "w.xml"
    write_problem(p, out)
    written = out.read_text()
    assert 'maximize="true"' in written and "-infinity" in written
    assert_same_problem(p, read_problem(out))


def test_xml_refuses_infinite_rewards(tmp_path: Path) -> None:
    text = SAMPLES["xml"].read_text().replace('maximize="false"', 'maximize="true"')
    with pytest.raises(InputError, match="infinite reward"):
        read_problem(write(tmp_path, "m.xml", text))


def test_xml_writer_uses_indices_for_non_integer_labels(tmp_path: Path) -> None:
    v = [Variable("a", ("R", "G")), Variable("b", (3, 5, 9), agent="owner")]
    p = Problem.build(v, [CostTable(("a", "b"), np.array([[0, 1, 2], [3, 4, math.inf]]))])
    out = tmp_path / "w.xml"
    write_problem(p, out)
    q = read_problem(out)
    assert q.variables["a"].values == (0, 1)
    assert q.variables["b"].values == (3, 5, 9)
    assert [x.agent for x in q.variables.values()] == ["a_a", "a_b"]  # one agent per variable
    assert_same_problem(p, q)
    with pytest.raises(ModelError, match="cannot be written"):
        write_problem(Problem.build([Variable("a b", (0,))], []), tmp_path / "bad.xml")
