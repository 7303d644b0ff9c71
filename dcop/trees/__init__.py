"""Pseudo-trees: the tree type, the DFS that builds one, candidate trees and UTIL sizing.

* ``pseudotree``  ``PseudoTree`` and the centralized DFS (most neighbours first)
* ``candidates``  how a candidate tree is built (heuristic, root rule and rank, seed)
* ``dfs``         the distributed DFS as pure per-agent state, and its in-process simulator
* ``sizing``      each agent's UTIL message planned from scopes, before any table exists
* ``induced``     an elimination order's induced scopes and its pseudo-tree (the coordinator's
                  elimination tree; the ordering engine measures orders by the scopes)

The coordinator and the agents both use this room (the agents step the DFS, the coordinator
simulates it to pick ``--trees``), so neither imports the other. Nothing here touches a transport
or a device. Import the submodules (nothing loads here, so an agent pays only for what it uses).
"""
