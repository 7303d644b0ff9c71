"""The collector's pauses: frozen set-up objects, and the pauses that remain counted."""

from __future__ import annotations

import gc

from dcop.agents.pauses import GcPauses, freeze_heap


def test_freeze_heap_exempts_live_objects_from_collection() -> None:
    keep = [[i] for i in range(1000)]
    try:
        freeze_heap()
        assert gc.get_freeze_count() >= len(keep)
    finally:
        gc.unfreeze()


def test_pauses_count_each_collection_and_stop_counting() -> None:
    pauses = GcPauses().start()
    try:
        gc.collect()
        gc.collect()
    finally:
        pauses.stop()
    assert pauses.collections >= 2
    assert pauses.seconds > 0.0
    seen = pauses.collections
    gc.collect()
    assert pauses.collections == seen
    figures = pauses.figures()
    assert figures == {"gc_pause_s": pauses.seconds, "gc_collections": float(seen)}
