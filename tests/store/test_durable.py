"""On disk before acknowledged: the inbox log's fsync, shared between concurrent deliveries."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orchestrator.store import GroupSync, SessionStore, StateSyncFailed, WalSync, state_fault


async def test_concurrent_deliveries_share_one_sync_and_sequential_ones_each_get_their_own(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "sessions.sqlite3") as store:
        group = GroupSync(store.wal_sync)

        async def delivered(index: int) -> None:
            store.accept("bot", str(index), {"text": "hi"})
            await group.wait()

        await asyncio.gather(*(delivered(i) for i in range(40)))
        shared = store.wal_sync.syncs
        assert 1 <= shared <= 2  # the first write's sync, then one for everything written meanwhile
        for index in range(40, 45):
            await delivered(index)
        assert store.wal_sync.syncs == shared + 5  # nobody returns on a sync that began before its write


async def test_a_write_made_while_a_sync_runs_waits_for_the_next_one(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "sessions.sqlite3") as store:
        started, release = asyncio.Event(), asyncio.Event()
        loop = asyncio.get_running_loop()
        calls: list[int] = []

        def slow_sync() -> None:  # the real fsync, held open until the test has written again
            calls.append(store.wal_sync.syncs)
            loop.call_soon_threadsafe(started.set)
            if len(calls) == 1:
                asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
            store.wal_sync()

        group = GroupSync(slow_sync)
        store.accept("bot", "1", {})
        first = asyncio.create_task(group.wait())
        await started.wait()
        store.accept("bot", "2", {})  # after the running sync began: it does not cover this row
        second = asyncio.create_task(group.wait())
        await asyncio.sleep(0)
        assert not second.done()
        release.set()
        await asyncio.gather(first, second)
        assert len(calls) == 2 and store.wal_sync.syncs == 2


def test_a_log_that_cannot_be_synced_is_a_state_fault(tmp_path: Path) -> None:
    sync = WalSync(tmp_path / "gone" / "sessions.sqlite3")
    with pytest.raises(StateSyncFailed) as raised:
        sync()
    assert state_fault(raised.value) is not None  # the daemon stops (exit 1) rather than acknowledge
    assert "cannot write" in str(raised.value)
