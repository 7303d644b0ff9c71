"""One agent's part of a pseudo-tree the coordinator gives (its elimination tree), as pure state.

The coordinator, which reads the whole problem, may offer the elimination pseudo-tree of its
ordering engine's order (:func:`dcop.trees.induced.order_pseudo_tree`) beside the agents' DFS
candidates. There is no walk to make: each agent learns its place (its ancestors from the root,
their domain sizes, its children: the Start message's ``GivenTree``).
What remains is the sizing pass the DFS's back tokens carry: every agent sends a ``back`` token
up once all its children's have come, with its separator and its subtree's summary, so the
tree's roots report its predicted UTILs exactly as DFS roots do, and the coordinator keeps the
candidate with the smallest. A parent may not be a graph neighbour: the Setup links the agent to
it (``Setup.links``).

:class:`GivenState` answers what the agent's session asks of a :class:`~dcop.trees.dfs.DfsState`
(parent, children, path, separator, summary, done, start, receive).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dcop.errors import DcopError, ProtocolError
from dcop.sizes import entries
from dcop.trees.dfs import DfsToken, Send, TreeSummary


class GivenState:
    """Agent ``me``'s place in the given tree number ``tree``: its ancestors from the root down
    to its parent (``path``) with their ``domains``, and its ``children``; ``neighbours``: its
    graph neighbours (id -> variable), each of which must be an ancestor or a descendant."""

    def __init__(
        self,
        me: int,
        domain: int,
        neighbours: Mapping[int, str],
        path: Sequence[int],
        domains: Sequence[int],
        children: Sequence[int],
        tree: int,
    ) -> None:
        if domain < 1:
            raise DcopError(f"agent {me}: domain size {domain} < 1")
        if me in path or me in children:
            raise ProtocolError(f"agent {me}: the given tree names it as its own relative")
        self.me = me
        self.domain = domain
        self.tree = tree
        self.path = tuple(path)
        self.parent: int | None = self.path[-1] if self.path else None
        self.children = list(children)
        self.pseudo_parents = [a for a in self.path[:-1] if a in neighbours]
        self._domains = dict(zip(self.path, domains, strict=True))
        self._sep = {a for a in self.path if a in neighbours}
        self._waiting = set(children)
        self._below = TreeSummary()
        self.separator: tuple[int, ...] = ()
        self.summary = TreeSummary()
        self.done = False
        self.entered = False

    @property
    def depth(self) -> int:
        return len(self.path)

    def ancestor_domains(self) -> dict[int, int]:
        """The domain size of each ancestor (from the coordinator)."""
        return dict(self._domains)

    def start(self) -> list[Send]:
        """Begin: a leaf sends its back token at once."""
        if self.entered:
            raise ProtocolError(f"agent {self.me}: the given tree started twice")
        self.entered = True
        return self._finish() if not self._waiting else []

    def receive(self, sender: int, token: DfsToken) -> list[Send]:
        """Take a child's back token; once every child's is in, send mine."""
        if token.tree != self.tree:
            raise ProtocolError(f"agent {self.me}: a token of tree {token.tree} in {self.tree}")
        if token.kind != "back" or sender not in self._waiting:
            raise ProtocolError(
                f"agent {self.me}: a {token.kind} token from {sender} in the given tree, which "
                "takes one back token from each child"
            )
        if not set(token.separator) <= {*self.path, self.me}:
            raise ProtocolError(f"agent {self.me}: a child separator beyond my ancestors")
        self._waiting.discard(sender)
        self._sep |= set(token.separator) - {self.me}
        self._below = self._below.merge(TreeSummary(token.width, token.largest, token.total))
        return self._finish() if self.entered and not self._waiting else []

    def _finish(self) -> list[Send]:
        self.done = True
        depth = {a: k for k, a in enumerate(self.path)}
        self.separator = tuple(sorted(self._sep, key=depth.__getitem__))
        if self.parent is None:
            self.summary = self._below
            return []
        util = entries(self._domains[a] for a in self.separator)
        self.summary = self._below.merge(TreeSummary(len(self.separator), util, util))
        back = DfsToken(
            "back",
            open=(0,) * (len(self.path) + 1),
            separator=self.separator,
            width=self.summary.width,
            largest=self.summary.largest,
            total=self.summary.total,
            tree=self.tree,
        )
        return [(self.parent, back)]
