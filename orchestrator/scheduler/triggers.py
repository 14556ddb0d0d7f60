"""Schedule clocks: APScheduler triggers, next fire times, and the misfire decision."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from orchestrator.config import ScheduleConfig
from orchestrator.store import ScheduleRecord

__all__ = ["Catchup", "MisfireDecision", "build_trigger", "decide_misfire", "describe_trigger", "next_fire"]

_TICK: Final = timedelta(microseconds=1)


def build_trigger(schedule: ScheduleConfig, *, anchor: float) -> Any:
    """Return the APScheduler trigger of `schedule`.

    Interval schedules fire at `anchor + k * interval_s` (k >= 1), where `anchor` is the last
    run (or when the schedule was first seen), so their phase survives restarts; cron
    schedules fire on the crontab in their `timezone` (default: the host's local zone).
    """
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    if schedule.cron is not None:
        return CronTrigger.from_crontab(schedule.cron, timezone=schedule.timezone)
    assert schedule.interval_s is not None  # the config check guarantees exactly one
    start = datetime.fromtimestamp(anchor, timezone.utc) + timedelta(seconds=schedule.interval_s)
    return IntervalTrigger(seconds=schedule.interval_s, start_date=start, timezone=timezone.utc)


def next_fire(schedule: ScheduleConfig, *, after: float, anchor: float) -> datetime | None:
    """Return the first fire time strictly after `after` (None if the trigger never fires again)."""
    trigger = build_trigger(schedule, anchor=anchor)
    moment = datetime.fromtimestamp(after, timezone.utc) + _TICK
    fire: datetime | None = trigger.get_next_fire_time(None, moment)
    return fire


def describe_trigger(schedule: ScheduleConfig) -> str:
    """Return `cron '0 9 * * mon-fri' (Europe/Berlin)` or `every 300s`."""
    if schedule.cron is not None:
        return f"cron {schedule.cron!r} ({schedule.timezone or 'local time'})"
    return f"every {schedule.interval_s:g}s"


class Catchup(enum.Enum):
    """What to do at start-up about fire times that passed while the daemon was down."""

    NONE_MISSED = "none_missed"
    RUN_ONCE = "run_once"
    SKIP = "skip"


@dataclass(frozen=True, slots=True, kw_only=True)
class MisfireDecision:
    """The misfire policy's verdict for one schedule, with what it is based on."""

    action: Catchup
    first_missed: datetime | None = None
    latest_in_grace: datetime | None = None


def decide_misfire(schedule: ScheduleConfig, record: ScheduleRecord, *, now: float) -> MisfireDecision:
    """Apply the misfire policy: missed runs coalesce into ONE run if the latest is within grace.

    Missed = fire times after `record.checked` and at or before `now`. If one of them lies
    within `misfire_grace_s` before `now`, run once now (however many were missed);
    otherwise skip them all (the caller logs it) and wait for the next fire time.
    """
    anchor = record.last_run if record.last_run is not None else record.registered
    first = next_fire(schedule, after=record.checked, anchor=anchor)
    if first is None or first.timestamp() > now:
        return MisfireDecision(action=Catchup.NONE_MISSED)
    window_start = max(record.checked, now - schedule.misfire_grace_s)
    recent = next_fire(schedule, after=window_start, anchor=anchor)
    if recent is not None and recent.timestamp() <= now:
        return MisfireDecision(action=Catchup.RUN_ONCE, first_missed=first, latest_in_grace=recent)
    return MisfireDecision(action=Catchup.SKIP, first_missed=first)
