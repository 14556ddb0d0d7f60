"""SQLite-backed state: the approval audit log, sessions, transcripts, the durable inbox, schedules."""

from orchestrator.store.audit import AuditLog
from orchestrator.store.lock import StateDirLocked, hold_state_lock
from orchestrator.store.schedules import ScheduleLog, ScheduleRecord
from orchestrator.store.sessions import InboxRow, SessionStore
from orchestrator.store.sqlite import Database, state_fault

__all__ = [
    "AuditLog",
    "Database",
    "InboxRow",
    "ScheduleLog",
    "ScheduleRecord",
    "SessionStore",
    "StateDirLocked",
    "hold_state_lock",
    "state_fault",
]
