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

The graph (pairs with a non-zero coupling) must be planar: :func:`planar_embedding` asks
networkx's left-right test, which also gives the embedding the faces are read from. Everything
else here costs milliseconds on a thousand variables; the planarity test is run last, only on a
pairwise binary model without field.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dcop.errors import ModelError
from dcop.model import Problem

#: A field or a coupling of at most this share of the costs' size is float noise, dropped.
FIELD_REL = 1e-9

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class NotPlanar(ModelError):
    """The planar solver does not apply to this problem; the message says why, in one line."""


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
            raise NotPlanar(_not_binary(name, var.size))
    index = {name: i for i, name in enumerate(names)}
    n = len(names)
    field = np.zeros(n)
    constant = float(problem.constant)
    pairs: dict[tuple[int, int], float] = {}
    scale = 0.0
    for table in problem.tables:
        if table.arity > 2:
            raise NotPlanar(f"planar: a table over {table.arity} variables ({table.label})")
        costs = table.costs
        if not np.isfinite(costs).all():
            raise NotPlanar(f"planar: table {table.label} has an infinite cost (a hard constraint)")
        scale = max(scale, float(np.abs(costs).max(initial=0.0)))
        if table.arity == 0:
            constant += float(costs)
        elif table.arity == 1:
            u0, u1 = float(costs[0]), float(costs[1])
            constant += (u0 + u1) / 2
            field[index[table.scope[0]]] += (u1 - u0) / 2
        else:
            (a00, a01), (a10, a11) = costs.tolist()
            i, j = index[table.scope[0]], index[table.scope[1]]
            spin = (a00 + a11 - a01 - a10) / 4  # J of J s_i s_j
            constant += (a00 + a01 + a10 + a11) / 4 + spin
            field[i] += (a10 + a11 - a00 - a01) / 4
            field[j] += (a01 + a11 - a00 - a10) / 4
            key = (i, j) if i < j else (j, i)
            pairs[key] = pairs.get(key, 0.0) - 2 * spin
    tolerance = FIELD_REL * scale
    worst = int(np.argmax(np.abs(field))) if n else 0
    if n and abs(field[worst]) > tolerance:
        raise NotPlanar(
            f"planar: {names[worst]} has a field (its unary parts cost {2 * field[worst]:.6g} "
            "more at value 1 than at value 0)"
        )
    slack = float(np.abs(field).sum())
    if pairs:
        keys = np.array(list(pairs), dtype=np.int64)
        coupling = np.fromiter(pairs.values(), dtype=np.float64, count=len(pairs))
    else:
        keys = np.zeros((0, 2), dtype=np.int64)
        coupling = np.zeros(0)
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


def why_not(problem: Problem) -> str | None:
    """None where the planar solver applies to ``problem`` (pairwise, binary, no field, planar),
    else why not, in one line. A problem with a variable of other than two values is answered
    at once."""
    if any(var.size != 2 for var in problem.variables.values()):
        return next(
            _not_binary(name, var.size) for name, var in problem.variables.items() if var.size != 2
        )
    try:
        planar_embedding(ising_form(problem))
    except NotPlanar as exc:
        return str(exc)
    return None


def _not_binary(name: str, size: int) -> str:
    return f"planar: {name} takes {size} value{'' if size == 1 else 's'} (two are needed)"
