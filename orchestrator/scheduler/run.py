"""One schedule run: the schedule path through the seam, on the schedule's own session."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

from loguru import logger

from channels import ChannelError, FileAdapter, Outbound
from orchestrator.config import Config, ScheduleConfig
from orchestrator.scheduler.host import ScheduleHost
from orchestrator.scheduler.outlet import DeliverToOutlet
from orchestrator.seam import build_schedule
from orchestrator.sop import run_sop
from orchestrator.tools import bind_outlet

__all__ = ["ScheduleOutcome", "deliver_result", "run_schedule", "session_key"]


def session_key(name: str) -> str:
    """Return the session key of a schedule's transcript (`schedule:<name>`)."""
    return f"schedule:{name}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleOutcome:
    """How one run ended (`status`: a StopReason or SopStatus value) and what it produced."""

    status: str
    text: str


async def run_schedule(host: ScheduleHost, config: Config, schedule: ScheduleConfig) -> ScheduleOutcome:
    """Run `schedule` once with no operator (whatever needs approval or confirmation is denied).

    A prompt schedule is one turn of its agent on the SCHEDULE path, `tools` as
    `caller_allowed` (narrowing only; absent = no narrowing), on the schedule's persistent
    session `schedule:<name>`; with a `deliver_to`, `send_file` (when the agent names it)
    posts into that chat through its adapter. An SOP schedule runs `run_sop`
    non-interactively (each step on its own child transcript, under its step agent's
    policy). Either counts as a running turn for the daemon's drain.
    """
    if schedule.sop is not None:
        async with host.in_flight():
            sop = await run_sop(
                config, schedule.sop, services=host.services, sessions=host.sessions, actor=session_key(schedule.name),
                session=session_key(schedule.name),
            )
        return ScheduleOutcome(status=sop.status.value, text=sop.output or sop.message)
    assert schedule.agent is not None and schedule.prompt is not None  # checked with the config
    target = schedule.deliver_to
    execution = build_schedule(
        config, schedule.agent, host.services, tools=schedule.tools, deliver_to=target is not None
    )
    key = session_key(schedule.name)
    adapter = host.channels.adapter(target.channel) if target is not None else None
    # the chat `send_file` posts to: the one the result goes to (a channel that cannot take
    # files, or is not running, leaves the tool with no chat, and it says so)
    outlet = DeliverToOutlet(adapter=adapter, target=target) if isinstance(adapter, FileAdapter) and target else None
    with bind_outlet(outlet) if outlet is not None else nullcontext():
        turn = await host.sessions.run_turn(
            key, agent=schedule.agent, execution=execution, text=schedule.prompt, approver=None, actor=key,
            hooks=(host.counting,),
        )
    result = turn.completed()
    return ScheduleOutcome(status=result.stop.value, text=result.text)


async def deliver_result(host: ScheduleHost, schedule: ScheduleConfig, outcome: ScheduleOutcome) -> bool:
    """Send a run's reply to its `deliver_to` chat; log (never raise) when it cannot be sent."""
    target = schedule.deliver_to
    if target is None:
        return False
    adapter = host.channels.adapter(target.channel)
    if adapter is None:
        logger.error("schedule {}: channel {} is not running; the result was not delivered", schedule.name, target.channel)
        return False
    try:
        await adapter.send(Outbound(chat=target.chat, text=outcome.text or "(no reply)"))
    except ChannelError as exc:
        logger.error("schedule {}: could not send to {} chat {}: {}", schedule.name, target.channel, target.chat, exc.reason)
        return False
    return True
