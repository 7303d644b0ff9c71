"""The pure distributed DFS: valid pseudo-trees for every heuristic, today's trees reproduced,
separators and UTIL sizes carried by the tokens equal the sizing pass and dcop.orders.greedy's."""

from __future__ import annotations

import math
from collections import deque

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcop.coordinator import peers_for, round_robin
from dcop.errors import DcopError, ProtocolError
from dcop.protocol import RunSpec
from dcop.trees.candidates import (
    DEFAULT_CANDIDATE,
    HEURISTICS,
    ROOT_RULES,
    Candidate,
    choose_roots,
    default_candidates,
)
from dcop.trees.dfs import (
    DfsState,
    DfsToken,
    TreeSummary,
    build_candidates,
    choose_candidate,
    simulate,
    summarize,
    tree_separators,
    util_entries,
)
from dcop.trees.induced import induced_scopes
from dcop.trees.pseudotree import dfs_pseudo_tree
from tests.conftest import random_problem

Graph = tuple[dict[int, set[int]], dict[int, str], dict[int, int]]


def graph_of(n: int, p: float, seed: int, d_max: int = 4) -> Graph:
    """A random graph (possibly disconnected) with ids 0..n-1, names that do not sort like the
    ids (so ties by name are really tested), and domain sizes 1..d_max."""
    g = nx.gnp_random_graph(n, p, seed=seed)
    adj = {v: set(g[v]) for v in g}
    names = {v: f"x{(v * 7 + 3) % n}_{v}" for v in g}
    domains = {v: 1 + (v * 5 + seed) % d_max for v in g}
    return adj, names, domains


def names_adjacency(adj: dict[int, set[int]], names: dict[int, str]) -> dict[str, set[str]]:
    return {names[v]: {names[u] for u in ns} for v, ns in adj.items()}


def ancestors(parent: dict[int, int | None], v: int) -> list[int]:
    out = []
    p = parent[v]
    while p is not None:
        out.append(p)
        p = parent[p]
    return out


graphs = st.builds(graph_of, st.integers(1, 16), st.floats(0.05, 0.8), st.integers(0, 10_000))
candidates = st.builds(
    Candidate,
    st.sampled_from(HEURISTICS),
    st.sampled_from(ROOT_RULES),
    st.integers(0, 3),
    st.one_of(st.none(), st.integers(0, 50)),
)


@settings(max_examples=60, deadline=None)
@given(graphs, candidates)
def test_every_heuristic_builds_a_valid_pseudo_forest(graph: Graph, candidate: Candidate) -> None:
    adj, names, domains = graph
    run = simulate(adj, names, domains, candidate)
    assert run.roots == candidate.roots(adj, names)
    parent = run.parents()
    g = nx.Graph(adj)
    g.add_nodes_from(adj)
    # one root per connected component, and every agent in exactly one tree
    assert len(run.roots) == nx.number_connected_components(g)
    assert {v for v in adj if parent[v] is None} == set(run.roots)
    assert all(s.done for s in run.states.values())
    for v, s in run.states.items():
        # tree edges are graph edges (a DFS tree); children and parents agree
        if s.parent is not None:
            assert s.parent in adj[v]
            assert v in run.states[s.parent].children
        assert s.path == tuple(reversed(ancestors(parent, v)))
        assert set(s.pseudo_parents) == (adj[v] & set(s.path)) - {s.parent}
    # no cross edges: every constraint's scope lies on one root-to-leaf path
    for a, b in g.edges:
        assert a in ancestors(parent, b) or b in ancestors(parent, a)
    # DFS walk: two tokens per tree edge
    assert run.messages == 2 * (len(adj) - len(run.roots))


@settings(max_examples=60, deadline=None)
@given(graphs, candidates)
def test_separators_and_sizes_carried_by_tokens_equal_the_sizing_pass(
    graph: Graph, candidate: Candidate
) -> None:
    adj, names, domains = graph
    run = simulate(adj, names, domains, candidate)
    assert run.roots == candidate.roots(adj, names)
    parent = run.parents()
    seps = tree_separators(parent, run.pseudo_parents())
    for v, s in run.states.items():
        assert set(s.separator) == seps[v]
    # ... and dcop.orders.greedy's separators of the same tree, and the induced scopes of its order
    adj_names = names_adjacency(adj, names)
    tree = run.pseudo_tree(names)
    by_ordering = tree.separators()
    scopes = induced_scopes(adj_names, tree.elimination_order())
    for v in adj:
        assert {names[u] for u in seps[v]} == set(by_ordering[names[v]]) == set(scopes[names[v]])
    # predicted UTIL entries: the product of the separator's domains, roots excluded
    sizes = util_entries(seps, domains, parent)
    assert set(sizes) == {v for v in adj if parent[v] is not None}
    for v, n in sizes.items():
        assert n == math.prod(domains[u] for u in seps[v])
    expected = summarize(parent, run.pseudo_parents(), domains)
    assert run.summary == expected
    assert expected.width == max((len(s) for s in seps.values()), default=0)
    assert expected.largest == max(sizes.values(), default=0)
    assert expected.total == sum(sizes.values())


