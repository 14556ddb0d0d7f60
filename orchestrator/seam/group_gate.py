"""Group gates are route policy: which messages in a group, channel or server a route takes.

The adapter reports facts on the `Inbound` (`is_direct`, `mentions_bot`, `reply_to_bot`,
`command_target`, the text with the bot's mention removed); `GroupGate.decide`, resolved here
from the route and nothing else, turns them into "taken" (and why) or "not taken". A direct
message is always taken. In a group, under `reply_in_groups = "mention"` (the default: omission
never widens) a message is taken only when it mentions the bot, replies to one of its messages,
is a command addressed to it (`/cmd`, `/cmd@thisbot`), or starts with one of the route's
`wake_words` (case-insensitive, a whole word); a command addressed to another bot
(`/cmd@otherbot`) is never taken, whatever the mode. `"all"` takes every other message.

Discord's deprecated `[channels.X] mention_only` still applies to that channel's routes that do
not set `reply_in_groups` (true: "mention", false: "all"); `deprecations` names it for `check`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

if TYPE_CHECKING:
    from orchestrator.config import Config, RouteConfig

__all__ = ["GateReason", "GroupGate", "group_gate_deprecations", "resolve_group_gate"]

GateReason: TypeAlias = Literal["direct", "all", "mention", "reply", "command", "wake_word"]
DEFAULT_REPLY_IN_GROUPS: Final = "mention"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupGate:
    """One route's group gate (made by `resolve_group_gate`); `decide` is a pure function of the facts."""

    reply_in_groups: Literal["mention", "all"]
    wake_words: tuple[str, ...]
    source: str  # where `reply_in_groups` came from: the route key, the legacy channel key, or the default
    _wake: re.Pattern[str] | None

    def decide(
        self,
        *,
        is_direct: bool,
        mentions_bot: bool,
        reply_to_bot: bool,
        command_target: Literal["bot", "other"] | None,
        text: str,
    ) -> GateReason | None:
        """Return why the message is taken, or None when it is not (it is then neither run nor answered)."""
        if is_direct:
            return "direct"
        if command_target == "other":
            return None  # `/cmd@otherbot`: another bot's, even under "all"
        if mentions_bot:
            return "mention"
        if reply_to_bot:
            return "reply"
        if command_target == "bot":
            return "command"
        if self._wake is not None and self._wake.match(text):
            return "wake_word"
        return "all" if self.reply_in_groups == "all" else None

    def describe(self) -> dict[str, object]:
        """Return the gate as plain data (for `orchestrator route --json`)."""
        return {"reply_in_groups": self.reply_in_groups, "wake_words": list(self.wake_words), "source": self.source}

    def explain(self) -> str:
        """Return the gate as one line of `orchestrator route`."""
        taken = "every message" if self.reply_in_groups == "all" else "mentions of the bot, replies to it, commands to it"
        wake = f", or a message starting with {', '.join(repr(w) for w in self.wake_words)}" if self.wake_words else ""
        return f"  groups: reply_in_groups {self.reply_in_groups} ({self.source}): takes {taken}{wake}; DMs: every message"


def resolve_group_gate(config: Config, route: RouteConfig) -> GroupGate:
    """Resolve `route`'s group gate: its `reply_in_groups`, else a Discord channel's legacy `mention_only`,
    else "mention"."""
    index = next((i for i, r in enumerate(config.routes) if r is route), None)
    where = f"routes[{index}]" if index is not None else "the route"
    legacy = _legacy_mention_only(config, route)
    if route.reply_in_groups is not None:
        mode, source = route.reply_in_groups, f"{where}.reply_in_groups"
    elif legacy is not None:
        mode, source = ("mention" if legacy else "all"), f"channels.{route.channel}.mention_only (deprecated)"
    else:
        mode, source = DEFAULT_REPLY_IN_GROUPS, "the default"
    words = tuple(dict.fromkeys(word.casefold() for word in route.wake_words))
    wake = (
        re.compile(r"\s*(?:" + "|".join(re.escape(w) for w in words) + r")(?!\w)", re.IGNORECASE) if words else None
    )
    return GroupGate(reply_in_groups=mode, wake_words=words, source=source, _wake=wake)


def group_gate_deprecations(config: Config) -> list[str]:
    """Return one line per channel that still sets the deprecated `mention_only` (for `orchestrator check`)."""
    lines = []
    for name, channel in config.channels.items():
        if getattr(channel, "kind", None) == "discord" and "mention_only" in channel.model_fields_set:
            mode = "mention" if getattr(channel, "mention_only") else "all"
            lines.append(
                f"channels.{name}.mention_only is deprecated: set reply_in_groups = \"{mode}\" on its [[routes]] "
                f"(until then it means reply_in_groups = \"{mode}\" for the routes of {name!r} that do not set it)"
            )
    return lines


def _legacy_mention_only(config: Config, route: RouteConfig) -> bool | None:
    channel = config.channels.get(route.channel)
    if getattr(channel, "kind", None) != "discord" or channel is None or "mention_only" not in channel.model_fields_set:
        return None
    return bool(getattr(channel, "mention_only"))
