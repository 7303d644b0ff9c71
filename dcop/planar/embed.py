"""The planar embedding the solver reads its faces from: a full grid's drawing where the graph is
one (:mod:`.grid`: linear, certified by Euler's formula), else networkx's planarity test
(:func:`dcop.planar.ising.planar_embedding`), which cannot be stopped once begun: with a deadline
it begins only where it is predicted to end in time (:data:`PLANARITY_S_PER_EDGE`).
"""

from __future__ import annotations

import time

from dcop.model import Problem
from dcop.planar.dual import successors_of
from dcop.planar.grid import grid_successors
from dcop.planar.ising import (
    IntArray,
    IsingModel,
    NotPlanar,
    PlanarLate,
    ising_form,
    not_binary,
    planar_embedding,
)

#: Seconds of networkx's planarity test and of reading its embedding, per edge: 1.2-2.2 s for the
#: 32,512 edges of a 128x128 grid on the 2-core VM (3.7e-5 to 6.8e-5); a prediction that errs long.
PLANARITY_S_PER_EDGE = 1e-4
#: How the embedding was found, as the solver's times name it.
HOW = ("grid", "networkx")


def planar_successors(model: IsingModel, deadline: float | None = None) -> tuple[IntArray, str]:
    """Each half-edge's successor around its face in a planar embedding of ``model``'s graph
    (:func:`dcop.planar.dual.dual_from_successors`), and how it was found (one of :data:`HOW`).
    :class:`~dcop.planar.ising.NotPlanar` where the graph is not planar;
    :class:`~dcop.planar.ising.PlanarLate` where networkx's test is predicted past
    ``deadline`` (a :func:`time.monotonic` instant)."""
    successor = grid_successors(model)
    if successor is not None:
        return successor, "grid"
    predicted = PLANARITY_S_PER_EDGE * len(model.a)
    if deadline is not None and time.monotonic() + predicted >= deadline:
        raise PlanarLate(
            f"networkx's planarity test (predicted {predicted:.3g} s) would not end before the "
            "deadline"
        )
    return successors_of(model, planar_embedding(model)), "networkx"


def why_not(problem: Problem) -> str | None:
    """None where the planar solver applies to ``problem`` (pairwise, binary, no field, planar),
    else why not, in one line. A problem with a variable of other than two values is answered
    at once."""
    for name, var in problem.variables.items():
        if var.size != 2:
            return not_binary(name, var.size)
    try:
        planar_successors(ising_form(problem))
    except NotPlanar as exc:
        return str(exc)
    return None
