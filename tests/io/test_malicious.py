"""Hostile input: huge declared sizes, YAML bombs, XML entities, code in expressions.

Each must be refused with an InputError before any large allocation; the pytest-timeout marker
turns a hang into a failure instead of a stuck CI job. (Huge tables given by a default cost are
not refused: they stay sparse, see test_sparse.py.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import dcop.io.pydcop_yaml as pydcop_yaml
from dcop.errors import InputError
from dcop.io import read_problem
from dcop.io.expressions import compile_expression
from tests.io.helpers import write

pytestmark = pytest.mark.timeout(60)

HUGE = [
    # 10**12 tuples claimed for a 4-entry table
    ("tuples.wcsp", "t 2 2 1 10\n2 2\n2 0 1 0 1000000000000\n0 0 1\n", "only 4 entries"),
    # a domain of 10**9 values
    ("domain.wcsp", "t 1 1000000000 0 10\n1000000000\n", "exceeds the limit"),
    # 10**12 variables declared
    ("vars.wcsp", "t 1000000000000 2 0 10\n2\n", "out of range"),
    # 10**7 functions declared, none present: ends at the end of the file, not after 10**7 loops
    ("functions.wcsp", "t 2 2 10000000 10\n2 2\n", "10000000 cost functions declared, 0 found"),
    ("manyfunctions.wcsp", "t 2 2 100000000 10\n2 2\n", "out of range"),
    ("vars.uai", "MARKOV\n1000000000000\n2\n", "out of range"),
    ("domain.uai", "MARKOV\n1\n1000000000\n1\n1 0\n1000000000\n", "out of range"),
    (
        "table.uai",
        "MARKOV\n4\n1000 1000 1000 1000\n1\n4 0 1 2 3\n1000000000000\n",
        "more than the limit",
    ),
    ("entries.uai", "MARKOV\n1\n2\n1\n1 0\n1000000000000 0.5 0.5\n", "declares 1000000000000"),
    ("range.yaml", "name: t\ndomains:\n  d: {values: [0 .. 1000000000]}\n", "exceed the limit"),
    (
        "intention.yaml",
        "name: t\ndomains:\n  d: {values: [0 .. 99]}\nvariables:\n"
        + "".join(f"  v{i}: {{domain: d}}\n" for i in range(4))
        + "constraints:\n  c: {type: intention, function: v0 + v1 + v2 + v3}\n",
        "limit",
    ),
    (
        "range.xml",
        '<instance><domains><domain name="D">1..1000000000</domain></domains></instance>',
        "exceeds the limit",
    ),
]


@pytest.mark.parametrize(("name", "content", "words"), HUGE, ids=[h[0] for h in HUGE])
def test_huge_declared_sizes_are_refused(
    name: str, content: str, words: str, tmp_path: Path
) -> None:
    path = write(tmp_path, name, content)
    with pytest.raises(InputError, match=words):
        read_problem(path)


BILLION_LAUGHS_YAML = """name: t
a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
domains:
  d: {values: *g}
