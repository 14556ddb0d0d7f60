"""`orchestrator schedules`: each schedule's trigger and next run, computed without the daemon."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone

from orchestrator.config import Config
from orchestrator.scheduler.runner import SCHEDULE_DB
from orchestrator.scheduler.triggers import describe_trigger, next_fire
from orchestrator.store import ScheduleLog, ScheduleRecord

__all__ = ["ScheduleRow", "schedule_rows"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRow:
    """One line of `orchestrator schedules`."""

    name: str
    agent: str | None
    sop: str | None
    trigger: str
    next_run: datetime | None
    last_run: datetime | None
    last_status: str | None
    deliver_to: str | None

    def describe(self) -> dict[str, object]:
        """Return the row as plain data (for `--json`)."""
        return {
            "name": self.name,
            "agent": self.agent,
            "sop": self.sop,
            "trigger": self.trigger,
            "next_run": _iso(self.next_run),
            "last_run": _iso(self.last_run),
            "last_status": self.last_status,
            "deliver_to": self.deliver_to,
        }


def schedule_rows(config: Config, *, now: float | None = None) -> list[ScheduleRow]:
    """Return every schedule with its next run time as the daemon would compute it.

    Reads the last-run table when the state directory has one (an interval schedule keeps
    its phase from its last run); never creates it.
    """
    now = time.time() if now is None else now
    records: dict[str, ScheduleRecord] = {}
    db = config.state_path() / SCHEDULE_DB
    if db.exists():
        with ScheduleLog(db) as log:
            for schedule in config.schedules:
                record = log.get(schedule.name)
                if record is not None:
                    records[schedule.name] = record
    rows = []
    for schedule in config.schedules:
        record = records.get(schedule.name)
        anchor = now
        if record is not None:
            anchor = record.last_run if record.last_run is not None else record.registered
        target = schedule.deliver_to
        rows.append(
            ScheduleRow(
                name=schedule.name,
                agent=schedule.agent,
                sop=schedule.sop,
                trigger=describe_trigger(schedule),
                next_run=next_fire(schedule, after=now, anchor=anchor),
                last_run=(
                    datetime.fromtimestamp(record.last_run, timezone.utc)
                    if record is not None and record.last_run is not None else None
                ),
                last_status=record.last_status if record is not None else None,
                deliver_to=f"{target.channel}:{target.chat}" if target is not None else None,
            )
        )
    return rows


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone().isoformat(timespec="seconds") if moment is not None else None