@settings(max_examples=60, deadline=None)
@given(graphs)
def test_most_connected_is_todays_centralized_tree(graph: Graph) -> None:
    adj, names, domains = graph
    run = simulate(adj, names, domains, Candidate("most-connected"))
    ours = run.pseudo_tree(names)
    theirs = dfs_pseudo_tree(names_adjacency(adj, names))
    assert ours.roots == theirs.roots
    assert ours.order == theirs.order
    assert ours.parent == theirs.parent
    assert ours.children == theirs.children
    assert ours.depth == theirs.depth
    for v in theirs.order:
        assert sorted(ours.pseudo_parents[v]) == sorted(theirs.pseudo_parents[v])


@pytest.mark.parametrize("seed", [3, 11])
def test_agents_build_the_simulated_candidate_trees(run_inproc, seed: int) -> None:
    """Every candidate tree the agent processes build is the one the in-process simulator builds
    from the same candidate (the benchmark measures the agents' own code)."""
    problem = random_problem(seed, n=8, n_tables=10)
    # DFS candidates asked for (the autos may leave the walk out for the elimination tree)
    result = run_inproc(problem, spec=RunSpec("dpop", trees=1))
    layout = result["run"].tree  # the choice; the agents hold every candidate
    peers = peers_for(
        problem, *round_robin(["127.0.0.1"], 0, list(range(20000, 20001 + problem.n)))
    )
    adj = {a.id: set(a.neighbours) for a in peers.agents}
    names = {a.id: str(a.variable) for a in peers.agents}
    domains = {a.id: problem.variables[str(a.variable)].size for a in peers.agents}
    sessions = {agent.me: agent.session for agent in result["agent_objects"]}
    candidates = default_candidates(len(layout.largest_entries))
    for k, candidate in enumerate(candidates):
        run = simulate(adj, names, domains, candidate, tree=k)
        for me, session in sessions.items():
            mine = run.states[me]
            built = session.trees[k]
            assert built.parent == mine.parent
            assert built.children == mine.children
            assert sorted(built.pseudo_parents) == sorted(mine.pseudo_parents)
            assert built.path == mine.path
        assert run.summary.largest == layout.largest_entries[k]
    best = min(range(len(candidates)), key=lambda k: (layout.largest_entries[k], k))
    assert (
        layout.tree == best or layout.largest_entries[layout.tree] == layout.largest_entries[best]
    )


@settings(max_examples=40, deadline=None)
@given(graphs, st.one_of(st.none(), st.integers(0, 50)))
def test_open_counts_in_tokens_are_true(graph: Graph, seed: int | None) -> None:
    """close-ancestors decides on the open counts the tokens carry: check each against the graph."""
    adj, names, domains = graph
    states = {
        v: DfsState(
            v,
            domains[v],
            {u: names[u] for u in ns},
            neighbourhoods={u: adj[u] for u in ns},
            heuristic="close-ancestors",
            seed=seed,
        )
        for v, ns in adj.items()
    }
    checked = 0
    for root in choose_roots(
        adj, names, "random" if seed is not None else "least-connected", 0, seed
    ):
        queue = deque((root, peer, t) for peer, t in states[root].start())
        while queue:
            sender, receiver, token = queue.popleft()
            # one token in flight: the visited agents are those entered (a child token's counts
            # are from before its receiver, which decrements its own ancestors)
            visited = {v for v, st in states.items() if st.entered}
            if token.kind == "child":
                for a, count in zip(token.path, token.open, strict=True):
                    assert count == len(adj[a] - visited)
                    checked += 1
            else:  # counts for the sender's ancestors, after its subtree
                for a, count in zip(states[sender].path, token.open, strict=True):
                    assert count == len(adj[a] - visited)
                    checked += 1
            queue.extend((receiver, p, t) for p, t in states[receiver].receive(sender, token))
    assert all(s.done for s in states.values())
    assert checked >= sum(len(s.path) for s in states.values())


def test_seeds_are_deterministic_and_change_the_tree() -> None:
    adj, names, domains = graph_of(14, 0.35, 7)
    a = simulate(adj, names, domains, Candidate("close-ancestors", "random", seed=5))
    b = simulate(adj, names, domains, Candidate("close-ancestors", "random", seed=5))
    assert a.parents() == b.parents() and a.roots == b.roots
    trees = {
        tuple(sorted(simulate(adj, names, domains, Candidate("random", seed=s)).parents().items()))
        for s in range(6)
    }
    assert len(trees) > 1


def test_candidates_and_choice() -> None:
    adj, names, domains = graph_of(16, 0.3, 2)
    cands = default_candidates(6)
    assert cands[:2] == [DEFAULT_CANDIDATE, Candidate()]
    assert Candidate("close-ancestors", "least-connected") == DEFAULT_CANDIDATE
    assert len(cands) == 6 and len(set(cands)) == 6
    assert default_candidates(1) == [DEFAULT_CANDIDATE]
    runs, best = build_candidates(adj, names, domains, cands)
    assert [r.states[0].tree for r in runs] == list(range(6))
    chosen = runs[best].summary
    assert all((chosen.largest, chosen.total) <= (r.summary.largest, r.summary.total) for r in runs)
    assert choose_candidate([None, TreeSummary(3, 8, 20), TreeSummary(3, 8, 12)]) == 2
    assert choose_candidate([TreeSummary(2, 4, 9), None, TreeSummary(1, 4, 9)]) == 0
    assert choose_candidate([TreeSummary(9, 500, 900), TreeSummary(2, 9, 10_000)]) == 1
    with pytest.raises(DcopError):
        choose_candidate([None, None])
    with pytest.raises(DcopError):
        default_candidates(0)


