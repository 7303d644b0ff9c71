"""GPU plans from shapes alone (no CuPy): kernel choice, signatures, metadata, chunk sizes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dcop.errors import ModelError
from dcop.gpu import kernels as K
from dcop.gpu.plan import (
    BucketPlan,
    PlanCache,
    PlanSettings,
    aggregate_meta,
    c_strides,
    chunk_units,
    kernel_dtype,
    launch_ranges,
    plan_join_eliminate,
)

# a bucket eliminating x (4 values): caller order T1 (a, x), T2 (a, b), T3 (x, b)
SCOPES = [("a", "x"), ("a", "b"), ("x", "b")]
SHAPES = [(3, 4), (3, 5), (4, 5)]
ALWAYS = PlanSettings(specialize_entries=0, min_groups=0, stage_output=True)
NEVER = PlanSettings(specialize_entries=1 << 62)


def test_strides_and_dtypes() -> None:
    assert c_strides((3, 4, 5)) == [20, 5, 1]
    assert c_strides(()) == []
    assert kernel_dtype([np.float32, np.float32]) == np.float32
    assert kernel_dtype([np.float32, np.float64]) == np.float64
    assert kernel_dtype([np.int64]) == np.float64  # integer tables are computed in float64


def test_generated_signature_of_a_bucket() -> None:
    plan = plan_join_eliminate(SCOPES, SHAPES, np.float32, "x", "min", settings=ALWAYS)
    # canonical order (a, b) < (a, x) < (x, b); the output keeps first appearance in the caller's
    assert plan.order == (1, 0, 2)
    assert plan.scopes == (("a", "b"), ("a", "x"), ("x", "b"))
    assert plan.out_scope == ("a", "b") and plan.out_shape == (3, 5)
    assert plan.generated and plan.joined == 60 and plan.out_bytes == 60
    assert plan.sig == K.FusedSig(
        dtype="float32",
        op="min",
        group_sizes=(3,),
        dy=5,
        ndom=4,
        tables=(
            K.TableSig(size=15, group_strides=(5,), sy=1, sx=0, shared=True),
            K.TableSig(size=12, group_strides=(4,), sy=0, sx=1, shared=True),
            K.TableSig(size=20, group_strides=(0,), sy=1, sx=5, shared=True),
        ),
        stage=True,
    )
    assert (plan.n_units, plan.rows_per_unit) == (3, 5)
    assert plan.kernel_name == plan.sig.name and plan.meta == ()


def test_few_groups_give_one_row_per_thread() -> None:
    settings = PlanSettings(specialize_entries=0, min_groups=100)
    plan = plan_join_eliminate(SCOPES, SHAPES, np.float64, "x", "max", settings=settings)
    assert plan.sig is not None
    assert plan.sig.group_sizes == (3, 5) and plan.sig.dy == 1 and not plan.sig.stage
    assert [(t.group_strides, t.sy, t.sx) for t in plan.sig.tables] == [
        ((5, 1), 0, 0),
        ((4, 0), 0, 1),
        ((0, 1), 0, 5),
    ]
    assert (plan.n_units, plan.rows_per_unit) == (15, 1)


def test_table_order_does_not_change_the_signature() -> None:
    first = plan_join_eliminate(SCOPES, SHAPES, np.float32, "x", scope=("a", "b"), settings=ALWAYS)
    for perm in itertools.permutations(range(3)):
        scopes = [SCOPES[j] for j in perm]
        shapes = [SHAPES[j] for j in perm]
        plan = plan_join_eliminate(
            scopes, shapes, np.float32, "x", scope=("a", "b"), settings=ALWAYS
        )
        assert plan.sig == first.sig
        # order maps plan position -> caller index
        assert [scopes[j] for j in plan.order] == list(first.scopes)


def test_shared_memory_goes_to_tables_read_per_eliminated_value_smaller_first() -> None:
    # float64; three tables with x of 2000, 3000 and 4000 entries, one without x of 100
    scopes = [("p", "x"), ("q", "x"), ("r", "x"), ("p", "q")]
    shapes = [(200, 10), (300, 10), (400, 10), (200, 300)]
    plan = plan_join_eliminate(
        scopes, shapes, np.float64, "x", scope=("p", "q", "r"), settings=ALWAYS
    )
    assert plan.sig is not None
    shared = {s: t.shared for s, t in zip(plan.scopes, plan.sig.tables, strict=True)}
    # staging 8 warps x 32 x 401 doubles is over half the budget, so no staging; 48 KiB hold 6144
    # doubles: (p, x) 2000 and (q, x) 3000 fit, then (r, x) 4000 does not, nor (p, q) 60000
    assert not plan.sig.stage
    assert shared == {("p", "x"): True, ("q", "x"): True, ("r", "x"): False, ("p", "q"): False}


def test_staging_fits_or_is_dropped() -> None:
    assert K.stage_bytes("float32", 5) == 8 * 32 * 5 * 4
    assert K.stage_bytes("float32", 4) == 8 * 32 * 5 * 4  # an odd row pitch
    plan = plan_join_eliminate([("a", "x")], [(4, 500)], np.float32, "a", settings=ALWAYS)
    assert plan.sig is not None and plan.sig.dy == 500 and not plan.sig.stage


def test_generic_metadata_layout() -> None:
    plan = plan_join_eliminate(SCOPES, SHAPES, np.float64, "x", "sum", settings=NEVER)
    assert not plan.generated and plan.sig is None
    assert plan.kernel_name == "dcop_join_elim_generic_sum_f64"
    # [n_tables, n_hoisted, NDOM]; per table [ptr, sx, s, (div, mod, mul) per output variable];
    # the table without x, (a, b), first
    assert plan.meta == (
        3, 1, 4,
        0, 0, 2, 5, 3, 5, 1, 5, 1,
        0, 1, 1, 5, 3, 4,
        0, 5, 1, 1, 5, 1,
    )  # fmt: skip
    assert plan.pointers == ((3, 0), (12, 1), (18, 2))  # positions of plan tables 0, 1, 2
    assert (plan.n_units, plan.rows_per_unit) == (15, 1)


def test_aggregate_metadata_layout() -> None:
    sizes = {"a": 3, "b": 5, "x": 4}
    meta, pointers = aggregate_meta(SCOPES[:2], SHAPES[:2], ("a", "b", "x"), sizes)
    # per table [ptr, s, mul.., div.., mod..]
    assert meta == (0, 2, 4, 1, 20, 1, 3, 4, 0, 2, 5, 1, 20, 4, 3, 5)
    assert pointers == ((0, 0), (8, 1))


@pytest.mark.parametrize(
    ("settings", "scopes", "shapes", "generated"),
    [
        (PlanSettings(specialize_entries=60), SCOPES, SHAPES, True),  # joined 60 >= 60
        (PlanSettings(specialize_entries=61), SCOPES, SHAPES, False),
        # more tables than the generic kernel takes
        (NEVER, [("a", "x")] * (K.GENERIC_MAX_TABLES + 1), [(3, 4)] * 33, True),
        (NEVER, [("a", "x")] * K.GENERIC_MAX_TABLES, [(3, 4)] * 32, False),
    ],
)
def test_generic_or_generated(
    settings: PlanSettings, scopes: list, shapes: list, generated: bool
) -> None:
    plan = plan_join_eliminate(scopes, shapes, np.float32, "x", settings=settings)
    assert plan.generated is generated


def test_too_much_metadata_means_generated() -> None:
    # 30 tables (fewer than GENERIC_MAX_TABLES) of 45 variables: 3 + 30 * (3 + 3 * 45) words
    names = [f"v{i}" for i in range(44)]
    scopes = [(*names, "x")] * 30
    shapes = [(1,) * 44 + (2,)] * 30
    assert K.GENERIC_MAX_TABLES >= 30 and K.GENERIC_MAX_META < 3 + 30 * (3 + 3 * 45)
    assert plan_join_eliminate(scopes, shapes, np.float32, "x", settings=NEVER).generated


def test_plan_errors() -> None:
    with pytest.raises(ModelError, match="at least one"):
        plan_join_eliminate([], [], np.float32, "x")
    with pytest.raises(ModelError, match="none of the tables"):
        plan_join_eliminate(SCOPES, SHAPES, np.float32, "z")
    with pytest.raises(ModelError, match="cannot hold"):
        plan_join_eliminate(SCOPES, SHAPES, np.float32, "x", scope=("a", "b", "x"))
    with pytest.raises(ModelError, match="does not match the tables"):
        plan_join_eliminate(SCOPES, SHAPES, np.float32, "x", scope=("a",))
    with pytest.raises(ModelError, match="domain 3 in one table and 4"):
        plan_join_eliminate([("a", "x"), ("a",)], [(3, 4), (4,)], np.float32, "x")
    with pytest.raises(ModelError, match="has shape"):
        plan_join_eliminate([("a", "x")], [(3,)], np.float32, "x")
    with pytest.raises(ModelError, match="float32 or float64"):
        plan_join_eliminate(SCOPES, SHAPES, np.int32, "x")
    with pytest.raises(ModelError, match="unknown elimination op"):
        plan_join_eliminate(SCOPES, SHAPES, np.float32, "x", "avg")


def test_more_groups_than_32_bits_plan_a_64_bit_counter() -> None:
    # only shapes: planning a 2**35-row output allocates nothing
    scopes = [("a", "b", "c", "x")]
    shapes = [(1 << 17, 1 << 17, 4, 2)]
    plan = plan_join_eliminate(scopes, shapes, np.float32, "x", settings=ALWAYS)
    assert plan.sig is not None and plan.sig.wide_groups and plan.n_units == 1 << 34
    small = plan_join_eliminate([("a", "x")], [(1 << 10, 2)], np.float32, "x", settings=ALWAYS)
    assert small.sig is not None and not small.sig.wide_groups


def _plan_with(rows_per_unit: int, dtype: type) -> BucketPlan:
    plan = plan_join_eliminate(SCOPES, SHAPES, dtype, "x", settings=ALWAYS)
    assert plan.rows_per_unit == rows_per_unit
    return plan


def test_chunk_units() -> None:
    plan = _plan_with(5, np.float32)  # 20 bytes per unit
    assert chunk_units(plan, chunk_bytes=100, device_budget=1e9) == 5
    assert chunk_units(plan, chunk_bytes=100, device_budget=60) == 1  # half the budget: 30 B
    assert chunk_units(plan, chunk_bytes=10, device_budget=1e9) == 1  # at least one unit
    assert chunk_units(plan, chunk_bytes=1 << 30, device_budget=400) == 10


def test_launch_ranges() -> None:
    assert launch_ranges(0, 10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert launch_ranges(3, 3, 4) == []
    assert launch_ranges(0, 5) == [(0, 5)]


def test_plans_are_cached_by_structure_and_renamed_on_the_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same bucket under other names (an agent's ids at Go, its variables' names in the
    solve) is planned once and comes back in the caller's names, with the same kernel."""
    from dcop.gpu import plan as plan_module

    calls: list[str] = []
    real = plan_module.plan_join_eliminate

    def counted(*args: object, **kwargs: object) -> BucketPlan:
        calls.append("plan")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(plan_module, "plan_join_eliminate", counted)
    cache = PlanCache()
    ids = [("7", "3"), ("7", "9"), ("3", "9")]
    by_ids = cache.plan(ids, SHAPES, np.float32, "3", "min", None, ALWAYS)
    by_names = cache.plan(SCOPES, SHAPES, np.float32, "x", "min", None, ALWAYS)
    assert len(calls) == 1
    direct = real(SCOPES, SHAPES, np.float32, "x", scope=("a", "b"), settings=ALWAYS)
    assert by_names.out_scope == ("a", "b") and by_ids.out_scope == ("7", "9")
    assert by_names.var == "x" and by_ids.var == "3"
    assert by_names.kernel_name == by_ids.kernel_name
    assert sorted(by_names.scopes) == sorted(direct.scopes)
    assert [SCOPES[j] for j in by_names.order] == list(by_names.scopes)
    # another output order, dtype or settings is another plan
    cache.plan(SCOPES, SHAPES, np.float32, "x", "min", ("b", "a"), ALWAYS)
    cache.plan(SCOPES, SHAPES, np.float64, "x", "min", None, ALWAYS)
    cache.plan(SCOPES, SHAPES, np.float32, "x", "min", None, NEVER)
    assert len(calls) == 4
    # errors name the caller's variables, and nothing wrong is cached
    with pytest.raises(ModelError, match="'a' has domain 3 in one table and 4"):
        cache.plan([("a", "x"), ("a",)], [(3, 4), (4,)], np.float32, "x", "min", None, ALWAYS)
    with pytest.raises(ModelError, match="cannot hold 'x'"):
        cache.plan(SCOPES, SHAPES, np.float32, "x", "min", ("a", "b", "x"), ALWAYS)
    with pytest.raises(ModelError, match="none of the tables"):
        cache.plan(SCOPES, SHAPES, np.float32, "z", "min", None, ALWAYS)


