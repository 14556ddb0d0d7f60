"""SessionStore: sessions, transcripts and the durable inbox in SQLite (WAL)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from orchestrator.store.durable import WalSync
from orchestrator.store.sqlite import Database

__all__ = ["Backlog", "InboxRow", "SessionStore"]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    agent TEXT NOT NULL,
    created REAL NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS sessions_open ON sessions (key, closed);
CREATE TABLE IF NOT EXISTS messages (
    session_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS summaries (
    session_id INTEGER PRIMARY KEY,
    covers INTEGER NOT NULL,
    body TEXT NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS inbox (
    channel TEXT NOT NULL,
    event_id TEXT NOT NULL,
    body TEXT NOT NULL,
    received REAL NOT NULL,
    state TEXT NOT NULL,
    reply TEXT,
    sent INTEGER NOT NULL DEFAULT 0,
    stream TEXT,
    queued_at REAL,
    next_try REAL,
    tries INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (channel, event_id)
);
CREATE INDEX IF NOT EXISTS inbox_state ON inbox (state);
"""
# How long finished inbox rows are kept for de-duplicating platform redeliveries.
_DEDUPE_WINDOW_S: Final = 7 * 24 * 3600.0
# A running daemon prunes after this many rows finished (and at most an hour apart), so a
# long-lived inbox stays bounded by the window's traffic, not by the uptime.
_PRUNE_EVERY: Final = 256
_PRUNE_INTERVAL_S: Final = 3600.0
# "limited": past the route's rate limit, kept (not run) like a finished row
_FINISHED: Final = frozenset({"done", "interrupted", "given_up", "limited"})
_ROW: Final = "SELECT channel, event_id, body, state, reply, sent, stream, queued_at, tries FROM inbox"


@dataclass(frozen=True, slots=True)
class InboxRow:
    """An accepted inbound message and where it got to."""

    channel: str
    event_id: str
    body: dict[str, Any]
    state: str
    # `replying` rows: the reply text and how many of its chunks the platform accepted.
    reply: str | None = None
    sent: int = 0
    # A streamed reply: the platform ids of the messages it has shown so far (a restart closes them).
    stream: tuple[str, ...] = ()
    # `queued` rows: when the reply was parked in the delivery queue, and how often it was retried since.
    queued_at: float | None = None
    tries: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Backlog:
    """What the inbox holds unfinished: `depth` messages (the oldest received at `oldest_received`),
    `waiting` of them replies in the delivery queue (the oldest parked at `oldest_queued`); store-clock seconds."""

    depth: int
    oldest_received: float | None
    waiting: int
    oldest_queued: float | None