def test_roots_one_per_component() -> None:
    adj = {0: {1}, 1: {0, 2}, 2: {1}, 3: set(), 4: {5}, 5: {4}}
    names = {0: "a", 1: "b", 2: "c", 3: "d", 4: "f", 5: "e"}
    assert choose_roots(adj, names) == [1, 5, 3]  # most neighbours, then name
    assert choose_roots(adj, names, "least-connected") == [0, 5, 3]
    assert choose_roots(adj, names, "least-connected", rank=1) == [2, 4, 3]
    assert choose_roots(adj, names, "most-connected", rank=4) == [0, 5, 3]  # modulo the size
    seeded = choose_roots(adj, names, "random", seed=4)
    assert seeded[0] in (0, 1, 2) and seeded[1:] in ([4, 3], [5, 3])
    with pytest.raises(DcopError, match="root rule"):
        choose_roots(adj, names, "central")
    with pytest.raises(DcopError, match="rank"):
        choose_roots(adj, names, rank=-1)


def test_protocol_errors() -> None:
    def state(**kw: object) -> DfsState:
        return DfsState(1, 2, {0: "a", 2: "c", 3: "d"}, degrees={0: 1, 2: 2, 3: 1}, **kw)  # type: ignore[arg-type]

    child = DfsToken("child", path=(0,), domains=(2,), open=(1,))
    s = state()
    # most connected first; my own open count (2 and 3) goes with the path
    assert s.receive(0, child) == [(2, DfsToken("child", path=(0, 1), domains=(2, 2), open=(0, 2)))]
    with pytest.raises(ProtocolError, match="second DFS child"):
        s.receive(0, child)
    with pytest.raises(ProtocolError, match="not from the child I wait for"):
        s.receive(3, DfsToken("back", open=(1, 1)))
    with pytest.raises(ProtocolError, match="tree 1"):
        state().receive(0, DfsToken("child", path=(0,), domains=(2,), open=(1,), tree=1))
    with pytest.raises(ProtocolError, match="not a neighbour"):
        state().receive(9, child)
    with pytest.raises(ProtocolError, match="does not end at its sender"):
        state().receive(2, child)
    with pytest.raises(ProtocolError, match="per ancestor"):
        state().receive(0, DfsToken("child", path=(0,), domains=(), open=(1,)))
    with pytest.raises(ProtocolError, match="cycle"):
        state().receive(0, DfsToken("child", path=(1, 0), domains=(2, 2), open=(1, 1)))
    with pytest.raises(ProtocolError, match="negative"):
        state().receive(0, DfsToken("child", path=(0,), domains=(2,), open=(-1,)))
    with pytest.raises(ProtocolError, match="domain size"):
        state().receive(0, DfsToken("child", path=(0,), domains=(0,), open=(1,)))
    with pytest.raises(ProtocolError, match="child token with links"):
        state().receive(0, DfsToken("child", path=(0,), domains=(2,), open=(1,), links=((3, 0),)))
    s = state()
    s.receive(0, child)
    with pytest.raises(ProtocolError, match="not an ancestor"):
        s.receive(2, DfsToken("back", open=(0, 1), links=((2, 3),)))
    s = state()
    s.receive(0, child)
    with pytest.raises(ProtocolError, match="not a neighbour"):
        s.receive(2, DfsToken("back", open=(0, 1), links=((5, 1),)))
    with pytest.raises(ProtocolError, match="kind"):
        state().receive(0, DfsToken("parent", path=(0,), domains=(2,), open=(1,)))  # type: ignore[arg-type]
    root = state()
    root.start()
    with pytest.raises(ProtocolError, match="root after joining"):
        root.start()
    with pytest.raises(ProtocolError, match="beyond my ancestors"):
        root.receive(root.children[0], DfsToken("back", open=(0,), separator=(7,)))


def test_bad_configuration_is_one_clear_error() -> None:
    with pytest.raises(DcopError, match="unknown DFS heuristic"):
        DfsState(0, 2, {}, heuristic="least-connected")
    with pytest.raises(DcopError, match="neighbour list"):
        DfsState(0, 2, {1: "b"}, degrees={1: 1}, heuristic="close-ancestors")
    with pytest.raises(DcopError, match="no degree"):
        DfsState(0, 2, {1: "b"})
    with pytest.raises(DcopError, match="symmetric"):
        simulate({0: {1}, 1: set()}, {0: "a", 1: "b"}, {0: 2, 1: 2})
    with pytest.raises(DcopError, match="forest"):
        tree_separators({0: 1, 1: 0}, {})
