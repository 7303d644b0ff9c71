"""The coordinator's decision, pure: which candidate pseudo-tree a run keeps, and which algorithm
and mini-bucket size run on it.

Everything here is a function of the roots' reports (each candidate's UTIL sizings for DPOP and
for every ADPOP z, :mod:`dcop.trees.sizing`) and of the run's limits: no message, no socket, no
clock. :func:`choose` keeps the tree (:func:`choose_tree`) and decides the algorithm
(:func:`choose_algorithm`); a run that cannot fit is refused there (``TableTooLarge``), before
any table is built, naming the agent, the size and the largest z that fits.

A further distributed algorithm is one more branch of :func:`choose_algorithm`: given the kept
tree's sizings and the :class:`Limits`, it returns a :class:`Decision` (algorithm, z, reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dcop.choices import DistributedAlgo, TreeName
from dcop.errors import TableTooLarge
from dcop.protocol import RunSpec, Sizing
from dcop.protocol.messages import ClusterCut, sizing_at
from dcop.protocol.runspec import sizing_choices
from dcop.results.run import TreeChoice
from dcop.sizes import entries, total
from dcop.trees.cutset import AGENT_BASE_BYTES, CUT_TIME_SLACK, MAX_CONTEXTS, cut_seconds

#: A UTIL message's header and per-table framing, beside its entries (bytes; generous).
UTIL_OVERHEAD_BYTES = 4096


#: MAR's down pass (the bucket's beliefs, joined, and the messages to the children), in UTILs of
#: the largest size, beside the up pass (measured: 230 MiB more than PR for a 64 MiB UTIL).
MAR_DOWN_UTILS = 3

#: How the run's pseudo-tree is chosen: ``auto`` offers the coordinator's elimination tree beside
#: the agents' DFS candidates where it is narrower than the first DFS tree, and keeps the
#: candidate with the smallest predicted UTILs; ``dfs`` builds the agents' DFS trees only (for
#: deployments whose agents hold their own problem and link to their neighbours only);
#: ``elimination`` runs the elimination tree alone (no DFS tree is built: no token walk).
TREE_POLICIES: tuple[str, ...] = tuple(t.value for t in TreeName)

#: A candidate's kind: built by the agents' DFS, or the coordinator's elimination tree.
DFS_KIND = "dfs"
ELIMINATION_KIND = "elimination"


def agent_peak_bytes(
    part_bytes: float, largest_bytes: float, total_bytes: float, marginals: bool = False
) -> float:
    """An agent's planned peak: its base, its own tables (the received frame and its backend
    copy), the UTIL it builds, and the children's UTILs it holds meanwhile (at most the whole
    tree's, at most twice its own: issue 33 item 7 measured 2.07x the UTIL for a chain of
    large UTILs); with ``marginals`` (MAR) also its down pass. ``--max-memory`` caps this for
    every agent."""
    held = min(max(0.0, total_bytes - largest_bytes), 2 * largest_bytes)
    down = MAR_DOWN_UTILS * largest_bytes if marginals else 0.0
    return AGENT_BASE_BYTES + 2 * part_bytes + largest_bytes + held + down


def combine_sizings(per_root: list[tuple[Sizing, ...]], count: int) -> list[Sizing]:
    """A forest's sizings for all ``count`` choices from its components' (each list may stop
    where it becomes DPOP's): per mini-bucket size, the largest UTIL over all components, and
    the total."""
    out = []
    for j in range(count):
        at = [sizing_at(s, j) for s in per_root]
        best = max(at, key=lambda s: (s.largest, -(s.agent or 0)))
        out.append(Sizing((), best.largest, best.agent, total(s.total for s in at)))
    return out


@dataclass(frozen=True)
class Limits:
    """What a UTIL must fit: the message limit, the memory limit per agent (None: none), the
    run's table item size, whether the agents also hold MAR's down pass, and each agent's own
    tables in bytes (its Setup's)."""

    message_bytes: int
    memory_bytes: int | None
    itemsize: int
    marginals: bool
    part_bytes: Mapping[int, int]

    @classmethod
    def of(cls, spec: RunSpec, itemsize: int, part_bytes: Mapping[int, int]) -> Limits:
        return cls(
            spec.max_message_bytes, spec.max_memory_bytes, itemsize, spec.task == "mar", part_bytes
        )

    def fits(self, sizing: Sizing) -> bool:
        """Whether a tree of this sizing fits: its largest UTIL within the message limit, and
        the agent that builds it (or, unnamed, the one with the most tables) within memory."""
        nbytes = sizing.largest * self.itemsize
        if nbytes + UTIL_OVERHEAD_BYTES > self.message_bytes:
            return False
        if self.memory_bytes is None:
            return True
        who = sizing.agent
        part = (
            self.part_bytes.get(who, 0)
            if who is not None
            else max(self.part_bytes.values(), default=0)
        )
        peak = agent_peak_bytes(part, nbytes, sizing.total * self.itemsize, self.marginals)
        return peak <= self.memory_bytes


@dataclass(frozen=True)
class Decision:
    """What runs on the kept tree: the algorithm (``dpop``, ``adpop`` or ``mbdpop``), its
    mini-bucket size (None: exact) and why; MB-DPOP's clusters (their cuts)."""

    algo: str
    z: int | None
    reason: str
    clusters: tuple[ClusterCut, ...] = ()


def main_index(spec: RunSpec, zs: Sequence[int | None]) -> int:
    """The sizing trees are compared by: the run's own z for ADPOP, else DPOP's."""
    return zs.index(spec.z) if spec.algo == DistributedAlgo.adpop.value else 0


def choose_tree(
    per_tree: Sequence[Sequence[Sizing]],
    main: int,
    kinds: Sequence[str],
    policy: str,
    elimination_note: str,
) -> tuple[int, str]:
    """The candidate with the smallest largest UTIL (then total, then number) at sizing ``main``,
    among the elimination tree alone under ``--tree elimination``; and why."""
    allowed = [
        k
        for k in range(len(per_tree))
        if policy != ELIMINATION_KIND or kinds[k] == ELIMINATION_KIND
    ]
    tree = min(
        allowed or range(len(per_tree)),
        key=lambda k: (per_tree[k][main].largest, per_tree[k][main].total, k),
    )
    dfs = [k for k in range(len(per_tree)) if kinds[k] == DFS_KIND]
    best_dfs = min((per_tree[k][main].largest for k in dfs), default=None)
    if kinds[tree] == ELIMINATION_KIND:
        why = (
            f"the elimination tree ({elimination_note}); its largest UTIL "
            f"{per_tree[tree][main].largest:.4g} entries, "
            + (
                f"the best DFS tree's {best_dfs:.4g}"
                if best_dfs is not None
                else "no DFS tree built"
            )
        )
        if policy == ELIMINATION_KIND:
            why = "--tree elimination: " + why
        return tree, why
    return tree, (
        f"DFS candidate {tree}: the smallest largest UTIL ({best_dfs:.4g} entries); the "
        f"elimination tree was {elimination_note}"
    )


def choose_algorithm(
    spec: RunSpec,
    zs: Sequence[int | None],
    sizings: Sequence[Sizing],
    limits: Limits,
    name: Callable[[int], str],
) -> Decision:
    """The algorithm and z that run on a tree of ``sizings`` (one per entry of ``zs``: DPOP's,
    then each ADPOP z), within ``limits``: ``dpop`` and ``adpop`` run as asked where they fit;
    ``auto`` runs DPOP where it fits, else the largest ADPOP z that does. Raises
    ``TableTooLarge`` (naming the agent, the size and the largest z that fits) where what was
    asked cannot fit. ``name(agent)`` names an agent in that refusal."""
    main = main_index(spec, zs)
    fitting = [z for j, z in enumerate(zs) if z is not None and limits.fits(sizings[j])]
    largest_z = max(fitting) if fitting else None
    if spec.algo == DistributedAlgo.auto.value:
        if limits.fits(sizings[0]):
            return Decision(
                DistributedAlgo.dpop.value, None, "auto: DPOP's largest UTIL fits the limits"
            )
        if largest_z is not None:
            return Decision(
                DistributedAlgo.adpop.value,
                largest_z,
                f"auto: DPOP's largest UTIL does not fit the limits; {largest_z} is the largest "
                "ADPOP z that does",
            )
    elif limits.fits(sizings[main]):
        return Decision(spec.algo, zs[main], f"--algo {spec.algo} fits the limits")
    raise TableTooLarge(refusal(spec, sizings[main], zs[main], limits, largest_z, name))


def choose_cut(
    spec: RunSpec,
    clusters: Sequence[tuple[ClusterCut, ...]],
    allowed: Sequence[int],
    dpop_tree: int,
    dpop_fits: bool,
    time_left: float | None,
) -> tuple[int, Decision] | None:
    """MB-DPOP's tree (the candidate whose cuts are predicted quickest) and its clusters, or None
    where it does not run: not asked (``mbdpop`` or ``auto`` on minimisation), DPOP's tree fits
    every limit (``--width`` too: no cluster; plain DPOP then, whatever was asked), or auto finds
    the predicted work beyond the time left. An asked MB-DPOP whose largest cut passes
    :data:`MAX_CONTEXTS` contexts, or whose predicted time passes CUT_TIME_SLACK times the time
    left, is refused in one line."""
    if spec.algo not in (DistributedAlgo.mbdpop.value, DistributedAlgo.auto.value):
        return None
    if spec.summing or not clusters:
        return None
    memory = spec.max_memory_bytes
    # DPOP's own sizing (the run's dtype) decides the bytes; a --width needs no cluster
    if dpop_fits and (spec.width is None or not clusters[dpop_tree]):
        return None
    # the quickest cuts; among equals DPOP's own tree (the smallest largest UTIL)
    tree = min(allowed, key=lambda k: (cut_seconds(clusters[k]), k != dpop_tree, k))
    seconds = cut_seconds(clusters[tree])
    left = time_left if time_left is not None else float("inf")
    contexts = max((entries(c.domains) for c in clusters[tree]), default=0.0)
    if spec.algo == DistributedAlgo.auto.value and (seconds > left or contexts > MAX_CONTEXTS):
        return None
    limits = (
        "what an agent holds"
        + (f" (a quarter of --max-memory {memory / 2**20:g} MiB)" if memory else "")
        + (f" and width {spec.width}" if spec.width else "")
    )
    if contexts > MAX_CONTEXTS:
        raise TableTooLarge(
            f"MB-DPOP's largest cut has at least {contexts:.4g} contexts (more than "
            f"{MAX_CONTEXTS:.0e}) "
            f"at {limits}; allow more (--max-memory, --width), or run --algo adpop for bounds"
        )
    if seconds > CUT_TIME_SLACK * left:
        raise TableTooLarge(
            f"MB-DPOP's cut would take about {seconds:.3g} s ({contexts:.4g} contexts in the "
            f"largest cluster) at {limits}, over {CUT_TIME_SLACK:g}x the {left:.3g} s left of "
            "--timeout; allow more (--max-memory, --width, --timeout), or run --algo adpop for "
            "bounds"
        )
    parts = f"UTILs over the message limit of {spec.max_message_bytes / 2**20:g} MiB go up in parts"
    if not clusters[tree]:
        reason = f"MB-DPOP: DPOP's largest UTIL passes the limits; {parts}, no cut needed"
    else:
        reason = (
            f"MB-DPOP: DPOP's largest UTIL passes the limits; {parts}; "
            f"{len(clusters[tree])} cluster(s) with cuts of "
            f"{', '.join(str(len(c.cut)) for c in clusters[tree])} variable(s) where a UTIL "
            f"passes {limits}, predicted {seconds:.3g} s"
        )
    return tree, Decision(DistributedAlgo.mbdpop.value, None, reason, clusters[tree])


def refusal(
    spec: RunSpec,
    sizing: Sizing,
    z: int | None,
    limits: Limits,
    fit: int | None,
    name: Callable[[int], str],
) -> str:
    """Why a run is refused before any table is built: what would not fit (the message, or the
    agent's whole planned peak where the message fits), and what would."""
    who = name(sizing.agent) if sizing.agent is not None else "an agent"
    what = "DPOP" if z is None else f"ADPOP(z={z})"
    nbytes = sizing.largest * limits.itemsize
    memory = spec.max_memory_bytes
    if nbytes + UTIL_OVERHEAD_BYTES > spec.max_message_bytes or memory is None:
        over = f"> the message limit of {spec.max_message_bytes / 2**20:g} MiB"
    else:  # the message fits: the agent's whole planned peak is what does not
        part = (
            limits.part_bytes.get(sizing.agent, 0)
            if sizing.agent is not None
            else max(limits.part_bytes.values(), default=0)
        )
        peak = agent_peak_bytes(part, nbytes, sizing.total * limits.itemsize, limits.marginals)
        down = " and its down pass" if limits.marginals else ""
        over = (
            f"and that agent's planned peak (its tables, that UTIL, its children's{down}) "
            f"of {peak / 2**20:.4g} MiB > the memory limit of {memory / 2**20:g} MiB"
        )
    way = (
        f"the largest ADPOP z that fits is {fit} (--algo adpop --z {fit}, or --algo auto)"
        if fit is not None
        else "no ADPOP z fits either, not even z=1"
    )
    if z is None and not spec.summing:
        way += "; --algo mbdpop answers exactly within the limits (parts, or cuts)"
    if spec.summing:
        # PR/MAR have no mini-bucket fallback here: say where an exact answer may still be
        way = (
            f"--task {spec.task} runs exact DPOP only; `dcop solve --task "
            f"{spec.task}` eliminates along the cheapest centralized order"
        )
    return (
        f"{what}'s largest UTIL, from {who}, would hold {sizing.largest:.4g} entries "
        f"({nbytes / 2**20:.4g} MiB) {over}; {way}; refused before any table was built"
    )


def choose(
    spec: RunSpec,
    reports: Sequence[Sequence[tuple[int, tuple[Sizing, ...]]]],
    kinds: Sequence[str],
    policy: str,
    elimination_note: str,
    limits: Limits,
    name: Callable[[int], str],
    clusters: Sequence[tuple[ClusterCut, ...]] = (),
    time_left: float | None = None,
) -> tuple[TreeChoice, Decision]:
    """The kept tree and what runs on it, from each candidate's roots' reports ``(width,
    sizings)`` (candidate k's in ``reports[k]``, its kind in ``kinds[k]``) and, for MB-DPOP, its
    clusters (``clusters[k]``; ``time_left``: of the run's timeout)."""
    zs = sizing_choices(spec)
    main = main_index(spec, zs)
    per_tree = [combine_sizings([s for _, s in roots], len(zs)) for roots in reports]
    widths = [max(w for w, _ in roots) for roots in reports]
    tree, why = choose_tree(per_tree, main, kinds, policy, elimination_note)
    sizings = per_tree[tree]
    allowed = [
        k
        for k in range(len(per_tree))
        if policy != ELIMINATION_KIND or kinds[k] == ELIMINATION_KIND
    ]
    cut = choose_cut(
        spec, clusters, allowed or range(len(per_tree)), tree, limits.fits(sizings[0]), time_left
    )
    if cut is not None:
        tree, decision = cut
        sizings, why = per_tree[tree], decision.reason
    else:
        decision = choose_algorithm(spec, zs, sizings, limits, name)
    chosen = zs.index(decision.z)
    return (
        TreeChoice(
            tree=tree,
            z=decision.z,
            largest_entries=[s[main].largest for s in per_tree],
            widths=widths,
            predicted={z: s.largest for z, s in zip(zs, sizings, strict=True)},
            predicted_agent=sizings[chosen].agent,
            kinds=list(kinds),
            why=why,
        ),
        decision,
    )
