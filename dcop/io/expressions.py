"""A restricted evaluator for pyDCOP's intentional cost expressions (never ``eval``).

The source is parsed with :mod:`ast` and checked against a whitelist before anything runs; the
checked tree is then interpreted node by node. Accepted:

* a single expression (``1000 if v1 == v2 else 0``, ``0.5 * x``), or a function body with
  ``return`` (pyDCOP's multi-line form) built from assignments to local names, ``if/elif/else``,
  ``pass`` and ``return``; no loops, so evaluation always ends;
* numbers, strings (only for comparisons), ``True``/``False``, tuples/lists of those;
* ``+ - * / // % **``, unary ``+ - not``, ``and``/``or``, comparisons (``== != < <= > >= in
  not in``), conditional expressions;
* calls of ``abs min max round int float bool`` and ``sqrt exp log log2 log10 floor ceil sin
  cos tan fabs``, constants ``pi e inf``;
* names of DCOP variables (their value labels are bound when evaluating).

Refused (``InputError``): attribute access, subscripts, imports, lambdas, comprehensions, calls of
any other name, keyword or star arguments, names starting with ``_``, sources above 10,000
characters or 2,000 nodes or nesting depth 60, integers above 4096 bits, ``**`` whose result would
exceed that, arithmetic on strings, and any arithmetic error (division by zero, math domain).
"""

from __future__ import annotations

import ast
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dcop.errors import InputError

MAX_SOURCE = 10_000
MAX_NODES = 2_000
MAX_DEPTH = 60
MAX_INT_BITS = 4096
MAX_STR = 1_000


def _round(x: Any, n: Any = None) -> Any:
    return round(x) if n is None else round(x, n)


def _minmax(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        if len(args) == 1 and isinstance(args[0], (tuple, list)):
            args = tuple(args[0])
        if not args:
            raise ValueError(f"{fn.__name__}() of nothing")
        return fn(*args)

    return call


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "min": _minmax(min),
    "max": _minmax(max),
    "round": _round,
    "int": int,
    "float": float,
    "bool": bool,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log2": math.log2,
    "log10": math.log10,
    "floor": math.floor,
    "ceil": math.ceil,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "fabs": math.fabs,
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "inf": math.inf}

_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)
_UNARY = (ast.UAdd, ast.USub, ast.Not)
_CMPOPS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)
_ALLOWED = (
    ast.Expression,
    ast.Module,
    ast.Return,
    ast.If,
    ast.Assign,
    ast.Pass,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.IfExp,
    ast.Call,
    ast.Name,
    ast.Constant,
    ast.Tuple,
    ast.List,
    ast.Load,
    ast.Store,
    ast.And,
    ast.Or,
    *_BINOPS,
    *_UNARY,
    *_CMPOPS,
)


class _Refused(Exception):
    """An expression outside the whitelist, or an evaluation error (reason in args[0])."""


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


@dataclass(frozen=True)
class Expression:
    """A checked expression; ``names`` are the free names (DCOP variables) it reads."""

    source: str
    tree: ast.AST
    names: frozenset[str]
    file: str | None = None
    line: int | None = None

    def __call__(self, env: Mapping[str, Any]) -> float:
        """Evaluate with ``env`` binding every name in ``names`` to a value label."""
        try:
            if isinstance(self.tree, ast.Expression):
                value = _eval(self.tree.body, dict(env))
            else:
                assert isinstance(self.tree, ast.Module)
                try:
                    _exec(self.tree.body, dict(env))
                except _Return as ret:
                    value = ret.value
                else:
                    raise _Refused("the function body ends without returning a value")
            if isinstance(value, bool):
                value = int(value)
            if not isinstance(value, (int, float)):
                raise _Refused(f"the result {_short(value)} is not a number")
            result = float(value)
        except _Refused as exc:
            raise self._error(f"{exc.args[0]} (with {_show_env(env)})") from None
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise self._error(f"{type(exc).__name__}: {exc} (with {_show_env(env)})") from None
        if math.isnan(result):
            raise self._error(f"the result is NaN (with {_show_env(env)})")
        return result

    def _error(self, reason: str) -> InputError:
        return InputError(f"expression {_short(self.source)}: {reason}", self.file, self.line)


