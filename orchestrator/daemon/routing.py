"""Routing: which `[[routes]]` entry (and so which agent) answers a message; deny by default."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatchcase

from orchestrator.config import Config, RouteConfig
from orchestrator.seam import ChatCommands, resolve_admission, resolve_chat_commands

__all__ = ["RouteMatch", "explain_route", "match_route", "session_key", "stranger_route"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteMatch:
    """The route a message took and its index in `[[routes]]`."""

    index: int
    route: RouteConfig


def match_route(
    config: Config, *, channel: str, chat: str, sender: str, paired: Collection[str] = ()
) -> RouteMatch | None:
    """Return the first route whose channel, chat and admitted senders all match, else None.

    A route with no `senders` admits nobody; `"*"` admits anyone; `paired` names the routes
    an approver paired the sender with (the stored approvals: the seam decides what they admit).
    """
    for index, route in enumerate(config.routes):
        if _why_not(route, channel=channel, chat=chat, sender=sender, paired=paired) is None:
            return RouteMatch(index=index, route=route)
    return None


def stranger_route(
    config: Config, *, channel: str, chat: str, sender: str, is_direct: bool, paired: Collection[str] = ()
) -> RouteMatch | None:
    """Return the first route of this chat that answers `sender` (admitted by none) with a pairing code, else None."""
    for index, route in enumerate(config.routes):
        if route.channel == channel and fnmatchcase(chat, route.chat) and resolve_admission(route).pairs(
            sender, is_direct=is_direct, paired=paired
        ):
            return RouteMatch(index=index, route=route)
    return None


def explain_route(
    config: Config, *, channel: str, chat: str, sender: str, paired: Collection[str] = ()
) -> list[str]:
    """Return one line per route considered, ending with the decision.

    A match is followed by the chat commands and SOPs the route grants that sender, who
    answers the approvals of each SOP's step agents, and whom it admits and how fast.
    """
    lines: list[str] = []
    for index, route in enumerate(config.routes):
        why = _why_not(route, channel=channel, chat=chat, sender=sender, paired=paired)
        if why is None:
            commands = resolve_chat_commands(config, route)
            lines.append(
                f"routes[{index}]: matches -> agent {route.agent!r}, session {route.session}"
                + (f", approvers {sorted(commands.approvers)}" if commands.approvers else "")
            )
            lines.extend(_explain_commands(commands, sender))
            lines.extend(_explain_admission(route, sender, paired))
            return lines
        lines.append(f"routes[{index}]: skipped ({why})")
    stranger = stranger_route(config, channel=channel, chat=chat, sender=sender, is_direct=True, paired=paired)
    if stranger is not None:
        lines.append(
            f"no route admits the sender: in a DM, routes[{stranger.index}] (strangers = \"pair\") answers with a "
            "pairing code its approvers may approve; elsewhere the message would be ignored and logged"
        )
        return lines
    lines.append("no route matches: the message would be ignored and logged")
    return lines


def session_key(route: RouteConfig, *, channel: str, chat: str, sender: str, thread: str | None) -> str:
    """Return the session key: per chat (and thread), or per sender within it."""
    base = f"{channel}:{chat}" + (f":{thread}" if thread else "")
    return base if route.session == "per_chat" else f"{base}:{sender}"


def _why_not(route: RouteConfig, *, channel: str, chat: str, sender: str, paired: Collection[str]) -> str | None:
    if route.channel != channel:
        return f"channel is {route.channel!r}"
    if not fnmatchcase(chat, route.chat):
        return f"chat {chat!r} does not match {route.chat!r}"
    if not resolve_admission(route).admits(sender, paired):
        return f"sender {sender!r} is not in its senders list" + (" nor paired with it" if paired else "")
    return None


def _explain_admission(route: RouteConfig, sender: str, paired: Collection[str]) -> list[str]:
    # Only what differs from the default (no pairing, no limit), so a plain route reads as before.
    admission, lines = resolve_admission(route), []
    if admission.strangers == "pair":
        how = "listed" if "*" in admission.senders or sender in admission.senders else "paired by an approver"
        lines.append(f"  sender: {how}; strangers: pair (codes decided by {sorted(admission.approvers)} or an admin)")
    if (limit := admission.rate_limit) is not None:
        lines.append(
            f"  rate_limit: {limit.messages} messages per {limit.per_s:g} s per sender per chat (/stop, /new never limited)"
        )
    return lines


def _explain_commands(commands: ChatCommands, sender: str) -> list[str]:
    lines = [f"  commands: {' '.join(commands.commands)}"]
    if not commands.sops:
        lines.append("  sops: none (`/sop NAME` is answered \"not available here\")")
    for name, agents in commands.sop_agents.items():
        who = [
            f"{agent} by {sorted(answerers)}" if answerers else f"{agent} by nobody (the route has no approvers: denied)"
            for agent, answerers in ((a, commands.answerers(a, sender)) for a in agents)
        ]
        lines.append(f"  sop {name}: steps run as {', '.join(agents)}; approvals: {'; '.join(who)}")
    return lines
