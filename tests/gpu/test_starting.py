"""A device backend started on its own thread (dcop.starting), on the fake CuPy: the solve
takes it after ordering and answers as on NumPy; a start that fails raises in the caller."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from dcop.backends import resolve_backend
from dcop.backends.numpy import NumpyBackend
from dcop.cli.entry import load_app
from dcop.errors import BackendUnavailable
from dcop.inference import solve
from dcop.starting import StartingBackend, timings
from tests.conftest import INSTANCES, random_problem
from tests.gpu import fake_cupy


def test_started_backend_is_warm_and_solves_as_numpy(fake_cupy_module: ModuleType) -> None:
    from dcop.gpu import CupyBackend

    starting = StartingBackend("cupy")
    problem = random_problem(3, integer=True)
    got = solve(problem, backend=starting)
    want = solve(problem, backend="numpy")
    assert isinstance(starting.result(), CupyBackend) and got.backend == "cupy"
    assert got.lower_bound == pytest.approx(want.lower_bound)
    assert got.upper_bound == pytest.approx(want.upper_bound)
    # warmed up on its thread: the min generic kernels of both dtypes were loaded there
    assert {"dcop_join_elim_generic_min_f32", "dcop_join_elim_generic_min_f64"} <= set(
        fake_cupy.COMPILED
    )
    assert set(timings(starting)) == {
        "backend_start",
        "backend_wait",
        "backend_kernels",
        "backend_init",
        "backend_warm_up",
    }
    assert got.times["backend"] >= 0 and got.times["kernel_compile"] >= 0
    # nothing warmed where no op is asked for (a PR/MAR run by the contraction engine)
    fake_cupy.COMPILED.clear()
    assert isinstance(StartingBackend("cupy", ops=()).result(), CupyBackend)
    assert fake_cupy.COMPILED == []


def test_a_start_that_fails_raises_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # no CuPy on this machine
    with pytest.raises(BackendUnavailable, match=r"needs CuPy|no usable"):
        resolve_backend(StartingBackend("cupy"))
    assert isinstance(resolve_backend(StartingBackend("auto")), NumpyBackend)
    assert resolve_backend("numpy").name == "numpy"


def test_cli_solve_on_a_started_backend(fake_cupy_module: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    model = INSTANCES / "test_Z.uai"
    if not model.exists():
        pytest.skip("no shared instances")
    run = CliRunner().invoke(
        load_app(["solve"], {}),
        ["solve", str(model), "--backend", "cupy", "-q", "--json", str(out)],
    )
    assert run.exit_code == 0, run.output
    doc = json.loads(out.read_text())
    cpu = CliRunner().invoke(
        load_app(["solve"], {}), ["solve", str(model), "-q", "--json", str(tmp_path / "c.json")]
    )
    assert cpu.exit_code == 0
    assert doc["solver"]["backend"] == "cupy" and doc["times"]["kernel_compile"] >= 0
    assert doc["cost"] == pytest.approx(json.loads((tmp_path / "c.json").read_text())["cost"])


def test_the_entry_point_starts_the_device_the_arguments_ask_for(
    fake_cupy_module: ModuleType,
) -> None:
    from dcop.starting import start_early, take_early

    start_early(["f.uai", "--backend", "cupy", "-q"])
    early = take_early("cupy", ("min",))
    assert isinstance(early, StartingBackend) and early.result().name == "cupy"
    assert take_early("cupy", ("min",)) is None  # taken once
    start_early(["f.uai", "--backend=auto", "--task", "pr"])
    assert take_early("auto", ("min",)) is None  # PR warms no join kernel
    assert isinstance(take_early("auto", ()), StartingBackend)
    for argv in (
        ["f.uai"],
        ["f.uai", "--backend", "numpy"],
        ["f", "--backend", "cupy", "--device", "1"],
    ):
        start_early(argv)
    assert take_early("cupy", ("min",)) is None and take_early("numpy", ("min",)) is None


def test_auto_on_a_small_file_defers_the_entry_points_start(
    fake_cupy_module: ModuleType, tmp_path: Path
) -> None:
    from dcop.starting import SMALL_FILE_BYTES, start_early, take_early

    small = tmp_path / "small.wcsp"
    small.write_text("x" * 100)
    start_early([str(small), "--algo", "auto", "--backend", "cupy"])
    deferred = take_early("cupy", ("min",))
    assert isinstance(deferred, StartingBackend) and not deferred.begun
    assert deferred.result().name == "cupy" and deferred.begun  # begins once asked for
    large = tmp_path / "large.wcsp"
    large.write_bytes(b"x" * SMALL_FILE_BYTES)
    for argv in (
        [str(large), "--algo", "auto", "--backend", "cupy"],  # a large file: begun at once
        [str(small), "--algo", "be", "--backend", "cupy"],  # not auto: the device is used
        ["missing.wcsp", "--algo", "auto", "--backend", "cupy"],  # no file: begun
    ):
        start_early(argv)
        early = take_early("cupy", ("min",))
        assert isinstance(early, StartingBackend) and early.begun, argv
        early.result()
