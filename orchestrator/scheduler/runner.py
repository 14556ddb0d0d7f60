"""ScheduleRunner: APScheduler inside the daemon; each job starts a turn in the runtime's TaskGroup."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Final

from loguru import logger

from orchestrator.config import Config, ScheduleConfig
from orchestrator.scheduler.host import ScheduleHost
from orchestrator.scheduler.run import deliver_result, run_schedule
from orchestrator.scheduler.triggers import Catchup, build_trigger, decide_misfire, describe_trigger
from orchestrator.store import ScheduleLog

__all__ = ["SCHEDULE_DB", "ScheduleRunner", "start_schedules"]

SCHEDULE_DB = "schedules.sqlite3"
# How often the wall clock is compared with the monotonic one, and how far back it must
# move to count as set back (NTP slews by far less; a step of this size is a person or a VM).
CLOCK_CHECK_S: Final = 2.0
CLOCK_STEP_BACK_S: Final = 5.0


async def start_schedules(host: ScheduleHost) -> ScheduleRunner:
    """Start the host's schedules as one more component of it; they stop (cleanly) when it closes.

    The host's reloads reach the runner through `ScheduleRunner.sync`.
    """
    return await host.enter_async_context(ScheduleRunner(host))


class ScheduleRunner:
    """The daemon's `[[schedules]]`; an async context manager.

    On enter it applies the misfire policy to what was missed while the daemon was down
    (`decide_misfire`) and installs one APScheduler job per schedule. A job only spawns the
    run into the runtime's TaskGroup, so a failing run is logged and never stops the daemon;
    a run still going when the next fire time comes makes that fire time skip (logged).
    On exit the scheduler stops and every schedule is marked checked up to now.
    """

    def __init__(
        self,
        host: ScheduleHost,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        clock_check_s: float = CLOCK_CHECK_S,
    ) -> None:
        self._host = host
        self._clock = clock
        self._monotonic = monotonic
        self._clock_check_s = clock_check_s
        self._offset = 0.0  # wall clock minus monotonic clock at the last check
        self._watch: asyncio.TimerHandle | None = None
        self._log: ScheduleLog | None = None
        self._scheduler: Any = None
        self._installed: dict[str, ScheduleConfig] = {}
        self._running: set[str] = set()
        self._closed = False

    async def __aenter__(self) -> ScheduleRunner:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self._log = ScheduleLog(self._host.config.state_path() / SCHEDULE_DB)
        try:
            self._scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop(), timezone=timezone.utc)
            self._scheduler.start()
            self._install(self._host.config, catch_up=True)
            self._offset = self._clock() - self._monotonic()
            self._watch = asyncio.get_running_loop().call_later(self._clock_check_s, self._check_clock)
        except BaseException:
            await self._stop()
            raise
        if self._installed:
            logger.info("schedules: {}", ", ".join(sorted(self._installed)))
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stop()

    def sync(self, config: Config) -> None:
        """Apply a reloaded config: add new schedules, replace changed ones, remove the rest."""
        wanted = {s.name: s for s in config.schedules}
        for name in list(self._installed):
            if name not in wanted:
                self._scheduler.remove_job(name)
                del self._installed[name]
                logger.info("schedule {} removed", name)
        self._install(config, catch_up=False)

    @property
    def busy(self) -> frozenset[str]:
        """Return the schedules whose run has started and not yet finished."""
        return frozenset(self._running)

    def next_run(self, name: str) -> datetime | None:
        """Return when the scheduler will next start `name` (None if not scheduled)."""
        job = self._scheduler.get_job(name) if self._scheduler is not None else None
        when: datetime | None = job.next_run_time if job is not None else None
        return when

    def fire_now(self, name: str) -> None:
        """Make the scheduler start `name` now (its trigger then continues as before)."""
        self._scheduler.modify_job(name, next_run_time=datetime.now(timezone.utc))

    def _install(self, config: Config, *, catch_up: bool) -> None:
        assert self._log is not None
        now = self._clock()
        for schedule in config.schedules:
            if self._installed.get(schedule.name) == schedule:
                continue  # unchanged across a reload: keep its next run time
            record = self._log.register(schedule.name, now)
            anchor = record.last_run if record.last_run is not None else record.registered
            # A run recorded while the wall clock was ahead (set back since) would hold the
            # schedule until the clock catches up with it: count from now instead.
            anchor = min(anchor, now)
            if catch_up:
                decision = decide_misfire(schedule, record, now=now)
                if decision.action is Catchup.RUN_ONCE:
                    logger.info(
                        "schedule {}: missed run(s) since {} while the daemon was down; running once now",
                        schedule.name, _shown(decision.first_missed),
                    )
                    anchor = now
                    self._spawn(schedule.name)
                elif decision.action is Catchup.SKIP:
                    logger.warning(
                        "schedule {}: missed run(s) since {} while the daemon was down, the latest more "
                        "than misfire_grace_s={}s ago: skipped",
                        schedule.name, _shown(decision.first_missed), schedule.misfire_grace_s,
                    )
                self._log.mark_checked(schedule.name, now)
            self._add_job(schedule, anchor=anchor)
            self._installed[schedule.name] = schedule
            logger.debug("schedule {}: {}", schedule.name, describe_trigger(schedule))

    def _check_clock(self) -> None:
        """Follow a wall clock set back: move each schedule's next run with it (a loop timer, monotonic)."""
        self._watch = None
        if self._closed or self._scheduler is None:
            return
        offset = self._clock() - self._monotonic()
        step, self._offset = offset - self._offset, offset
        if step < -CLOCK_STEP_BACK_S:
            logger.warning("the wall clock moved back {:.0f}s; schedules' next runs follow it", -step)
            self._follow_step_back(step)
        self._watch = asyncio.get_running_loop().call_later(self._clock_check_s, self._check_clock)

    def _follow_step_back(self, step: float) -> None:
        # APScheduler waits for wall-clock times: after a step back every next run lies that
        # much further away. An interval schedule keeps the time it had left (its next run
        # moves back by the step); a cron schedule takes its next crontab time from now.
        now = datetime.fromtimestamp(self._clock(), timezone.utc)
        for name, schedule in self._installed.items():
            job = self._scheduler.get_job(name)
            if job is None or job.next_run_time is None:
                continue
            if schedule.interval_s is None:
                self._scheduler.modify_job(name, next_run_time=job.trigger.get_next_fire_time(None, now))
                continue
            self._add_job(schedule, anchor=job.next_run_time.timestamp() + step - schedule.interval_s)

    def _add_job(self, schedule: ScheduleConfig, *, anchor: float) -> None:
        self._scheduler.add_job(
            self._fire,
            build_trigger(schedule, anchor=anchor),
            args=[schedule.name],
            id=schedule.name,
            name=f"schedule:{schedule.name}",
            misfire_grace_time=schedule.misfire_grace_s,
            coalesce=True,
            max_instances=1,
            replace_existing=True,
        )

    async def _fire(self, name: str) -> None:
        # Runs as APScheduler's own short task: hand the turn to the runtime's TaskGroup.
        if self._closed or not self._host.accepting:
            return
        if name in self._running:
            logger.warning("schedule {}: the previous run is still going; this run is skipped", name)
            if self._log is not None:
                self._log.mark_checked(name, self._clock())
            return
        self._spawn(name)

    def _spawn(self, name: str) -> None:
        self._running.add(name)
        self._host.spawn(self._run(name), name=f"schedule:{name}")

    async def _run(self, name: str) -> None:
        try:
            config = self._host.config  # one generation for the whole run
            schedule = next((s for s in config.schedules if s.name == name), None)
            if schedule is None or self._log is None:
                return  # removed by a reload after it fired
            self._log.run_started(name, self._clock())
            status = "failed"
            try:
                outcome = await run_schedule(self._host, config, schedule)
                status = outcome.status
            except asyncio.CancelledError:
                status = "interrupted"
                raise
            finally:
                if self._log is not None:
                    self._log.run_finished(name, status)
            logger.info("schedule {} ran: {}", name, status)
            await deliver_result(self._host, schedule, outcome)
        finally:
            self._running.discard(name)

    async def _stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
            await asyncio.sleep(0)  # AsyncIOScheduler shuts down in a loop callback
        if self._log is not None:
            now = self._clock()
            for name in self._installed:
                self._log.mark_checked(name, now)
            self._closed = True
            self._log.close()
            self._log = None
        self._closed = True


def _shown(moment: datetime | None) -> str:
    return moment.astimezone().isoformat(timespec="seconds") if moment is not None else "?"
