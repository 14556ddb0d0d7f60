"""SQLite (WAL) audit log of approval decisions and pairing decisions."""

from __future__ import annotations

import json
import time
from pathlib import Path

from orchestrator.policy import ApprovalDecision, ApprovalRequest, ApprovalRule
from orchestrator.store.sqlite import Database

__all__ = ["AuditLog", "PairingAudit"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS approval_audit (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    request_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    rule TEXT NOT NULL,
    verdict TEXT NOT NULL,
    decided_by TEXT,
    reason TEXT NOT NULL
)
"""
_PAIRING_SCHEMA = """
CREATE TABLE IF NOT EXISTS pairing_audit (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    action TEXT NOT NULL,
    code TEXT,
    channel TEXT NOT NULL,
    route TEXT,
    sender TEXT NOT NULL,
    decided_by TEXT,
    reason TEXT NOT NULL
);
"""


class AuditLog(Database):
    """Append-only approval audit table in `<state_dir>/audit.sqlite3`; a context manager."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)


    def record_approval(
        self, request: ApprovalRequest, decision: ApprovalDecision, *, rule: ApprovalRule
    ) -> None:
        """Append one decision."""
        self._db.execute(
            "INSERT INTO approval_audit (ts, request_id, agent, session, tool, arguments, rule,"
            " verdict, decided_by, reason) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                time.time(),
                request.request_id,
                request.agent,
                request.session,
                request.tool,
                json.dumps(dict(request.arguments), sort_keys=True, default=str),
                rule.value,
                decision.verdict.value,
                decision.decided_by,
                decision.reason,
            ),
        )

    def decisions(self, *, agent: str | None = None) -> list[dict[str, object]]:
        """Return recorded decisions, oldest first (optionally for one agent)."""
        query = "SELECT agent, session, tool, rule, verdict, decided_by, reason FROM approval_audit"
        params: tuple[str, ...] = ()
        if agent is not None:
            query += " WHERE agent = ?"
            params = (agent,)
        cursor = self._db.execute(query + " ORDER BY id", params)
        cols = [c[0] for c in cursor.description]
        return [dict(zip(cols, row, strict=True)) for row in cursor.fetchall()]


class PairingAudit(Database):
    """Append-only pairing audit table beside the approvals' in `<state_dir>/audit.sqlite3`; a context manager.

    Opened by the daemon and by `orchestrator pairing` (each its own connection, WAL).
    """

    def __init__(self, path: Path) -> None:
        super().__init__(path, _PAIRING_SCHEMA)

    def record_pairing(
        self, action: str, *, channel: str, sender: str, code: str | None = None, route: str | None = None,
        decided_by: str | None = None, reason: str = "",
    ) -> None:
        """Append one pairing event: `offered`, `approved`, `denied`, `revoked` or `refused`."""
        self._db.execute(
            "INSERT INTO pairing_audit (ts, action, code, channel, route, sender, decided_by, reason)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (time.time(), action, code, channel, route, sender, decided_by, reason),
        )

    def decisions(self) -> list[dict[str, object]]:
        """Return the recorded pairing events, oldest first."""
        cursor = self._db.execute(
            "SELECT action, code, channel, route, sender, decided_by, reason FROM pairing_audit ORDER BY id"
        )
        cols = [c[0] for c in cursor.description]
        return [dict(zip(cols, row, strict=True)) for row in cursor.fetchall()]
