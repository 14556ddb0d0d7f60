"""UsageLog: every model call's token usage and cost, in `<state_dir>/usage.sqlite3` (WAL)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from loguru import logger

from orchestrator.errors import StateError
from orchestrator.store.full_disk import FullDisk, disk_full
from orchestrator.store.sqlite import Database, open_read_only, state_fault

__all__ = ["GROUPINGS", "NOBODY", "Grouping", "Purpose", "UsageLog", "UsageRow", "UsageTotal", "read_usage"]

# Version 1: the `usage` table as first shipped. `_SCHEMA` stays that shape and sets no
# version (a fresh file reads 0 = just made as version 1); each later version is one step of
# `_MIGRATIONS`, run in order in one transaction with the new `user_version`, so an existing
# state dir is upgraded in place, never rebuilt.
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS usage (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    agent TEXT NOT NULL,
    path TEXT NOT NULL,
    sender TEXT NOT NULL,
    session TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    estimated INTEGER NOT NULL DEFAULT 0,
    cost REAL
);
CREATE INDEX IF NOT EXISTS usage_ts ON usage (ts);
CREATE INDEX IF NOT EXISTS usage_agent_sender ON usage (agent, sender, ts);
"""
# (version reached, its statements): version 2 keeps prompt-cache writes apart (part of
# input_tokens); version 3 adds `purpose` ("turn" | "summary": what the call was for);
# version 4 adds `callers` (the agents up a delegated call's chain, a JSON list; "" for none).
_MIGRATIONS: Final = (
    (2, ("ALTER TABLE usage ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0",)),
    (3, ("ALTER TABLE usage ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn'",)),
    (4, ("ALTER TABLE usage ADD COLUMN callers TEXT NOT NULL DEFAULT ''",)),
)
_INSERT: Final = (
    "INSERT INTO usage (ts, agent, path, sender, session, provider, model, input_tokens, output_tokens,"
    " cached_tokens, cache_write_tokens, estimated, cost, purpose, callers) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
# `--by model`: summary calls are their own group, `provider/model (summary)`.
_MODEL_KEY: Final = "provider || '/' || model || CASE WHEN purpose = 'summary' THEN ' (summary)' ELSE '' END"
GROUPINGS: Final = ("agent", "sender", "model")
Grouping = Literal["agent", "sender", "model"]
# What a call was for: the turn's own model calls, or folding its context into the summary.
Purpose = Literal["turn", "summary"]
# Who a call was for when the turn names nobody (an anonymous library or schedule turn).
NOBODY: Final = "-"
# Rows wait at most this long (or until this many are pending) before one transaction writes them.
_FLUSH_AFTER_S: Final = 0.5
_FLUSH_ROWS: Final = 256
# Rows kept because the disk was full are tried again this often.
_RETRY_FULL_S: Final = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    """One model call: who it was for, which link answered, what it used and cost.

    `cached_tokens` (cache reads) and `cache_write_tokens` are parts of `input_tokens`.
    `estimated`: the provider reported no usage, so the tokens are the engine's estimate.
    `cost` is None when the answering provider has no `prices`.
    """

    ts: float
    agent: str
    path: str
    sender: str
    session: str
    provider: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_write_tokens: int = 0
    estimated: bool = False
    cost: float | None = None
    purpose: Purpose = "turn"
    callers: str = ""  # the agents up the delegation chain whose days it also counts against (JSON list)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageTotal:
    """The sum over one group's calls (`key` is the agent, sender or `provider/model`)."""

    key: str
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cost: float | None  # None when no call of the group had a price
    estimated_calls: int
    cache_write_tokens: int = 0

    def describe(self) -> dict[str, object]:
        """Return the total as plain data (`--json`, `GET /api/usage`)."""
        return {
            "key": self.key,
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "cost": None if self.cost is None else round(self.cost, 6),
            "estimated_calls": self.estimated_calls,
        }


class UsageLog(Database):
    """The append-only `usage` table; a context manager.

    Off the model call's path: `record` only queues the row; the queue is written in one
    transaction by `flush` (the engine calls it when a turn ends, before the transcript is
    stored and the reply sent), half a second after its first row (an event-loop timer, not
    a task), at 256 rows, before every read through this log, and on close. A crash loses
    only the rows of the turns it interrupts. On a full disk the rows stay queued in memory
    and are written once space is back (tried every second; `disk` says it once); another
    failed write (a file locked past the busy timeout) is logged and its rows dropped, never
    raised into a turn; one no retry fixes (`state_fault`: damage, an I/O error, a read-only store) is also handed to
    `on_fault`, which the daemon sets to stop itself.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)
        try:
            _migrate(self._db)
        except sqlite3.Error as exc:
            self._db.close()
            raise StateError(str(path), f"cannot upgrade the usage table: {exc}") from exc
        self._pending: list[tuple[object, ...]] = []
        self._timer: asyncio.TimerHandle | None = None
        self.on_fault: Callable[[str], None] | None = None
        # Says once that the disk is full (the daemon shares its own); rows wait in memory meanwhile.
        self.disk = FullDisk(str(path.parent))
        self._closing = False

    def record(self, row: UsageRow) -> None:
        """Queue one call's usage for the next write."""
        self._pending.append(_values(row))
        if len(self._pending) >= _FLUSH_ROWS:
            self.flush()
        elif self._timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no event loop (a synchronous caller): write now
                self.flush()
                return
            self._timer = loop.call_later(_FLUSH_AFTER_S, self.flush)

    def flush(self) -> None:
        """Write every queued row in one transaction; on a full disk keep them for the next try, else log and drop them."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        rows, self._pending = self._pending, []
        if not rows:
            return
        try:
            with self._db:  # one transaction: one commit for the batch
                self._db.execute("BEGIN")
                self._db.executemany(_INSERT, rows)
        except sqlite3.Error as exc:
            if disk_full(exc) and not self._closing:
                # Kept, and written when space is back: the failed transaction left nothing,
                # so no row is lost and none is written twice.
                self._pending[:0] = rows
                self.disk.met()
                self._retry_later()
                return
            logger.warning("usage of {} model calls not recorded: {}", len(rows), exc)
            reason = state_fault(exc)
            if reason is not None and self.on_fault is not None:
                self.on_fault(reason)
            return
        self.disk.cleared()

    def _retry_later(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop: the next record or read tries again
            return
        self._timer = loop.call_later(_RETRY_FULL_S, self.flush)

    def close(self) -> None:
        """Write what is queued (a full disk now loses it, logged), then close."""
        self._closing = True
        self.flush()
        super().close()

    def spent_since(self, since: float) -> Iterator[tuple[str, str, float, int, str]]:
        """Yield (agent, sender, ts, input + output tokens, callers) of every call since `since`, oldest first."""
        self.flush()
        yield from self._db.execute(
            "SELECT agent, sender, ts, input_tokens + output_tokens, callers FROM usage WHERE ts >= ? ORDER BY ts",
            (since,),
        )

    def totals(
        self, *, by: Grouping = "agent", since: float | None = None, agent: str | None = None, sender: str | None = None
    ) -> list[UsageTotal]:
        """Return the sums per `by` group, biggest token count first."""
        self.flush()
        return _totals(self._db, by=by, since=since, agent=agent, sender=sender)


def read_usage(
    path: Path, *, by: Grouping = "agent", since: float | None = None, agent: str | None = None, sender: str | None = None
) -> list[UsageTotal]:
    """Return the sums from the usage file at `path` read-only (a running daemon may be writing it).

    A missing file is no usage (nothing is created). Raises `StateError` for a file that
    cannot be read.
    """
    if not path.exists():
        return []
    db = open_read_only(path)
    try:
        return _totals(db, by=by, since=since, agent=agent, sender=sender)
    except sqlite3.Error as exc:
        raise StateError(str(path), str(exc)) from exc
    finally:
        db.close()


def _totals(
    db: sqlite3.Connection, *, by: Grouping, since: float | None, agent: str | None, sender: str | None
) -> list[UsageTotal]:
    if by not in GROUPINGS:
        raise ValueError(f"cannot group usage by {by!r}")
    if by == "model":  # a file a daemon of version 1 still writes has no `purpose` yet
        key = _MODEL_KEY if _has_purpose(db) else "provider || '/' || model"
    else:
        key = by
    where: list[str] = []
    params: list[object] = []
    for column, value in (("agent", agent), ("sender", sender)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if since is not None:
        where.append("ts >= ?")
        params.append(since)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    # A file no daemon of this version has opened yet (read-only here) has no cache-write column.
    written = "SUM(cache_write_tokens)" if _version(db) >= 2 else "0"
    rows = db.execute(
        f"SELECT {key}, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cached_tokens), {written},"
        f" SUM(cost), SUM(estimated) FROM usage{clause} GROUP BY 1"
        " ORDER BY SUM(input_tokens) + SUM(output_tokens) DESC, 1",
        params,
    )
    return [
        UsageTotal(
            key=str(group), calls=calls, input_tokens=inp, output_tokens=out, cached_tokens=cached,
            cache_write_tokens=write, cost=cost, estimated_calls=estimated,
        )
        for group, calls, inp, out, cached, write, cost, estimated in rows
    ]


def _version(db: sqlite3.Connection) -> int:
    # 0 is a file the v1 schema has just created (it sets no version of its own).
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    return max(1, version)


def _migrate(db: sqlite3.Connection) -> None:
    """Bring the usage table to the last version of `_MIGRATIONS`, each step in one transaction."""
    version = _version(db)
    for target, statements in _MIGRATIONS:
        if version >= target:
            continue
        with db:
            db.execute("BEGIN IMMEDIATE")
            if _version(db) < target:  # another process may have upgraded it meanwhile
                for statement in statements:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {target}")
        version = target


def _has_purpose(db: sqlite3.Connection) -> bool:
    return any(column[1] == "purpose" for column in db.execute("PRAGMA table_info(usage)"))


def _values(row: UsageRow) -> tuple[object, ...]:
    return (
        row.ts, row.agent, row.path, row.sender, row.session, row.provider, row.model,
        row.input_tokens, row.output_tokens, row.cached_tokens, row.cache_write_tokens, int(row.estimated), row.cost,
        row.purpose, row.callers,
    )

