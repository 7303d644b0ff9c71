"""Recognition: is a problem a planar Ising model without field, and which one.

Every variable has two values, every table at most two variables and no infinite cost. Each
table is written in spins ``s = 2x - 1`` (value 0 is -1, value 1 is +1), where a binary table
``f(x, y)`` is exactly ``c + h_x s_x + h_y s_y + J s_x s_y`` and a unary one ``c + h s``. With
``J s_x s_y = J - 2J [x != y]`` the problem's cost is

    constant + sum over edges of K [x_i != x_j] + sum over variables of H_i s_i,

``K = -2J`` summed over the tables of a pair (either orientation), ``H_i`` the summed linear
parts of every table of ``i`` (its field). The planar solver needs ``H = 0``: a field is a
coupling to one more spin, and that spin breaks planarity in general.

Tolerance. Costs read from a UAI file are ``-ln`` of printed probabilities: a field that is zero
in the model comes out at about 1e-16 of the costs. A field of at most ``FIELD_REL`` times the
costs' size (the largest finite ``|cost|`` of any table) is dropped, and so is a coupling that
small; what is dropped is added up in :attr:`IsingModel.slack`, a bound on how far any
assignment's cost can be from the field-free form. The solver subtracts it from its lower bound,
so a proof stays a proof: the bounds meet (within the search's proof margin) only where the
dropped parts are float noise.

The graph (pairs with a non-zero coupling) must be planar: a full grid's embedding is its
drawing (:mod:`.grid`), any other graph asks networkx's left-right test (:func:`planar_embedding`),
which also gives the embedding the faces are read from (:mod:`.embed` chooses). Everything else
here costs milliseconds on a thousand variables; the planarity test is run last, only on a
pairwise binary model without field.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dcop.errors import ModelError
from dcop.model import CostTable, Problem

#: A field or a coupling of at most this share of the costs' size is float noise, dropped.
FIELD_REL = 1e-9

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class NotPlanar(ModelError):
    """The planar solver does not apply to this problem; the message says why, in one line."""


class PlanarLate(Exception):
    """The deadline came, or would come, before the planar solver's next step ends (a step that
    cannot be stopped once begun is not begun): the message says which step."""


@dataclass(frozen=True)
class IsingModel:
    """A problem as ``constant + sum_e K_e [x_a(e) != x_b(e)]`` over variable indices.

    ``names`` are the problem's variables in its order; edge ``e`` joins ``names[a[e]]`` and
    ``names[b[e]]`` (``a < b``, one edge per pair) with coupling ``K[e]`` (non-zero; ``K > 0``:
    the two prefer to be equal). ``slack`` bounds ``|cost(x) - form(x)|`` for every assignment
    (the fields and couplings dropped as noise); ``scale`` is the costs' size."""

    names: tuple[str, ...]
    a: IntArray
    b: IntArray
    coupling: FloatArray
    constant: float
    slack: float
    scale: float

    def energy(self, spins: npt.NDArray[np.int8]) -> float:
        """The field-free form's cost of an assignment (value indices in ``names`` order)."""
        differ = spins[self.a] != spins[self.b]
        return self.constant + float(np.sum(self.coupling[differ]))


