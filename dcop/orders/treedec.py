"""Tree decompositions as elimination orders: goatd's solvers and PACE 2017 ``.td`` text.

goatd (a Rust library with Python wheels) computes tree decompositions with elimination orders,
FlowCutter and multilevel bisection; its portfolio matched the best of the PACE 2017 heuristic
solvers on dcop's instances. It is optional: its wheels cover Linux x86-64, macOS arm64 and
Windows x64 only, so elsewhere :func:`available` is False and the engine searches with randomized
min-fill instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from dcop.errors import InputError
from dcop.orders.greedy import Adjacency

#: goatd's module once asked for (None: not installed); it is loaded by the first search, not
#: by importing this module: an order that needs no search does not load it.
goatd: ModuleType | bool | None = False


def _goatd() -> ModuleType | None:
    global goatd
    if goatd is False:
        try:  # optional: no wheel for Linux aarch64 or macOS x86-64
            goatd = importlib.import_module("goatd")
        except ImportError:  # pragma: no cover - depends on the platform
            goatd = None
    return goatd if isinstance(goatd, ModuleType) else None


def available() -> bool:
    """Whether goatd is installed."""
    return _goatd() is not None


def decompose_order(
    adjacency: Adjacency, budget_s: float, seed: int = 0, method: str = "portfolio"
) -> list[str]:
    """An elimination order from goatd's ``method`` (portfolio: its best within the budget), on
    the clock: the orders benchmark's long reference search; the engine searches by
    :class:`Decomposer`'s repeatable runs.

    goatd treats ``budget_ms`` as soft with a hard stop at twice it, so half the budget is asked
    for. Raises :class:`RuntimeError` when goatd is missing or fails.
    """
    goatd = _goatd()
    if goatd is None:
        raise RuntimeError("goatd is not installed")
    names = list(adjacency)
    index = {v: i for i, v in enumerate(names)}
    edges = [(index[a], index[b]) for a in names for b in adjacency[a] if index[a] < index[b]]
    budget_ms = max(1, int(budget_s * 500))
    try:
        graph = goatd.Graph(len(names), edges)
        td = goatd.decompose(graph, order=method, seed=seed, budget_ms=budget_ms)
    except goatd.Error as exc:
        raise RuntimeError(f"goatd: {exc}") from None
    return [names[i] for i in bags_to_order(len(names), td.bags, td.edges)]


class Decomposer:
    """goatd's constructions over one graph, each run to its end and so repeatable: the same
    graph, method and seed give the same order on every call and under any load (the engine's
    search, whose budget is a count of these runs). Raises :class:`RuntimeError` when goatd is
    missing or fails."""

    def __init__(self, adjacency: Adjacency) -> None:
        module = _goatd()
        if module is None:
            raise RuntimeError("goatd is not installed")
        self._goatd = module
        self.names = list(adjacency)
        index = {v: i for i, v in enumerate(self.names)}
        edges = [
            (index[a], index[b]) for a in self.names for b in adjacency[a] if index[a] < index[b]
        ]
        try:
            self.graph = module.Graph(len(self.names), edges)
        except module.Error as exc:
            raise RuntimeError(f"goatd: {exc}") from None

    def run(self, method: str, seed: int = 0, sample: bool = False) -> Any:
        """goatd's decomposition by ``method`` (``portfolio`` with no deadline: its every slot
        and its 100 sampled min-fill refinements; ``minfill`` with ``sample``: one min-fill
        whose ties are drawn at random by ``seed``); its ``treewidth`` and ``bag_mass`` rank it
        without a walk of ours."""
        module = self._goatd
        options: dict[str, object] = {"ties": "sample"} if sample else {}
        try:
            return module.decompose(self.graph, order=method, seed=seed, **options)
        except module.Error as exc:
            raise RuntimeError(f"goatd: {exc}") from None

    def order(self, td: Any) -> list[str]:
        """The elimination order of ``td`` (a decomposition :meth:`run` returned)."""
        return [self.names[i] for i in bags_to_order(len(self.names), td.bags, td.edges)]


def bags_to_order(
    n: int, bags: Sequence[Sequence[int]], edges: Sequence[tuple[int, int]]
) -> list[int]:
    """An elimination order of vertices ``0..n-1`` whose width is at most the decomposition's.

    Each tree of bags is rooted at its first bag and walked children first; a bag eliminates the
    vertices it holds that its parent bag does not (each vertex's topmost bag), so every vertex is
    eliminated when all the bags below it are done and its neighbours left lie in its bag.
    Vertices in no bag (not allowed by PACE, tolerated here) come last.
    """
    tree: list[list[int]] = [[] for _ in bags]
    for a, b in edges:
        tree[a].append(b)
        tree[b].append(a)
    seen = [False] * len(bags)
    done = [False] * n
    order: list[int] = []
    for root in range(len(bags)):
        if seen[root]:
            continue
        seen[root] = True
        parent = {root: -1}
        pre = [root]
        stack = [root]
        while stack:
            b = stack.pop()
            for c in tree[b]:
                if not seen[c]:
                    seen[c] = True
                    parent[c] = b
                    pre.append(c)
                    stack.append(c)
        for b in reversed(pre):  # every bag after all the bags below it
            above = set(bags[parent[b]]) if parent[b] >= 0 else set()
            for v in bags[b]:
                if v not in above and not done[v]:
                    done[v] = True
                    order.append(v)
    order += [v for v in range(n) if not done[v]]
    return order


def read_td(text: str, names: Sequence[str], where: str = "td") -> list[str]:
    """The elimination order of a PACE 2017 ``.td`` text over ``names`` (vertex i + 1 is
    ``names[i]``); a one-line :class:`InputError` naming ``where`` and the line when malformed."""
    n = len(names)
    bags: dict[int, list[int]] = {}
    edges: list[tuple[int, int]] = []
    header: tuple[int, int] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields or fields[0] == "c":
            continue
        try:
            if fields[0] == "s":
                if header is not None or len(fields) != 5 or fields[1] != "td":
                    raise ValueError("expected one 's td <bags> <width+1> <vertices>' line")
                header = (int(fields[2]), int(fields[4]))
                if header[1] != n:
                    raise ValueError(f"the decomposition has {header[1]} vertices, the problem {n}")
            elif header is None:
                raise ValueError("a line before the 's td' header")
            elif fields[0] == "b":
                bag = int(fields[1])
                if not 1 <= bag <= header[0] or bag in bags:
                    raise ValueError(f"bag {bag} is out of range or repeated")
                vertices = [int(x) - 1 for x in fields[2:]]
                if any(not 0 <= v < n for v in vertices):
                    raise ValueError(f"a vertex outside 1..{n}")
                bags[bag] = vertices
            else:
                a, b = int(fields[0]), int(fields[1])
                if len(fields) != 2 or not (1 <= a <= header[0] and 1 <= b <= header[0]):
                    raise ValueError("a tree edge must join two bag numbers")
                edges.append((a - 1, b - 1))
        except ValueError as exc:
            message = str(exc) if "invalid literal" not in str(exc) else "not a number"
            raise InputError(message, where, number) from None
    if header is None:
        raise InputError("no 's td' header line", where)
    if len(bags) != header[0]:
        raise InputError(f"{header[0]} bags declared, {len(bags)} given", where)
    listed = [bags[b + 1] for b in range(header[0])]
    covered = {v for bag in listed for v in bag}
    if len(covered) != n:
        missing = next(v for v in range(n) if v not in covered)
        raise InputError(f"vertex {missing + 1} ({names[missing]}) is in no bag", where)
    return [names[i] for i in bags_to_order(n, listed, edges)]


def write_td(adjacency: Adjacency, order: Sequence[str], names: Sequence[str]) -> str:
    """The PACE 2017 ``.td`` text of ``order``'s decomposition: one bag per variable (it and its
    induced scope), joined to the bag of its parent in the elimination tree."""
    from dcop.trees.induced import induced_scopes

    scopes = induced_scopes(adjacency, order)
    number = {v: i + 1 for i, v in enumerate(names)}
    bag_of = {v: k + 1 for k, v in enumerate(order)}
    width = max((len(s) for s in scopes.values()), default=0)
    lines = [f"s td {len(order)} {width + 1} {len(names)}"]
    for v in order:
        members = " ".join(str(number[u]) for u in (v, *scopes[v]))
        lines.append(f"b {bag_of[v]} {members}")
    roots = [v for v in order if not scopes[v]]
    for v in order:  # PACE wants one tree: the components' root bags hang off the last root
        if scopes[v]:
            lines.append(f"{bag_of[v]} {bag_of[scopes[v][0]]}")
        elif v != roots[-1]:
            lines.append(f"{bag_of[v]} {bag_of[roots[-1]]}")
    return "\n".join(lines) + "\n"
