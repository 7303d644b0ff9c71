"""PR and MAR through ``CupyBackend`` on the fake CuPy (no GPU): the host side of the sum-product
steps (0-d UTILs, merged-axis reductions, neutral tables, transposes, downloads) gives the NumPy
backend's numbers. The CUDA sources are checked on a device by
``tests/inference/test_sumproduct.py``."""

from __future__ import annotations

from types import ModuleType
from typing import Any, ClassVar

import numpy as np
import pytest

from dcop.inference.partition import infer
from tests.inference.test_sumproduct import observe, random_markov


@pytest.mark.parametrize("seed", range(6))
def test_pr_and_mar_on_the_fake_gpu_equal_numpy(fake_cupy_module: ModuleType, seed: int) -> None:
    from dcop.gpu import CupyBackend

    problem = random_markov(seed, n=7, zeros=0.1, shift=(-1) ** seed * 200.0)
    if seed % 2:
        problem = observe(problem, seed)
    cpu = infer(problem, "mar")
    gpu = infer(problem, "mar", backend=CupyBackend())
    assert gpu.status == cpu.status and gpu.backend == "cupy"
    if cpu.status != "ok":
        return
    assert gpu.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
    assert gpu.marginals is not None and cpu.marginals is not None
    for v, probs in cpu.marginals.items():
        np.testing.assert_allclose(gpu.marginals[v], probs, atol=1e-12)
    bounds_cpu = infer(problem, "pr", z=2)
    bounds_gpu = infer(problem, "pr", z=2, backend=CupyBackend())
    assert bounds_gpu.ln_upper == pytest.approx(bounds_cpu.ln_upper, rel=1e-12)
    assert bounds_gpu.ln_lower == pytest.approx(bounds_cpu.ln_lower, rel=1e-12) or (
        bounds_gpu.ln_lower == bounds_cpu.ln_lower
    )


class _StreamCheckedArray(np.ndarray):
    """A NumPy array that fails arithmetic done off its backend's stream."""

    on_stream: ClassVar[list[bool]] = [False]

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):  # type: ignore[no-untyped-def]
        assert self.on_stream[0], f"{ufunc.__name__} ran off the backend's stream"
        plain = [np.asarray(x) if isinstance(x, _StreamCheckedArray) else x for x in inputs]
        return getattr(ufunc, method)(*plain, **kwargs).view(_StreamCheckedArray)


class _StreamBackend:
    """NumPy's backend with a stream context (as CupyBackend.stream_context) that the arrays check."""

    def __init__(self) -> None:
        from dcop.backends.numpy import NumpyBackend

        self.inner = NumpyBackend()

    def stream_context(self) -> Any:
        import contextlib

        @contextlib.contextmanager
        def bound() -> Any:
            _StreamCheckedArray.on_stream[0] = True
            try:
                yield
            finally:
                _StreamCheckedArray.on_stream[0] = False

        return bound()

    def join_eliminate(self, tables: Any, var: str, op: Any, scope: Any = None) -> Any:
        from dcop.tables import Table

        with self.stream_context():
            plain = [Table(t.scope, np.asarray(t.data)) for t in tables]
            out = self.inner.join_eliminate(plain, var, op, scope=scope)
            return Table(out.scope, np.asarray(out.data).view(_StreamCheckedArray))

    def to_numpy(self, data: Any) -> np.ndarray:
        return np.asarray(data)


def test_weighted_mini_buckets_scale_their_tables_on_the_backends_stream() -> None:
    """Weighted MBE divides each mini-bucket's tables by its weight and multiplies the message
    back: on a GPU that arithmetic must queue on the backend's (non-blocking) stream, else the
    backend's kernel may read a table before the division that made it has run (the GPU's
    weighted bounds differed from NumPy's when several processes shared the device)."""
    from dcop.sumproduct import bound_util
    from dcop.tables import Table

    rng = np.random.default_rng(0)
    scopes = [("a", "b"), ("a", "c"), ("a", "d")]
    tables = [Table(s, rng.normal(size=(2, 3)).view(_StreamCheckedArray)) for s in scopes]
    got, _ = bound_util(_StreamBackend(), tables, "a", 2, "weighted")  # type: ignore[arg-type]
    want, _ = bound_util(
        __import__("dcop.backends.numpy", fromlist=["NumpyBackend"]).NumpyBackend(),
        [Table(t.scope, np.asarray(t.data)) for t in tables],
        "a",
        2,
        "weighted",
    )
    assert len(got) == len(want) > 1
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g.data), w.data)


