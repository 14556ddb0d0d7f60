"""Cross-checks of `[[schedules]]`: one trigger each, a valid crontab, known agent and channel."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from orchestrator.config import Config, ScheduleConfig
from orchestrator.errors import ConfigProblem
from orchestrator.text import suggest

__all__ = ["check_schedules"]

_WEEKDAY_FIELD: Final = 4


def check_schedules(config: Config, *, shown: str) -> Iterator[ConfigProblem]:
    """Yield one problem per bad schedule key (`schedules[i].key: message`)."""
    seen: dict[str, int] = {}
    for i, schedule in enumerate(config.schedules):
        base = f"schedules[{i}]"
        first = seen.setdefault(schedule.name, i)
        if first != i:
            yield ConfigProblem(
                shown, f"{base}.name", f"duplicate schedule name {schedule.name!r} (also schedules[{first}])"
            )
        yield from _check_target(config, schedule, base, shown)
        if schedule.cron is None and schedule.interval_s is None:
            yield ConfigProblem(shown, f"{base}.cron", "give exactly one of cron or interval_s (neither is set)")
        elif schedule.cron is not None and schedule.interval_s is not None:
            yield ConfigProblem(shown, f"{base}.interval_s", "give exactly one of cron or interval_s (both are set)")
        if schedule.timezone is not None:
            problem = _timezone_problem(schedule.timezone)
            if schedule.cron is None:
                yield ConfigProblem(shown, f"{base}.timezone", "only applies to cron schedules")
            elif problem:
                yield ConfigProblem(shown, f"{base}.timezone", problem)
        if schedule.cron is not None:
            problem = _crontab_problem(schedule.cron)
            if problem:
                yield ConfigProblem(shown, f"{base}.cron", problem)
        target = schedule.deliver_to
        if target is not None and target.channel not in config.channels:
            yield ConfigProblem(
                shown,
                f"{base}.deliver_to.channel",
                f"unknown channel {target.channel!r}" + suggest(target.channel, config.channels),
            )


def _check_target(config: Config, schedule: ScheduleConfig, base: str, shown: str) -> Iterator[ConfigProblem]:
    if schedule.sop is not None:
        if schedule.prompt is not None:
            yield ConfigProblem(shown, f"{base}.sop", "give exactly one of prompt or sop (both are set)")
        if schedule.agent is not None:
            yield ConfigProblem(shown, f"{base}.agent", "an SOP schedule runs as the SOP's own agents: remove agent")
        if schedule.tools is not None:
            yield ConfigProblem(shown, f"{base}.tools", "an SOP schedule takes each step's own tools: remove tools")
        if schedule.sop not in config.sops:
            yield ConfigProblem(shown, f"{base}.sop", f"unknown SOP {schedule.sop!r}" + suggest(schedule.sop, config.sops))
        return
    if schedule.prompt is None:
        yield ConfigProblem(shown, f"{base}.prompt", "give exactly one of prompt or sop (neither is set)")
    if schedule.agent is None:
        yield ConfigProblem(shown, f"{base}.agent", "missing required key (a prompt schedule names its agent)")
    elif schedule.agent not in config.agents:
        yield ConfigProblem(
            shown, f"{base}.agent", f"unknown agent {schedule.agent!r}" + suggest(schedule.agent, config.agents)
        )


def _crontab_problem(expr: str) -> str | None:
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) == 5 and any(c.isdigit() for c in fields[_WEEKDAY_FIELD]):
        # APScheduler 3 numbers weekdays from Monday = 0, crontab from Sunday = 0: a number
        # here would silently run on the wrong day.
        return f"invalid crontab {expr!r}: write the day of week as names (mon-fri, sun), not numbers"
    try:
        CronTrigger.from_crontab(expr, timezone="UTC")
    except ValueError as exc:
        return f"invalid crontab {expr!r}: {exc}"
    return None


def _timezone_problem(name: str) -> str | None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone {name!r} (use an IANA name such as 'Europe/Berlin' or 'UTC')"
    return None
