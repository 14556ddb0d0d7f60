"""ScheduleLog: when each schedule last ran and up to when its fire times are accounted for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from orchestrator.store.sqlite import Database

__all__ = ["ScheduleLog", "ScheduleRecord"]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS schedule_runs (
    name TEXT PRIMARY KEY,
    registered REAL NOT NULL,
    checked REAL NOT NULL,
    last_run REAL,
    last_status TEXT
);
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRecord:
    """One schedule's durable clock (UNIX seconds).

    `checked`: every fire time up to here was run, skipped or caught up; the fire times
    after it that have passed were missed while the daemon was down.
    """

    name: str
    registered: float
    checked: float
    last_run: float | None
    last_status: str | None


class ScheduleLog(Database):
    """The `schedule_runs` table in `<state_dir>/schedules.sqlite3`; a context manager."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, _SCHEMA)


    def get(self, name: str) -> ScheduleRecord | None:
        """Return the record of `name`, None for a schedule never seen."""
        row = self._db.execute(
            "SELECT name, registered, checked, last_run, last_status FROM schedule_runs WHERE name = ?", (name,)
        ).fetchone()
        if row is None:
            return None
        return ScheduleRecord(name=row[0], registered=row[1], checked=row[2], last_run=row[3], last_status=row[4])

    def register(self, name: str, now: float) -> ScheduleRecord:
        """Return the record of `name`, creating it (checked = `now`) on first sight."""
        self._db.execute(
            "INSERT OR IGNORE INTO schedule_runs (name, registered, checked) VALUES (?,?,?)", (name, now, now)
        )
        record = self.get(name)
        assert record is not None
        return record

    def mark_checked(self, name: str, at: float) -> None:
        """Record that every fire time of `name` up to `at` has been accounted for."""
        self._db.execute("UPDATE schedule_runs SET checked = MAX(checked, ?) WHERE name = ?", (at, name))

    def run_started(self, name: str, at: float) -> None:
        """Record a run starting at `at` (before it runs: a crash mid-run never repeats it)."""
        self._db.execute(
            "UPDATE schedule_runs SET last_run = ?, last_status = 'running', checked = MAX(checked, ?)"
            " WHERE name = ?",
            (at, at, name),
        )

    def run_finished(self, name: str, status: str) -> None:
        """Record how the last run ended (a `StopReason` value, or `failed`)."""
        self._db.execute("UPDATE schedule_runs SET last_status = ? WHERE name = ?", (status, name))