@pytest.mark.parametrize("host_split", [0, 1 << 20])
def test_mar_beliefs_of_several_variables_split_on_the_host_or_the_device(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch, host_split: int
) -> None:
    """A belief table over several variables is split per variable on the host after the one
    transfer (HOST_SPLIT and below) or by a launch per variable (above): the same marginals as
    NumPy's either way, on trees that run on the device, with and without evidence, ln Z far
    from 0 (every adjoint rescaled and its tiny entries counted in the same pass)."""
    from dcop.contraction import engine, execute
    from dcop.gpu import CupyBackend

    monkeypatch.setattr(engine, "HOST_LARGEST", 0)
    monkeypatch.setattr(execute, "HOST_SPLIT", host_split)
    widths: list[int] = []
    beliefs = execute.DeviceScaled.beliefs

    def counted(self: Any, node: Any, adj: Any, names: Any) -> Any:
        widths.append(len(names))
        return beliefs(self, node, adj, names)

    monkeypatch.setattr(execute.DeviceScaled, "beliefs", counted)
    for seed in range(8):
        problem = random_markov(seed, n=9, zeros=0.05, shift=(-1) ** seed * 300.0)
        if seed % 3 == 1:
            problem = observe(problem, seed)
        cpu = infer(problem, "mar")
        gpu = infer(problem, "mar", backend=CupyBackend())
        assert gpu.status == cpu.status
        if cpu.status != "ok":
            continue
        assert gpu.ln_partition == pytest.approx(cpu.ln_partition, rel=1e-12)
        assert gpu.marginals is not None and cpu.marginals is not None
        assert set(gpu.marginals) == set(cpu.marginals)
        for v, probs in cpu.marginals.items():
            np.testing.assert_allclose(gpu.marginals[v], probs, atol=1e-12)
    assert max(widths) >= 2  # some source held several variables


def test_a_rescaled_adjoint_counts_its_tiny_entries_in_the_rescale_s_own_launch(
    fake_cupy_module: ModuleType,
) -> None:
    """An adjoint whose bounds leave the safe range is divided by its peak, and the entries
    below ``tiny`` are counted by that same launch (the count MAR's precision check reads)."""
    from dcop.contraction.execute import DeviceScaled, Node
    from dcop.gpu import CupyBackend
    from tests.gpu import fake_cupy

    space = DeviceScaled(CupyBackend(), np.float64, {"a": 3, "b": 2})
    xp = space.xp
    parent = Node(("a",), xp.asarray([1.0, 1e-200, 0.5]), hi=0.0, lo=-500.0)
    sibling = Node(
        ("a", "b"), xp.asarray([[1.0, 1e-150], [1e-120, 1.0], [0.25, 1.0]]), hi=0.0, lo=-400.0
    )
    child = Node(("a", "b"), xp.ones((3, 2)), hi=0.0, lo=0.0)
    fake_cupy.LAUNCHED.clear()
    node = space.adjoint(parent, sibling, child)
    assert fake_cupy.LAUNCHED == ["dcop_psum_rows_i32_f64", "dcop_peak_divide_small_f64"]
    assert len(space.scales) == 1 and node.hi == 0.0 and node.lo == -900.0
    # parent * sibling, divided by its peak 1: 1e-320 is the one entry below tiny
    assert len(space.counts) == 1 and int(space.counts[0][0].get()) == 1
    np.testing.assert_allclose(
        node.data.get(), [[1.0, 1e-150], [1e-320, 1e-200], [0.125, 0.5]], rtol=1e-3, atol=0
    )


def test_a_sliced_mar_on_the_fake_gpu_equals_the_whole_one(
    fake_cupy_module: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slicing a device MAR slices each small leaf's host copy with its data: the marginals
    equal the unsliced run's."""
    from dcop.contraction import contract, engine
    from dcop.contraction.execute import DeviceScaled
    from dcop.generators import ising_grid
    from dcop.gpu import CupyBackend
    from dcop.plan.memory import Limit

    monkeypatch.setattr(engine, "HOST_LARGEST", 0)
    problem = observe(ising_grid(6, 0.8, 0.2, seed=4), 3)
    gpu = CupyBackend()
    whole = contract(problem, "mar", gpu)
    inputs = sum(t.entries for t in problem.tables)
    peak = whole.plan.stats.peak("mar")
    room = Limit((inputs + (peak - inputs) // 2) * 8.0, "a test limit")
    sliced = contract(problem, "mar", gpu, room=room)
    assert sliced.plan.slices > 1
    assert sliced.ln_z == pytest.approx(whole.ln_z, rel=1e-12)
    assert sliced.marginals is not None and whole.marginals is not None
    for v, probs in whole.marginals.items():
        np.testing.assert_allclose(sliced.marginals[v], probs, atol=1e-12)
    # a leaf's host copy is sliced with its device data
    space = DeviceScaled(gpu, np.float64, {"a": 2, "b": 3})
    space.host_leaves = True  # as for a MAR
    (leaf,) = space.leaves([("a", "b")], [np.log(np.arange(1.0, 7.0).reshape(2, 3))])
    assert leaf.host is not None
    cut = space.slice_leaf(leaf, {"a": 1})
    assert cut.scope == ("b",) and cut.host is not None
    np.testing.assert_array_equal(cut.host, cut.data.get())
    np.testing.assert_allclose(cut.host, [4 / 6, 5 / 6, 1.0])
