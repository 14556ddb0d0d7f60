"""Admission: route, de-duplicate and durably accept one inbound message (the inbox write)."""

from __future__ import annotations

import dataclasses
import enum
import time
from typing import Final

from loguru import logger

from channels import Inbound
from orchestrator.config import Config, RouteConfig
from orchestrator.daemon.routing import match_route, session_key, stranger_route
from orchestrator.daemon.runtime import Runtime
from orchestrator.seam import (
    APPROVAL_COMMANDS, COMPACT_COMMAND, PAIRING_COMMAND, SESSION_COMMANDS, SOP_COMMAND, WHOAMI_COMMAND, pairing_in_use,
    resolve_admission, resolve_group_gate,
)
from orchestrator.sessions import SessionState
from orchestrator.store import RateVerdict

__all__ = ["Admitted", "Disposition", "INSTANT_COMMANDS", "STRANGER", "admit"]

# A well-formed `/approve ID` never gets here (the adapter hands it over as an answer): what
# does is malformed, and is answered with a usage line instead of reaching the model.
INSTANT_COMMANDS: Final = frozenset(SESSION_COMMANDS) | frozenset(APPROVAL_COMMANDS)
_COMMANDS: Final = INSTANT_COMMANDS | {SOP_COMMAND, COMPACT_COMMAND, PAIRING_COMMAND}
# The `command` of a stranger's DM to a route that pairs strangers (no text reads as it: it has no slash).
STRANGER: Final = "stranger"


class Disposition(enum.Enum):
    """What happened to one inbound message."""

    ANSWERED = "answered"
    NO_ROUTE = "no_route"
    NOT_TAKEN = "not_taken"  # a group message the route's gate does not take: not stored, not run
    WHOAMI = "whoami"  # answered off the inbox (never stored, never a turn), rate-bound per sender
    DUPLICATE = "duplicate"
    COMMAND = "command"
    STOPPED = "stopped"
    NOT_ACCEPTING = "not_accepting"
    BUSY = "busy"
    LIMITED = "limited"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Admitted:
    """A message past routing and the inbox write (or a chat command), ready to handle."""

    config: Config
    route: RouteConfig
    key: str
    command: str | None
    # A chat message's place in its session (taken at admission, so a burst is counted in
    # arrival order before any turn task runs); its turn releases it. None for commands.
    state: SessionState | None = None
    # Set instead of `state` when the session already has `max_queued_per_session` waiting.
    busy: int | None = None
    # Set instead of `state` when the sender is past the route's `rate_limit` (the row is "limited").
    limited: RateVerdict | None = None


def admit(runtime: Runtime, inbound: Inbound, *, replay: bool = False) -> Admitted | Disposition:
    """Route, de-duplicate and durably accept one message; return why it stops here otherwise.

    This is the durability point: once it returns `Admitted`, the message (chat commands
    too, so a redelivered `/sop` never runs twice) is in the inbox and the platform may be
    told it was received. While the daemon is stopping, messages are still stored but left
    pending for the next start (`/new` and `/stop` still act at once). `replay` re-admits a
    message a previous process accepted but never started (it is never refused as "busy").
    """
    config = runtime.config  # one generation for the whole turn
    # The stored pairings are read on every message (a revoke holds on the next one), only
    # on a channel with a route that pairs strangers.
    paired = (
        runtime.pairing.routes_of(inbound.channel, inbound.sender) if pairing_in_use(config, inbound.channel)
        else frozenset()
    )
    match = match_route(config, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, paired=paired)
    command = inbound.text.strip().split(maxsplit=1)[0].lower() if inbound.text.strip() else ""
    if command == WHOAMI_COMMAND and not replay and (inbound.is_direct or inbound.command_target == "bot"):
        return Disposition.WHOAMI  # anyone, even a sender no route admits (a group: addressed to this bot)
    if match is None:
        return _stranger(runtime, inbound, paired, replay=replay)
    route = match.route
    # A group message the route's gate does not take is not stored: it was never accepted for
    # a turn, so a replay must not run it (group context, issue #28 item 3, keeps its own rows).
    # A replayed row passed the gate when it was first admitted.
    if not replay and not inbound.is_direct:
        reason = resolve_group_gate(config, route).decide(
            is_direct=False, mentions_bot=inbound.mentions_bot, reply_to_bot=inbound.reply_to_bot,
            command_target=inbound.command_target, text=inbound.text,
        )
        if reason is None:
            logger.debug("group message {} {} not taken by routes[{}]", inbound.channel, inbound.event_id, match.index)
            return Disposition.NOT_TAKEN
    key = session_key(route, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, thread=inbound.thread)
    if not replay and not runtime.store.accept(inbound.channel, inbound.event_id, dataclasses.asdict(inbound)):
        logger.info("duplicate delivery {} {}: ignored", inbound.channel, inbound.event_id)
        return Disposition.DUPLICATE
    admission = resolve_admission(route)
    limit = admission.limits(command)
    if limit is not None and not replay:  # a replayed message was counted by the process that took it
        verdict = runtime.rate_windows.hit(
            (admission.route_id, inbound.channel, inbound.chat, inbound.sender),
            now=time.monotonic(), messages=limit.messages, per_s=limit.per_s,
        )
        if not verdict.allowed:  # kept in the inbox, marked, never run
            runtime.store.mark(inbound.channel, inbound.event_id, "limited")
            logger.info(
                "{} sender {} is past the rate limit: message {} not run", inbound.channel, inbound.sender, inbound.event_id
            )
            return Admitted(config=config, route=route, key=key, command=None, limited=verdict)
    if command in INSTANT_COMMANDS:  # /new, /stop, /help act at once, also while stopping
        return Admitted(config=config, route=route, key=key, command=command)
    if not runtime.accepting:
        return Disposition.NOT_ACCEPTING
    if command in _COMMANDS:
        return Admitted(config=config, route=route, key=key, command=command)
    state = runtime.sessions.place(key)
    waiting = state.users - 2  # besides this message, one is running or about to
    # A message the daemon itself held across a restart is answered, never refused as a flood.
    if waiting >= config.daemon.max_queued_per_session and not replay:
        runtime.sessions.release(state)
        return Admitted(config=config, route=route, key=key, command=None, busy=waiting)
    return Admitted(config=config, route=route, key=key, command=None, state=state)


def _stranger(runtime: Runtime, inbound: Inbound, paired: frozenset[str], *, replay: bool) -> Admitted | Disposition:
    """A sender no route admits: ignored, or (a DM to a route that pairs strangers) answered with a code."""
    config = runtime.config
    match = stranger_route(
        config, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, is_direct=inbound.is_direct,
        paired=paired,
    )
    if match is None:
        logger.info("no route for {} chat {} sender {}: ignored", inbound.channel, inbound.chat, inbound.sender)
        return Disposition.NO_ROUTE
    # Stored for de-duplication only: a stranger's words and files are never kept.
    body = dataclasses.asdict(dataclasses.replace(inbound, text="", attachments=()))
    if not replay and not runtime.store.accept(inbound.channel, inbound.event_id, body):
        return Disposition.DUPLICATE
    key = session_key(match.route, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender, thread=None)
    return Admitted(config=config, route=match.route, key=key, command=STRANGER)
