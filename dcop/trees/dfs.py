"""The distributed DFS that builds DPOP's pseudo-tree, as pure per-agent state (no transport).

Each agent holds one :class:`DfsState` per candidate tree. The coordinator picks one root per
connected component (:func:`choose_roots`); a root calls :meth:`DfsState.start`, every agent feeds
each token it receives to :meth:`DfsState.receive`, and both return the tokens to send,
``[(peer, token), ...]``. The agent maps :class:`DfsToken` onto the wire; nothing here knows about
sockets, clocks or callbacks. :func:`simulate` runs the states of every agent of a graph in one
process, so tests and ``benchmarks/pseudotree.py`` exercise the code the agents run.

The walk (one token per tree, so it is sequential):

* ``child``: you are my child. Carries the path of ancestors from the root with their domain sizes
  and open counts (neighbours not yet visited). The receiver takes the sender as parent and its
  other neighbours on the path as pseudo-parents, then passes the token to its unvisited
  neighbours one at a time, in the order of the tree's heuristic.
* ``back``: my subtree is done. Carries the subtree's links to the ancestors above (pairs
  descendant, ancestor: the back edges still to be told), the ancestors' open counts, the sender's
  separator and its subtree's summary (largest separator, largest and total predicted UTIL
  entries), so every root ends knowing its component's tree cost: no sizing pass.

No token carries the visited set (it made a 1000-agent tree's tokens ~1.5 KB each, 24x the
UTILs' bytes). An agent's visited neighbours are known without it: when a child token reaches an
unvisited agent, every visited neighbour it has is on the path (a visited agent off the path has
finished, and an agent finishes only once all its neighbours are visited); while it is on the path,
its neighbours visited later are in its children's subtrees, and each comes back to it as a link in
a back token. A tree's tokens thus carry O(depth) ids, plus one pair per back edge on its way up.

Why the order matters: in a DFS the subtree of an agent is the connected component of unvisited
agents it enters, and its separator is that component's boundary: the ancestors that still have
unvisited neighbours in it. An ancestor leaves every separator below it once all its neighbours are
visited, so a good order finishes ("closes") ancestors early.

Heuristics (the order in which an agent tries its unvisited neighbours; ties by variable name, or
by a seeded hash of it when the tree has a seed):

* ``most-connected``: most neighbours first: the paper's and FRODO's default and today's agents'
  (:func:`dcop.trees.pseudotree.most_neighbours_first`); reproduces
  :func:`dcop.trees.pseudotree.dfs_pseudo_tree`.
* ``close-ancestors``: the neighbour linked to the ancestor with the fewest open neighbours left
  (compared as sorted lists of the open counts of the ancestors it links to; linking to more is
  better), then the least connected. It closes nearly finished ancestors first, as Sloan's
  profile-reducing order numbers the vertices that shrink the active front, and otherwise walks
  outwards from the least connected vertices, as Cuthill-McKee's order does; like both, it works
  best from a peripheral start (``least-connected`` roots, :func:`choose_roots`). Needs 2-hop
  knowledge (each neighbour's neighbour list, exchanged once before the DFS) and the open counts
  the token carries.
* ``max-cardinality``: most neighbours among the ancestors first, then most connected: maximum
  cardinality search restricted to a DFS. Needs 2-hop knowledge.
* ``random``: a seeded random order (FRODO's ``RandScoringHeuristic``), for restarts.

Candidate trees (:class:`Candidate`: heuristic, root rule and rank, seed) are independent walks,
one token each, so agents can build K of them at once; each root reports its component's
:class:`TreeSummary` and the coordinator keeps the tree :func:`choose_candidate` picks.

FRODO's DFS heuristics (``frodo2.algorithms.varOrdering.dfs.DFSgeneration``) score neighbours by a
static score: most or least connected, smallest domain, variable name or random, with the same
scores for root election; ``close-ancestors`` and ``max-cardinality`` use the walk's state instead.

It lives in the core (:mod:`dcop.trees`) because both sides run it: every agent steps its own
:class:`DfsState`, and the coordinator builds the first candidate in process (:func:`simulate`) to
decide how many candidates a run needs (``--trees`` auto), without importing any agent code.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from dcop.errors import DcopError, ProtocolError
from dcop.sizes import add, entries, total
from dcop.trees.candidates import Candidate, check_heuristic, seeded_rank
from dcop.trees.pseudotree import PseudoTree

#: today's tree: most-connected first, from the most connected agent
MOST_CONNECTED = Candidate()
NEEDS_NEIGHBOURHOODS = ("close-ancestors", "max-cardinality")
TOKEN_KINDS = ("child", "back")
_NEVER = sys.maxsize  # ends each sorted list of open counts: of two lists with the same prefix,
# the longer one (more ancestors linked) compares smaller


# ---- what travels -------------------------------------------------------------------------------
@dataclass(frozen=True)
class DfsToken:
    """One hop of the DFS token of candidate tree ``tree``.

    ``path``, ``domains`` (child): the receiver's ancestors from the root, ending with the sender,
    and their domain sizes. ``open`` (child): each ancestor's neighbours not yet visited (the
    receiver decrements its own ancestors); (back): the same for the sender's ancestors (the
    receiver's path and the receiver itself), after the sender's subtree. ``links`` (back): the
    back edges ``(descendant, ancestor)`` of the sender's subtree to the receiver and above.
    ``separator``, ``width``, ``largest``, ``total`` (back): the sender's separator, and its
    subtree's largest separator size, largest and total predicted UTIL entries (capped floats:
    :mod:`dcop.sizes`)."""

    kind: Literal["child", "back"]
    path: tuple[int, ...] = ()
    domains: tuple[int, ...] = ()
    open: tuple[int, ...] = ()
    links: tuple[tuple[int, int], ...] = ()
    separator: tuple[int, ...] = ()
    width: int = 0
    largest: float = 0.0
    total: float = 0.0
    tree: int = 0


Send = tuple[int, DfsToken]


@dataclass(frozen=True)
class TreeSummary:
    """The predicted cost of a (sub)tree: largest separator size, largest and total UTIL entries
    (a product of domain sizes per non-root agent, as a capped float: :mod:`dcop.sizes`). For a
    root: its component's tree."""

    width: int = 0
    largest: float = 0.0
    total: float = 0.0

    def merge(self, other: TreeSummary) -> TreeSummary:
        """Both (sub)trees together."""
        return TreeSummary(
            max(self.width, other.width),
            max(self.largest, other.largest),
            add(self.total, other.total),
        )


