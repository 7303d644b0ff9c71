"""The search's compiler starts without SciPy's linear algebra (numba's BLAS probe skipped), and
SciPy stays importable afterwards."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("numba")
pytest.importorskip("scipy")

PROBE = """
import sys
from dcop.search import jit
from dcop.search.kernel import search  # noqa: F401
assert jit.COMPILED
import numba.np.arraymath
print("scipy.linalg" in sys.modules, numba.np.arraymath._HAVE_BLAS)
import scipy.linalg
print(scipy.linalg.__name__)
"""


def test_numba_starts_without_scipy_linalg() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == ["False", "False", "scipy.linalg"]
