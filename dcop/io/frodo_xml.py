"""FRODO's XCSP 2.1 XML DCOPs (read and write).

Read: ``<presentation maximize="true|false">``, ``<agents>``, ``<domains>`` (integer values:
``1..5``, ``0 2 7`` or a mix), ``<variables>`` (``domain`` and ``agent`` attributes; the owner is
kept in ``Variable.agent``), ``<relations>`` and ``<constraints>`` that reference them by name
with a ``scope``.

* ``semantics="soft"``: ``defaultCost`` for unlisted tuples; the body is ``cost: t1 | t2 | cost2:
  t3 ...`` where a cost prefix applies to the following tuples until the next prefix; costs are
  numbers, ``infinity`` or ``-infinity``. ``semantics="supports"`` (listed tuples cost 0, others
  infinity) and ``"conflicts"`` (listed tuples infinity, others 0) are read too.
* ``maximize="true"``: utilities are negated (``Problem.sign = -1``); ``-infinity`` is then the
  infeasible value. An infinite reward (``infinity`` when maximising, ``-infinity`` when
  minimising) is refused.
* ``nbValues``, ``nbTuples``, ``arity`` are checked against the content; intensional constraints
  (``<predicates>``/``<functions>``) are refused as not supported, and so is an instance that
  declares no variables (``<instance/>`` is a mistake, not an empty problem).
* A constraint's table stays sparse (:class:`dcop.model.CostTable`: the relation's default cost
  plus its tuples) when its dense form would be much larger than the tuple list.

Safety: parsed with ``defusedxml`` (its ElementTree parser, onto our own nodes) with DTDs forbidden, so entity expansion ("billion
laughs") and external entities are refused; files above 64 MiB are refused before parsing;
declared domain ranges and table sizes are checked before allocating. Errors name ``file:line``.

Write: the layout of FRODO 2.18.1's own generators (the files in ``instances/frodo``): one agent
per variable (``a_<var>``, or the variables' own agents when they are all set and distinct),
integer domains (the labels when they are all integers, else value indices 0..d-1), one soft
relation per table (default = the most frequent cost, or a sparse table's own default) and one
constraint referencing it;
``maximize="true"`` with utilities when ``Problem.sign == -1``. A non-zero constant becomes a
unary relation on the first variable with that cost everywhere. FRODO's default cost type is
integer: non-integer costs are written exactly but need FRODO's real-valued configuration.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
from defusedxml import DefusedXmlException

from dcop.errors import InputError, ModelError
from dcop.io._common import (
    MAX_DOMAIN,
    MAX_XML_BYTES,
    SizeBudget,
    build_problem,
    format_cost,
    listed_table,
    listings,
    read_text,
)
from dcop.model import CostTable, Problem, Variable

#: Bytes of memory per byte of text that reading an XML file takes (a tree of nodes and tuple
#: lists; measured: 16 MB took 320 MB).
XML_EXPANSION = 24


class XNode:
    """An XML element with the line of its start tag."""

    __slots__ = ("attrs", "children", "line", "tag", "text")

    def __init__(self, tag: str, attrs: dict[str, str], line: int) -> None:
        self.tag = tag
        self.attrs = attrs
        self.line = line
        self.children: list[XNode] = []
        self.text: list[str] = []

    def find(self, tag: str) -> XNode | None:
        return next((c for c in self.children if c.tag == tag), None)

    def body(self) -> str:
        return "".join(self.text)


class _Builder:
    """The parser's target: XNodes with the line of each start tag (read from the parser)."""

    def __init__(self) -> None:
        self.expat: Any = None  # the pyexpat parser underneath, for line numbers
        self.stack: list[XNode] = []
        self.root: XNode | None = None

    def line(self) -> int:
        number = getattr(self.expat, "CurrentLineNumber", None)
        return int(number) if number else 1

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        node = XNode(tag, dict(attrs), self.line())
        if self.stack:
            self.stack[-1].children.append(node)
        else:
            self.root = node
        self.stack.append(node)

    def end(self, tag: str) -> None:
        self.stack.pop()

    def data(self, content: str) -> None:
        if self.stack:
            self.stack[-1].text.append(content)

    def close(self) -> XNode | None:
        return self.root


