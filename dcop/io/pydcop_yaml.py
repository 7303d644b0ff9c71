"""pyDCOP YAML DCOPs (read and write).

Read::

    name: ...
    objective: min | max                  # max: costs negated, Problem.sign = -1
    domains:
      d: {values: [R, G, B]}              # or [0 .. 9] (an integer range), type ignored
    variables:
      v1: {domain: d, initial_value: R, cost_function: 0.5 * v1}   # unary intentional cost
    constraints:
      c1: {type: intention, function: "1000 if v1 == v2 else 0"}  # or a multi-line body
      c2: {type: extensional, variables: [v1, v2], default: 1,
           values: {0: "R G | G R", 2.5: "B B"}}   # cost: tuples (labels), '|' separated
    agents: {a1: {capacity: 100}, ...}    # or a list of names
    distribution_hints: {must_host: {a1: [v1]}, host_with: {v1: [c1]}}
    hosting_costs: {default: 10, a1: {default: 5, computations: {v1: 0}}}
    distribution: {a1: [v1], a2: [v2]}   # optional: pyDCOP's distribution-file layout

* Intentional expressions (constraints' ``function``, variables' ``cost_function``) go through
  the restricted evaluator :mod:`dcop.io.expressions`, never ``eval``; the scope is the set of
  DCOP variables the expression names, in declaration order, and the table is the expression
  evaluated on every combination of their value labels. Besides each expression's own limits,
  a file may ask for at most ``MAX_INTENTION_ENTRIES`` evaluations per constraint and
  ``MAX_EVALUATIONS`` (and ``MAX_EVALUATION_SECONDS`` of wall time) in all; beyond that the
  error names the constraint being built.
* Extensional tuples name value labels (compared as text, as pyDCOP does); a tuple listed twice
  keeps the last cost; a tuple not listed costs ``default``, and without a default every tuple
  must be listed. An extensional ``default``/cost may be ``.inf``. A constraint with a default
  stays sparse (:class:`dcop.model.CostTable`) when its dense table would be much larger than
  its list, so a short file never allocates a huge table.
* Agents: ``Problem.meta["agents"]`` (names, file order), ``meta["agent_properties"]`` (each
  agent's declared properties, e.g. ``capacity``) and ``meta["placement_hints"]`` (distribution,
  must_host, host_with, hosting_costs as written). ``Variable.agent`` comes from
  :func:`dcop.io.placement.agent_placement` (one agent per variable: distribution, must_host,
  hosting_costs, then free agents in file order); whatever cannot be honoured is logged as a
  warning (logger ``dcop.io.pydcop_yaml``) and kept in ``meta["placement_warnings"]``.
* ``initial_value`` is checked against the domain and kept in ``Problem.meta["initial_values"]``;
  ``noise_level`` (random noise added by pyDCOP) and ``routes`` are ignored;
  ``external_variables`` are refused.

Safety: the file is at most 32 MiB; it is first scanned as a YAML event stream (no objects built)
and refused if it uses aliases (so no "billion laughs"), nests deeper than 32 or has more than
2 million events; only then is it composed with the safe loader. Tags other than the standard
scalar ones are refused. Every error names ``file:line``.

The writer emits only extensional constraints (default = the most frequent cost, or a sparse
table's own default), domains with the
variables' labels (value indices when labels would not survive the ``'a b | c d'`` syntax), the
objective (``max`` with costs negated back when ``Problem.sign == -1``), agents with
``must_host`` hints (or, when no variable has an agent, one agent ``a_<var>`` per variable, which
pyDCOP needs to run), and a non-zero constant as a unary constraint on the first variable.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import yaml

from dcop.errors import InputError, ModelError
from dcop.io._common import (
    MAX_DOMAIN,
    MAX_YAML_BYTES,
    SizeBudget,
    build_problem,
    check_deadline,
    listed_table,
    listings,
    read_text,
)
from dcop.io.expressions import Expression, compile_expression
from dcop.io.placement import agent_placement
from dcop.model import CostTable, FloatArray, Problem, Variable

log = logging.getLogger(__name__)

MAX_YAML_DEPTH = 32
MAX_YAML_EVENTS = 2_000_000
#: Bytes of memory per byte of text that reading a YAML file takes (pure-Python tree and
#: tables; measured: 3.9 MB took 262 MB).
YAML_EXPANSION = 72
#: Most entries an intentional table may have (each is one interpreted evaluation).
MAX_INTENTION_ENTRIES = 1 << 21
#: Most interpreted evaluations (intentional constraints and cost functions) in one file, and
#: the most wall time they may take together.
MAX_EVALUATIONS = 1 << 23
MAX_EVALUATION_SECONDS = 120.0

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_COLLECTION_TAGS = ("tag:yaml.org,2002:seq", "tag:yaml.org,2002:map")


class YMap(dict[Any, Any]):
    """A YAML mapping that remembers its line and the line of each value."""

    line: int
    lines: dict[Any, int]


class YSeq(list[Any]):
    """A YAML sequence that remembers its line and the line of each item."""

    line: int
    lines: list[int]


def _scan(text: str, file: str) -> None:
    """Refuse aliases, deep nesting and huge documents before building any object."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=_Loader), start=1):
        if count > MAX_YAML_EVENTS:
            raise InputError(f"more than {MAX_YAML_EVENTS} YAML events", file, _mark(event))
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise InputError(f"YAML nested deeper than {MAX_YAML_DEPTH}", file, _mark(event))
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            raise InputError("YAML aliases (*name) are not supported", file, _mark(event))


