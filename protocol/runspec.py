"""The run spec: how a distributed run is solved, made once at the edge and carried unchanged.

The command line (``dcop run``, ``dcop coordinator``) or a deployment builds one :class:`RunSpec`;
it is validated there, once (``__post_init__``). The coordinator sends it to every agent inside
the Start message (a msgspec Struct: the codec encodes its fields and decodes them through the
same ``__post_init__``), and deployments turn it back into command line flags with
:meth:`RunSpec.cli_args`. A parameter added here therefore reaches the agents by touching this
module, the CLI edge and the agent only.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from msgspec import Struct
from msgspec.structs import asdict, force_setattr, replace

from dcop.choices import RUN_TASKS, DistributedAlgo, check_z
from dcop.errors import InputError
from dcop.protocol.constants import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_MESSAGE_MIB,
    MAX_SCOPE,
    MAX_TREES,
    PEER_TIMEOUT_PER_AGENT_S,
    PEER_TIMEOUT_S,
    SLOWEST_FRAME_BYTES_PER_S,
)

Algo = Literal["dpop", "adpop", "mbdpop", "auto"]
Task = Literal["min", "pr", "mar"]
#: What a run computes (:data:`dcop.choices.RUN_TASKS`; PR and MAR: sum-product UTILs in log space).
TASKS: tuple[str, ...] = RUN_TASKS
#: Distributed algorithms: DPOP is exact, ADPOP(z) sends mini-bucket UTILs (bounds), MB-DPOP is
#: exact with every UTIL message within the limit (cycle cuts, :mod:`dcop.trees.cutset`), auto
#: runs DPOP where its largest UTIL fits, else MB-DPOP where its predicted work fits the time,
#: else ADPOP with the largest z that fits.
ALGOS: tuple[str, ...] = tuple(a.value for a in DistributedAlgo)
#: Largest z ``auto`` considers (beyond it ADPOP's tables outgrow any message limit).
AUTO_Z_MAX = 24
#: ``trees`` of a spec that leaves the count to the coordinator: one candidate pseudo-tree where
#: the first candidate's largest UTIL has at most AUTO_ONE_TREE_ENTRIES entries (such a tree is
#: solved in milliseconds, while each more candidate costs a DFS of n tokens), else AUTO_TREES_MAX
#: (see dcop.trees.candidates.default_candidates for which).
AUTO_TREES = 0
AUTO_TREES_MAX = 8
AUTO_ONE_TREE_ENTRIES = 1 << 16
DEFAULT_TREES = AUTO_TREES
MIB = 1 << 20
#: Smallest message limit a spec accepts (the command line asks for at least 1 MiB; tests go lower).
MIN_MESSAGE_BYTES = 4096


def check_message_limit(max_bytes: object, least: int = MIN_MESSAGE_BYTES) -> int:
    """The one rule of a message limit (the run spec, every command line, an agent's options):
    whole bytes from ``least`` (the command lines: 1 MiB; a spec made in Python may go down to
    :data:`MIN_MESSAGE_BYTES`) to :data:`MAX_MESSAGE_MIB` MiB; else a one-line InputError."""
    if type(max_bytes) is not int or not least <= max_bytes <= MAX_MESSAGE_MIB * MIB:
        shown = (
            f"{max_bytes / MIB:g} MiB" if isinstance(max_bytes, int | float) else repr(max_bytes)
        )
        low = f"{least // MIB} MiB" if least % MIB == 0 else f"{least} bytes"
        raise InputError(
            f"the message limit (--max-message-mib) must be between {low} and "
            f"{MAX_MESSAGE_MIB} MiB, not {shown}"
        )
    return max_bytes


def message_limit(mib: float, least: int = MIN_MESSAGE_BYTES) -> int:
    """``--max-message-mib`` in bytes, checked by :func:`check_message_limit`."""
    if not math.isfinite(mib):
        return check_message_limit(mib, least)
    return check_message_limit(int(mib * MIB), least)


def peer_timeout_for(max_message_bytes: int) -> float:
    """Silence allowed before a peer counts as dead when messages may reach ``max_message_bytes``:
    PEER_TIMEOUT_S, or longer where one largest message could hold the link that long (messages
    on one socket queue behind it)."""
    return max(PEER_TIMEOUT_S, 2 * max_message_bytes / SLOWEST_FRAME_BYTES_PER_S)


def link_timeout(max_message_bytes: int, peer_timeout: float | None) -> float:
    """A transport's ZMTP heartbeat timeout: :func:`peer_timeout_for` its frame limit, or the
    run's peer timeout where that is longer (a run of thousands of agents, or a user's)."""
    return max(peer_timeout_for(max_message_bytes), peer_timeout or 0.0)


def peer_timeout_at_scale(spec: RunSpec, agents: int) -> RunSpec:
    """``spec`` for a run of ``agents`` processes on one host: where its peer timeout is derived
    (not given), at least ``PEER_TIMEOUT_PER_AGENT_S`` per agent (20 s at n = 2000; unchanged up
    to n = 1000). A timeout given by the user is kept as it is."""
    if spec.peer_timeout_s is not None:
        return spec
    at_scale = agents * PEER_TIMEOUT_PER_AGENT_S
    if at_scale <= spec.peer_timeout:
        return spec
    return replace(spec, peer_timeout_s=at_scale)


class RunSpec(Struct, frozen=True, forbid_unknown_fields=True):
    """What a distributed run does, checked on construction (``InputError`` says what is wrong).

    Parameters
    ----------
    algo
        ``dpop`` (exact) or ``adpop`` (mini-buckets of ``z`` variables: bounds).
    z
        The ADPOP mini-bucket size (at least 1); None for DPOP, where it is ignored.
    max_message_bytes
        Largest message of the run: a UTIL table above it fails the run with a clear error.
    peer_timeout_s
        Seconds of silence before a peer counts as dead; None derives it from the message limit.
    trees
        Candidate pseudo-trees the agents build by distributed DFS; the coordinator keeps the one
        with the smallest largest UTIL. ``AUTO_TREES`` (0, the default) lets the coordinator
        choose before the DFS starts; the agents receive a count of at least one, or 0 beside
        the coordinator's elimination tree under ``--tree elimination``: no DFS tree is built
        (a run's document then shows 0 too).
    max_memory_bytes
        Largest UTIL table one agent may build (None: only the message limit applies).
    gpu_min_entries
        GPU agents run a bucket on the device from this many joined entries (None: the measured
        default, ``dcop.placement``; 0: every bucket).
    task
        ``min`` (minimise the cost), ``pr`` (``ln Z``: UTILs by log-sum-exp) or ``mar`` (``ln Z``
        and marginals: a downward pass after the UTILs). PR and MAR are exact: DPOP only.
    width
        MB-DPOP's largest UTIL in variables (``--width``; None: the message limit alone).
    """

    algo: Algo = "dpop"
    z: int | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    peer_timeout_s: float | None = None
    trees: int = DEFAULT_TREES
    max_memory_bytes: int | None = None
    gpu_min_entries: int | None = None
    task: Task = "min"
    width: int | None = None

    def __post_init__(self) -> None:
        if self.algo not in ALGOS:
            raise InputError(f"unknown algorithm {self.algo!r}; use one of {', '.join(ALGOS)}")
        if self.task not in TASKS:
            raise InputError(f"unknown task {self.task!r}; use one of {', '.join(TASKS)}")
        if self.task != "min" and self.algo != "dpop":
            raise InputError(
                f"--task {self.task} is exact sum-product: run it with --algo dpop, not {self.algo}"
            )
        if self.algo == "adpop":
            force_setattr(self, "z", check_z(self.z, "adpop", most=MAX_SCOPE))
        elif self.z is not None:
            force_setattr(self, "z", None)  # z means nothing to DPOP: one spelling of "none"
        check_message_limit(self.max_message_bytes)
        if self.peer_timeout_s is not None and not (
            math.isfinite(self.peer_timeout_s) and self.peer_timeout_s > 0
        ):
            raise InputError("--peer-timeout must be a positive number of seconds")
        if type(self.trees) is not int or not 0 <= self.trees <= MAX_TREES:
            raise InputError(f"--trees must be between 1 and {MAX_TREES}, or 0 for auto")
        if self.max_memory_bytes is not None and (
            type(self.max_memory_bytes) is not int or self.max_memory_bytes < MIN_MESSAGE_BYTES
        ):
            raise InputError("the memory limit must be a number of bytes of at least 4096")
        if self.width is not None and (type(self.width) is not int or self.width < 1):
            raise InputError("--width must be a whole number of variables >= 1")
        if self.width is not None and self.algo not in ("mbdpop", "auto"):
            raise InputError(
                f"--width is MB-DPOP's limit: use it with --algo mbdpop or auto, not {self.algo}"
            )
        if self.gpu_min_entries is not None and (
            type(self.gpu_min_entries) is not int or self.gpu_min_entries < 0
        ):
            raise InputError("--gpu-min-entries must be a whole number >= 0")

    @staticmethod
    def from_options(
        algo: str = "dpop",
        z: int | None = None,
        max_message_mib: float = DEFAULT_MAX_MESSAGE_BYTES / MIB,
        peer_timeout_s: float | None = None,
        trees: int = DEFAULT_TREES,
        max_memory_bytes: int | None = None,
        gpu_min_entries: int | None = None,
        task: str = "min",
        width: int | None = None,
    ) -> RunSpec:
        """The spec from command-line values (the message limit in MiB, at least one)."""
        return RunSpec(
            algo,  # type: ignore[arg-type]  # checked by RunSpec itself
            z,
            message_limit(max_message_mib, least=MIB),
            peer_timeout_s,
            trees,
            max_memory_bytes,
            gpu_min_entries,
            task,  # type: ignore[arg-type]  # checked by RunSpec itself
            width,
        )

    @property
    def summing(self) -> bool:
        """Whether the run sums (PR/MAR: log-sum-exp UTILs) instead of minimising."""
        return self.task != "min"

    @property
    def exact(self) -> bool:
        """Whether the run proves an optimum (DPOP) or bounds it (ADPOP; auto decides later)."""
        return self.algo in ("dpop", "mbdpop")

    @property
    def may_cut(self) -> bool:
        """Whether the agents plan MB-DPOP's cycle cuts on their DFS (mbdpop, or auto on
        minimisation)."""
        return self.task == "min" and self.algo in ("mbdpop", "auto")

    def z_choices(self) -> tuple[int | None, ...]:
        """The mini-bucket sizes the agents size their UTILs for (None: DPOP): the one asked, or
        for ``auto`` DPOP and every z up to :data:`AUTO_Z_MAX`."""
        if self.algo in ("dpop", "mbdpop"):
            return (None,)
        if self.algo == "adpop":
            return (self.z,)
        return (None, *range(1, AUTO_Z_MAX + 1))

    @property
    def peer_timeout(self) -> float:
        """The silence allowed before a peer counts as dead (given, or from the message limit)."""
        if self.peer_timeout_s is not None:
            return self.peer_timeout_s
        return peer_timeout_for(self.max_message_bytes)

    @property
    def label(self) -> str:
        """``DPOP`` or ``ADPOP(z)``, for messages and summaries."""
        name = "MB-DPOP" if self.algo == "mbdpop" else self.algo.upper()
        label = name + (f"({self.z})" if self.z is not None else "")
        return label + (f" {self.task.upper()}" if self.summing else "")

    def replace(self, **changes: Any) -> RunSpec:
        """This spec with ``changes``, checked again (as a new spec is)."""
        return RunSpec(**(asdict(self) | changes))

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready map (the result document's ``spec``)."""
        return asdict(self)

    def cli_args(self) -> list[str]:
        """The ``dcop coordinator`` / ``dcop run`` flags that make this spec again."""
        args = ["--algo", self.algo]
        if self.z is not None:
            args += ["--z", str(self.z)]
        args += ["--max-message-mib", f"{self.max_message_bytes / MIB:g}"]
        if self.peer_timeout_s is not None:
            args += ["--peer-timeout", f"{self.peer_timeout_s:g}"]
        if self.trees != DEFAULT_TREES:
            args += ["--trees", str(self.trees)]
        if self.max_memory_bytes is not None:
            args += ["--max-memory", str(self.max_memory_bytes)]
        if self.gpu_min_entries is not None:
            args += ["--gpu-min-entries", str(self.gpu_min_entries)]
        if self.summing:
            args += ["--task", self.task]
        if self.width is not None:
            args += ["--width", str(self.width)]
        return args


def sizing_choices(spec: RunSpec) -> tuple[int | None, ...]:
    """The mini-bucket sizes every agent sizes its UTIL for, index ``j`` standing for z = j and
    index 0 for DPOP (None): up to AUTO_Z_MAX (so that a refusal can name the largest z that
    fits) or the run's own larger z."""
    top = max(AUTO_Z_MAX, spec.z or 0)
    return (None, *range(1, top + 1))
