"""Routing: which `[[routes]]` entry (and so which agent) answers a message; deny by default."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase

from orchestrator.config import Config, RouteConfig
from orchestrator.seam import ChatCommands, resolve_chat_commands, resolve_group_gate

__all__ = ["RouteMatch", "explain_route", "match_route", "session_key"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteMatch:
    """The route a message took and its index in `[[routes]]`."""

    index: int
    route: RouteConfig


def match_route(config: Config, *, channel: str, chat: str, sender: str) -> RouteMatch | None:
    """Return the first route whose channel, chat and sender allowlist all match, else None.

    A route with no `senders` admits nobody; `"*"` admits anyone.
    """
    for index, route in enumerate(config.routes):
        if _why_not(route, channel=channel, chat=chat, sender=sender) is None:
            return RouteMatch(index=index, route=route)
    return None


def explain_route(config: Config, *, channel: str, chat: str, sender: str) -> list[str]:
    """Return one line per route considered, ending with the decision.

    A match is followed by the chat commands and SOPs the route grants that sender, and who
    answers the approvals of each SOP's step agents.
    """
    lines: list[str] = []
    for index, route in enumerate(config.routes):
        why = _why_not(route, channel=channel, chat=chat, sender=sender)
        if why is None:
            commands = resolve_chat_commands(config, route)
            lines.append(
                f"routes[{index}]: matches -> agent {route.agent!r}, session {route.session}"
                + (f", approvers {sorted(commands.approvers)}" if commands.approvers else "")
            )
            lines.append(resolve_group_gate(config, route).explain())
            lines.extend(_explain_commands(commands, sender))
            return lines
        lines.append(f"routes[{index}]: skipped ({why})")
    lines.append("no route matches: the message would be ignored and logged")
    return lines


def session_key(route: RouteConfig, *, channel: str, chat: str, sender: str, thread: str | None) -> str:
    """Return the session key: per chat (and thread), or per sender within it."""
    base = f"{channel}:{chat}" + (f":{thread}" if thread else "")
    return base if route.session == "per_chat" else f"{base}:{sender}"


def _why_not(route: RouteConfig, *, channel: str, chat: str, sender: str) -> str | None:
    if route.channel != channel:
        return f"channel is {route.channel!r}"
    if not fnmatchcase(chat, route.chat):
        return f"chat {chat!r} does not match {route.chat!r}"
    if "*" not in route.senders and sender not in route.senders:
        return f"sender {sender!r} is not in its senders list"
    return None


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