# ---- heuristics and roots -----------------------------------------------------------------------
# ---- one agent's state --------------------------------------------------------------------------
class DfsState:
    """One agent's part of one candidate tree's DFS.

    Parameters
    ----------
    me, domain
        This agent's id and domain size.
    neighbours
        Neighbour id -> variable name (names break ties, the same way in every agent).
    degrees
        Neighbour id -> its number of neighbours; derived from ``neighbourhoods`` when omitted.
    neighbourhoods
        Neighbour id -> its neighbours' ids (2-hop knowledge, exchanged once before the DFS;
        ``max-cardinality`` and ``close-ancestors`` need it).
    heuristic, seed
        The order in which unvisited neighbours are tried (:data:`HEURISTICS`); a seed replaces
        the tie-break by name with a seeded hash of the name.
    tree
        The candidate tree this state builds; tokens of other trees are refused.
    """

    def __init__(
        self,
        me: int,
        domain: int,
        neighbours: Mapping[int, str],
        *,
        degrees: Mapping[int, int] | None = None,
        neighbourhoods: Mapping[int, Collection[int]] | None = None,
        heuristic: str = "most-connected",
        seed: int | None = None,
        tree: int = 0,
    ) -> None:
        check_heuristic(heuristic)
        if domain < 1:
            raise DcopError(f"agent {me}: domain size {domain} < 1")
        self.me = me
        self.domain = domain
        self.names = dict(neighbours)
        self.neighbourhoods = {i: frozenset(ns) for i, ns in (neighbourhoods or {}).items()}
        self.degrees = dict(
            degrees if degrees is not None else {i: len(n) for i, n in self.neighbourhoods.items()}
        )
        lacking = [i for i in self.names if i not in self.degrees]
        if lacking:
            raise DcopError(f"agent {me}: no degree known for neighbour {lacking[0]}")
        if heuristic in NEEDS_NEIGHBOURHOODS:
            lacking = [i for i in self.names if i not in self.neighbourhoods]
            if lacking:
                raise DcopError(
                    f"agent {me}: {heuristic} needs the neighbour list of neighbour {lacking[0]}"
                )
        self.heuristic = heuristic
        self.seed = seed
        self.tree = tree
        # the result
        self.parent: int | None = None
        self.path: tuple[int, ...] = ()
        self.children: list[int] = []
        self.pseudo_parents: list[int] = []
        self.separator: tuple[int, ...] = ()
        self.summary = TreeSummary()  # of my subtree; a root's: its component's tree
        self.done = False
        # the walk
        self.entered = False
        #: my neighbours visited so far (and I)
        self.visited: set[int] = set()
        #: back edges of my subtree to my parent and above, for my back token
        self._up: list[tuple[int, int]] = []
        self.waiting_on: int | None = None
        self._domains: dict[int, int] = {}  # the ancestors' domain sizes
        self._open: dict[int, int] = {}  # the ancestors' neighbours not yet visited
        self._sep: set[int] = set()
        self._below = TreeSummary()  # the children's subtrees so far

    @property
    def depth(self) -> int:
        return len(self.path)

    def ancestor_domains(self) -> dict[int, int]:
        """The domain size of each ancestor (from the child token that reached me)."""
        return dict(self._domains)

    # ---- entry points -------------------------------------------------------------------
    def start(self) -> list[Send]:
        """Begin the DFS as the root of a component; return the tokens to send."""
        if self.entered:
            raise ProtocolError(f"agent {self.me}: told to be a root after joining a DFS")
        self.entered = True
        self.visited = {self.me}
        return self._next()

    def receive(self, sender: int, token: DfsToken) -> list[Send]:
        """Take one token from neighbour ``sender``; return the tokens to send."""
        if token.tree != self.tree:
            raise ProtocolError(
                f"agent {self.me}: a token of tree {token.tree} in tree {self.tree}"
            )
        if sender not in self.names:
            raise ProtocolError(f"agent {self.me}: a DFS token from {sender}, not a neighbour")
        if token.kind not in TOKEN_KINDS:
            raise ProtocolError(f"agent {self.me}: a DFS token of kind {token.kind!r}")
        if any(c < 0 for c in token.open):
            raise ProtocolError(f"agent {self.me}: a DFS token with a negative open count")
        if token.kind == "child":
            return self._on_child(sender, token)
        if sender != self.waiting_on:
            raise ProtocolError(
                f"agent {self.me}: a back token from {sender}, not from the child I wait for"
            )
        return self._on_back(token)

    # ---- the walk -----------------------------------------------------------------------
    def _on_child(self, sender: int, token: DfsToken) -> list[Send]:
        if self.entered:
            raise ProtocolError(f"agent {self.me}: a second DFS child token (from {sender})")
        path = token.path
        if not path or path[-1] != sender:
            raise ProtocolError(
                f"agent {self.me}: a child token whose path does not end at its sender"
            )
        if len(set(path)) != len(path) or self.me in path:
            raise ProtocolError(f"agent {self.me}: a child token whose path has a cycle")
        if len(token.domains) != len(path) or len(token.open) != len(path):
            raise ProtocolError(
                f"agent {self.me}: a child token without a domain size and count per ancestor"
            )
        if min(token.domains) < 1:
            raise ProtocolError(f"agent {self.me}: a child token with a domain size < 1")
        if token.links:
            raise ProtocolError(f"agent {self.me}: a child token with links")
        self.entered = True
        self.parent = sender
        self.path = path
        self._domains = dict(zip(path, token.domains, strict=True))
        self.pseudo_parents = [a for a in path[:-1] if a in self.names]
        # an unvisited agent's visited neighbours are all on the path (see the module docstring)
        self.visited = {self.me, *(a for a in path if a in self.names)}
        self._open = dict(zip(path, token.open, strict=True))
        for a in (*self.pseudo_parents, sender):  # I am no longer open to my ancestors
            self._open[a] = max(0, self._open[a] - 1)
        self._sep = {sender, *self.pseudo_parents}
        return self._next()

    def _on_back(self, token: DfsToken) -> list[Send]:
        if not set(token.separator) <= {*self.path, self.me}:
            raise ProtocolError(f"agent {self.me}: a child separator beyond my ancestors")
        if len(token.open) != len(self.path) + 1:
            raise ProtocolError(f"agent {self.me}: a back token without a count per ancestor")
        above = set(self.path)
        for x, a in token.links:
            if a == self.me:
                if x not in self.names:
                    raise ProtocolError(f"agent {self.me}: a back edge from {x}, not a neighbour")
                self.visited.add(x)
            elif a in above:
                self._up.append((x, a))
            else:
                raise ProtocolError(f"agent {self.me}: a back edge to {a}, not an ancestor")
        self.waiting_on = None
        self._open = dict(zip(self.path, token.open, strict=False))  # mine is recounted
        self._sep |= set(token.separator) - {self.me}
        self._below = self._below.merge(TreeSummary(token.width, token.largest, token.total))
        return self._next()

    def _next(self) -> list[Send]:
        candidates = [u for u in self.names if u not in self.visited]
        if not candidates:
            return self._finish()
        u = min(candidates, key=self._key())
        child = DfsToken(
            "child",
            path=(*self.path, self.me),
            domains=(*(self._domains[a] for a in self.path), self.domain),
            open=self._counts(),
            tree=self.tree,
        )
        self.children.append(u)
        self.waiting_on = u
        self.visited.add(u)
        return [(u, child)]

    def _finish(self) -> list[Send]:
        self.done = True
        depth = {a: k for k, a in enumerate(self.path)}
        self.separator = tuple(sorted(self._sep, key=depth.__getitem__))
        if self.parent is None:
            self.summary = self._below  # a root sends no UTIL
            return []
        size = entries(self._domains[a] for a in self.separator)
        self.summary = self._below.merge(TreeSummary(len(self.separator), size, size))
        back = DfsToken(
            "back",
            open=tuple(self._open[a] for a in self.path),
            links=(*self._up, *((self.me, a) for a in self.pseudo_parents)),
            separator=self.separator,
            width=self.summary.width,
            largest=self.summary.largest,
            total=self.summary.total,
            tree=self.tree,
        )
        return [(self.parent, back)]

    # ---- helpers ------------------------------------------------------------------------
    def _counts(self) -> tuple[int, ...]:
        """Unvisited neighbours of each ancestor and of me, for the token."""
        mine = sum(1 for u in self.names if u not in self.visited)
        return (*(self._open[a] for a in self.path), mine)

    def _key(self) -> Callable[[int], tuple[object, ...]]:
        names, degrees, seed, hoods = self.names, self.degrees, self.seed, self.neighbourhoods

        def tie(u: int) -> object:
            return names[u] if seed is None else seeded_rank(seed, names[u])

        if self.heuristic == "most-connected":
            return lambda u: (-degrees[u], tie(u))
        if self.heuristic == "max-cardinality":
            on_path = {*self.path, self.me}
            return lambda u: (-len(hoods[u] & on_path), -degrees[u], tie(u))
        if self.heuristic == "close-ancestors":
            opened = self._open
            # the ancestors it links to, fewest open neighbours first; linking to more is better
            return lambda u: (
                (*sorted(opened[a] for a in hoods[u] if a in opened), _NEVER),
                degrees[u],  # then the least connected, as Cuthill-McKee: measured much better
                tie(u),
            )
        return lambda u: (seeded_rank(seed or 0, names[u]),)


