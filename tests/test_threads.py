"""The daemon's blocking work waits in its own pool: a stuck store never holds up a host-name lookup."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from orchestrator.memory import MemoryStore
from orchestrator.threads import BLOCKING_WORKERS


async def test_a_lookup_completes_while_every_blocking_worker_waits_on_a_locked_store(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite3"
    with MemoryStore(path) as store:
        # Another process's writer holds the database: every store call waits (busy timeout),
        # more of them than the loop's default executor has workers (min(32, cores + 4)).
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        writes = [
            asyncio.ensure_future(store.store(agent="a", text=f"note {i}")) for i in range(BLOCKING_WORKERS + 2)
        ]
        try:
            lookup = asyncio.ensure_future(asyncio.get_running_loop().getaddrinfo("localhost", 80))
            await asyncio.wait([lookup, *writes], return_when=asyncio.FIRST_COMPLETED)
            assert lookup.done() and lookup.exception() is None, "the lookup waited behind the store"
            assert not any(write.done() for write in writes)  # the store was still stuck meanwhile
        finally:
            holder.execute("COMMIT")
            holder.close()
        records = await asyncio.gather(*writes)
    assert sorted(record.text for record in records) == sorted(f"note {i}" for i in range(BLOCKING_WORKERS + 2))