def parse_xml(text: str, file: str) -> XNode:
    """A tree of XNode; DTDs, entities and external references are refused."""
    # imported here, and the ElementTree parser rather than defusedxml's SAX one: the SAX
    # reader pulls in urllib, http and ssl (12 ms of every `dcop run` of an XML file, on the
    # 2-core VM, against 4 ms for this one)
    from defusedxml.ElementTree import DefusedXMLParser, ParseError

    builder = _Builder()
    parser = DefusedXMLParser(
        target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True
    )
    builder.expat = parser.parser
    try:
        # the text is already decoded: fed as str, expat reads it as such and ignores the
        # declaration's encoding (as bytes, `encoding="TTF-8"` raised LookupError, and a
        # declared latin-1 mis-read every non-ASCII name)
        parser.feed(text)
        parser.close()
    except DefusedXmlException as exc:
        raise InputError(
            f"refused XML: {type(exc).__name__} (DTDs and entities are not allowed)",
            file,
            builder.line(),
        ) from None
    except ParseError as exc:
        line = exc.position[0] if exc.position else builder.line()
        reason = str(exc).split(": line", 1)[0]
        raise InputError(f"invalid XML: {reason}", file, line) from None
    if builder.root is None:
        raise InputError("empty XML document", file, 1)
    return builder.root


def _cost(token: str, file: str, line: int) -> float:
    word = token.strip().lower()
    if word in ("infinity", "+infinity", "inf", "+inf"):
        return math.inf
    if word in ("-infinity", "-inf"):
        return -math.inf
    try:
        value = float(word)
    except ValueError:
        raise InputError(f"{token.strip()[:40]!r} is not a cost", file, line) from None
    if math.isnan(value):
        raise InputError("a cost is NaN", file, line)
    return value


def _int_attr(node: XNode, key: str, file: str, required: bool = False) -> int | None:
    raw = node.attrs.get(key)
    if raw is None:
        if required:
            raise InputError(f"<{node.tag}> needs the attribute {key}", file, node.line)
        return None
    try:
        return int(raw)
    except ValueError:
        raise InputError(
            f"<{node.tag}> attribute {key}={raw[:40]!r} is not an integer", file, node.line
        ) from None


def _name(node: XNode, file: str) -> str:
    name = node.attrs.get("name")
    if not name:
        raise InputError(f"<{node.tag}> needs a name", file, node.line)
    return name


def _domain(node: XNode, file: str) -> tuple[int, ...]:
    values: list[int] = []
    for part in node.body().split():
        if ".." in part:
            low, _, high = part.partition("..")
            try:
                lo, hi = int(low), int(high)
            except ValueError:
                raise InputError(
                    f"domain range {part[:40]!r} is not 'a..b'", file, node.line
                ) from None
            if hi < lo:
                raise InputError(f"empty domain range {part!r}", file, node.line)
            if hi - lo + 1 + len(values) > MAX_DOMAIN:
                raise InputError(
                    f"domain exceeds the limit of {MAX_DOMAIN} values", file, node.line
                )
            values.extend(range(lo, hi + 1))
        else:
            try:
                values.append(int(part))
            except ValueError:
                raise InputError(
                    f"domain value {part[:40]!r} is not an integer", file, node.line
                ) from None
            if len(values) > MAX_DOMAIN:
                raise InputError(
                    f"domain exceeds the limit of {MAX_DOMAIN} values", file, node.line
                )
    if not values:
        raise InputError(f"domain {node.attrs.get('name')!r} is empty", file, node.line)
    if len(set(values)) != len(values):
        raise InputError(f"domain {node.attrs.get('name')!r} repeats a value", file, node.line)
    declared = _int_attr(node, "nbValues", file)
    if declared is not None and declared != len(values):
        raise InputError(
            f"domain {node.attrs.get('name')!r} declares nbValues={declared} but has "
            f"{len(values)} values",
            file,
            node.line,
        )
    return tuple(values)


class _Relation:
    def __init__(self, arity: int, default: float, tuples: list[tuple[float, list[int], int]]):
        self.arity = arity
        self.default = default
        self.tuples = tuples  # (cost, values, line)