def _mark(obj: Any) -> int | None:
    mark = getattr(obj, "start_mark", None) or getattr(obj, "problem_mark", None)
    return None if mark is None else int(mark.line) + 1


def load_yaml(text: str, file: str) -> Any:
    """Parse YAML text into YMap/YSeq/scalars with line numbers (see the module docstring)."""
    try:
        _scan(text, file)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = _mark(exc)
        position = getattr(exc, "position", None)  # reader errors: a character offset
        if line is None and isinstance(position, int):
            line = text.count("\n", 0, position) + 1
        raise InputError(f"invalid YAML: {reason}", file, line or 1) from None
    if node is None:
        raise InputError("empty file", file, 1)
    constructor = yaml.constructor.SafeConstructor()
    return _convert(node, constructor, file)


def _convert(node: yaml.Node, constructor: Any, file: str) -> Any:
    line = int(node.start_mark.line) + 1
    try:
        if isinstance(node, yaml.ScalarNode):
            return constructor.construct_object(node, deep=True)
        if not isinstance(node, yaml.ScalarNode) and node.tag not in _COLLECTION_TAGS:
            raise InputError(f"invalid YAML: tag {node.tag[:60]!r} is not allowed", file, line)
        if isinstance(node, yaml.SequenceNode):
            seq = YSeq(_convert(item, constructor, file) for item in node.value)
            seq.line = line
            seq.lines = [int(item.start_mark.line) + 1 for item in node.value]
            return seq
        if isinstance(node, yaml.MappingNode):
            mapping = YMap()
            mapping.line = line
            mapping.lines = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise InputError(
                        "mapping keys must be plain values", file, int(key_node.start_mark.line) + 1
                    )
                key = _convert(key_node, constructor, file)
                if key in mapping:
                    raise InputError(
                        f"duplicate key {key!r}", file, int(key_node.start_mark.line) + 1
                    )
                mapping[key] = _convert(value_node, constructor, file)
                mapping.lines[key] = int(value_node.start_mark.line) + 1
            return mapping
    except yaml.YAMLError as exc:
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"invalid YAML: {reason}", file, line) from None
    except TypeError as exc:  # e.g. an unhashable key
        raise InputError(f"invalid YAML: {exc}", file, line) from None
    raise InputError("unknown YAML node", file, line)  # pragma: no cover


def _line(container: Any, key: Any, default: int | None = None) -> int | None:
    if isinstance(container, YMap):
        return container.lines.get(key, container.line)
    if isinstance(container, YSeq) and isinstance(key, int) and 0 <= key < len(container.lines):
        return container.lines[key]
    return getattr(container, "line", default)


