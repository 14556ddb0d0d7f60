"""SQLite-backed state: the approval audit log (sessions and transcripts come with channels)."""

from orchestrator.store.audit import AuditLog

__all__ = ["AuditLog"]
