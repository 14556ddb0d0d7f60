"""SQLite-backed state: the approval audit log, sessions, transcripts and the durable inbox."""

from orchestrator.store.audit import AuditLog
from orchestrator.store.sessions import InboxRow, SessionStore

__all__ = ["AuditLog", "InboxRow", "SessionStore"]