def ising_form(problem: Problem) -> IsingModel:
    """The problem as an Ising model without field; :class:`NotPlanar` (one line: ``planar: ...``)
    where it is not one: a variable of other than two values, a table over three variables or
    more, an infinite cost, a field."""
    names = tuple(problem.variables)
    for name, var in problem.variables.items():
        if var.size != 2:
            raise NotPlanar(not_binary(name, var.size))
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    by_arity: tuple[list[CostTable], list[CostTable], list[CostTable]] = ([], [], [])
    for table in problem.tables:
        if table.arity > 2:
            raise NotPlanar(f"planar: a table over {table.arity} variables ({table.label})")
        by_arity[table.arity].append(table)
    nullary, unary, binary = by_arity
    # every table's costs at once: a Python loop over the tables, arrays for the arithmetic
    c0 = np.array([float(t.costs) for t in nullary])
    c1 = np.array([t.costs for t in unary]).reshape(-1, 2)
    c2 = np.array([t.costs for t in binary]).reshape(-1, 2, 2)
    for costs, tables in ((c0, nullary), (c1, unary), (c2, binary)):
        finite = np.isfinite(costs).reshape(len(tables), -1).all(axis=1) if tables else costs
        if not finite.all():
            label = tables[int(np.argmin(finite))].label
            raise NotPlanar(f"planar: table {label} has an infinite cost (a hard constraint)")
    scale = max((float(np.abs(c).max()) for c in (c0, c1, c2) if c.size), default=0.0)
    at1 = np.array([index[t.scope[0]] for t in unary], dtype=np.int64)
    i = np.array([index[t.scope[0]] for t in binary], dtype=np.int64)
    j = np.array([index[t.scope[1]] for t in binary], dtype=np.int64)
    a00, a01, a10, a11 = c2[:, 0, 0], c2[:, 0, 1], c2[:, 1, 0], c2[:, 1, 1]
    spin = (a00 + a11 - a01 - a10) / 4  # J of J s_i s_j
    constant = float(problem.constant) + float(c0.sum()) + float(c1.sum()) / 2
    constant += float(((a00 + a01 + a10 + a11) / 4 + spin).sum())
    field = np.zeros(n)  # (bincount of no index at all is of integers)
    field += np.bincount(at1, weights=(c1[:, 1] - c1[:, 0]) / 2, minlength=n)
    field += np.bincount(i, weights=(a10 + a11 - a00 - a01) / 4, minlength=n)
    field += np.bincount(j, weights=(a01 + a11 - a00 - a10) / 4, minlength=n)
    # one edge per pair, its tables' couplings summed (either orientation)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    pair, where = np.unique(lo * max(n, 1) + hi, return_inverse=True)
    coupling = np.bincount(where, weights=-2 * spin, minlength=pair.size).astype(np.float64)
    keys = np.stack([pair // max(n, 1), pair % max(n, 1)], axis=1).astype(np.int64)
    tolerance = FIELD_REL * scale
    worst = int(np.argmax(np.abs(field))) if n else 0
    if n and abs(field[worst]) > tolerance:
        raise NotPlanar(
            f"planar: {names[worst]} has a field (its unary parts cost {2 * field[worst]:.6g} "
            "more at value 1 than at value 0)"
        )
    slack = float(np.abs(field).sum())
    noise = np.abs(coupling) <= tolerance
    if noise.any():
        # K [x != y] is within |K| of 0 and of K: dropping it moves any cost by at most |K|
        slack += float(np.abs(coupling[noise]).sum())
        keys, coupling = keys[~noise], coupling[~noise]
    return IsingModel(
        names=names,
        a=keys[:, 0].copy(),
        b=keys[:, 1].copy(),
        coupling=coupling,
        constant=constant,
        slack=slack,
        scale=scale,
    )


def planar_embedding(model: IsingModel) -> object:
    """A planar embedding of the model's graph (a :class:`networkx.PlanarEmbedding` over variable
    indices, every variable a node); :class:`NotPlanar` where the graph is not planar."""
    import networkx as nx

    n, m = len(model.names), len(model.a)
    if n >= 3 and m > 3 * n - 6:  # Euler: a simple planar graph has at most 3n - 6 edges
        raise NotPlanar(f"planar: the graph is not planar ({m} edges on {n} variables)")
    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(model.a.tolist(), model.b.tolist(), strict=True))
    planar, embedding = nx.check_planarity(graph)
    if not planar:
        raise NotPlanar("planar: the graph is not planar")
    return embedding


def not_binary(name: str, size: int) -> str:
    """Why a variable of ``size`` values is refused, in one line."""
    return f"planar: {name} takes {size} value{'' if size == 1 else 's'} (two are needed)"