# ---- whole trees (pure) -------------------------------------------------------------------------
def tree_separators(
    parent: Mapping[int, int | None], pseudo_parents: Mapping[int, Collection[int]]
) -> dict[int, frozenset[int]]:
    """Every agent's separator, bottom-up as a sizing pass computes it:
    sep(x) = parent(x) + pseudo-parents(x) + the children's separators - {x}."""
    children: dict[int, list[int]] = {v: [] for v in parent}
    for v, p in parent.items():
        if p is not None:
            if p not in children:
                raise DcopError(f"agent {v}'s parent {p} is not in the tree")
            children[p].append(v)
    order = [v for v, p in parent.items() if p is None]  # roots, then pre-order
    for v in order:
        order.extend(children[v])
    if len(order) != len(parent):
        raise DcopError("the parent links do not form a forest")
    sep: dict[int, frozenset[int]] = {}
    for v in reversed(order):
        s = set(pseudo_parents.get(v, ()))
        p = parent[v]
        if p is not None:
            s.add(p)
        for c in children[v]:
            s |= sep[c]
        s.discard(v)
        sep[v] = frozenset(s)
    return sep


def util_entries(
    separators: Mapping[int, Collection[int]],
    domains: Mapping[int, int],
    parent: Mapping[int, int | None],
) -> dict[int, float]:
    """Predicted UTIL entries of every non-root agent: the product of its separator's domains
    (a capped float, exact below 2^53)."""
    return {
        v: entries(domains[u] for u in s) for v, s in separators.items() if parent[v] is not None
    }


