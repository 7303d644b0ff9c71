"""Distributed runs ask for one BLAS thread before NumPy loads (see dcop.blas)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dcop.blas import BLAS_THREAD_VARIABLES, one_blas_thread


def test_one_blas_thread_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BLAS_THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    one_blas_thread()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1" and os.environ["MKL_NUM_THREADS"] == "4"


def _child(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in BLAS_THREAD_VARIABLES}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_importing_dcop_does_not_load_numpy_before_a_process_can_set_its_threads() -> None:
    assert _child("import sys, dcop; print('numpy' in sys.modules)") == "False"
    assert _child("import dcop; print(dcop.Problem.__name__)") == "Problem"


@pytest.mark.parametrize(
    ("command", "threads"),
    [("coordinator", "1"), ("solve", "1"), ("info", "1"), ("generate", "None")],
)
def test_the_solving_and_coordinating_commands_ask_for_one_blas_thread(
    command: str, threads: str
) -> None:
    code = (
        "import os, sys\n"
        "from dcop.cli.entry import prepare\n"
        f"prepare([{command!r}, '--help'])\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    assert _child(code) == threads
