"""PairingStore: strangers' pending pairing codes, the senders approvers paired, and the answers counted.

The store keeps state and counts; what a route admits and who may decide a code is the
seam's (`orchestrator/seam/admission.py`). Every method takes `now` (UNIX seconds), so
expiry is tested with a clock, never by sleeping. The daemon and `orchestrator pairing`
open the same file (WAL): an approval or revoke written by one is read by the other on its
next message.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.store.sqlite import Database

__all__ = ["Offer", "PairedSender", "PairingCode", "PairingStore"]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS pairing_codes (
    code TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    route TEXT NOT NULL,
    sender TEXT NOT NULL,
    chat TEXT NOT NULL,
    sender_name TEXT,
    created REAL NOT NULL,
    UNIQUE (channel, sender)
);
CREATE TABLE IF NOT EXISTS paired_senders (
    channel TEXT NOT NULL,
    sender TEXT NOT NULL,
    route TEXT NOT NULL,
    approved_by TEXT NOT NULL,
    approved REAL NOT NULL,
    code TEXT NOT NULL,
    PRIMARY KEY (channel, sender, route)
);
CREATE TABLE IF NOT EXISTS pairing_counts (
    channel TEXT NOT NULL,
    sender TEXT NOT NULL,
    kind TEXT NOT NULL,
    ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS pairing_counts_by_sender ON pairing_counts (channel, sender, kind, ts);
"""
_HOUR_S: Final = 3600.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingCode:
    """One pending code: who asked, where, for which route, and when."""

    code: str
    channel: str
    route: str
    sender: str
    chat: str
    sender_name: str | None
    created: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedSender:
    """One approval: `sender` on `channel` is admitted by the route named `route`."""

    channel: str
    sender: str
    route: str
    approved_by: str
    approved: float
    code: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Offer:
    """What a stranger's message got: their code (`new` the first time), or None when the channel is full."""

    code: PairingCode | None
    new: bool


class PairingStore(Database):
    """The pairing tables in `<state_dir>/pairing.sqlite3`; a context manager."""

    def __init__(self, path: Path, *, alphabet: str, length: int, ttl_s: float) -> None:
        super().__init__(path, _SCHEMA)
        self._alphabet, self._length, self._ttl_s = alphabet, length, ttl_s

    def offer(
        self, *, channel: str, route: str, sender: str, chat: str, sender_name: str | None, now: float, max_pending: int
    ) -> Offer:
        """Return the sender's pending code, or make one when the channel has fewer than `max_pending`."""
        self._expire(now)
        held = self._codes("WHERE channel = ? AND sender = ?", (channel, sender))
        if held:
            return Offer(code=held[0], new=False)
        (pending,) = self._db.execute("SELECT COUNT(*) FROM pairing_codes WHERE channel = ?", (channel,)).fetchone()
        if pending >= max_pending:
            return Offer(code=None, new=False)
        while True:  # 32^8 codes: a collision is a retry, never an error
            code = "".join(secrets.choice(self._alphabet) for _ in range(self._length))
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO pairing_codes (code, channel, route, sender, chat, sender_name, created)"
                " VALUES (?,?,?,?,?,?,?)",
                (code, channel, route, sender, chat, sender_name, now),
            )
            if cursor.rowcount == 1:
                break
        made = self.find(code, now=now)
        assert made is not None
        return Offer(code=made, new=True)

    def find(self, code: str, *, now: float) -> PairingCode | None:
        """Return the pending code `code` (any case, surrounding blanks ignored), None when unknown or expired."""
        self._expire(now)
        found = self._codes("WHERE code = ?", (code.strip().upper(),))
        return found[0] if found else None

    def pending(self, *, now: float) -> list[PairingCode]:
        """Return every pending code, oldest first."""
        self._expire(now)
        return self._codes("ORDER BY created, code", ())

    def approve(self, code: PairingCode, *, by: str, now: float) -> PairedSender:
        """Pair the code's sender with its route and drop the code (one transaction)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM pairing_codes WHERE code = ?", (code.code,))
            self._db.execute(
                "INSERT OR REPLACE INTO paired_senders (channel, sender, route, approved_by, approved, code)"
                " VALUES (?,?,?,?,?,?)",
                (code.channel, code.sender, code.route, by, now, code.code),
            )
        return PairedSender(
            channel=code.channel, sender=code.sender, route=code.route, approved_by=by, approved=now, code=code.code
        )

    def deny(self, code: PairingCode) -> bool:
        """Drop a pending code; return whether it was still there."""
        return self._db.execute("DELETE FROM pairing_codes WHERE code = ?", (code.code,)).rowcount == 1

    def revoke(self, *, channel: str, sender: str, route: str | None = None) -> list[PairedSender]:
        """Unpair `sender` on `channel` (from every route, or from `route`); return what was removed."""
        where, params = "WHERE channel = ? AND sender = ?", [channel, sender]
        if route is not None:
            where, params = where + " AND route = ?", [*params, route]
        removed = self._paired(where, params)
        self._db.execute(f"DELETE FROM paired_senders {where}", tuple(params))
        return removed

    def routes_of(self, channel: str, sender: str) -> frozenset[str]:
        """Return the routes `sender` on `channel` was paired with (empty for a stranger)."""
        rows = self._db.execute(
            "SELECT route FROM paired_senders WHERE channel = ? AND sender = ?", (channel, sender)
        ).fetchall()
        return frozenset(row[0] for row in rows)

    def paired(self, *, channel: str | None = None, route: str | None = None) -> list[PairedSender]:
        """Return the approvals, oldest first (optionally of one channel and route)."""
        clauses = [c for c, v in (("channel = ?", channel), ("route = ?", route)) if v is not None]
        params = tuple(v for v in (channel, route) if v is not None)
        return self._paired(("WHERE " + " AND ".join(clauses)) if clauses else "", params)

    def count(self, *, channel: str, sender: str, kind: str, now: float) -> int:
        """Return how many `kind` events `sender` had in the last hour (`note`d ones)."""
        self._db.execute("DELETE FROM pairing_counts WHERE ts <= ?", (now - _HOUR_S,))
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM pairing_counts WHERE channel = ? AND sender = ? AND kind = ?", (channel, sender, kind)
        ).fetchone()
        return int(count)

    def note(self, *, channel: str, sender: str, kind: str, now: float) -> None:
        """Count one `kind` event of `sender` (an answer to a stranger, a refused decision)."""
        self._db.execute(
            "INSERT INTO pairing_counts (channel, sender, kind, ts) VALUES (?,?,?,?)", (channel, sender, kind, now)
        )

    def _expire(self, now: float) -> None:
        self._db.execute("DELETE FROM pairing_codes WHERE created <= ?", (now - self._ttl_s,))

    def _codes(self, where: str, params: Sequence[object]) -> list[PairingCode]:
        rows = self._db.execute(
            f"SELECT code, channel, route, sender, chat, sender_name, created FROM pairing_codes {where}", tuple(params)
        ).fetchall()
        return [
            PairingCode(code=r[0], channel=r[1], route=r[2], sender=r[3], chat=r[4], sender_name=r[5], created=r[6])
            for r in rows
        ]

    def _paired(self, where: str, params: Sequence[object]) -> list[PairedSender]:
        rows = self._db.execute(
            f"SELECT channel, sender, route, approved_by, approved, code FROM paired_senders {where}"
            " ORDER BY approved, sender",
            tuple(params),
        ).fetchall()
        return [
            PairedSender(channel=r[0], sender=r[1], route=r[2], approved_by=r[3], approved=r[4], code=r[5]) for r in rows
        ]
