"""`/whoami`: anyone's own platform user id and the chat id, what an admin needs for `senders`.

Answered off the inbox (never stored, never a turn), even to a sender no route admits; an
admitted sender also learns the route and agent that answer them. At most one answer per
sender per channel a minute (`WHOAMI_EVERY_S`), so a stranger cannot make the bot spam.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Final

from loguru import logger

from channels import Inbound, Outbound
from orchestrator.daemon.approvals import send
from orchestrator.daemon.routing import match_route

if TYPE_CHECKING:
    from orchestrator.daemon.runtime import Runtime  # the runtime holds this module's limit

__all__ = ["WHOAMI_EVERY_S", "WhoamiLimit", "answer_whoami", "whoami_allowed", "whoami_text"]

WHOAMI_EVERY_S: Final = 60.0
_REMEMBERED: Final = 10_000  # senders remembered at most (the oldest forgotten first)


class WhoamiLimit:
    """When each sender was last answered; `allow` says whether they may be answered now."""

    def __init__(self, *, every_s: float = WHOAMI_EVERY_S) -> None:
        self._every_s = every_s
        self._last: OrderedDict[tuple[str, str], float] = OrderedDict()

    def allow(self, channel: str, sender: str, *, now: float | None = None) -> bool:
        """Return True (and count it) when `sender` on `channel` was not answered within the last minute."""
        now = time.monotonic() if now is None else now
        key = (channel, sender)
        last = self._last.get(key)
        if last is not None and now - last < self._every_s:
            return False
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > _REMEMBERED:
            self._last.popitem(last=False)
        return True


def whoami_text(runtime: Runtime, inbound: Inbound) -> str:
    """Return the `/whoami` answer: ids for anyone, the route and agent for an admitted sender."""
    lines = [f"Your user id on {inbound.channel}: {inbound.sender}", f"This chat's id: {inbound.chat}"]
    if inbound.thread:
        lines.append(f"This thread's id: {inbound.thread}")
    match = match_route(runtime.config, channel=inbound.channel, chat=inbound.chat, sender=inbound.sender)
    if match is None:
        lines.append("No route admits you here: an admin can add your id to a route's senders.")
    else:
        lines.append(f"You are answered by agent {match.route.agent!r} (routes[{match.index}]).")
    return "\n".join(lines)


def whoami_allowed(runtime: Runtime, inbound: Inbound) -> bool:
    """Return whether `inbound.sender` may be answered now (decided at delivery, so in arrival order)."""
    if runtime.whoami.allow(inbound.channel, inbound.sender):
        return True
    logger.info("/whoami from {} {} within a minute of the last answer: not answered", inbound.channel, inbound.sender)
    return False


async def answer_whoami(runtime: Runtime, inbound: Inbound) -> None:
    """Send `inbound.sender` their `/whoami` answer (after `whoami_allowed`)."""
    adapter = runtime.channels.adapter(inbound.channel)
    if adapter is None:
        return
    await send(adapter, Outbound(chat=inbound.chat, thread=inbound.thread, text=whoami_text(runtime, inbound)))