def _relation(node: XNode, file: str) -> _Relation:
    name = _name(node, file)
    arity = _int_attr(node, "arity", file, required=True)
    assert arity is not None
    if arity < 0:
        raise InputError(f"relation {name!r} has a negative arity", file, node.line)
    semantics = node.attrs.get("semantics", "soft")
    if semantics == "soft":
        default = _cost(node.attrs.get("defaultCost", "0"), file, node.line)
        listed: float | None = None
    elif semantics == "supports":
        default, listed = math.inf, 0.0
    elif semantics == "conflicts":
        default, listed = 0.0, math.inf
    else:
        raise InputError(f"relation {name!r}: unknown semantics {semantics!r}", file, node.line)
    text = node.body()
    tuples: list[tuple[float, list[int], int]] = []
    line = node.line
    current: float | None = listed
    for piece in text.split("|"):
        piece_line = line + piece[: len(piece) - len(piece.lstrip())].count("\n")
        line += piece.count("\n")
        if ":" in piece:
            if semantics != "soft":
                raise InputError(
                    f"relation {name!r}: a cost prefix in a {semantics} relation", file, piece_line
                )
            prefix, _, piece = piece.rpartition(":")
            if ":" in prefix:
                raise InputError(f"relation {name!r}: two cost prefixes in a row", file, piece_line)
            current = _cost(prefix, file, piece_line)
        tokens = piece.split()
        if not tokens and not text.strip():
            break
        if current is None:
            raise InputError(
                f"relation {name!r}: the first tuple has no cost prefix ('cost: ...')",
                file,
                piece_line,
            )
        if len(tokens) != arity:
            raise InputError(
                f"relation {name!r}: tuple {' '.join(tokens)[:40]!r} has {len(tokens)} values, "
                f"arity is {arity}",
                file,
                piece_line,
            )
        try:
            values = [int(t) for t in tokens]
        except ValueError:
            raise InputError(
                f"relation {name!r}: tuple {' '.join(tokens)[:40]!r} holds a non-integer value",
                file,
                piece_line,
            ) from None
        tuples.append((current, values, piece_line))
    declared = _int_attr(node, "nbTuples", file)
    if declared is not None and declared != len(tuples):
        raise InputError(
            f"relation {name!r} declares nbTuples={declared} but lists {len(tuples)}",
            file,
            node.line,
        )
    return _Relation(arity, default, tuples)


def _section(root: XNode, tag: str, child: str, file: str) -> list[XNode]:
    node = root.find(tag)
    if node is None:
        return []
    items = [c for c in node.children if c.tag == child]
    counter = {
        "domains": "nbDomains",
        "variables": "nbVariables",
        "relations": "nbRelations",
        "constraints": "nbConstraints",
        "agents": "nbAgents",
    }[tag]
    declared = _int_attr(node, counter, file)
    if declared is not None and declared != len(items):
        raise InputError(
            f"<{tag}> declares {counter}={declared} but holds {len(items)}", file, node.line
        )
    return items


