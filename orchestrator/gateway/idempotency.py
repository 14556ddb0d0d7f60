"""IdempotencyStore: the first response to each `Idempotency-Key`, kept in SQLite across restarts."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from orchestrator.store import Database

__all__ = ["IdempotencyStore", "StoredResponse", "fingerprint"]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    status INTEGER NOT NULL,
    body TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_created ON idempotency (created);
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredResponse:
    """A response stored under a key, and the request it answered (as a fingerprint)."""

    fingerprint: str
    status: int
    body: dict[str, Any]


def fingerprint(*parts: object) -> str:
    """Return a stable hash of a request's identifying parts (JSON-serialisable)."""
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class IdempotencyStore(Database):
    """Responses by `Idempotency-Key`, forgotten after `ttl_s`; a context manager.

    `lock(key)` serialises requests carrying the same key inside this process, so a
    retry that arrives while the first request still runs waits for its stored answer.
    """

    def __init__(self, path: Path, *, ttl_s: float) -> None:
        super().__init__(path, _SCHEMA)
        self.ttl_s = ttl_s
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}
        self.prune()


    def get(self, key: str) -> StoredResponse | None:
        """Return the unexpired response stored under `key`, if any."""
        row = self._db.execute(
            "SELECT fingerprint, status, body FROM idempotency WHERE key = ? AND created >= ?",
            (key, time.time() - self.ttl_s),
        ).fetchone()
        if row is None:
            return None
        return StoredResponse(fingerprint=row[0], status=int(row[1]), body=json.loads(row[2]))

    def put(self, key: str, response: StoredResponse) -> None:
        """Store the first response under `key` (an expired entry is replaced)."""
        self._db.execute(
            "INSERT OR REPLACE INTO idempotency (key, fingerprint, status, body, created) VALUES (?,?,?,?,?)",
            (key, response.fingerprint, response.status, json.dumps(response.body), time.time()),
        )

    def prune(self) -> int:
        """Forget responses older than the TTL; return how many."""
        cursor = self._db.execute("DELETE FROM idempotency WHERE created < ?", (time.time() - self.ttl_s,))
        return cursor.rowcount

    def lock(self, key: str) -> _KeyLock:
        """Return the in-process lock for `key`, to hold with `async with`."""
        return _KeyLock(self, key)

    def _acquire(self, key: str) -> asyncio.Lock:
        self._users[key] = self._users.get(key, 0) + 1
        return self._locks.setdefault(key, asyncio.Lock())

    def _release(self, key: str) -> None:
        self._users[key] -= 1
        if self._users[key] == 0:
            del self._users[key], self._locks[key]


class _KeyLock:
    __slots__ = ("_key", "_store")

    def __init__(self, store: IdempotencyStore, key: str) -> None:
        self._store, self._key = store, key

    async def __aenter__(self) -> None:
        lock = self._store._acquire(self._key)
        try:
            await lock.acquire()
        except BaseException:
            self._store._release(self._key)
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._store._locks[self._key].release()
        self._store._release(self._key)
