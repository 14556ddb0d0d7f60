"""SQLite-backed state: the audit log, sessions, transcripts, the durable inbox, schedules, usage, pairings."""

from orchestrator.store.audit import AuditLog, PairingAudit
from orchestrator.store.durable import GroupSync, StateSyncFailed, WalSync
from orchestrator.store.full_disk import FullDisk, disk_full
from orchestrator.store.lock import StateDirLocked, hold_state_lock, state_lock_holder
from orchestrator.store.pairing import Offer, PairedSender, PairingCode, PairingStore
from orchestrator.store.rate_limits import RateVerdict, RateWindows
from orchestrator.store.schedules import ScheduleLog, ScheduleRecord
from orchestrator.store.sessions import Backlog, InboxRow, SessionStore
from orchestrator.store.sqlite import Database, open_database, open_read_only, state_fault
from orchestrator.store.usage import GROUPINGS, NOBODY, Grouping, Purpose, UsageLog, UsageRow, UsageTotal, read_usage
from orchestrator.store.usage_report import BadUsageQuery, UsageReport, parse_grouping, parse_since

__all__ = [
    "GROUPINGS",
    "NOBODY",
    "AuditLog",
    "Backlog",
    "BadUsageQuery",
    "Database",
    "FullDisk",
    "Grouping",
    "GroupSync",
    "InboxRow",
    "Offer",
    "PairedSender",
    "PairingCode",
    "PairingAudit",
    "PairingStore",
    "Purpose",
    "RateVerdict",
    "RateWindows",
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
    "disk_full",
    "hold_state_lock",
    "open_database",
    "open_read_only",
    "state_lock_holder",
    "parse_grouping",
    "parse_since",
    "read_usage",
    "state_fault",
]
