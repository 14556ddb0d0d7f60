"""After the start-up freeze, full collections keep their pace: the turns' cyclic garbage that
outlives the young generations is collected, not piled up until a quarter of start-up's
objects were promoted."""

from __future__ import annotations

import gc

import pytest

from orchestrator.daemon import freeze_start_up

pytestmark = pytest.mark.slow


def _turns_of_cyclic_garbage(cycles: int) -> None:
    held: list[list[object]] = []
    for _ in range(cycles):
        cell: list[object] = []
        cell.append(cell)  # a cycle: only the collector frees it
        held.append(cell)
        if len(held) > 3_000:  # a turn's objects live long enough to reach the old generation
            held.clear()


def test_full_collections_keep_their_pace_after_the_start_up_freeze() -> None:
    start_up = [[] for _ in range(400_000)]  # start-up's long-lived objects
    gc.collect()  # they survived a full collection, as start-up's do
    try:
        freeze_start_up()
        after_freeze = gc.get_stats()[-1]["collections"]
        _turns_of_cyclic_garbage(300_000)
        assert gc.get_stats()[-1]["collections"] > after_freeze  # without the collect: none at all
        assert len(gc.get_objects(generation=2)) < 50_000  # the old generation holds no pile of garbage
    finally:
        gc.unfreeze()
    assert start_up