def test_a_shape_gets_its_own_kernel_once_its_calls_pay_for_the_compile() -> None:
    cache = PlanCache()
    settings = PlanSettings(specialize_entries=150, min_groups=0)
    kinds = [
        cache.plan(SCOPES, SHAPES, np.float32, "x", "min", None, settings).generated
        for _ in range(2)
    ]
    # the same structure under other names adds to the same sum: 60, 120, then 180 >= 150
    renamed = [("p", "q"), ("p", "r"), ("q", "r")]
    kinds += [
        cache.plan(renamed, SHAPES, np.float32, "q", "min", None, settings).generated
        for _ in range(2)
    ]
    assert kinds == [False, False, True, True]
    # another structure (shapes, dtype) is summed apart
    other = [(3, 2), (3, 5), (2, 5)]
    assert not cache.plan(SCOPES, other, np.float32, "x", "min", None, settings).generated
    assert not cache.plan(SCOPES, SHAPES, np.float64, "x", "min", None, settings).generated


def test_a_shape_compiled_off_the_call_earns_its_kernel_at_a_share() -> None:
    """A shape the generic kernel runs while its own compiles (at most background_max_entries
    joined) earns its kernel at background_share of specialize_entries; a larger one at all."""
    settings = PlanSettings(
        specialize_entries=150, min_groups=0, background_share=0.5, background_max_entries=60
    )
    cache = PlanCache()
    # joined 60 (SCOPES, SHAPES): earned at 75, in the second call
    kinds = [
        cache.plan(SCOPES, SHAPES, np.float32, "x", "min", None, settings).generated
        for _ in range(2)
    ]
    assert kinds == [False, True]
    # joined 120 > 60: compiled on the call's path, earned at 150 (at 75 it would be at once)
    wide = [(4, 6), (4, 5), (6, 5)]
    other = [(3, 2), (3, 5), (2, 5)]  # joined 30
    kinds = [
        cache.plan(SCOPES, wide, np.float32, "x", "min", None, settings).generated for _ in range(2)
    ]
    assert kinds == [False, True]
    assert not cache.plan(SCOPES, other, np.float32, "x", "min", None, settings).generated
    # 30 + 30 = 60 < 75, then 90 >= 75
    assert [
        cache.plan(SCOPES, other, np.float32, "x", "min", None, settings).generated
        for _ in range(2)
    ] == [False, True]