def summarize(
    parent: Mapping[int, int | None],
    pseudo_parents: Mapping[int, Collection[int]],
    domains: Mapping[int, int],
) -> TreeSummary:
    """The whole forest's :class:`TreeSummary`, from every agent's parent and pseudo-parents."""
    seps = tree_separators(parent, pseudo_parents)
    sizes = util_entries(seps, domains, parent)
    return TreeSummary(
        max((len(s) for s in seps.values()), default=0),
        max(sizes.values(), default=0.0),
        total(sizes.values()),
    )


def combine(summaries: Collection[TreeSummary]) -> TreeSummary:
    """A forest's summary from its components' summaries (what its roots report)."""
    out = TreeSummary()
    for s in summaries:
        out = out.merge(s)
    return out


def choose_candidate(candidates: Sequence[TreeSummary | None]) -> int:
    """The index of the candidate tree to run DPOP on: the smallest largest UTIL, then the
    smallest total UTIL, then the earliest. ``None`` marks a candidate that did not finish."""
    ok = [(c.largest, c.total, k) for k, c in enumerate(candidates) if c is not None]
    if not ok:
        raise DcopError("no candidate pseudo-tree was built")
    return min(ok)[2]


# ---- candidates and the in-process simulator ----------------------------------------------------
@dataclass
class DfsRun:
    """One candidate tree built in process: every agent's final state and the token count."""

    candidate: Candidate
    roots: list[int]
    states: dict[int, DfsState]
    messages: int
    summary: TreeSummary

    def parents(self) -> dict[int, int | None]:
        return {i: s.parent for i, s in self.states.items()}

    def pseudo_parents(self) -> dict[int, list[int]]:
        return {i: list(s.pseudo_parents) for i, s in self.states.items()}

    def pseudo_tree(self, names: Mapping[int, str]) -> PseudoTree:
        """The tree as a :class:`dcop.trees.pseudotree.PseudoTree` (variable names)."""
        return to_pseudo_tree(self.states, self.roots, names)