class SessionStore(Database):
    """All durable conversation state of the daemon; a context manager.

    Inbox states: `pending` (accepted, turn not started), `running`, `replying` (the turn
    is persisted and its reply is being sent: the text and the chunks accepted so far are
    stored, so the next start sends the rest), `queued` (the turn's sends gave up within
    `reply_deadline_s`: the delivery queue of the running daemon retries the rest until
    `next_try`), `done` (the platform accepted every chunk, or refused it for good),
    `given_up` (still unsent after `reply_give_up_s`), `interrupted` (the daemon stopped
    mid-turn; the user was told on the next start). A
    streamed reply's rows also keep the platform ids of the messages it has shown
    (`stream_messages`), so the next start can close a reply a crash left half-shown.

    Finished rows are kept for `dedupe_window_s` so a redelivery is recognised; they are
    pruned at start (`prune_inbox`) and while running, every `prune_every` finished rows
    or when a row finishes more than an hour after the last prune. `clock` is the wall
    clock rows are stamped with (tests pass their own).
    """

    def __init__(
        self,
        path: Path,
        *,
        dedupe_window_s: float = _DEDUPE_WINDOW_S,
        prune_every: int = _PRUNE_EVERY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(path, _SCHEMA)
        # Commits are in the page cache at once (synchronous=NORMAL); this puts them on disk
        # before the platform is told (the daemon's `GroupSync` shares one call between deliveries).
        self.wal_sync = WalSync(path)
        self._window_s = dedupe_window_s
        self._prune_every = prune_every
        self._clock = clock
        self._finished_since_prune = 0
        self._pruned_at = clock()
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(inbox)")}
        if "reply" not in columns:  # a state dir from before replies joined the protocol
            self._db.execute("ALTER TABLE inbox ADD COLUMN reply TEXT")
            self._db.execute("ALTER TABLE inbox ADD COLUMN sent INTEGER NOT NULL DEFAULT 0")
        if "stream" not in columns:  # a state dir from before replies streamed
            self._db.execute("ALTER TABLE inbox ADD COLUMN stream TEXT")
        if "queued_at" not in columns:  # a state dir from before the delivery queue
            self._db.execute("ALTER TABLE inbox ADD COLUMN queued_at REAL")
            self._db.execute("ALTER TABLE inbox ADD COLUMN next_try REAL")
            self._db.execute("ALTER TABLE inbox ADD COLUMN tries INTEGER NOT NULL DEFAULT 0")


    def close(self) -> None:
        """Close the database and the log's descriptor."""
        self.wal_sync.close()
        super().close()

    # -- inbox ---------------------------------------------------------------------------

    def accept(self, channel: str, event_id: str, body: dict[str, Any]) -> bool:
        """Record an inbound message durably; False when (channel, event_id) was seen before."""
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO inbox (channel, event_id, body, received, state) VALUES (?,?,?,?,?)",
            (channel, event_id, json.dumps(body), self._clock(), "pending"),
        )
        return cursor.rowcount == 1

    def mark(self, channel: str, event_id: str, state: str) -> None:
        """Move an inbox row to `state`; finishing rows now and then prunes the old ones."""
        self._db.execute(
            "UPDATE inbox SET state = ? WHERE channel = ? AND event_id = ?", (state, channel, event_id)
        )
        if state not in _FINISHED:
            return
        self._finished_since_prune += 1
        due = self._clock() - self._pruned_at >= min(_PRUNE_INTERVAL_S, self._window_s)
        if self._finished_since_prune >= self._prune_every or due:
            self.prune_inbox()

    def begin_reply(self, channel: str, event_id: str, text: str) -> None:
        """Record the reply about to be sent (state `replying`, no chunk accepted yet)."""
        self._db.execute(
            "UPDATE inbox SET state = 'replying', reply = ?, sent = 0 WHERE channel = ? AND event_id = ?",
            (text, channel, event_id),
        )

    def reply_progress(self, channel: str, event_id: str, sent: int) -> None:
        """Record that the platform accepted the first `sent` chunks of the reply."""
        self._db.execute("UPDATE inbox SET sent = ? WHERE channel = ? AND event_id = ?", (sent, channel, event_id))

    def stream_messages(self, channel: str, event_id: str, message_ids: Sequence[str]) -> None:
        """Record the platform ids a streamed reply has shown so far (a restart closes them)."""
        self._db.execute(
            "UPDATE inbox SET stream = ? WHERE channel = ? AND event_id = ?",
            (json.dumps(list(message_ids)), channel, event_id),
        )

    def unfinished(self) -> list[InboxRow]:
        """Return rows left `pending`, `running` or `replying` by the previous process, oldest first.

        `queued` rows are not among them: the delivery queue sends those (`due_replies`).
        """
        return self._rows("WHERE state IN ('pending', 'running', 'replying') ORDER BY received, rowid")

    # -- the delivery queue ------------------------------------------------------------------

    def queue_reply(self, channel: str, event_id: str, *, next_try: float) -> None:
        """Park a reply whose sends gave up (state `queued`), to be tried again from `next_try`."""
        self._db.execute(
            "UPDATE inbox SET state = 'queued', queued_at = COALESCE(queued_at, ?), next_try = ?"
            " WHERE channel = ? AND event_id = ?",
            (self._clock(), next_try, channel, event_id),
        )

    def retry_reply(self, channel: str, event_id: str, *, next_try: float) -> None:
        """Count one more failed try of a queued reply and set when the next one is due."""
        self._db.execute(
            "UPDATE inbox SET next_try = ?, tries = tries + 1 WHERE channel = ? AND event_id = ? AND state = 'queued'",
            (next_try, channel, event_id),
        )

    def due_replies(self, now: float) -> list[InboxRow]:
        """Return the queued replies due at `now`, oldest message first."""
        return self._rows("WHERE state = 'queued' AND next_try <= ? ORDER BY received, rowid", (now,))

    def next_reply_due(self) -> float | None:
        """Return when the next queued reply is due (None: the queue is empty)."""
        (due,) = self._db.execute("SELECT MIN(next_try) FROM inbox WHERE state = 'queued'").fetchone()
        return None if due is None else float(due)

    def queued_replies(self) -> int:
        """Return how many replies wait in the delivery queue."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM inbox WHERE state = 'queued'").fetchone()
        return int(count)

    def _rows(self, where: str, parameters: tuple[Any, ...] = ()) -> list[InboxRow]:
        rows = self._db.execute(f"{_ROW} {where}", parameters).fetchall()
        return [
            InboxRow(c, e, json.loads(b), s, r, n, tuple(json.loads(m)) if m else (), q, t)
            for c, e, b, s, r, n, m, q, t in rows
        ]

    def prune_inbox(self, *, older_than_s: float | None = None) -> int:
        """Forget finished rows past the de-duplication window (or `older_than_s`); return how many."""
        now = self._clock()
        self._finished_since_prune, self._pruned_at = 0, now
        cursor = self._db.execute(
            "DELETE FROM inbox WHERE state IN ('done', 'interrupted', 'given_up', 'limited') AND received < ?",
            (now - (self._window_s if older_than_s is None else older_than_s),),
        )
        return cursor.rowcount

    def inbox_depth(self) -> int:
        """Return how many messages wait for or are in their turn or reply (`pending` to `queued`)."""
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM inbox WHERE state IN ('pending', 'running', 'replying', 'queued')"
        ).fetchone()
        return int(count)

    def backlog(self) -> Backlog:
        """Return the inbox depth and the delivery queue, each with its oldest row's time (one read)."""
        depth, received, waiting, queued = self._db.execute(
            "SELECT COUNT(*) FILTER (WHERE state IN ('pending', 'running', 'replying', 'queued')),"
            " MIN(received) FILTER (WHERE state IN ('pending', 'running', 'replying', 'queued')),"
            " COUNT(*) FILTER (WHERE state = 'queued'), MIN(queued_at) FILTER (WHERE state = 'queued')"
            " FROM inbox"
        ).fetchone()
        return Backlog(depth=int(depth), oldest_received=received, waiting=int(waiting), oldest_queued=queued)

    def inbox_size(self) -> int:
        """Return how many rows the inbox holds (finished ones included)."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM inbox").fetchone()
        return int(count)

    # -- sessions ------------------------------------------------------------------------

    def open_session(self, key: str, agent: str) -> int:
        """Return the open session id for `key`, creating one for `agent` if none is open."""
        row = self._db.execute(
            "SELECT id, agent FROM sessions WHERE key = ? AND closed = 0 ORDER BY id DESC LIMIT 1", (key,)
        ).fetchone()
        if row is not None and row[1] == agent:
            return int(row[0])
        if row is not None:  # the route now names another agent: never mix transcripts
            self.close_session(key)
        cursor = self._db.execute(
            "INSERT INTO sessions (key, agent, created) VALUES (?,?,?)", (key, agent, self._clock())
        )
        return int(cursor.lastrowid or 0)

    def find_session(self, key: str, agent: str) -> int | None:
        """Return the open session id for `key` if `agent` owns it; never create one."""
        row = self._db.execute(
            "SELECT id FROM sessions WHERE key = ? AND agent = ? AND closed = 0 ORDER BY id DESC LIMIT 1",
            (key, agent),
        ).fetchone()
        return None if row is None else int(row[0])

    def close_session(self, key: str) -> None:
        """Close the open session for `key` (the next message starts a fresh one)."""
        self._db.execute("UPDATE sessions SET closed = 1 WHERE key = ? AND closed = 0", (key,))

    def load_messages(self, session_id: int, *, last: int | None = None) -> tuple[list[dict[str, Any]], int]:
        """Return (the last `last` messages in order, how many the session has in all)."""
        (total,) = self._db.execute(
            "SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,)
        ).fetchone()
        rows = self._db.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY seq DESC LIMIT ?",
            (session_id, -1 if last is None else last),
        ).fetchall()
        return [json.loads(body) for (body,) in reversed(rows)], int(total)

    def load_range(self, session_id: int, start: int, stop: int) -> list[dict[str, Any]]:
        """Return messages `start..stop` (positions from the session's first) in order, as many as exist."""
        rows = self._db.execute(
            "SELECT body FROM messages WHERE session_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
            (session_id, start, stop),
        ).fetchall()
        return [json.loads(body) for (body,) in rows]

    def append_messages(self, session_id: int, start_seq: int, messages: list[dict[str, Any]]) -> None:
        """Persist messages `start_seq..` of a transcript (idempotent per seq)."""
        if not messages:
            return
        self._db.executemany(
            "INSERT OR REPLACE INTO messages (session_id, seq, body) VALUES (?,?,?)",
            [(session_id, start_seq + i, json.dumps(m)) for i, m in enumerate(messages)],
        )

    def load_summary(self, session_id: int) -> tuple[str, int] | None:
        """Return (the running summary, how many leading messages it covers), or None."""
        row = self._db.execute("SELECT body, covers FROM summaries WHERE session_id = ?", (session_id,)).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def save_summary(self, session_id: int, text: str, covers: int) -> None:
        """Store the session's running summary (one per session; a newer one replaces it)."""
        self._db.execute(
            "INSERT OR REPLACE INTO summaries (session_id, covers, body, updated) VALUES (?,?,?,?)",
            (session_id, covers, text, self._clock()),
        )

    def sessions(self) -> Iterator[tuple[str, str, int]]:
        """Yield (key, agent, message count) for every open session."""
        yield from self._db.execute(
            "SELECT s.key, s.agent, (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)"
            " FROM sessions s WHERE s.closed = 0 ORDER BY s.id"
        )