def _domain_values(spec: Any, name: str, file: str, line: int | None) -> tuple[object, ...]:
    if not isinstance(spec, YMap) or "values" not in spec:
        raise InputError(f"domain {name!r} needs a 'values' list", file, line)
    raw = spec["values"]
    line = _line(spec, "values")
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise InputError(f"domain {name!r}: 'values' must be a non-empty list", file, line)
    values: list[object]
    if len(raw) == 1 and isinstance(raw[0], str) and ".." in raw[0]:
        low, _, high = raw[0].partition("..")
        try:
            lo, hi = int(low), int(high)
        except ValueError:
            raise InputError(
                f"domain {name!r}: range {raw[0]!r} is not 'low .. high' with integers", file, line
            ) from None
        if hi < lo:
            raise InputError(f"domain {name!r}: empty range {raw[0]!r}", file, line)
        if hi - lo + 1 > MAX_DOMAIN:
            raise InputError(
                f"domain {name!r}: {hi - lo + 1} values exceed the limit {MAX_DOMAIN}", file, line
            )
        values = list(range(lo, hi + 1))
    else:
        if len(raw) > MAX_DOMAIN:
            raise InputError(f"domain {name!r}: more than {MAX_DOMAIN} values", file, line)
        values = []
        for i, v in enumerate(raw):
            if isinstance(v, (list, dict)) or v is None:
                raise InputError(
                    f"domain {name!r}: value {i} must be a number or a name", file, _line(raw, i)
                )
            values.append(v)
    seen: set[str] = set()
    for i, v in enumerate(values):
        if str(v) in seen:
            raise InputError(f"domain {name!r}: value {v!r} appears twice", file, _line(raw, i))
        seen.add(str(v))
    return tuple(values)


def _label_index(var: Variable, token: object) -> int | None:
    return _label_map(var).get(str(token))


def _label_map(var: Variable) -> dict[str, int]:
    """Label text -> value index (labels are compared as text, as pyDCOP does)."""
    found: dict[str, int] = {}
    for i, v in enumerate(var.values):
        found.setdefault(str(v), i)
    return found