def to_pseudo_tree(
    states: Mapping[int, DfsState], roots: Sequence[int], names: Mapping[int, str]
) -> PseudoTree:
    """Agents' finished DFS states as a :class:`~dcop.trees.pseudotree.PseudoTree` (DFS pre-order)."""
    order: list[int] = []
    stack = list(reversed(roots))
    while stack:
        v = stack.pop()
        order.append(v)
        stack.extend(reversed(states[v].children))
    parent: dict[str, str | None] = {}
    pseudo_children: dict[str, list[str]] = {names[v]: [] for v in order}
    for v in order:
        p = states[v].parent
        parent[names[v]] = names[p] if p is not None else None
        for a in states[v].pseudo_parents:
            pseudo_children[names[a]].append(names[v])
    return PseudoTree(
        parent=parent,
        children={names[v]: [names[c] for c in states[v].children] for v in order},
        pseudo_parents={names[v]: [names[a] for a in states[v].pseudo_parents] for v in order},
        pseudo_children=pseudo_children,
        roots=[names[r] for r in roots],
        order=[names[v] for v in order],
        depth={names[v]: states[v].depth for v in order},
    )


def simulate(
    adjacency: Mapping[int, Collection[int]],
    names: Mapping[int, str],
    domains: Mapping[int, int],
    candidate: Candidate = MOST_CONNECTED,
    *,
    roots: Sequence[int] | None = None,
    tree: int = 0,
) -> DfsRun:
    """Build one candidate tree in process: one :class:`DfsState` per agent (given its neighbours'
    names and neighbour lists, as exchanged before the DFS), the roots started in order, and every
    returned token delivered through one FIFO queue (deterministic)."""
    adj = {i: frozenset(ns) for i, ns in adjacency.items()}
    for i, ns in adj.items():
        if i in ns or any(i not in adj.get(u, ()) for u in ns):
            raise DcopError(f"the adjacency is not symmetric and loop-free at agent {i}")
    if roots is None:
        roots = candidate.roots(adj, names)
    states = {
        i: DfsState(
            i,
            domains[i],
            {u: names[u] for u in ns},
            neighbourhoods={u: adj[u] for u in ns},
            heuristic=candidate.heuristic,
            seed=candidate.seed,
            tree=tree,
        )
        for i, ns in adj.items()
    }
    queue: deque[tuple[int, int, DfsToken]] = deque()
    messages = 0
    for r in roots:
        queue.extend((r, peer, token) for peer, token in states[r].start())
        while queue:
            sender, receiver, token = queue.popleft()
            messages += 1
            out = states[receiver].receive(sender, token)
            queue.extend((receiver, peer, t) for peer, t in out)
    if not all(s.done for s in states.values()):
        raise DcopError("the DFS ended with agents outside every tree (one root per component?)")
    summary = combine([states[r].summary for r in roots])
    return DfsRun(candidate, list(roots), states, messages, summary)


def build_candidates(
    adjacency: Mapping[int, Collection[int]],
    names: Mapping[int, str],
    domains: Mapping[int, int],
    candidates: Sequence[Candidate],
) -> tuple[list[DfsRun], int]:
    """Build every candidate tree (independent walks: agents may run them at once) and return
    them with the index :func:`choose_candidate` picks from the roots' summaries."""
    runs = [simulate(adjacency, names, domains, c, tree=k) for k, c in enumerate(candidates)]
    return runs, choose_candidate([r.summary for r in runs])