def read_xml(path: str | Path) -> Problem:
    """Read a FRODO XCSP 2.1 XML DCOP into a Problem (see the module docstring)."""
    path = Path(path)
    file = str(path)
    text = read_text(path, MAX_XML_BYTES, XML_EXPANSION)
    if not text.strip():
        raise InputError("empty file", file, 1)
    root = parse_xml(text, file)
    if root.tag != "instance":
        raise InputError(f"the root element is <{root.tag}>, not <instance>", file, root.line)
    for tag in ("predicates", "functions"):
        node = root.find(tag)
        if node is not None and node.children:
            raise InputError(
                f"intensional constraints (<{tag}>) are not supported", file, node.line
            )
    presentation = root.find("presentation")
    maximize = False
    name = path.stem
    if presentation is not None:
        flag = presentation.attrs.get("maximize", "false").strip().lower()
        if flag not in ("true", "false", "1", "0"):
            raise InputError(f"maximize={flag[:20]!r} is not true/false", file, presentation.line)
        maximize = flag in ("true", "1")
        name = presentation.attrs.get("name", name)
    sign = -1 if maximize else 1
    agents = [_name(a, file) for a in _section(root, "agents", "agent", file)]

    domains: dict[str, tuple[int, ...]] = {}
    for node in _section(root, "domains", "domain", file):
        dname = _name(node, file)
        if dname in domains:
            raise InputError(f"domain {dname!r} is declared twice", file, node.line)
        domains[dname] = _domain(node, file)

    variables: dict[str, Variable] = {}
    for node in _section(root, "variables", "variable", file):
        vname = _name(node, file)
        if vname in variables:
            raise InputError(f"variable {vname!r} is declared twice", file, node.line)
        dname = node.attrs.get("domain", "")
        if dname not in domains:
            raise InputError(f"variable {vname!r} uses unknown domain {dname!r}", file, node.line)
        agent = node.attrs.get("agent")
        if agent is not None and agents and agent not in agents:
            raise InputError(f"variable {vname!r} names unknown agent {agent!r}", file, node.line)
        variables[vname] = Variable(vname, domains[dname], agent)

    relations: dict[str, _Relation] = {}
    for node in _section(root, "relations", "relation", file):
        rname = _name(node, file)
        if rname in relations:
            raise InputError(f"relation {rname!r} is declared twice", file, node.line)
        relations[rname] = _relation(node, file)

    budget = SizeBudget(file)
    tables: list[CostTable] = []
    constant = 0.0
    index_of = {v: {val: i for i, val in enumerate(var.values)} for v, var in variables.items()}
    for node in _section(root, "constraints", "constraint", file):
        cname = _name(node, file)
        scope = node.attrs.get("scope", "").split()
        for v in scope:
            if v not in variables:
                raise InputError(f"constraint {cname!r}: unknown variable {v!r}", file, node.line)
        if len(set(scope)) != len(scope):
            raise InputError(f"constraint {cname!r} repeats a variable", file, node.line)
        arity = _int_attr(node, "arity", file)
        if arity is not None and arity != len(scope):
            raise InputError(
                f"constraint {cname!r}: arity {arity} but {len(scope)} variables", file, node.line
            )
        ref = node.attrs.get("reference")
        relation = relations.get(ref or "")
        if relation is None:
            raise InputError(
                f"constraint {cname!r} references unknown relation {ref!r} (only extensional "
                "relations are supported)",
                file,
                node.line,
            )
        if relation.arity != len(scope):
            raise InputError(
                f"constraint {cname!r}: relation {ref!r} has arity {relation.arity}, the scope "
                f"{len(scope)}",
                file,
                node.line,
            )
        shape = tuple(variables[v].size for v in scope)
        index = np.empty((len(relation.tuples), len(scope)), dtype=np.int64)
        for row, (_, values, line) in enumerate(relation.tuples):
            for col, (v, val) in enumerate(zip(scope, values, strict=True)):
                i = index_of[v].get(val)
                if i is None:
                    raise InputError(
                        f"relation {ref!r} (constraint {cname!r}): value {val} is not in the "
                        f"domain of {v!r}",
                        file,
                        line,
                    )
                index[row, col] = i
        costs = np.array([cost for cost, _, _ in relation.tuples], dtype=np.float64)
        default = relation.default
        if sign < 0:
            costs, default = -costs, -default
        # a soft relation is a default cost plus tuples: kept sparse when that is smaller
        table = listed_table(scope, shape, default, index, costs, cname, budget, node.line)
        if np.isneginf(table.cost_values()).any():
            what = "infinity" if maximize else "-infinity"
            raise InputError(
                f"constraint {cname!r}: an infinite reward ({what}) is not supported",
                file,
                node.line,
            )
        if scope:
            tables.append(table)
        else:
            constant += table.cost_of({})
    if not variables:
        raise InputError("the instance declares no variables", file, root.line)
    meta: dict[str, object] = {"format": "xml", "file": file}
    if agents:
        meta["agents"] = agents
    return build_problem(
        file,
        list(variables.values()),
        tables,
        name=name,
        constant=constant,
        sign=sign,
        meta=meta,
    )


# ---- writer ------------------------------------------------------------------------------------
_SAFE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]*$")


def _domain_text(values: tuple[int, ...]) -> str:
    if len(values) > 1 and values == tuple(range(values[0], values[0] + len(values))):
        return f"{values[0]}..{values[-1]}"
    return " ".join(str(v) for v in values)


def _cost_text(value: float) -> str:
    if value == math.inf:
        return "infinity"
    if value == -math.inf:
        return "-infinity"
    return format_cost(value)


