"""What an agent's UTIL message will hold, planned from scopes before any table exists.

The sizing rides on the DFS: when an agent's subtree is done, it knows the scopes of its own
tables, the ancestors on its path (with their domain sizes) and the scopes of the tables each
child will send up. :func:`plan_util` then plans its bucket exactly as the UTIL phase will run it
(the same bucket order, the same mini-bucket partition, :func:`dcop.buckets.plan_bucket`), for
every mini-bucket size the run may choose. The plans travel up in the DFS back tokens, so a root
ends knowing the largest UTIL of its tree for each choice, and the coordinator can refuse or pick
ADPOP's z before any table is built.

Scopes here are tuples of agent ids (an agent owns one variable): the partition depends only on
which variables a scope holds and in what order the tables come, so planning over ids and running
over variable names give the same mini-buckets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dcop.buckets import plan_bucket
from dcop.sizes import add, entries, total

Scope = tuple[int, ...]


@dataclass(frozen=True)
class UtilPlan:
    """One agent's UTIL message for one mini-bucket size: the scopes of the tables it sends up
    (its mini-bucket outputs, then its children's tables that do not hold its variable) and
    their entries in all (a capped float: :mod:`dcop.sizes`)."""

    tables: tuple[Scope, ...]
    entries: float
    #: mini-buckets: 1 means the whole bucket in one (then every larger z plans the same)
    groups: int = 1
    #: entries each mini-bucket joins (where it runs: :func:`dcop.placement.place`)
    joined: tuple[int, ...] = ()


def bucket_order(
    me: int, own: Sequence[Scope], received: Sequence[Scope]
) -> tuple[list[Scope], list[Scope]]:
    """The bucket (own tables, then the received tables that hold ``me``, in arrival order) and
    the received tables that go up unchanged (they do not hold ``me``)."""
    bucket = [*own, *(s for s in received if me in s)]
    passing = [s for s in received if me not in s]
    return bucket, passing


def plan_util(
    me: int,
    own: Sequence[Scope],
    children: Sequence[Sequence[Scope]],
    domains: Mapping[int, int],
    z: int | None,
) -> UtilPlan:
    """Plan my UTIL message: ``own`` are the scopes of my tables whose other variables are my
    ancestors, ``children`` the scopes each child sends (in the order of my children), ``z`` the
    mini-bucket size (None: DPOP, one bucket)."""
    received = [s for child in children for s in child]
    bucket, passing = bucket_order(me, own, received)
    sizes = {str(a): d for a, d in domains.items()}
    plans = plan_bucket([tuple(map(str, s)) for s in bucket], str(me), sizes, z)
    outputs = [tuple(int(a) for a in p.out_scope) for p in plans if p.out_scope]
    tables = (*outputs, *passing)
    size = total(entries(domains[a] for a in s) for s in tables)
    return UtilPlan(tuple(tables), size, len(plans), tuple(p.joined_entries for p in plans))


@dataclass(frozen=True)
class SizeSummary:
    """A subtree's largest UTIL message (entries, and which agent sends it) and its total, for
    one mini-bucket size (entries as capped floats: :mod:`dcop.sizes`)."""

    largest: float = 0.0
    agent: int | None = None
    total: float = 0.0

    def merge(self, other: SizeSummary) -> SizeSummary:
        """Both subtrees (ties keep the smaller agent id, so merging is order-independent)."""
        if (other.largest, -(other.agent or 0)) > (self.largest, -(self.agent or 0)):
            best, at = other.largest, other.agent
        else:
            best, at = self.largest, self.agent
        return SizeSummary(best, at, add(self.total, other.total))


def subtree_summaries(
    me: int,
    plans: Sequence[UtilPlan],
    children: Sequence[Sequence[SizeSummary]],
    is_root: bool,
) -> list[SizeSummary]:
    """For each mini-bucket size: my subtree's summary (my own message counts unless I am a root,
    which sends none)."""
    out = []
    for k, plan in enumerate(plans):
        s = SizeSummary() if is_root else SizeSummary(plan.entries, me, plan.entries)
        for child in children:
            s = s.merge(child[k])
        out.append(s)
    return out