def _cost(value: Any, what: str, file: str, line: int | None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise InputError(f"{what}: {value!r} is not a number", file, line)
    try:
        cost = float(value)
    except ValueError:
        raise InputError(f"{what}: {value!r} is not a number", file, line) from None
    except OverflowError:  # an integer of hundreds of digits
        raise InputError(
            f"{what}: {str(value)[:20]}... ({len(str(value))} digits) is beyond the range of a "
            "float (about 1.8e308)",
            file,
            line,
        ) from None
    if math.isnan(cost):
        raise InputError(f"{what} is NaN", file, line)
    return cost


def read_yaml(path: str | Path) -> Problem:
    """Read a pyDCOP YAML DCOP into a Problem (see the module docstring)."""
    path = Path(path)
    file = str(path)
    root = load_yaml(read_text(path, MAX_YAML_BYTES, YAML_EXPANSION), file)
    if not isinstance(root, YMap):
        raise InputError("the top level must be a mapping (name, objective, domains, ...)", file, 1)
    objective = root.get("objective", "min")
    if objective not in ("min", "max"):
        raise InputError(
            f"objective must be 'min' or 'max', not {objective!r}", file, _line(root, "objective")
        )
    sign = -1 if objective == "max" else 1
    if root.get("external_variables"):
        raise InputError(
            "external_variables are not supported", file, _line(root, "external_variables")
        )
    for section in ("domains", "variables", "constraints"):
        if section in root and root[section] is not None and not isinstance(root[section], YMap):
            raise InputError(f"'{section}' must be a mapping", file, _line(root, section))

    domains: dict[str, tuple[object, ...]] = {}
    dom_section = root.get("domains") or YMap()
    for dname, spec in dom_section.items():
        if str(dname) in domains:
            raise InputError(f"domain {dname!r} is declared twice", file, _line(dom_section, dname))
        domains[str(dname)] = _domain_values(spec, str(dname), file, _line(dom_section, dname))

    budget = SizeBudget(file)
    variables: dict[str, Variable] = {}
    initial: dict[str, object] = {}
    unary: list[tuple[str, Any, int | None]] = []
    var_section = root.get("variables") or YMap()
    for vname, spec in var_section.items():
        vline = _line(var_section, vname)
        name = str(vname)
        if not name or name in variables:
            raise InputError(f"variable {name!r} is declared twice or has no name", file, vline)
        if not isinstance(spec, YMap) or "domain" not in spec:
            raise InputError(f"variable {name!r} needs a 'domain'", file, vline)
        dname = spec["domain"]
        if str(dname) not in domains:
            raise InputError(
                f"variable {name!r} uses unknown domain {dname!r}", file, _line(spec, "domain")
            )
        var = Variable(name, domains[str(dname)])
        if "initial_value" in spec and spec["initial_value"] is not None:
            iv = spec["initial_value"]
            idx = _label_index(var, iv)
            if idx is None:
                raise InputError(
                    f"initial value {iv!r} of variable {name!r} is not in its domain",
                    file,
                    _line(spec, "initial_value"),
                )
            initial[name] = var.values[idx]
        if spec.get("cost_function") is not None:
            unary.append((name, spec["cost_function"], _line(spec, "cost_function")))
        variables[name] = var

    tables: list[CostTable] = []
    constant = 0.0
    evaluations = EvaluationBudget(file)
    for vname, source, line in unary:
        expr = compile_expression(str(source), file, line)
        others = sorted(expr.names - {vname})
        if others:
            raise InputError(
                f"cost_function of variable {vname!r} uses other names: {', '.join(others)}",
                file,
                line,
            )
        var = variables[vname]
        budget.claim([var.size], line)
        what = f"cost_function of variable {vname!r}"
        costs = evaluations.table(expr, [vname], [var.values], what, line)
        tables.append(CostTable((vname,), costs, name=f"{vname}_cost"))

    con_section = root.get("constraints") or YMap()
    for cname, spec in con_section.items():
        cline = _line(con_section, cname)
        name = str(cname)
        if not isinstance(spec, YMap):
            raise InputError(f"constraint {name!r} must be a mapping", file, cline)
        kind = spec.get("type")
        if kind in ("intention", "intentional"):
            table = _intention(name, spec, variables, budget, evaluations, file, cline)
        elif kind == "extensional":
            table = _extensional(name, spec, variables, budget, file, cline)
        else:
            raise InputError(
                f"constraint {name!r}: type must be 'intention' or 'extensional', not {kind!r}",
                file,
                _line(spec, "type") if "type" in spec else cline,
            )
        if table.scope:
            tables.append(table)
        else:
            value = table.cost_of({})
            if sign * value == -math.inf:  # -1e400 reads as -inf: an unbounded "optimum"
                what = "+inf reward in a max problem" if sign < 0 else "cost -inf"
                raise InputError(f"constraint {name!r}: {what} is not supported", file, cline)
            constant += value

    if sign < 0:
        tables = [t.map_costs(np.negative) for t in tables]
        constant = -constant
    for table in tables:
        if np.isneginf(table.cost_values()).any():
            what = "+inf reward in a max problem" if sign < 0 else "cost -inf"
            raise InputError(
                f"constraint {table.name!r}: {what} is not supported",
                file,
                _line(con_section, table.name, None),
            )
    meta: dict[str, object] = {"format": "yaml", "file": file, "objective": objective}
    if initial:
        meta["initial_values"] = initial
    meta.update(_agents_meta(root, file))
    meta["constraints"] = [str(c) for c in con_section]
    problem = build_problem(
        file,
        list(variables.values()),
        tables,
        name=str(root.get("name", path.stem)),
        constant=constant,
        sign=sign,
        meta=meta,
    )
    placement, warnings = agent_placement(problem)
    for vname, agent in placement.items():
        var = problem.variables[vname]
        problem.variables[vname] = Variable(var.name, var.values, agent)
    problem.meta["placement_warnings"] = warnings
    for warning in warnings:
        log.warning("%s: %s", file, warning)
    return problem


def _scope_vars(
    names: Any, variables: dict[str, Variable], what: str, file: str, line: int | None
) -> list[Variable]:
    if isinstance(names, str):
        names = [names.strip()]
    if not isinstance(names, list):
        raise InputError(f"{what}: 'variables' must be a list of names", file, line)
    out: list[Variable] = []
    for i, n in enumerate(names):
        var = variables.get(str(n))
        if var is None:
            raise InputError(f"{what}: unknown variable {n!r}", file, _line(names, i, line))
        if var in out:
            raise InputError(f"{what}: variable {n!r} appears twice", file, _line(names, i, line))
        out.append(var)
    return out


def _intention(
    name: str,
    spec: YMap,
    variables: dict[str, Variable],
    budget: SizeBudget,
    evaluations: EvaluationBudget,
    file: str,
    line: int | None,
) -> CostTable:
    if spec.get("function") is None:
        raise InputError(f"constraint {name!r} needs a 'function'", file, line)
    fline = _line(spec, "function")
    source = spec["function"]
    if isinstance(source, bool) or not isinstance(source, (str, int, float)):
        raise InputError(f"constraint {name!r}: 'function' must be an expression", file, fline)
    expr = compile_expression(str(source), file, fline)
    unknown = sorted(n for n in expr.names if n not in variables)
    if unknown:
        raise InputError(
            f"constraint {name!r}: unknown variable or name {unknown[0]!r}", file, fline
        )
    scope = [var for var in variables.values() if var.name in expr.names]
    shape = [var.size for var in scope]
    entries = budget.claim(shape, fline, f"constraint {name!r}")
    if entries > MAX_INTENTION_ENTRIES:
        raise InputError(
            f"constraint {name!r}: {entries} combinations to evaluate, more than the limit "
            f"{MAX_INTENTION_ENTRIES} for intentional constraints",
            file,
            fline,
        )
    labels = [var.values for var in scope]
    names = [var.name for var in scope]
    costs = evaluations.table(expr, names, labels, f"constraint {name!r}", fline)
    return CostTable(tuple(names), costs, name=name)


class EvaluationBudget:
    """Caps the interpreted evaluations of intentional expressions over a whole file, in number
    and in wall time, on top of each expression's own limits (no loops, bounded integers) and
    the per-constraint ``MAX_INTENTION_ENTRIES``: many moderate constraints cannot add up to
    hours of work. Exceeding it is an InputError naming the constraint being built."""

    #: evaluations between two looks at the clock
    CHECK_EVERY = 1024
    #: the clock (seconds); a class attribute so that tests can replace it
    clock = staticmethod(time.monotonic)

    def __init__(
        self,
        file: str,
        evaluations: int | None = None,
        seconds: float | None = None,
    ) -> None:
        self.file = file
        self.limit = MAX_EVALUATIONS if evaluations is None else evaluations
        self.left = self.limit
        self.seconds = MAX_EVALUATION_SECONDS if seconds is None else seconds
        self.deadline = self.clock() + self.seconds

    def table(
        self,
        expr: Expression,
        names: list[str],
        labels: list[tuple[object, ...]],
        what: str,
        line: int | None,
    ) -> FloatArray:
        """The expression on every combination of the labels (C order), as a float64 array."""
        shape = [len(values) for values in labels]
        count = math.prod(shape)
        if count > self.left:
            raise InputError(
                f"{what}: {count} more evaluations exceed the budget of {self.limit} "
                "intentional evaluations per file",
                self.file,
                line,
            )
        self.left -= count
        flat = np.empty(count, dtype=np.float64)
        for i, combo in enumerate(itertools.product(*labels)):
            if i % self.CHECK_EVERY == 0:
                check_deadline(self.file)  # the run's own deadline, when it reads the file
            if i % self.CHECK_EVERY == 0 and self.clock() > self.deadline:
                raise InputError(
                    f"{what}: evaluating intentional expressions took more than "
                    f"{self.seconds:g} s in all",
                    self.file,
                    line,
                )
            flat[i] = expr(dict(zip(names, combo, strict=True)))
        return flat.reshape(shape)


def _extensional(
    name: str,
    spec: YMap,
    variables: dict[str, Variable],
    budget: SizeBudget,
    file: str,
    line: int | None,
) -> CostTable:
    if "variables" not in spec:
        raise InputError(f"constraint {name!r} needs 'variables'", file, line)
    scope = _scope_vars(
        spec["variables"], variables, f"constraint {name!r}", file, _line(spec, "variables")
    )
    shape = tuple(var.size for var in scope)
    label_maps = [_label_map(var) for var in scope]
    default = None
    if spec.get("default") is not None:
        default = _cost(
            spec["default"], f"constraint {name!r}: default", file, _line(spec, "default")
        )
    values = spec.get("values")
    vline = _line(spec, "values")
    if values is None:
        values = YMap()
        values.line, values.lines = line or 1, {}
    if not isinstance(values, YMap):
        raise InputError(f"constraint {name!r}: 'values' must map costs to tuples", file, vline)
    rows: list[list[int]] = []
    costs: list[float] = []
    for cost_key, tuples in values.items():
        tline = _line(values, cost_key)
        cost = _cost(cost_key, f"constraint {name!r}: cost", file, tline)
        if isinstance(tuples, str):
            groups = tuples.split("|")
        elif isinstance(tuples, (int, float)) and not isinstance(tuples, bool) and len(scope) == 1:
            groups = [str(tuples)]
        elif isinstance(tuples, list):
            groups = [str(t) for t in tuples]
        else:
            raise InputError(
                f"constraint {name!r}: tuples must be a string like 'a b | c d'", file, tline
            )
        for group in groups:
            tokens = group.split()
            if len(tokens) != len(scope):
                raise InputError(
                    f"constraint {name!r}: tuple {group.strip()!r} has {len(tokens)} values for "
                    f"{len(scope)} variables",
                    file,
                    tline,
                )
            index = []
            for var, labels, tok in zip(scope, label_maps, tokens, strict=True):
                i = labels.get(tok)
                if i is None:
                    raise InputError(
                        f"constraint {name!r}: {tok!r} is not a value of variable {var.name!r}",
                        file,
                        tline,
                    )
                index.append(i)
            rows.append(index)
            costs.append(cost)
    index_array = np.array(rows, dtype=np.int64).reshape(len(rows), len(scope))
    names = tuple(var.name for var in scope)
    if default is None:
        # every tuple must be listed: find the first one that is not, without a dense table
        listed = CostTable.sparse(names, shape, math.nan, index_array, costs)
        form = listed.sparse_form()
        assert form is not None
        if len(form[2]) < listed.entries:
            seen = iter(form[1].tolist())
            for want in itertools.product(*(range(s) for s in shape)):
                if list(want) != next(seen, None):
                    break
            shown = " ".join(str(var.values[i]) for var, i in zip(scope, want, strict=True))
            raise InputError(
                f"constraint {name!r}: tuple '{shown}' has no cost and no default is given",
                file,
                line,
            )
    return listed_table(
        names,
        shape,
        math.nan if default is None else default,
        index_array,
        np.array(costs, dtype=np.float64),
        name,
        budget,
        line,
    )


def _plain(value: Any) -> Any:
    """YAML values as plain dicts, lists and scalars (for Problem.meta)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _agents_meta(root: YMap, file: str) -> dict[str, object]:
    """The agents (with their properties) and the placement hints, for :mod:`dcop.io.placement`."""
    meta: dict[str, object] = {}
    agents_raw = root.get("agents")
    if agents_raw is not None and not isinstance(agents_raw, (list, dict)):
        raise InputError("'agents' must be a mapping or a list", file, _line(root, "agents"))
    if agents_raw:
        agents = [str(a) for a in agents_raw]
        if len(set(agents)) != len(agents):
            raise InputError("'agents' names an agent twice", file, _line(root, "agents"))
        meta["agents"] = agents
        if isinstance(agents_raw, dict):
            properties = {str(a): _plain(p) for a, p in agents_raw.items() if p}
            for agent, props in properties.items():
                if not isinstance(props, dict):
                    raise InputError(
                        f"the properties of agent {agent!r} must be a mapping",
                        file,
                        _line(agents_raw, agent),
                    )
            meta["agent_properties"] = properties
    hints: dict[str, object] = {}
    raw_hints = root.get("distribution_hints")
    if raw_hints is not None and not isinstance(raw_hints, YMap):
        raise InputError(
            "distribution_hints must be a mapping", file, _line(root, "distribution_hints")
        )
    given: dict[Any, Any] = raw_hints or {}
    for key, section, where in (
        ("distribution", root.get("distribution"), (root, "distribution")),
        ("must_host", given.get("must_host"), (raw_hints, "must_host")),
    ):
        if section is None:
            continue
        if not isinstance(section, YMap):
            raise InputError(f"{key} must be a mapping of agents to names", file, _line(*where))
        wishes: dict[str, list[str]] = {}
        for agent, hosted in section.items():
            if isinstance(hosted, (str, int)):
                hosted = [hosted]
            if hosted is None:
                hosted = []
            if not isinstance(hosted, list):
                raise InputError(f"{key} of {agent!r} must be a list", file, _line(section, agent))
            wishes[str(agent)] = [str(h) for h in hosted]
        hints[key] = wishes
    host_with = given.get("host_with")
    if host_with is not None:
        if not isinstance(host_with, YMap):
            raise InputError("host_with must be a mapping", file, _line(raw_hints, "host_with"))
        hints["host_with"] = [
            [str(k), *(str(x) for x in (v if isinstance(v, list) else [v]))]
            for k, v in host_with.items()
        ]
    costs = root.get("hosting_costs")
    if costs is not None:
        if not isinstance(costs, YMap):
            raise InputError("hosting_costs must be a mapping", file, _line(root, "hosting_costs"))
        hints["hosting_costs"] = _plain(costs)
    # always present (maybe empty) for YAML: agent_placement then ignores Variable.agent, which
    # the reader fills from its result, and gives the same answer when called again
    meta["placement_hints"] = hints
    return meta


# ---- writer ------------------------------------------------------------------------------------
def _writable_labels(values: tuple[object, ...]) -> bool:
    texts = []
    for v in values:
        if not isinstance(v, (int, float, str)) or isinstance(v, bool):
            return False
        text = str(v)
        if not text or "|" in text or text != text.strip() or len(text.split()) != 1:
            return False
        if isinstance(v, str) and v != yaml.safe_load(yaml.safe_dump(v)):
            return False
        texts.append(text)
    if len(values) == 1 and ".." in texts[0]:
        return False
    return len(set(texts)) == len(texts)


def _yaml_number(value: float) -> int | float:
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return int(value)
    return float(value)


def write_yaml(problem: Problem, path: str | Path) -> None:
    """Write a Problem as a pyDCOP YAML DCOP with extensional constraints."""
    domains: dict[str, dict[str, Any]] = {}
    domain_of: dict[tuple[object, ...], str] = {}
    labels: dict[str, tuple[object, ...]] = {}
    variables: dict[str, dict[str, Any]] = {}
    initial = problem.meta.get("initial_values")
    for name, var in problem.variables.items():
        values = var.values if _writable_labels(var.values) else tuple(range(var.size))
        labels[name] = values
        key = tuple((type(v).__name__, v) for v in values)
        if key not in domain_of:
            domain_of[key] = f"d{len(domain_of)}"
            # pyDCOP 0.1.1 needs a domain type; it does not interpret it
            domains[domain_of[key]] = {"values": list(values), "type": "discrete"}
        entry: dict[str, Any] = {"domain": domain_of[key]}
        if isinstance(initial, dict) and name in initial and values is var.values:
            entry["initial_value"] = initial[name]
        variables[name] = entry

    sign = problem.sign
    constraints: dict[str, dict[str, Any]] = {}
    constant = problem.constant
    used: set[str] = set(problem.variables)
    for i, table in enumerate(listings(problem)):  # sparse tables are never built densely
        if not table.scope:
            constant += table.default
            continue
        cname = table.name or f"c{i}"
        while cname in used:
            cname = f"{cname}_{i}"
        used.add(cname)
        constraints[cname] = _extensional_entry(
            table.scope, sign * table.default, table.index, sign * table.values, labels
        )
    if constant != 0:
        if not problem.variables:
            raise ModelError("pyDCOP YAML cannot hold a constant cost without variables")
        first = next(iter(problem.variables))
        cname = "constant_cost"
        while cname in used:
            cname += "_"
        none = np.zeros((0, 1), dtype=np.int64)
        constraints[cname] = _extensional_entry(
            (first,), sign * constant, none, np.zeros(0), labels
        )
    doc: dict[str, Any] = {
        "name": problem.name,
        "objective": "max" if sign < 0 else "min",
        "domains": domains,
        "variables": variables,
        "constraints": constraints,
    }
    owners = {name: var.agent for name, var in problem.variables.items() if var.agent}
    if owners:
        agents = list(dict.fromkeys(owners.values()))
        doc["agents"] = {a: {} for a in agents}
        doc["distribution_hints"] = {
            "must_host": {a: [v for v, o in owners.items() if o == a] for a in agents}
        }
    elif problem.variables:
        # pyDCOP needs agents to run: one per variable, matched by order when read back
        taken = set(problem.variables)
        names = []
        for v in problem.variables:
            agent = f"a_{v}"
            while agent in taken:
                agent += "_"
            taken.add(agent)
            names.append(agent)
        doc["agents"] = {a: {} for a in names}
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    text = yaml.dump(doc, Dumper=dumper, sort_keys=False, default_flow_style=False, width=100)
    Path(path).write_text(text, encoding="utf-8")


def _extensional_entry(
    scope: tuple[str, ...],
    default: float,
    index: npt.NDArray[np.integer[Any]],
    costs: FloatArray,
    labels: dict[str, tuple[object, ...]],
) -> dict[str, Any]:
    groups: dict[float, list[str]] = {}
    for row, cost in zip(index, costs, strict=True):
        text = " ".join(str(labels[v][int(i)]) for v, i in zip(scope, row, strict=True))
        groups.setdefault(float(cost), []).append(text)
    return {
        "type": "extensional",
        "variables": list(scope),
        "default": _yaml_number(default),
        "values": {_yaml_number(c): " | ".join(ts) for c, ts in groups.items()},
    }
