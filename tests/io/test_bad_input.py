"""Malformed files: each reader answers with one InputError naming ``file:line``; the CLI exits 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dcop.errors import InputError
from dcop.io import read_problem
from tests.io.helpers import SAMPLES, write

WCSP_HEAD = "t 3 2 1 100\n2 2 3\n"
UAI_HEAD = "MARKOV\n2\n2 3\n1\n2 0 1\n"
YAML_HEAD = "name: t\nobjective: min\ndomains:\n  d: {values: [a, b]}\nvariables:\n  x: {domain: d}\n  y: {domain: d}\n"
XML_HEAD = """<instance>
<presentation name="t" maximize="false"/>
<domains nbDomains="1"><domain name="D" nbValues="2">1..2</domain></domains>
<variables nbVariables="2">
<variable name="x" domain="D" agent="a"/>
<variable name="y" domain="D" agent="b"/>
</variables>
"""


def xml(relations: str, constraints: str) -> str:
    return (
        XML_HEAD
        + f"<relations>{relations}</relations>\n<constraints>{constraints}</constraints>\n"
        + "</instance>\n"
    )


REL = '<relation name="r" arity="2" semantics="soft" defaultCost="0" nbTuples="1">1: 1 2</relation>'
CON = '<constraint name="c" arity="2" scope="x y" reference="r"/>'

# (file name, content, line, words the message must contain)
CASES: list[tuple[str, str, int, str]] = [
    # ---- wcsp
    ("empty.wcsp", "", 1, "empty file"),
    ("blank.wcsp", "\n\n   \n", 1, "empty file"),
    ("header.wcsp", "t 3 x 1 100\n", 1, "maximum domain size"),
    ("sizes.wcsp", "t 3 2 1 100\n2 2\n", 2, "domain sizes"),
    ("trunc.wcsp", WCSP_HEAD + "2 0 1 0 3\n0 0 5\n1 1 5\n", 4, "can hold at most 6"),
    ("trunc2.wcsp", WCSP_HEAD + "2 0 1 0 3\n0 0 5\n1 1 5\n1 0   \n\n", 7, "9 values expected, 8"),
    ("count.wcsp", "t 3 2 2 100\n2 2 3\n1 0 0 0\n", 3, "2 cost functions declared, 1 found"),
    ("extra.wcsp", WCSP_HEAD + "1 0 0 0\n\n1 1 0 0\n", 5, "after the 1 declared"),
    ("range.wcsp", WCSP_HEAD + "2 0 2 0 2\n0 0 5\n1 3 5\n", 5, "not in the domain 0..2"),
    ("unknown.wcsp", WCSP_HEAD + "2 0 7 0 0\n", 3, "out of range"),
    ("word.wcsp", WCSP_HEAD + "2 0 1 0 1\n0 1 five\n", 4, "'five'"),
    ("nan.wcsp", WCSP_HEAD + "2 0 1 0 1\n0 1 nan\n", 4, "NaN"),
    ("interval.wcsp", "t 3 2 1 100\n2 -4 3\n", 2, "interval variables"),
    ("global.wcsp", WCSP_HEAD + "3 0 1 2 -1 salldiff var 10\n", 3, "not supported"),
    ("global2.wcsp", WCSP_HEAD + "2 0 1\n-1 >= 0 0\n", 4, "keyword '>='"),
    ("shared.wcsp", WCSP_HEAD + "2 0 1 0 -1\n", 3, "shared table 1"),
    ("shape.wcsp", "t 3 3 2 100\n2 2 3\n-2 0 1 0 0\n2 1 2 0 -1\n", 4, "shape"),
    ("top.wcsp", "t 3 2 1 0\n2 2 3\n", 1, "must be positive"),
    ("dup.wcsp", WCSP_HEAD + "2 1 1 0 0\n", 3, "twice"),
    ("toomany.wcsp", WCSP_HEAD + "1 0 0 3\n0 1\n1 1\n0 1\n", 3, "only 2 entries"),
    ("nul.wcsp", "t 1 2 0 10\n\x00", 2, "NUL byte"),
    # ---- uai
    ("empty.uai", "", 1, "empty file"),
    ("kind.uai", "FACTOR\n1\n2\n", 1, "MARKOV or BAYES"),
    ("entries.uai", UAI_HEAD + "\n4\n0.1 0.2 0.3 0.4\n", 7, "declares 4 entries"),
    ("trunc.uai", UAI_HEAD + "\n6\n0.1 0.2\n0.3\n", 9, "6 values expected, 3 found"),
    ("neg.uai", UAI_HEAD + "6\n0.1 0.2 0.3\n0.4 -0.5 0.6\n", 8, "'-0.5'"),
    ("inf.uai", UAI_HEAD + "6\n0.1 0.2 0.3 0.4 inf 0.6\n", 7, "'inf'"),
    ("word.uai", UAI_HEAD + "6\n0.1 0.2 0.3\n0.4 0,5 0.6\n", 8, "'0,5'"),
    ("scope.uai", "MARKOV\n2\n2 3\n1\n2 0 2\n", 5, "out of range"),
    ("count.uai", "MARKOV\n2\n2 3\n2\n2 0 1\n", 5, "end of file"),
    ("extra.uai", UAI_HEAD + "6 1 1 1 1 1 1\n7\n", 7, "after the 1 declared"),
    ("domain.uai", "MARKOV\n2\n2 0\n", 3, "out of range"),
    # ---- pyDCOP yaml
    ("empty.yaml", "", 1, "empty file"),
    ("comment.yaml", "# nothing\n", 1, "empty file"),
    ("syntax.yaml", "name: t\ndomains: {d: [a, b\nvariables: {}\n", 3, "invalid YAML"),
    ("top.yaml", "- a\n- b\n", 1, "top level must be a mapping"),
    ("objective.yaml", "name: t\nobjective: maximise\n", 2, "objective"),
    ("domain.yaml", YAML_HEAD + "  z: {domain: e}\n", 8, "unknown domain"),
    (
        "var.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: extensional\n    variables: [x, w]\n"
        "    values: {1: a a}\n",
        11,
        "unknown variable 'w'",
    ),
    (
        "arity.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: extensional\n    variables: [x, y]\n"
        "    default: 0\n    values:\n      1: a a | b\n",
        14,
        "has 1 values for 2 variables",
    ),
    (
        "value.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: extensional\n    variables: [x, y]\n"
        "    default: 0\n    values:\n      1: a c\n",
        14,
        "'c' is not a value",
    ),
    (
        "cost.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: extensional\n    variables: [x, y]\n"
        "    default: 0\n    values:\n      lots: a a\n",
        14,
        "not a number",
    ),
    (
        "default.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: extensional\n    variables: [x, y]\n"
        "    values:\n      1: a a | b b\n",
        10,
        "no default",
    ),
    (
        "name.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: intention\n    function: x + z\n",
        11,
        "unknown variable or name 'z'",
    ),
    (
        "type.yaml",
        YAML_HEAD + "constraints:\n  c:\n    type: table\n    function: x\n",
        10,
        "type must be",
    ),
    (
        "range.yaml",
        "name: t\ndomains:\n  d:\n    values: [1 .. a]\n",
        4,
        "not 'low .. high'",
    ),
    (
        "initial.yaml",
        "name: t\ndomains: {d: {values: [1, 2]}}\nvariables:\n  x: {domain: d, initial_value: 3}\n",
        4,
        "initial value 3",
    ),
    (
        "divide.yaml",
        YAML_HEAD.replace("[a, b]", "[0, 1]")
        + "constraints:\n  c:\n    type: intention\n    function: 1 / (x - y)\n",
        11,
        "ZeroDivisionError",
    ),
    # ---- FRODO xml
    ("empty.xml", "", 1, "empty file"),
    ("tag.xml", XML_HEAD + "<relations>\n</instance>\n", 9, "invalid XML"),
    ("root.xml", "<?xml version='1.0'?>\n\n<problem/>\n", 3, "not <instance>"),
    (
        "scope.xml",
        xml(REL, '\n<constraint name="c" arity="2" scope="x w" reference="r"/>'),
        10,
        "'w'",
    ),
    (
        "ref.xml",
        xml(REL, '\n<constraint name="c" arity="2" scope="x y" reference="q"/>'),
        10,
        "'q'",
    ),
    ("tuples.xml", xml(REL.replace('nbTuples="1"', 'nbTuples="2"'), CON), 8, "nbTuples=2"),
    (
        "value.xml",
        xml(REL.replace("1: 1 2", "1: 1 2 |\n 3: 2 7").replace('"1"', '"2"'), CON),
        9,
        "value 7",
    ),
    ("cost.xml", xml(REL.replace("1: 1 2", "one: 1 2"), CON), 8, "'one' is not a cost"),
    ("arity.xml", xml(REL.replace("1: 1 2", "1: 1 2 1"), CON), 8, "arity is 2"),
    ("domain.xml", XML_HEAD.replace(">1..2<", ">1 b<") + "</instance>", 3, "not an integer"),
    (
        "count.xml",
        XML_HEAD.replace('nbVariables="2"', 'nbVariables="3"') + "</instance>",
        4,
        "nbVariables=3",
    ),
    (
        "var.xml",
        XML_HEAD.replace('domain="D" agent="b"', 'domain="E" agent="b"') + "</instance>",
        6,
        "unknown domain",
    ),
    # an instance without variables is not an empty problem but a mistake
    ("instance.xml", "<instance/>\n", 1, "declares no variables"),
    (
        "novars.xml",
        '<?xml version="1.0"?>\n<instance>\n<presentation name="t"/>\n</instance>',
        2,
        "declares no variables",
    ),
]


@pytest.mark.parametrize(("name", "content", "line", "words"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_names_file_and_line(
    name: str, content: str, line: int, words: str, tmp_path: Path
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as info:
        read_problem(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert words in message, message
    assert "\n" not in message


def test_not_utf8(tmp_path: Path) -> None:
    path = write(tmp_path, "latin.uai", b"MARKOV\n1\n2\n\xff\xfe\n")
    with pytest.raises(InputError, match=r":4: not a UTF-8 text file"):
        read_problem(path)


EVID_CASES = [
    ("range.evid", "1 1 3\n", "out of range"),
    ("count.evid", "2 1 2\n", "holds 1 pairs"),
    ("word.evid", "1 x 2\n", "'x'"),
    ("empty.evid", "", "empty evidence"),
    ("twice.evid", "2 1 0 1 2\n", "observed twice"),
]


@pytest.mark.parametrize(("name", "content", "words"), EVID_CASES, ids=[c[0] for c in EVID_CASES])
def test_bad_evidence(name: str, content: str, words: str, tmp_path: Path) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as info:
        read_problem(SAMPLES["uai"], evidence=path)
    assert str(info.value).startswith(f"{path}:1: ")
    assert words in str(info.value)


def _dcop() -> Path:
    return Path(sys.executable).parent / "dcop"


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("cli.wcsp", WCSP_HEAD + "2 0 1 0 1\n0 1 five\n", 4),
        ("cli.uai", UAI_HEAD + "6\n0.1 0.2 0.3\n0.4 -0.5 0.6\n", 8),
        (
            "cli.yaml",
            YAML_HEAD + "constraints:\n  c:\n    type: intention\n    function: x.y\n",
            11,
        ),
        ("cli.xml", xml(REL, '\n<constraint name="c" arity="2" scope="x w" reference="r"/>'), 10),
    ],
)
def test_cli_exits_2_with_one_line(name: str, content: str, line: int, tmp_path: Path) -> None:
    if not _dcop().exists():
        pytest.skip("dcop console script not installed")
    path = write(tmp_path, name, content)
    run = subprocess.run(
        [str(_dcop()), "info", str(path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"{path}:{line}: " in lines[0]
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(("objective", "value"), [("min", "-1e400"), ("max", "1e400")])
def test_a_constant_intention_of_minus_infinity_is_refused(
    objective: str, value: str, tmp_path: Path
) -> None:
    """A scope-less intention that reads as -inf (``-1e400``) made the optimum -inf, reported
    ok and exact (issue 33, item 12): refused, naming the constraint and its line."""
    text = (
        f"name: c\nobjective: {objective}\ndomains:\n  d: {{values: [0, 1]}}\n"
        "variables:\n  x: {domain: d}\nconstraints:\n"
        "  c1: {type: intention, function: x}\n"
        f"  big: {{type: intention, function: '{value}'}}\n"
        "agents: [a1]\n"
    )
    path = write(tmp_path, "c.yaml", text)
    with pytest.raises(InputError, match=r"constraint 'big': .*not supported") as info:
        read_problem(path)
    assert info.value.line == 9