def write_xml(problem: Problem, path: str | Path) -> None:
    """Write a Problem in FRODO's XCSP 2.1 layout (see the module docstring)."""
    from xml.sax.saxutils import escape, quoteattr  # here, as defusedxml.sax in parse_xml

    names = list(problem.variables)
    for v in names:
        if not _SAFE.match(v):
            raise ModelError(f"variable name {v!r} cannot be written to FRODO XML")
    given = [problem.variables[v].agent for v in names]
    if all(a is not None and _SAFE.match(a) for a in given) and len(set(given)) == len(given):
        agents = [str(a) for a in given]
    else:
        agents = [f"a_{v}" for v in names]

    labels: dict[str, tuple[int, ...]] = {}
    domain_names: dict[tuple[int, ...], str] = {}
    for v in names:
        var = problem.variables[v]
        ints = all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in var.values)
        values = tuple(int(x) for x in var.values) if ints else tuple(range(var.size))  # type: ignore[call-overload]
        if len(set(values)) != len(values):
            values = tuple(range(var.size))
        labels[v] = values
        domain_names.setdefault(values, f"D{len(domain_names)}")

    tables = listings(problem)  # sparse tables are listed as they are, never built densely
    constant = problem.constant + sum(t.default for t in tables if not t.scope)
    scoped = [(t.scope, t.default, t.index, t.values) for t in tables if t.scope]
    if constant != 0:
        if not names:
            raise ModelError("FRODO XML cannot hold a constant cost without variables")
        none = np.zeros((0, 1), dtype=np.int64)
        scoped.append(((names[0],), constant, none, np.zeros(0)))
    sign = problem.sign

    out: list[str] = ['<?xml version="1.0" encoding="UTF-8"?>']
    out.append(
        '<instance xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xsi:noNamespaceSchemaLocation="src/frodo2/algorithms/XCSPschema.xsd">'
    )
    max_arity = max((len(s[0]) for s in scoped), default=0)
    out.append(
        f"  <presentation name={quoteattr(problem.name or 'problem')} "
        f'maxConstraintArity="{max_arity}" maximize="{"true" if sign < 0 else "false"}" '
        'format="XCSP 2.1_FRODO" />'
    )
    out.append(f'  <agents nbAgents="{len(agents)}">')
    out.extend(f"    <agent name={quoteattr(a)} />" for a in agents)
    out.append("  </agents>")
    out.append(f'  <domains nbDomains="{len(domain_names)}">')
    for values, dname in domain_names.items():
        out.append(
            f'    <domain name="{dname}" nbValues="{len(values)}">{_domain_text(values)}</domain>'
        )
    out.append("  </domains>")
    out.append(f'  <variables nbVariables="{len(names)}">')
    for v, a in zip(names, agents, strict=True):
        out.append(
            f'    <variable name={quoteattr(v)} domain="{domain_names[labels[v]]}" '
            f"agent={quoteattr(a)} />"
        )
    out.append("  </variables>")
    relations: list[str] = []
    constraints: list[str] = []
    for i, (scope, internal_default, listed, internal) in enumerate(scoped):
        default = sign * internal_default
        costs = sign * internal
        if len(listed) == 0:  # list one tuple so that no relation has an empty body
            listed = np.zeros((1, len(scope)), dtype=np.int64)
            costs = np.array([default])
        groups: dict[float, list[str]] = {}
        for row, cost in zip(listed, costs, strict=True):
            tup = " ".join(str(labels[v][int(j)]) for v, j in zip(scope, row, strict=True))
            groups.setdefault(float(cost), []).append(tup)
        body = " | ".join(f"{_cost_text(c)}: " + " | ".join(ts) for c, ts in groups.items())
        relations.append(
            f'    <relation name="r_{i}" arity="{len(scope)}" semantics="soft" '
            f'defaultCost="{_cost_text(default)}" nbTuples="{len(listed)}">{escape(body)}</relation>'
        )
        constraints.append(
            f'    <constraint name="c_{i}" arity="{len(scope)}" '
            f'scope={quoteattr(" ".join(scope))} reference="r_{i}" />'
        )
    out.append(f'  <relations nbRelations="{len(relations)}">')
    out.extend(relations)
    out.append("  </relations>")
    out.append(f'  <constraints nbConstraints="{len(constraints)}">')
    out.extend(constraints)
    out.append("  </constraints>")
    out.append("</instance>")
    Path(path).write_text("\n".join(out) + "\n", encoding="utf-8")
