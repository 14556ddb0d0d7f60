"""Schedules: `[[schedules]]` turns started by APScheduler 3 in the daemon, on the SCHEDULE path."""

from orchestrator.scheduler.host import ScheduleHost
from orchestrator.scheduler.listing import ScheduleRow, schedule_rows
from orchestrator.scheduler.run import ScheduleOutcome, deliver_result, run_schedule, session_key
from orchestrator.scheduler.runner import SCHEDULE_DB, ScheduleRunner, start_schedules
from orchestrator.scheduler.triggers import Catchup, MisfireDecision, decide_misfire, describe_trigger, next_fire

__all__ = [
    "SCHEDULE_DB",
    "Catchup",
    "MisfireDecision",
    "ScheduleHost",
    "ScheduleOutcome",
    "ScheduleRow",
    "ScheduleRunner",
    "decide_misfire",
    "deliver_result",
    "describe_trigger",
    "next_fire",
    "run_schedule",
    "schedule_rows",
    "session_key",
    "start_schedules",
]
