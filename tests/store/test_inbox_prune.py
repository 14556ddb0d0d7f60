"""The durable inbox is pruned while the daemon runs, not only at start, and still de-duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store import SessionStore

pytestmark = pytest.mark.slow

DAY = 24 * 3600.0


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_month_of_traffic_keeps_the_inbox_to_the_dedupe_window(tmp_path: Path) -> None:
    clock = Clock()
    per_day = 400
    sizes = []
    with SessionStore(tmp_path / "sessions.sqlite3", dedupe_window_s=7 * DAY, clock=clock) as store:
        for day in range(30):  # one process, never restarted: no start-time prune after the first
            for n in range(per_day):
                event = f"{day}:{n}"
                assert store.accept("bot", event, {"text": event})
                store.mark("bot", event, "running")
                store.mark("bot", event, "done" if n % 10 else "interrupted")
                clock.now += DAY / per_day
            sizes.append(store.inbox_size())
            # a redelivery from within the window is still recognised, whatever was pruned
            assert not store.accept("bot", f"{max(0, day - 6)}:{per_day - 1}", {"text": "again"})
        print(f"\ninbox rows at the end of each day: {sizes}")
        # the window holds 7 days of rows; the prune runs every 256 finished rows
        assert max(sizes) <= 7 * per_day + 256 + per_day
        assert sizes[-1] < sizes[6] + 256 + per_day
        assert store.accept("bot", "0:0", {"text": "a month later"})  # past the window: new again


def test_unfinished_rows_are_never_pruned(tmp_path: Path) -> None:
    clock = Clock()
    with SessionStore(tmp_path / "sessions.sqlite3", dedupe_window_s=DAY, prune_every=1, clock=clock) as store:
        store.accept("bot", "waiting", {"text": "pending"})
        store.accept("bot", "sending", {"text": "replying"})
        store.begin_reply("bot", "sending", "the answer")
        clock.now += 10 * DAY
        store.accept("bot", "later", {"text": "x"})
        store.mark("bot", "later", "done")  # triggers a prune
        assert [row.event_id for row in store.unfinished()] == ["waiting", "sending"]
        assert store.inbox_size() == 3