"""

BILLION_LAUGHS_XML = """<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<instance><presentation name="&lol9;"/></instance>
"""

EXTERNAL_XML = """<?xml version="1.0"?>
<!DOCTYPE instance [<!ENTITY secret SYSTEM "file:///etc/passwd">]>
<instance><presentation name="&secret;"/></instance>
"""


def test_yaml_billion_laughs_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r":3: YAML aliases"):
        read_problem(write(tmp_path, "bomb.yaml", BILLION_LAUGHS_YAML))


def test_yaml_deep_nesting_is_refused(tmp_path: Path) -> None:
    # PyYAML >= 6.0.4 refuses deep flow nesting in its own scanner, before our event check
    with pytest.raises(InputError, match=r"deep\.yaml:1: .*(nested deeper|maximum nesting depth)"):
        read_problem(write(tmp_path, "deep.yaml", "a: " + "[" * 100_000 + "]" * 100_000 + "\n"))
    with pytest.raises(InputError, match="nested deeper"):
        read_problem(write(tmp_path, "deep2.yaml", "".join(" " * i + "k:\n" for i in range(200))))


def test_yaml_enormous_file_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as fh:
        fh.write(b"name: t\n")
        fh.truncate(40 * 2**20)  # sparse: 40 MiB of NUL bytes
    with pytest.raises(InputError, match="more than the limit"):
        read_problem(path)


def test_yaml_python_tags_are_refused(tmp_path: Path) -> None:
    text = "name: !!python/object/apply:os.system ['echo pwned']\n"
    with pytest.raises(InputError, match="invalid YAML"):
        read_problem(write(tmp_path, "tag.yaml", text))


def test_xml_entity_expansion_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bomb\.xml:2: refused XML: DTDForbidden"):
        read_problem(write(tmp_path, "bomb.xml", BILLION_LAUGHS_XML))
    with pytest.raises(InputError, match=r"external\.xml:2: refused XML: DTDForbidden"):
        read_problem(write(tmp_path, "external.xml", EXTERNAL_XML))
    entity = "<instance>\n<presentation>&lol;</presentation></instance>\n"
    with pytest.raises(InputError, match=r"entity\.xml:2: invalid XML: undefined entity"):
        read_problem(write(tmp_path, "entity.xml", entity))


def test_reading_xml_loads_no_network_code(tmp_path: Path) -> None:
    """The XML reader is defusedxml's ElementTree parser: the SAX one pulls in urllib, http and
    ssl (12 ms of every `dcop run` of an XML file on the 2-core VM)."""
    path = Path(__file__).parent / "data" / "features.xml"
    script = (
        "import sys\n"
        "from dcop.io import read_problem\n"
        f"read_problem({str(path)!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith(('urllib.request', 'http', 'ssl'))))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


EVIL = [
    "__import__('os').system('echo pwned')",
    "().__class__",
    "().__class__.__bases__[0].__subclasses__()",
    "9**9**9",
    "10**10**10",
    "2**100000",
    "x**999999999",
    "open('/etc/passwd').read()",
    "eval('1')",
    "exec('import os')",
    "globals()",
    "(lambda: 1)()",
    "[i for i in range(10**9)]",
    "{i: i for i in range(3)}",
    "x.real",
    "x[0]",
    "'a' * 10**9",
    "'%s' % x",
    "f'{x}'",
    "import os\nreturn 1",
    "while True:\n  pass\nreturn 1",
    "for i in range(10**12):\n  pass\nreturn 0",
    "def f(): return 1\nreturn f()",
    "return __builtins__",
    "_ = 1\nreturn _",
    "abs = 3\nreturn abs",
    "min(*[1, 2])",
    "round(x, ndigits=2)",
    "(" * 300 + "1" + ")" * 300,
    "+".join(["x"] * 3000),
    "x if x else " * 500 + "0",
]


@pytest.mark.parametrize("source", EVIL, ids=range(len(EVIL)))
def test_evil_expressions_are_refused(source: str) -> None:
    with pytest.raises(InputError):
        compile_expression(source, "f.yaml", 3)({"x": 5})


def test_evil_expression_in_a_file_names_the_line(tmp_path: Path) -> None:
    text = (
        "name: t\ndomains: {d: {values: [1, 2]}}\nvariables: {x: {domain: d}}\n"
        "constraints:\n  c:\n    type: intention\n"
        "    function: __import__('os').system('touch pwned') or x\n"
    )
    path = write(tmp_path, "evil.yaml", text)
    with pytest.raises(InputError) as info:
        read_problem(path)
    assert str(info.value).startswith(f"{path}:7: ")
    assert not (tmp_path / "pwned").exists()


def test_allowed_expressions_still_work() -> None:
    expr = compile_expression("max(x, 2) ** 2 + (1 if x in (1, 3) else sqrt(4)) - abs(-x) // 2")
    assert expr({"x": 3}) == 9 + 1 - 1
    assert expr({"x": 2}) == 4 + 2.0 - 1
    assert compile_expression("10 ** 3 * 2 ** -1")({}) == 500
    assert compile_expression("x == 'R' and 5 or 0")({"x": "R"}) == 5


def _intentional(constraints: int, size: int) -> str:
    """A YAML DCOP with ``constraints`` intentional constraints over two variables of ``size``."""
    return (
        f"name: t\ndomains:\n  d: {{values: [0 .. {size - 1}]}}\n"
        "variables:\n  x: {domain: d}\n  y: {domain: d}\nconstraints:\n"
        + "".join(
            f"  c{k}: {{type: intention, function: x * y + {k}}}\n" for k in range(constraints)
        )
    )


def test_intentional_evaluations_have_a_total_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each constraint is small; together they exceed the file's budget of evaluations."""
    monkeypatch.setattr(pydcop_yaml, "MAX_EVALUATIONS", 20)
    assert read_problem(write(tmp_path, "two.yaml", _intentional(2, 3))).tables  # 18 evaluations
    path = write(tmp_path, "three.yaml", _intentional(3, 3))  # 27
    with pytest.raises(InputError, match="constraint 'c2': 9 more evaluations exceed") as info:
        read_problem(path)
    assert str(info.value).startswith(f"{path}:10: ")  # the line of c2


def test_intentional_evaluations_have_a_total_time_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A clock that moves 1 s per look: the cap is reached inside the third constraint."""
    ticks = iter(range(10**6))
    monkeypatch.setattr(pydcop_yaml.EvaluationBudget, "clock", staticmethod(lambda: next(ticks)))
    monkeypatch.setattr(pydcop_yaml, "MAX_EVALUATION_SECONDS", 5.5)
    monkeypatch.setattr(pydcop_yaml.EvaluationBudget, "CHECK_EVERY", 4)
    path = write(tmp_path, "slow.yaml", _intentional(4, 3))  # 3 looks per constraint
    with pytest.raises(InputError, match=r"constraint 'c1': .* took more than 5.5 s in all"):
        read_problem(path)
