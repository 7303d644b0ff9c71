"""The wire metrics of a distributed run and the theory beside them (the typed result that
carries them: :class:`dcop.results.run.RunResult`).

Measured (by the agents on their own sockets, and by the coordinator on its own): messages and
bytes per type (what crossed the sockets), the largest UTIL message (with the tables handed over
by CUDA IPC, which are also counted apart as ``ipc_bytes``), totals, wall time, per-agent compute time, and the
simulated runtime (the largest logical clock: each message carries its sender's clock, a
receiver's clock is max(own, message) + its compute time). Theory: a connected problem sends
n-1 UTIL and n-1 VALUE messages (a forest: n - #components), 2(n - #components) DFS tokens per
candidate DFS tree (n - #components back tokens for the coordinator's elimination tree), one
degree message each way per edge, and a DPOP UTIL message holds
prod(|D_v| for v in separator) entries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dcop.coordinator.topology import Layout
from dcop.model import Problem
from dcop.protocol import Hello, Result

ALGORITHM_TYPES = ("degree", "token", "offer", "util", "value", "down")


def wire_metrics(
    *,
    problem: Problem,
    layout: Layout,
    exact: bool,
    roots: list[int],
    task: str = "min",
    trees: int,
    candidates_roots: int,
    results: Mapping[int, Result],
    coordinator_sent: Mapping[str, list[int]],
    coordinator_received: Mapping[str, list[int]],
    wall_s: float,
    solve_s: float,
    hellos: Mapping[int, Hello],
    elimination_tree: bool = False,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's metrics (messages and bytes per type, sizes, times, theory and checks) and each
    agent's place in the pseudo-tree with its own figures, by variable name."""
    name = dict(layout.variable)
    sizes = problem.domain_sizes()
    n = len(name)
    components = len(roots)
    edges = sum(len(ns) for ns in layout.neighbours.values()) // 2

    # messages and bytes by type: agents' own sends (up to their result) + the coordinator's
    count: dict[str, int] = {}
    size: dict[str, int] = {}
    for r in results.values():
        for kind, c in r.metrics.sent_count.items():
            count[kind] = count.get(kind, 0) + c
        for kind, b in r.metrics.sent_bytes.items():
            size[kind] = size.get(kind, 0) + b
    for kind, (c, b) in coordinator_sent.items():
        count[kind] = count.get(kind, 0) + c
        size[kind] = size.get(kind, 0) + b
    c_res, b_res = coordinator_received.get("result", [0, 0])
    count["result"] = count.get("result", 0) + c_res
    size["result"] = size.get("result", 0) + b_res

    per_agent: dict[str, Any] = {}
    entries_ok = True
    for i, r in sorted(results.items()):
        sep = tuple(name[a] for a in r.separator)
        theory_entries = math.prod(sizes[v] for v in sep) if r.parent is not None and sep else 0
        if exact and r.parent is not None and r.metrics.util_entries != theory_entries:
            entries_ok = False
        hello = hellos.get(i)
        per_agent[name[i]] = {
            "id": i,
            "parent": name.get(r.parent) if r.parent is not None else None,
            "children": [name[c] for c in r.children],
            "pseudo_parents": [name[p] for p in r.pseudo_parents],
            "separator": list(sep),
            "util_bytes": r.metrics.util_bytes,
            "largest_sent_bytes": r.metrics.largest_sent,
            "util_entries": r.metrics.util_entries,
            "util_tables": r.metrics.util_tables,
            "ipc_bytes": r.metrics.ipc_bytes,
            "theory_entries": theory_entries,
            "compute_s": r.metrics.compute_s,
            "clock_s": r.metrics.clock,
            "dropped_frames": r.metrics.dropped,
            "setup_s": r.metrics.setup_s,
            "backend": dict(r.metrics.backend),
            "pid": hello.pid if hello else None,
            "host": hello.host if hello else None,
        }
    util_n = count.get("util", 0)
    value_n = count.get("value", 0)
    tree_edges = n - components
    theory = {
        "n": n,
        "trees": components,
        "candidate_trees": trees,
        "edges": edges,
        "util_messages": tree_edges,
        # the downward pass: VALUE when minimising, MAR's down messages, none for PR
        "value_messages": tree_edges if task == "min" else 0,
        "down_messages": tree_edges if task == "mar" else 0,
        # every candidate tree's DFS: a child and a back token per tree edge; the coordinator's
        # elimination tree (the last candidate, where offered): a back token per tree edge
        "token_messages": (n - components) * (2 * trees - int(elimination_tree)),
        "tree_reports": candidates_roots,
        "degree_messages": 2 * edges,
        "largest_util_entries": max((a["theory_entries"] for a in per_agent.values()), default=0),
        "max_separator": max((len(a["separator"]) for a in per_agent.values()), default=0),
    }
    measured_util = [a["util_bytes"] for a in per_agent.values()]
    metrics = {
        "messages": dict(sorted(count.items())),
        "bytes": dict(sorted(size.items())),
        "total_messages": sum(count.values()),
        "total_bytes": sum(size.values()),
        "algorithm_messages": sum(count.get(k, 0) for k in ALGORITHM_TYPES),
        "algorithm_bytes": sum(size.get(k, 0) for k in ALGORITHM_TYPES),
        "largest_util_bytes": max(measured_util, default=0),
        "largest_message_bytes": max((r.metrics.largest_sent for r in results.values()), default=0),
        "largest_util_entries": max((a["util_entries"] for a in per_agent.values()), default=0),
        # UTIL tables handed over on the GPU by CUDA IPC: in the UTIL sizes above, not in bytes
        "ipc_bytes": sum(r.metrics.ipc_bytes for r in results.values()),
        "ipc_tables": sum(r.metrics.ipc_tables for r in results.values()),
        "wall_s": wall_s,
        "solve_wall_s": solve_s,
        "simulated_runtime_s": max((r.metrics.clock for r in results.values()), default=0.0),
        "compute_s_total": sum(r.metrics.compute_s for r in results.values()),
        "compute_s_max": max((r.metrics.compute_s for r in results.values()), default=0.0),
        "dropped_frames": sum(r.metrics.dropped for r in results.values()),
        "setup_s_max": max((r.metrics.setup_s for r in results.values()), default=0.0),
        "buckets_gpu": sum(int(r.metrics.backend.get("buckets_gpu", 0)) for r in results.values()),
        **_handover_tables(results),
        "theory": theory,
        "checks": {
            "util_messages_match": util_n == theory["util_messages"],
            "value_messages_match": value_n == theory["value_messages"],
            "down_messages_match": count.get("down", 0) == theory["down_messages"],
            "token_messages_match": count.get("token", 0) == theory["token_messages"],
            "util_entries_match": entries_ok if exact else None,
        },
    }
    return metrics, per_agent


def _handover_tables(results: Mapping[int, Result]) -> dict[str, dict[str, int]]:
    """GPU runs: UTIL tables by the path they took to their parents (``ipc`` on one device,
    ``p2p`` between devices, ``host`` through host memory, ``net``), from the agents' backend
    figures; nothing for a run whose agents counted none (CPU agents)."""
    totals: dict[str, int] = {}
    for r in results.values():
        for key, value in r.metrics.backend.items():
            if key.startswith("handover_") and key.endswith("_tables"):
                path = key[len("handover_") : -len("_tables")]
                totals[path] = totals.get(path, 0) + int(value)
    return {"handover_tables": dict(sorted(totals.items()))} if totals else {}
