"""What a distributed run is, decided once before any agent hears of it: a :class:`RunPlan`.

A plan holds the problem's layout on the agents, the run's table dtype, the first DFS candidates
simulated in process with the agents' own code (each at most once: ``--trees`` auto, the
elimination offer and ``--gpu`` placement all read the same runs), how many candidates the agents
build, the elimination tree offered beside them, each agent's own tables, and (``dcop run
--gpu``) each agent's device. Each part is
computed when first asked: ``dcop run`` makes its plan before it starts any agent (the problem's
checks refuse bad input there, and a GPU placement needs the tree before an agent's device is
fixed) but simulates and orders only when the coordinator asks, while the agents start.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dcop.coordinator.choice import TREE_POLICIES, agent_peak_bytes
from dcop.coordinator.elimination import EliminationTree, offer
from dcop.coordinator.topology import Layout, check_wire_limits, layout_for
from dcop.errors import DcopError, TableTooLarge
from dcop.model import CostTable, Problem
from dcop.protocol import RunSpec
from dcop.protocol.peers import Peers
from dcop.protocol.runspec import AUTO_ONE_TREE_ENTRIES, AUTO_TREES, AUTO_TREES_MAX
from dcop.sumproduct import log_constant
from dcop.tables import choose_dtype
from dcop.trees.candidates import default_candidates
from dcop.trees.dfs import DfsRun, simulate


def local_layout(problem: Problem) -> Layout:
    """The layout of a run whose peers.json :func:`~dcop.coordinator.topology.peers_for` makes
    (``dcop run``): agent ``i`` runs the ``i``-th variable, its neighbours those of the primal
    graph."""
    names = list(problem.variables)
    ident = {v: i for i, v in enumerate(names)}
    adjacency = problem.neighbours()
    return Layout(
        dict(enumerate(names)),
        {ident[v]: frozenset(ident[u] for u in adjacency[v]) for v in names},
        frozenset(range(len(names))),
    )


def auto_tree_count(first_largest: float) -> int:
    """How many candidate pseudo-trees a spec with ``trees = AUTO_TREES`` builds: one where the
    first candidate's largest UTIL has at most ``AUTO_ONE_TREE_ENTRIES`` entries, else
    ``AUTO_TREES_MAX``. A small tree is solved in milliseconds, less than one more DFS of n
    tokens costs (measured: 8 candidates add about 0.1 s to a 30-agent local run whose UTILs are
    all under 7000 entries)."""
    return 1 if first_largest <= AUTO_ONE_TREE_ENTRIES else AUTO_TREES_MAX


class RunPlan:
    """One distributed run as decided before it starts (see the module docstring).

    ``peers``: the agents of the run (None: those ``dcop run`` starts, one per variable in the
    problem's order). ``spec`` is the run spec as asked; :attr:`spec` as the agents' Start
    carries it (the count of DFS candidates resolved). ``tree`` is the tree policy
    (:data:`TREE_POLICIES`), ``order_time`` the ordering engine's budget for the elimination tree
    (None: its default). ``gpu`` and ``gpu_placement`` say which CUDA devices the agents of a
    local run use and how they are spread (:mod:`dcop.coordinator.gpus`; None: no GPU).
    """

    def __init__(
        self,
        problem: Problem,
        peers: Peers | None = None,
        spec: RunSpec | None = None,
        *,
        tree: str = "auto",
        order_time: float | None = None,
        gpu: int | str | None = None,
        gpu_placement: str = "round-robin",
    ) -> None:
        if tree not in TREE_POLICIES:
            raise DcopError(f"unknown tree policy {tree!r}; use one of {', '.join(TREE_POLICIES)}")
        self.problem = problem
        self.asked = spec if spec is not None else RunSpec()
        self.tree_policy = tree
        self.order_time = order_time
        self.gpu = gpu
        self.gpu_placement = gpu_placement
        # float32 where integer totals stay exact: chosen once, here, for every agent's tables;
        # sums of exponentials are never exact in float32 (PR/MAR run in float64)
        self.dtype = np.dtype(np.float64 if self.asked.summing else choose_dtype(problem))
        if self.asked.summing:
            log_constant(problem)  # a model with a WCSP top has no Z: refused here
        check_wire_limits(problem)
        #: who runs which variable: ``peers``' agents (checked against the problem), or without
        #: peers those that :func:`~dcop.coordinator.topology.peers_for` numbers (``dcop run``)
        self.layout: Layout = (
            layout_for(problem, peers) if peers is not None else local_layout(problem)
        )
        self._runs: list[DfsRun] = []

    # ---- the DFS candidates, simulated once each ----------------------------------------------
    def candidates(self, count: int) -> list[DfsRun]:
        """The first ``count`` default candidate trees, as the agents will build them (the
        agents' own DFS code, in process; each simulated once however often it is asked)."""
        wanted = default_candidates(count)
        sizes = self.problem.domain_sizes()
        domains = {a: sizes[v] for a, v in self.layout.variable.items()}
        for k in range(len(self._runs), count):
            self._runs.append(
                simulate(self.layout.neighbours, self.layout.variable, domains, wanted[k], tree=k)
            )
        return self._runs[:count]

    @property
    def first_largest(self) -> float:
        """The largest predicted UTIL (entries) of the first candidate DFS tree."""
        return self.candidates(1)[0].summary.largest

    @functools.cached_property
    def tree_count(self) -> int:
        """How many DFS candidates the agents build (``--trees``; auto: :func:`auto_tree_count`)."""
        if self.asked.trees == AUTO_TREES:
            return auto_tree_count(self.first_largest)
        return self.asked.trees

    # ---- the elimination tree offered beside them ---------------------------------------------
    @functools.cached_property
    def _offer(self) -> tuple[EliminationTree | None, str]:
        first = (
            self.first_largest
            if self.tree_policy != "dfs" and len(self.layout.variable) >= 2
            else None
        )
        return offer(
            self.problem,
            self.layout,
            self.tree_policy,
            first,
            self.order_time,
            alone=self._one_dfs_tree,
        )

    @property
    def _one_dfs_tree(self) -> bool:
        """Whether ``--trees auto`` and ``--tree auto`` leave the agents a single DFS candidate,
        which the elimination tree then replaces wherever it is no larger (``spec``)."""
        return (
            self.tree_policy == "auto"
            and self.asked.trees == AUTO_TREES
            and len(self.layout.variable) >= 2
            and self.tree_count == 1
        )

    @property
    def elimination(self) -> EliminationTree | None:
        """The elimination tree offered beside the DFS candidates (None: not offered)."""
        return self._offer[0]

    @property
    def elimination_note(self) -> str:
        """Why the elimination tree was offered or not."""
        return self._offer[1]

    def links(self, agent: int) -> tuple[int, ...]:
        """The agents ``agent`` links to beyond its neighbours (the elimination tree's)."""
        return self.elimination.links.get(agent, ()) if self.elimination is not None else ()

    @functools.cached_property
    def spec(self) -> RunSpec:
        """The spec the agents' Start carries: the DFS candidates counted, and none where the
        elimination tree runs alone (each walk is 2(n - 1) tokens in turn: seconds at a
        thousand agents): under ``--tree elimination``, and under both autos where the agents
        would build one DFS candidate and the elimination tree is no larger (a tree's: width 1
        either way; a 1000-agent tree's walk was about a third of its solve)."""
        trees = self.tree_count
        if self.elimination is not None and (
            self.tree_policy == "elimination" or self._one_dfs_tree
        ):
            trees = 0
        return self.asked.replace(trees=trees) if trees != self.asked.trees else self.asked

    @property
    def reported_spec(self) -> RunSpec:
        """The spec a result document reports: :attr:`spec`, where the elimination tree ran
        alone (``trees`` 0 in the agents' Start) with the DFS count asked or chosen instead
        (the document's ``trees`` counts candidates asked for, at least one; its pseudo-tree
        says which ran)."""
        spec = self.spec
        return spec.replace(trees=self.tree_count) if spec.trees == 0 else spec

    @functools.cached_property
    def devices(self) -> dict[int, str] | None:
        """Each agent's ``--gpu`` value (None: the run uses no GPU). ``balanced`` and ``split``
        placements read the candidate trees: asked before any agent starts, since an agent's
        device is fixed at its start (CuPy is imported here only for ``all``)."""
        if self.gpu is None:
            return None
        from dcop.coordinator.gpus import agent_gpu_values

        return agent_gpu_values(self, self.gpu, self.gpu_placement)

    # ---- each agent's part --------------------------------------------------------------------
    @functools.cached_property
    def tables_of(self) -> dict[str, list[CostTable]]:
        """Each variable's tables, in the problem's order (``Problem.tables_of`` reads every
        table: asked for each agent, that was quadratic in n)."""
        out: dict[str, list[CostTable]] = {v: [] for v in self.problem.variables}
        for t in self.problem.tables:
            for v in dict.fromkeys(t.scope):
                out[v].append(t)
        return out

    @functools.cached_property
    def part_bytes(self) -> dict[int, int]:
        """Each agent's own tables in the run's dtype (its Setup's frames), in bytes."""
        sizes = self.problem.domain_sizes()
        itemsize = self.dtype.itemsize
        return {
            a: sum(math.prod(sizes[v] for v in t.scope) for t in self.tables_of[var]) * itemsize
            for a, var in self.layout.variable.items()
        }

    def name(self, agent: int) -> str:
        """``agent 3 (x3)``: an agent as errors name it."""
        var = self.layout.variable.get(agent)
        return f"agent {agent} ({var})" if var else f"agent {agent}"

    def check_parts(self, host_memory: int | None) -> None:
        """Refuse (too_large) before any table is sent a setup over the message limit, or an
        agent whose own tables alone break --max-memory: each agent in a table's scope gets
        its own copy, and a tiny file's one huge table once took 27 agents to 16.9 GiB.
        ``host_memory``: what the agents share where they all run on this host."""
        spec = self.asked
        memory = spec.max_memory_bytes
        if not self.part_bytes:
            return
        a, nbytes = max(self.part_bytes.items(), key=lambda kv: (kv[1], -kv[0]))
        if nbytes > spec.max_message_bytes:  # its exact size is checked as it is sent
            raise TableTooLarge(
                f"{self.name(a)}'s own tables hold {nbytes / 2**20:.4g} MiB, more than the "
                f"message limit of {spec.max_message_bytes / 2**20:g} MiB its setup must "
                "fit in; refused before any table was sent"
            )
        if host_memory is not None:
            # the tables only: the agents' base is mostly pages shared with their template
            together = sum(2 * b for b in self.part_bytes.values())
            if together > host_memory:
                raise TableTooLarge(
                    f"the agents' own tables (each agent in a table's scope gets its own copy) "
                    f"need {together / 2**30:.4g} GiB together, more than the "
                    f"{host_memory / 2**30:.4g} GiB this host has free; refused before "
                    "any table was sent"
                )
        need = agent_peak_bytes(nbytes, 0, 0)
        if memory is not None and need > memory:
            raise TableTooLarge(
                f"{self.name(a)}'s own tables hold {nbytes / 2**20:.4g} MiB: with its base and "
                f"their copy it needs {need / 2**20:.4g} MiB > the memory limit of "
                f"{memory / 2**20:g} MiB; refused before any table was sent"
            )