def test_by_default_only_a_bucket_whose_kernel_pays_for_its_compile_is_generated() -> None:
    from dcop.gpu import plan as P

    saved = P.DEFAULT_SPECIALIZE_ENTRIES * (
        1 / P.GENERIC_ENTRIES_PER_S - 1 / P.GENERATED_ENTRIES_PER_S
    )
    assert saved == pytest.approx(P.COMPILE_S, rel=1e-6)
    cache = PlanCache()
    default = PlanSettings()
    # a bucket of 2^25 joined entries (a spin glass of width 24): the generic kernel
    wide = [tuple(f"v{k}" for k in range(13)), tuple(f"v{k}" for k in range(12, 25))]
    shapes = [(2,) * 13, (2,) * 13]
    assert not cache.plan(wide, shapes, np.float32, "v12", "min", None, default).generated
    # one of 2^36: its own kernel at once
    big = [("a", "x"), ("x", "b")]
    plan = cache.plan(
        big, [(1 << 18, 1 << 8), (1 << 8, 1 << 10)], np.float32, "x", "min", None, default
    )
    assert plan.joined == 1 << 36 and plan.generated
    # over the generic kernel's table count: generated whatever the size
    many = [("a", "x")] * (K.GENERIC_MAX_TABLES + 1)
    assert cache.plan(many, [(2, 2)] * len(many), np.float32, "x", "min", None, default).generated