def compile_expression(source: str, file: str | None = None, line: int | None = None) -> Expression:
    """Parse and check ``source``; InputError (at ``file:line``) when it is not allowed."""

    def refuse(reason: str) -> InputError:
        return InputError(f"expression {_short(source)}: {reason}", file, line)

    if not isinstance(source, str):
        raise refuse("an expression must be a string")
    if len(source) > MAX_SOURCE:
        raise refuse(f"longer than {MAX_SOURCE} characters")
    tree: ast.AST
    try:
        tree = _parse(source.strip(), "eval")
    except SyntaxError:
        try:
            tree = _parse(_dedent(source), "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise refuse(f"not a valid expression ({type(exc).__name__})") from None
        if not any(isinstance(node, ast.Return) for node in ast.walk(tree)):
            raise refuse("a multi-line function must return a value") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise refuse(f"not a valid expression ({type(exc).__name__})") from None
    try:
        loaded, stored = _check(tree)
    except _Refused as exc:
        raise refuse(str(exc.args[0])) from None
    free = frozenset(n for n in loaded - stored if n not in CONSTANTS)
    return Expression(source, tree, free, file, line)


def _parse(source: str, mode: str) -> ast.AST:
    """ast.parse without its SyntaxWarnings ("1if x else 0"): they would print a stray
    ``<unknown>:1: SyntaxWarning`` line beside the CLI's one-line result or error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(source, mode=mode)


def _dedent(source: str) -> str:
    lines = [ln for ln in source.splitlines() if ln.strip()]
    indent = min((len(ln) - len(ln.lstrip()) for ln in lines), default=0)
    return "\n".join(ln[indent:] for ln in lines)


def _check(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Walk the tree iteratively; return (names read, names assigned)."""
    loaded: set[str] = set()
    stored: set[str] = set()
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise _Refused(f"more than {MAX_NODES} syntax nodes")
        if depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH}")
        if not isinstance(node, _ALLOWED):
            raise _Refused(f"{type(node).__name__} is not allowed")
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                raise _Refused(f"name {node.id!r} is not allowed")
            if isinstance(node.ctx, ast.Store):
                if node.id in FUNCTIONS or node.id in CONSTANTS:
                    raise _Refused(f"cannot assign to {node.id!r}")
                stored.add(node.id)
            elif node.id in FUNCTIONS:
                raise _Refused(f"function {node.id!r} can only be called")
            else:
                loaded.add(node.id)
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or value is None:
                pass
            elif isinstance(value, int):
                if value.bit_length() > MAX_INT_BITS:
                    raise _Refused("integer constant too large")
            elif isinstance(value, str):
                if len(value) > MAX_STR:
                    raise _Refused("string constant too long")
            elif not isinstance(value, float):
                raise _Refused(f"constant of type {type(value).__name__} is not allowed")
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise _Refused("only calls of " + ", ".join(sorted(FUNCTIONS)) + " are allowed")
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise _Refused("keyword and star arguments are not allowed")
            for arg in node.args:
                stack.append((arg, depth + 1))
            continue  # the function name itself is checked above
        elif isinstance(node, ast.Assign):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise _Refused("only assignments to a single local name are allowed")
        elif isinstance(node, (ast.Tuple, ast.List)) and not isinstance(node.ctx, ast.Load):
            raise _Refused("unpacking assignments are not allowed")
        for child in ast.iter_child_nodes(node):
            stack.append((child, depth + 1))
    return loaded, stored


# ---- the interpreter ---------------------------------------------------------------------------
def _exec(body: list[ast.stmt], env: dict[str, Any]) -> None:
    for stmt in body:
        if isinstance(stmt, ast.Return):
            raise _Return(None if stmt.value is None else _eval(stmt.value, env))
        if isinstance(stmt, ast.Assign):
            target = stmt.targets[0]
            assert isinstance(target, ast.Name)
            env[target.id] = _eval(stmt.value, env)
        elif isinstance(stmt, ast.If):
            _exec(stmt.body if _truth(_eval(stmt.test, env)) else stmt.orelse, env)
        elif isinstance(stmt, ast.Pass):
            pass
        else:  # pragma: no cover - _check admits no other statement
            raise _Refused(f"{type(stmt).__name__} is not allowed")


