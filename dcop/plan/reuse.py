"""Plans kept within one process for the next call on the same structure.

A planner's search (the ordering engine's order, the contraction's path search) is a function
of its input's structure (variables, scopes, domain sizes) and its budget alone, the budget
spent as predicted work: the same structure gets the same plan on every call. A process that
solves it again (a notebook, a server, ``benchmarks/startup.py``'s ten calls in one process)
takes the plan made the first time instead of searching again: on a 22x22 spin glass's PR the
search was a quarter of every call. The memo is bounded: the least recently used plan goes
first, so a process that solves many structures holds a few plans only.

``DCOP_PLAN_REUSE=0`` in the environment keeps none: a benchmark that times the best of several
calls in one process (benchmarks/pr.py, gpu_be.py) times each as a fresh process runs it, its
planning included.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Generic, TypeVar

V = TypeVar("V")

#: Plans each memo holds.
PLANS_KEPT = 8
#: The environment variable that turns reuse off (``0``).
REUSE_ENV = "DCOP_PLAN_REUSE"


def reuse_on() -> bool:
    """Whether plans are kept (read at each call: a benchmark may set it after import)."""
    return os.environ.get(REUSE_ENV, "1") != "0"


class PlanMemo(Generic[V]):
    """Plans by structure key (:func:`structure_key` and the planner's own settings), the
    least recently used dropped beyond ``size``."""

    def __init__(self, size: int = PLANS_KEPT) -> None:
        self.size = size
        self._plans: OrderedDict[Hashable, V] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        """The plan kept for ``key``, or None (always, with reuse off)."""
        plan = self._plans.get(key) if reuse_on() else None
        if plan is not None:
            self._plans.move_to_end(key)
        return plan

    def put(self, key: Hashable, plan: V) -> None:
        """Keep ``plan`` for ``key`` (with reuse off, nothing is kept)."""
        if not reuse_on():
            return
        self._plans[key] = plan
        self._plans.move_to_end(key)
        while len(self._plans) > self.size:
            self._plans.popitem(last=False)

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)


#: Every memo made through :func:`memo`, for :func:`clear_all`.
_MEMOS: list[PlanMemo[object]] = []


def memo(size: int = PLANS_KEPT) -> PlanMemo[V]:
    """A new memo that :func:`clear_all` empties too."""
    made: PlanMemo[V] = PlanMemo(size)
    _MEMOS.append(made)  # type: ignore[arg-type]
    return made


def clear_all() -> None:
    """Empty every memo (tests that change a planner's constants start from none)."""
    for kept in _MEMOS:
        kept.clear()


def structure_key(
    names: Sequence[str], sizes: Mapping[str, int], scopes: Iterable[Sequence[str]]
) -> tuple[tuple[str, ...], tuple[int, ...], tuple[tuple[str, ...], ...]]:
    """What a plan depends on in its input: the variables in their order, their domain sizes,
    and the scopes in their order (the graph, and the tables a tree joins)."""
    return (tuple(names), tuple(sizes[v] for v in names), tuple(tuple(s) for s in scopes))
