"""SQLite-backed state: the approval audit log, sessions, transcripts, the durable inbox, schedules, usage."""

from orchestrator.store.audit import AuditLog
from orchestrator.store.durable import GroupSync, StateSyncFailed, WalSync
from orchestrator.store.lock import StateDirLocked, hold_state_lock, state_lock_holder
from orchestrator.store.schedules import ScheduleLog, ScheduleRecord
from orchestrator.store.sessions import InboxRow, SessionStore
from orchestrator.store.sqlite import Database, state_fault
from orchestrator.store.usage import GROUPINGS, NOBODY, Grouping, Purpose, UsageLog, UsageRow, UsageTotal, read_usage
from orchestrator.store.usage_report import BadUsageQuery, UsageReport, parse_grouping, parse_since

__all__ = [
    "GROUPINGS",
    "NOBODY",
    "AuditLog",
    "BadUsageQuery",
    "Database",
    "Grouping",
    "GroupSync",
    "InboxRow",
    "Purpose",
    "ScheduleLog",
    "ScheduleRecord",
    "SessionStore",
    "StateDirLocked",
    "StateSyncFailed",
    "UsageLog",
    "UsageReport",
    "UsageRow",
    "UsageTotal",
    "WalSync",
    "hold_state_lock",
    "state_lock_holder",
    "parse_grouping",
    "parse_since",
    "read_usage",
    "state_fault",
]
