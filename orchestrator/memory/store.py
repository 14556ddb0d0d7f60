"""MemoryStore: agents' memories in SQLite (WAL) with FTS5 keyword recall ranked by bm25."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, TypeVar

from orchestrator.store import open_database
from orchestrator.threads import in_thread

__all__ = ["MemoryRecord", "MemoryStore"]

_T = TypeVar("_T")

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    agent TEXT NOT NULL,
    text TEXT NOT NULL,
    tags TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memories_agent ON memories (agent);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    text, tags, content='memories', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER IF NOT EXISTS memories_ai AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text, tags) VALUES (new.id, new.text, new.tags);
END;
CREATE TRIGGER IF NOT EXISTS memories_ad AFTER DELETE ON memories BEGIN
    INSERT INTO memories_fts (memories_fts, rowid, text, tags) VALUES ('delete', old.id, old.text, old.tags);
END;
"""
# Matches in the text count more than matches in the tags.
_BM25_WEIGHTS: Final = "10.0, 3.0"
_WORD: Final = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRecord:
    """One stored memory: its id, the agent that wrote it, and what it says."""

    id: int
    agent: str
    text: str
    tags: tuple[str, ...]
    created: float


class MemoryStore:
    """Every agent's memories in `<state_dir>/memory.sqlite3`; a context manager.

    The store itself knows no policy: callers (the memory tools, bound by the seam) say
    which agent writes and which agents' memories a recall may see. Database work runs
    in a worker thread, one statement at a time, so a locked database never stalls the
    event loop.
    """

    def __init__(self, path: Path) -> None:
        """Open (or create) the store at `path`; raises `StateError` or `StateCorrupt` as every store does."""
        self.path = path
        self._lock = threading.Lock()
        self._db = open_database(path, _SCHEMA)

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database (waits for a statement in flight)."""
        with self._lock:
            self._db.close()

    async def store(self, *, agent: str, text: str, tags: Sequence[str] = ()) -> MemoryRecord:
        """Write one memory stamped with `agent` and return it."""
        joined = " ".join(tags)
        created = time.time()

        def write() -> int:
            row = self._db.execute(
                "INSERT INTO memories (agent, text, tags, created) VALUES (?,?,?,?) RETURNING id",
                (agent, text, joined, created),
            ).fetchone()
            return int(row[0])

        memory_id = await self._run(write)
        return MemoryRecord(id=memory_id, agent=agent, text=text, tags=tuple(tags), created=created)

    async def recall(self, query: str, *, agents: Sequence[str], limit: int) -> list[MemoryRecord]:
        """Return up to `limit` memories of `agents` matching `query`'s words, best first.

        Any word may match (bm25 ranks memories matching more, rarer words higher); the
        query is reduced to its words, so FTS5 syntax in it is never interpreted.
        """
        words = _WORD.findall(query)
        if not words or not agents or limit < 1:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        marks = ",".join("?" * len(agents))
        sql = (
            "SELECT m.id, m.agent, m.text, m.tags, m.created FROM memories_fts"
            " JOIN memories m ON m.id = memories_fts.rowid"
            f" WHERE memories_fts MATCH ? AND m.agent IN ({marks})"
            f" ORDER BY bm25(memories_fts, {_BM25_WEIGHTS}), m.id DESC LIMIT ?"
        )

        def read() -> list[tuple[int, str, str, str, float]]:
            return self._db.execute(sql, (match, *agents, limit)).fetchall()

        rows = await self._run(read)
        return [
            MemoryRecord(id=i, agent=a, text=t, tags=tuple(g.split()), created=c) for i, a, t, g, c in rows
        ]

    async def forget(self, memory_id: int, *, agent: str) -> bool:
        """Delete memory `memory_id` if `agent` wrote it; return whether anything was deleted."""

        def delete() -> int:
            cursor = self._db.execute("DELETE FROM memories WHERE id = ? AND agent = ?", (memory_id, agent))
            return cursor.rowcount

        return await self._run(delete) == 1

    async def _run(self, work: Callable[[], _T]) -> _T:
        def locked() -> _T:
            with self._lock:
                return work()

        return await in_thread(locked)
