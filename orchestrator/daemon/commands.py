"""Chat commands (`/new`, `/stop`, `/usage`, `/help`, `/compact`, `/sop NAME`, `/show ID`, `/pairing`, a malformed `/approve`): one handler each, in `COMMANDS`."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Final

from loguru import logger

from channels import APPROVE_COMMAND, DENY_COMMAND, SHOW_COMMAND, Inbound, Outbound, parse_show_command
from orchestrator.daemon.admission import INSTANT_COMMANDS, STRANGER, Admitted
from orchestrator.daemon.approvals import REFUSED, ChannelApprover, send, whole_call
from orchestrator.daemon.pairing import answer_stranger, decide_pairing
from orchestrator.daemon.runtime import Runtime
from orchestrator.policy import ApprovalRequest, Interactivity
from orchestrator.seam import (
    COMPACT_COMMAND, DAY_S, PAIRING_COMMAND, SOP_COMMAND, WHOAMI_COMMAND, ChatCommands, budget_key, build_channel,
    resolve_chat_commands,
)
from orchestrator.sessions import TurnRefused
from orchestrator.sop import SopResult, SopStatus, run_sop

__all__ = ["COMMANDS", "CommandHandler", "run_command"]

CommandHandler = Callable[[Runtime, Inbound, Admitted], Awaitable[None]]
"""Handle one admitted command message; it marks the inbox row done when it is."""


async def run_command(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """Run the handler of the command `admitted` names (a stranger's DM is answered with a pairing code)."""
    assert admitted.command is not None
    if admitted.command == STRANGER:
        await answer_stranger(runtime, inbound, admitted)
        return
    await COMMANDS[admitted.command](runtime, inbound, admitted)


async def _new(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/new`: close the session; the next message starts afresh."""
    _done(runtime, inbound)
    runtime.transcripts.forget(admitted.key)
    await _tell(runtime, inbound, "Started a new session.")


async def _stop(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/stop`: cancel what runs in the session (the turn itself then reports "Stopped.")."""
    _done(runtime, inbound)
    if not runtime.sessions.stop(admitted.key):
        await _tell(runtime, inbound, "Nothing is running.")


async def _usage(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/usage`: the sender's own tokens and cost with the routed agent, and what is left of the day's budget."""
    _done(runtime, inbound)
    await _tell(runtime, inbound, usage_text(runtime, inbound, admitted))


def usage_text(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> str:
    """Return the `/usage` answer: the last 24 hours and 30 days of this sender with this agent."""
    agent, sender = admitted.route.agent, f"{inbound.channel}:{inbound.sender}"
    meter, now = runtime.services.usage, time.time()
    lines = [f"Your usage with {agent}:"]
    own = 0
    for label, span in (("last 24 hours", DAY_S), ("last 30 days", 30 * DAY_S)):
        total = meter.report(since=now - span, agent=agent, sender=sender).total
        own = own or total.input_tokens + total.output_tokens
        cost = f", cost {total.cost:.4f}" if total.cost is not None else ""
        lines.append(f"{label}: {total.input_tokens + total.output_tokens} tokens in {total.calls} model calls{cost}")
    # the budget as the seam resolved it for this route's turns; the day counts delegated turns too
    limit = build_channel(admitted.config, agent, runtime.services).knobs.max_tokens_per_day
    spent = meter.spent_today(budget_key(agent, sender))
    delegated = f" ({spent - own} of the day's tokens went to agents {agent} delegated to)" if spent > own else ""
    lines.append(f"daily budget: {max(0, limit - spent)} of {limit} tokens left{delegated}")
    return "\n".join(lines)


async def _compact(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/compact`: fold the session's older messages into its summary now (after a running turn)."""
    config, agent = admitted.config, admitted.route.agent
    try:
        folded = await runtime.sessions.compact(
            admitted.key, agent=agent, execution=lambda: build_channel(config, agent, runtime.services),
            gate=lambda: runtime.accepting, actor=f"{inbound.channel}:{inbound.sender}",
        )
    except TurnRefused:  # stopping: leave it pending for the next start
        return
    except Exception as exc:  # a bug here must not leave the user in silence
        logger.opt(exception=exc).error("/compact failed for {}", admitted.key)
        folded = 0
    _done(runtime, inbound)
    if folded is None:
        await _tell(runtime, inbound, "Stopped.")
    elif folded:
        await _tell(runtime, inbound, f"Compacted: {folded} earlier messages are now a summary the agent keeps.")
    else:
        await _tell(runtime, inbound, "Nothing was compacted: the conversation is short, or summarizing failed now.")


async def _help(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/help`: the commands and SOPs this route grants the sender (the seam's `ChatCommands`)."""
    _done(runtime, inbound)
    await _tell(runtime, inbound, help_text(resolve_chat_commands(admitted.config, admitted.route)))


def help_text(commands: ChatCommands) -> str:
    """Return the `/help` answer for a route's grant."""
    lines = ["Commands here:"]
    lines += [f"{name} {_USAGE[name]}".replace("  ", " ") for name in commands.commands]
    if commands.sops:
        lines.append("SOPs here: " + ", ".join(commands.sops))
    lines.append("Anything else is a message to the agent.")
    return "\n".join(lines)


_USAGE: Final[Mapping[str, str]] = MappingProxyType({
    "/new": "- start a new session",
    "/stop": "- stop what is running in this session",
    "/usage": "- your token usage with this agent",
    "/help": "- this list",
    COMPACT_COMMAND: "- fold older messages into a summary now",
    SOP_COMMAND: "NAME [context] - run an SOP",
    APPROVE_COMMAND: "ID - allow a tool call you were asked about",
    DENY_COMMAND: "ID - refuse it",
    SHOW_COMMAND: "ID - the whole call of an approval you may answer",
    PAIRING_COMMAND: "approve|deny CODE - decide a new sender's pairing code (route approvers)",
    WHOAMI_COMMAND: "- your user id and this chat's id",
})


async def _approval_usage(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """A malformed `/approve` or `/deny` (no id, a bad id, extra words): a usage line, never the model."""
    _done(runtime, inbound)
    await _tell(runtime, inbound, "Usage: /approve ID or /deny ID, with the ID from the approval prompt.")


async def _show(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/show ID` (or Show all): the whole call of an approval waiting in this chat, to those who may answer it."""
    _done(runtime, inbound)
    request_id = parse_show_command(inbound.text)
    if request_id is None:
        await _tell(runtime, inbound, "Usage: /show ID, with the ID from the approval prompt.")
        return
    pending = runtime.approvals.get(request_id)
    if pending is None or (pending.channel, pending.chat) != (inbound.channel, inbound.chat) or pending.future.done():
        await _tell(runtime, inbound, f"There is no pending approval {request_id} in this chat.")
        return
    if not resolve_chat_commands(admitted.config, admitted.route).may_show(pending.allowed, inbound.sender):
        logger.warning("{} may not see approval {}", inbound.sender, request_id)
        await _tell(runtime, inbound, f"Only those who may answer approval {request_id} can see its whole call.")
        return
    adapter = runtime.channels.adapter(inbound.channel)
    if adapter is None:
        logger.warning("channel {} is not connected: /show {} was not answered", inbound.channel, request_id)
        return
    for piece in whole_call(request_id, pending, limit=adapter.max_message_chars):
        await send(adapter, Outbound(chat=pending.chat, thread=pending.thread, text=piece))


async def _sop(runtime: Runtime, inbound: Inbound, admitted: Admitted) -> None:
    """`/sop NAME [context]`: run an SOP the route grants in this chat's session.

    Approvals are asked in the chat: the routed agent's steps answered by the requester or
    the route's approvers, every other agent's steps by the route's approvers only (the seam's
    `ChatCommands.answerers`). An SOP the route does not list never runs a step.
    """
    config, route, key = admitted.config, admitted.route, admitted.key
    parts = inbound.text.strip().split(maxsplit=2)

    async def reply(text: str) -> None:
        await _tell(runtime, inbound, text, reply_to=inbound.message_id)

    commands = resolve_chat_commands(config, route)
    if len(parts) < 2 or not commands.may_start(parts[1]):
        _done(runtime, inbound)
        await reply(_not_available(parts[1] if len(parts) > 1 else None, commands))
        return

    def answerers(request: ApprovalRequest) -> frozenset[str]:
        return commands.answerers(request.agent, inbound.sender)

    def refusal(request: ApprovalRequest) -> str:
        if request.agent == route.agent:
            return REFUSED
        return f"Only a route approver can answer this approval: it is for a step of agent {request.agent!r}."

    approver = ChannelApprover(
        approvals=runtime.approvals, spawn=runtime.spawn, channels=runtime.channels, inbound=inbound,
        answerers=answerers, refusal=refusal,
    )

    async def work() -> SopResult:
        # "running" until it ends: a crash meanwhile makes the next start tell the user
        runtime.store.mark(inbound.channel, inbound.event_id, "running")
        async with runtime.in_flight():
            return await run_sop(
                config, parts[1], services=runtime.services, sessions=runtime.sessions, approver=approver,
                interactivity=Interactivity.CHANNEL_PROMPT,
                context=parts[2] if len(parts) > 2 else "", initiator=route.agent,
                actor=f"{inbound.channel}:{inbound.sender}", session=key,
            )

    try:
        result = await runtime.sessions.run_task(key, work, gate=lambda: runtime.accepting)
    except TurnRefused:  # stopping: leave it pending for the next start
        return
    except Exception as exc:  # a bug in one SOP must not leave the user in silence
        logger.opt(exception=exc).error("SOP {} failed", parts[1])
        _done(runtime, inbound)
        await reply("Sorry, something went wrong while running the SOP; the error is logged.")
        return
    _done(runtime, inbound)
    if result is None:
        await reply("Stopped.")
        return
    if result.status is SopStatus.COMPLETED:
        await reply(result.output or "(no reply)")
    else:
        await reply(f"SOP {parts[1]!r} {result.status.value}: {result.message}")


def _not_available(name: str | None, commands: ChatCommands) -> str:
    """Answer a `/sop` this route does not grant, naming only the SOPs it does."""
    here = f" (available here: {', '.join(commands.sops)})" if commands.sops else " (no SOP is available here)"
    if name is None:
        return "Usage: /sop NAME [context]" + here
    return f"SOP {name!r} is not available here{here}."


def _done(runtime: Runtime, inbound: Inbound) -> None:
    runtime.store.mark(inbound.channel, inbound.event_id, "done")


async def _tell(runtime: Runtime, inbound: Inbound, text: str, *, reply_to: str | None = None) -> None:
    # The live adapter, looked up now: a SIGHUP restart may have swapped it while an SOP ran.
    adapter = runtime.channels.adapter(inbound.channel)
    if adapter is None:
        logger.warning("channel {} is not connected: a command's answer in chat {} was not sent", inbound.channel, inbound.chat)
        return
    await send(adapter, Outbound(chat=inbound.chat, thread=inbound.thread, text=text, reply_to=reply_to))


COMMANDS: Final[Mapping[str, CommandHandler]] = MappingProxyType({
    "/new": _new, "/stop": _stop, "/usage": _usage, "/help": _help, COMPACT_COMMAND: _compact, SOP_COMMAND: _sop,
    APPROVE_COMMAND: _approval_usage, DENY_COMMAND: _approval_usage, SHOW_COMMAND: _show,
    PAIRING_COMMAND: decide_pairing,
})
# `/whoami` is answered before admission (daemon/whoami.py), never as an admitted command
assert set(COMMANDS) == INSTANT_COMMANDS | {SOP_COMMAND, COMPACT_COMMAND, PAIRING_COMMAND} == set(_USAGE) - {WHOAMI_COMMAND}, (
    "every chat command has one handler and a usage"
)
