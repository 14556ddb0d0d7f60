"""On disk before acknowledged: one fsync of the inbox's write-ahead log for every delivery waiting on it.

The stores run WAL with `synchronous=NORMAL`: a commit is in the OS's page cache, safe from
a crash of the process but not from a power cut, a kernel crash or a filesystem that goes
read-only before the cache is written. What a platform is told we have (the Telegram
offset, a webhook's 200, Slack's ack) must survive those too, so the daemon waits on
`GroupSync.wait` after the inbox write and before it returns to the adapter. One fsync of
the log makes every commit before it durable (the log is written in order), so concurrent
deliveries share one: a waiter whose write came before a sync started returns when that
sync ends; the others share the next one. Per message this costs about one fsync (a few
milliseconds on a disk, less under concurrency); see `bench/inbox_intake.py`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path

from orchestrator.errors import OrchestratorError
from orchestrator.threads import in_thread

__all__ = ["GroupSync", "StateSyncFailed", "WalSync"]


class StateSyncFailed(OrchestratorError):
    """The state store's log could not be written to disk (an I/O error, a filesystem gone read-only)."""

    def __init__(self, path: str, reason: str) -> None:
        self.path, self.reason = path, reason
        super().__init__(f"cannot write {path} to disk ({reason})")


class WalSync:
    """fsync one SQLite database's write-ahead log (and, once, its folder); `syncs` counts them."""

    __slots__ = ("_path", "_fd", "_folder_synced", "syncs")

    def __init__(self, database: Path) -> None:
        self._path = database
        self._fd: int | None = None
        self._folder_synced = False
        self.syncs = 0

    def __call__(self) -> None:
        """Make every commit so far durable; raises `StateSyncFailed`."""
        wal = self._path.with_name(self._path.name + "-wal")
        try:
            if self._fd is None and wal.exists():
                # The log exists from the first write on, for as long as the store is open.
                self._fd = os.open(wal, os.O_RDONLY | os.O_CLOEXEC)
            if self._fd is not None:
                os.fsync(self._fd)
            else:  # nothing logged yet: whatever was committed is in the database file
                database = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(database)
                finally:
                    os.close(database)
            if not self._folder_synced:  # a new log's directory entry must reach the disk too
                folder = os.open(self._path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    os.fsync(folder)
                finally:
                    os.close(folder)
                self._folder_synced = True
        except OSError as exc:
            raise StateSyncFailed(str(wal), exc.strerror or str(exc)) from exc
        self.syncs += 1

    def close(self) -> None:
        """Close the log's descriptor."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class GroupSync:
    """Coalesce `sync` calls across concurrent waiters (one event loop)."""

    __slots__ = ("_sync", "_lock", "_asked", "_covered")

    def __init__(self, sync: Callable[[], None]) -> None:
        self._sync = sync
        self._lock = asyncio.Lock()
        self._asked = 0  # waits begun: each after its caller's write
        self._covered = 0  # waits a finished sync covers (their writes came before it started)

    async def wait(self) -> None:
        """Return once everything the caller wrote before calling is on disk; raises `StateSyncFailed`."""
        self._asked += 1
        mine = self._asked
        async with self._lock:
            if self._covered >= mine:
                return  # a sync that started after this caller's write has finished
            covering = self._asked
            await in_thread(self._sync)
            self._covered = covering
