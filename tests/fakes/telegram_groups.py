"""Group messages as Telegram delivers them to a bot: entities, replies, `via_bot`, privacy mode.

Telegram marks `@username` mentions and a leading `/command` as message entities (offsets in
UTF-16 code units); a `text_mention` names a user without a username by id. What a bot in a
group receives depends on its privacy mode (BotFather's /setprivacy, on by default) and on
whether it is an admin there: an admin bot, or one with privacy mode off, gets every message;
with privacy mode on it gets only commands (`/cmd`, or `/cmd@thisbot`; never `/cmd@otherbot`),
replies to its own messages, and messages that mention it (Telegram's "Privacy mode" in the
Bot API documentation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

__all__ = ["entities_of", "privacy_lets_through"]

_MENTION: Final = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}")
_COMMAND: Final = re.compile(r"/[A-Za-z0-9_]+(?:@[A-Za-z0-9_]+)?")


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def entities_of(text: str, text_mentions: Iterable[tuple[str, dict[str, Any]]] = ()) -> list[dict[str, Any]]:
    """Return the entities Telegram attaches to `text`: a leading bot_command, each `@mention`, and a
    `text_mention` for each (shown text, user) in `text_mentions` (its first occurrence)."""
    entities: list[dict[str, Any]] = []
    command = _COMMAND.match(text)
    if command is not None:
        entities.append({"type": "bot_command", "offset": 0, "length": _units(command.group())})
    for found in _MENTION.finditer(text):
        entities.append({"type": "mention", "offset": _units(text[:found.start()]), "length": _units(found.group())})
    for shown, user in text_mentions:
        at = text.index(shown)
        entities.append({"type": "text_mention", "offset": _units(text[:at]), "length": _units(shown), "user": user})
    return sorted(entities, key=lambda e: e["offset"])


def privacy_lets_through(message: dict[str, Any], *, bot_id: int, username: str) -> bool:
    """Return whether a bot in privacy mode (not an admin) receives this group message."""
    text = message.get("text") or message.get("caption") or ""
    command = _COMMAND.match(text)
    if command is not None:
        _, at, named = command.group().partition("@")
        if not at or named.casefold() == username.casefold():
            return True
    replied = message.get("reply_to_message") or {}
    if (replied.get("from") or {}).get("id") == bot_id:
        return True
    for entity in message.get("entities") or ():
        if entity["type"] == "text_mention" and entity["user"]["id"] == bot_id:
            return True
        if entity["type"] == "mention":
            span = text.encode("utf-16-le")[entity["offset"] * 2:(entity["offset"] + entity["length"]) * 2]
            if span.decode("utf-16-le").casefold() == f"@{username}".casefold():
                return True
    return False
