"""The exact solver of planar Ising models without field (``--algo planar``).

A pairwise binary model whose tables have no field (:mod:`.ising`) and whose graph is planar is
solved exactly in polynomial time: its unsatisfied edges form a minimum-weight T-join of the
planar dual (:mod:`.dual`, :mod:`.tjoin`), the assignment follows by a walk (:mod:`.solver`).
"""

from __future__ import annotations

from dcop.planar.embed import why_not
from dcop.planar.ising import NotPlanar
from dcop.planar.solver import solve_planar

__all__ = ["NotPlanar", "solve_planar", "why_not"]
