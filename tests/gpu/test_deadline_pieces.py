"""A deadline inside one large bucket on the CuPy backend (fake CuPy): under a check
(:mod:`dcop.backends.between`) a join+eliminate is queued in pieces of predicted work, and the
backend waits for its stream after each piece and runs the check, which may stop the bucket
there; without a check nothing waits. Pieces are made small here (``piece_seconds``) so that a
small bucket has many; what is counted is launches, waits and checks, never seconds."""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from dcop import bucketpass
from dcop.backends.between import checked_between
from dcop.backends.numpy import NumpyBackend
from dcop.gpu.plan import grid_units, piece_units, predicted_seconds
from dcop.search import solve_aobb
from dcop.search import solver as search_solver
from dcop.tables import Table
from tests.conftest import hub, hub_optimum
from tests.gpu import fake_cupy

#: The hub's pieces: this many output rows each (its bucket has 10**LEAVES rows; a piece holds
#: at least a launch's whole grid, 16384 rows of the fake's two multiprocessors).
PIECE_ROWS = 20_000
LEAVES = 5
VALUES = 20  # the hub's values: the only bucket whose eliminated domain is not 10


class Stop(Exception):
    """The check's own exception: the backend must let it through."""


def device(**kwargs: Any) -> Any:
    """A CuPy backend whose pieces are PIECE_ROWS rows of the hub's bucket."""
    from dcop.gpu import CupyBackend

    backend = CupyBackend(**kwargs)
    shape = backend.prepare(hub_tables(backend), "h").plan
    backend.piece_seconds = predicted_seconds(shape, PIECE_ROWS)
    backend.synchronize()  # nothing queued before a test counts
    return backend


def hub_tables(backend: Any, leaves: int = LEAVES) -> list[Table]:
    problem, _ = hub(VALUES, leaves)
    return [backend.table(t.scope, t.dense(), np.float64) for t in problem.tables]