def _truth(value: Any) -> bool:
    return bool(value)


def _number(value: Any) -> int | float:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    raise _Refused(f"arithmetic on {_short(value)}, which is not a number")


def _checked_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MAX_INT_BITS:
        raise _Refused(f"an intermediate integer exceeds {MAX_INT_BITS} bits")
    return value


def _power(base: int | float, exponent: int | float) -> int | float:
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0:
        if abs(base) > 1 and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
            raise _Refused(f"the power would exceed {MAX_INT_BITS} bits")
        value = int(base**exponent)
        _checked_int(value)
        return value
    if isinstance(exponent, (int, float)) and abs(exponent) > 1e6 and abs(base) > 1:
        raise _Refused("the power is too large")
    result = float(base) ** float(exponent) if isinstance(base, int) else base**exponent
    if isinstance(result, complex):
        raise _Refused("the power has no real value")
    return result


def _binop(op: ast.operator, a: Any, b: Any) -> Any:
    x, y = _number(a), _number(b)
    if isinstance(op, ast.Add):
        return _checked_int(x + y)
    if isinstance(op, ast.Sub):
        return _checked_int(x - y)
    if isinstance(op, ast.Mult):
        return _checked_int(x * y)
    if isinstance(op, ast.Div):
        return x / y
    if isinstance(op, ast.FloorDiv):
        return x // y
    if isinstance(op, ast.Mod):
        return x % y
    if isinstance(op, ast.Pow):
        return _power(x, y)
    raise _Refused(f"operator {type(op).__name__} is not allowed")  # pragma: no cover


def _compare(op: ast.cmpop, a: Any, b: Any) -> bool:
    if isinstance(op, ast.Eq):
        return bool(a == b)
    if isinstance(op, ast.NotEq):
        return bool(a != b)
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(b, (tuple, list)):
            raise _Refused("'in' needs a tuple or list on its right")
        found = a in b
        return found if isinstance(op, ast.In) else not found
    if isinstance(a, str) != isinstance(b, str):
        raise _Refused(f"cannot order {_short(a)} and {_short(b)}")
    if isinstance(op, ast.Lt):
        return bool(a < b)
    if isinstance(op, ast.LtE):
        return bool(a <= b)
    if isinstance(op, ast.Gt):
        return bool(a > b)
    if isinstance(op, ast.GtE):
        return bool(a >= b)
    raise _Refused(f"comparison {type(op).__name__} is not allowed")  # pragma: no cover


def _eval(node: ast.AST, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        raise _Refused(f"name {node.id!r} is not defined here")
    if isinstance(node, ast.BinOp):
        return _binop(node.op, _eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return not _truth(value)
        number = _number(value)
        return -number if isinstance(node.op, ast.USub) else +number
    if isinstance(node, ast.BoolOp):
        result: Any = None
        for sub in node.values:
            result = _eval(sub, env)
            if isinstance(node.op, ast.And) and not _truth(result):
                return result
            if isinstance(node.op, ast.Or) and _truth(result):
                return result
        return result
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            if not _compare(op, left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        branch = node.body if _truth(_eval(node.test, env)) else node.orelse
        return _eval(branch, env)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)
        args = [_eval(a, env) for a in node.args]
        name = node.func.id
        if name not in ("min", "max", "bool"):
            args = [_number(a) for a in args]
        if (
            name in ("round", "int")
            and args
            and isinstance(args[0], float)
            and not math.isfinite(args[0])
        ):
            raise _Refused(f"{name}() of {args[0]}")
        return _checked_int(FUNCTIONS[name](*args))
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval(e, env) for e in node.elts)
    raise _Refused(f"{type(node).__name__} is not allowed")  # pragma: no cover


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, str) else repr(" ".join(value.split()))
    return text if len(text) <= 60 else text[:57] + "..."


def _show_env(env: Mapping[str, Any]) -> str:
    items = ", ".join(f"{k}={v!r}" for k, v in list(env.items())[:6])
    return items + (", ..." if len(env) > 6 else "")