def pieces_of_the_hub(backend: Any) -> int:
    shape = backend.prepare(hub_tables(backend), "h").plan
    grid = grid_units(shape, backend.sm_count)
    return -(-shape.n_units // piece_units(shape, backend.piece_seconds, grid))


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every stream's ``synchronize``, by the stream waited for."""
    seen: list[Any] = []
    monkeypatch.setattr(fake_cupy.FakeStream, "synchronize", lambda self: seen.append(self))
    return seen


def hub_launches() -> int:
    """Launches of the fused kernel so far (the hub's bucket is the one the tests run)."""
    return sum(name.startswith("dcop_join_elim_") for name in fake_cupy.LAUNCHED)


def raising_at(n: int, calls: list[int]) -> Any:
    def check() -> None:
        calls.append(1)
        if len(calls) == n:
            raise Stop

    return check


def test_a_check_that_raises_stops_the_bucket_at_its_piece(
    fake_cupy_module: ModuleType, waits: list[Any]
) -> None:
    backend = device()
    tables = hub_tables(backend)
    assert pieces_of_the_hub(backend) == 5
    fake_cupy.LAUNCHED.clear()
    waits.clear()
    calls: list[int] = []
    with checked_between(raising_at(3, calls)), pytest.raises(Stop):
        backend.join_eliminate(tables, "h")
    # three pieces queued, each waited for before its check; the third check stopped the rest
    assert hub_launches() == 3
    assert len(calls) == 3
    assert waits == [backend.stream] * 3


def test_without_a_check_nothing_waits_and_the_pieces_give_the_same_table(
    fake_cupy_module: ModuleType, waits: list[Any]
) -> None:
    backend = device()
    tables = hub_tables(backend)
    fake_cupy.LAUNCHED.clear()
    waits.clear()
    whole = backend.to_numpy(backend.join_eliminate(tables, "h").data)
    assert hub_launches() == 1  # one launch, as before any deadline
    assert waits == []  # no check: no wait added (to_numpy's own copy here is a small one)
    calls: list[int] = []
    with checked_between(lambda: calls.append(1)):
        pieces = backend.join_eliminate(tables, "h")
    assert hub_launches() == 1 + 5
    assert len(calls) == 5 and waits == [backend.stream] * 5
    np.testing.assert_array_equal(backend.to_numpy(pieces.data), whole)
    host = [Table(t.scope, backend.to_numpy(t.data)) for t in tables]
    expected = NumpyBackend(threads=1).join_eliminate(host, "h", scope=pieces.scope)
    np.testing.assert_allclose(whole, expected.data)


def test_the_backend_is_usable_after_a_stop(fake_cupy_module: ModuleType, waits: list[Any]) -> None:
    backend = device()
    tables = hub_tables(backend)
    with checked_between(raising_at(2, [])), pytest.raises(Stop):
        backend.join_eliminate(tables, "h")
    again = backend.join_eliminate(tables, "h")  # no check: the whole bucket, as before
    host = [Table(t.scope, backend.to_numpy(t.data)) for t in tables]
    expected = NumpyBackend(threads=1).join_eliminate(host, "h", scope=again.scope)
    np.testing.assert_allclose(backend.to_numpy(again.data), expected.data)


def test_a_chunked_output_stops_between_its_pieces_with_its_copies_done(
    fake_cupy_module: ModuleType, waits: list[Any]
) -> None:
    """An output larger than the device's share goes to pinned host memory in chunks copied on
    a second stream: a stop waits for that copy too before the host array can be freed."""
    # chunks of 2 pieces (40000 rows of 8 bytes): three of them
    backend = device(max_device_bytes=700_000, chunk_bytes=2 * PIECE_ROWS * 8)
    tables = hub_tables(backend)
    fake_cupy.LAUNCHED.clear()
    waits.clear()
    calls: list[int] = []
    with checked_between(raising_at(3, calls)), pytest.raises(Stop):
        backend.join_eliminate(tables, "h")
    assert backend.transfers.chunks == 1  # stopped inside the second of three chunks
    assert hub_launches() == 3 and len(calls) == 3
    assert waits[-2:] == [backend.stream, backend.copy_stream]  # the copies finished
    again = backend.join_eliminate(tables, "h")
    assert isinstance(again.data, np.ndarray)  # chunked to the host
    host = [Table(t.scope, backend.to_numpy(t.data)) for t in tables]
    expected = NumpyBackend(threads=1).join_eliminate(host, "h", scope=again.scope)
    np.testing.assert_allclose(again.data, expected.data)


def test_a_pass_hears_its_hook_inside_the_device_s_bucket(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch, waits: list[Any]
) -> None:
    monkeypatch.setattr(bucketpass, "PROGRESS_WITHIN_S", 0.0)  # every check calls the hook
    problem, order = hub(VALUES, LEAVES)
    heard: list[str] = []

    def hook(done: int, total: int, var: str) -> None:
        heard.append(var)
        if heard.count("h") == 4:  # before the bucket, then after its third piece
            raise Stop

    with pytest.raises(Stop):
        bucketpass.bucket_pass(problem, order.order, device(), None, progress=hook)
    assert heard == ["h"] * 4
    assert hub_launches() >= 3


class _Clock:
    """The search's clock, jumped an hour on once the hub's bucket has run ``after`` pieces:
    its deadline passes there, whatever this machine's speed."""

    def __init__(self, after: int, launched: list[int]) -> None:
        self.after = after
        self.launched = launched

    def monotonic(self) -> float:
        return time.monotonic() + (3600.0 if self.launched[0] >= self.after else 0.0)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_a_search_stopped_inside_a_device_bucket_keeps_its_first_answer(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bucketpass, "PROGRESS_WITHIN_S", 0.0)
    launched = [0]  # pieces of the hub's bucket (the one bucket of VALUES values) so far
    real_call = fake_cupy.FakeRawKernel.__call__

    def counting(self: Any, grid: Any, block: Any, args: tuple[Any, ...], **kw: Any) -> None:
        if self.name.startswith("dcop_join_elim_generic_") and int(args[0].a[2]) == VALUES:
            launched[0] += 1
        real_call(self, grid, block, args, **kw)

    monkeypatch.setattr(fake_cupy.FakeRawKernel, "__call__", counting)
    monkeypatch.setattr(search_solver, "time", _Clock(3, launched))
    problem, order = hub(VALUES, LEAVES)
    backend = device()
    launched[0] = 0
    result = solve_aobb(
        problem, z=7, ordering=order, backend=backend, deadline=time.monotonic() + 600.0,
        reduced=False, threads=1,
    )  # fmt: skip
    assert launched[0] == 3  # of 5: the deadline was heard inside the bucket
    assert result.status == "timeout" and not result.exact
    assert result.upper_bound == pytest.approx(problem.evaluate(result.assignment))
    optimum = hub_optimum(problem)
    assert result.lower_bound <= optimum + 1e-9 <= result.upper_bound + 2e-9
    # the backend goes on: the same search without a deadline proves the optimum on it
    monkeypatch.setattr(search_solver, "time", time)
    whole = solve_aobb(problem, z=7, ordering=order, backend=backend, reduced=False, threads=1)
    assert whole.status == "ok" and whole.upper_bound == pytest.approx(optimum)


#: The kernels a bucket may run: the generic one, a generated one with a group of rows per
#: thread, and a generated one with one row per thread.
KERNELS = {
    "generic": {},
    "generated": {"specialize_entries": 0, "min_groups": 0},
    "generated-rows": {"specialize_entries": 0, "min_groups": 1 << 40},
}


def pieces_match_one_launch(backend: Any, leaves: int) -> None:
    """The hub's bucket in pieces of a seventh or a launch's whole grid (the last a partial
    one), under a check that counts and under one that raises at the second piece, against the
    bucket in one launch and NumPy's; and the bucket in one launch again after the stop."""
    tables = hub_tables(backend, leaves)
    shape = backend.prepare(tables, "h").plan
    backend.piece_seconds = predicted_seconds(shape, max(1, shape.n_units // 7))
    grid = grid_units(shape, backend.sm_count)
    pieces = -(-shape.n_units // piece_units(shape, backend.piece_seconds, grid))
    assert pieces >= 3
    whole = backend.to_numpy(backend.join_eliminate(tables, "h").data)
    calls: list[int] = []
    with checked_between(lambda: calls.append(1)):
        checked = backend.to_numpy(backend.join_eliminate(tables, "h").data)
    np.testing.assert_array_equal(checked, whole)
    assert len(calls) >= pieces - 1  # the last, partial piece may leave its work queued
    with checked_between(raising_at(2, [])), pytest.raises(Stop):
        backend.join_eliminate(tables, "h")
    again = backend.to_numpy(backend.join_eliminate(tables, "h").data)
    np.testing.assert_array_equal(again, whole)
    host = [Table(t.scope, backend.to_numpy(t.data)) for t in tables]
    expected = NumpyBackend(threads=1).join_eliminate(host, "h", scope=shape.out_scope)
    np.testing.assert_allclose(whole, expected.data)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_pieces_of_every_kernel_write_their_own_rows(
    fake_cupy_module: ModuleType, kernel: str
) -> None:
    from dcop.gpu import CupyBackend

    pieces_match_one_launch(CupyBackend(**KERNELS[kernel]), LEAVES)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_pieces_on_the_device_give_the_same_table(cp: Any, kernel: str) -> None:
    """The same on a real GPU (10**7 rows: pieces of whole grids): the kernels' launch ranges
    and output offsets of a piece."""
    from dcop.gpu import CupyBackend

    pieces_match_one_launch(CupyBackend(**KERNELS[kernel]), 7)
