"""The group facts of a Telegram message: does it mention this bot, reply to it, or command it.

Pure functions over python-telegram-bot's `Message`; the core's route gate decides from them.
Mentions are `mention` entities spelling `@thisbot` (any case) and `text_mention` entities naming
the bot's user id; their spans are cut out of the text the model sees (entity offsets are
UTF-16 code units, as Telegram counts). A reply counts when the replied-to message is the bot's
own (a forum topic's root, which every message of the topic "replies" to, does not). A leading
`/cmd` is addressed to this bot, `/cmd@thisbot` too (its `@thisbot` cut), `/cmd@otherbot` to
another bot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from telegram import Message, MessageEntity

__all__ = ["TelegramGroupFacts", "group_facts", "sent_via"]

_COMMAND: Final = re.compile(r"\s*/[A-Za-z0-9_]+(@([A-Za-z0-9_]+))?")


@dataclass(frozen=True, slots=True, kw_only=True)
class TelegramGroupFacts:
    """What the route gate needs from one message, and its text with the bot's mentions cut out."""

    text: str
    mentions_bot: bool
    reply_to_bot: bool
    command_target: Literal["bot", "other"] | None


def sent_via(message: Message, bot_id: int | None) -> bool:
    """Return whether a person posted `message` through this bot's inline mode (the bot's own output)."""
    return bot_id is not None and message.via_bot is not None and message.via_bot.id == bot_id


def group_facts(message: Message, text: str, *, bot_id: int | None, username: str | None) -> TelegramGroupFacts:
    """Return the group facts of `message`, whose text (or caption) is `text`."""
    entities = message.entities if message.text is not None else message.caption_entities
    units = text.encode("utf-16-le")
    cuts: list[tuple[int, int]] = []  # UTF-16 spans of this bot's mentions
    handle = f"@{username}".casefold() if username else None
    for entity in entities or ():
        if entity.type == MessageEntity.MENTION and handle is not None:
            span = units[entity.offset * 2:(entity.offset + entity.length) * 2].decode("utf-16-le", "replace")
            if span.casefold() == handle:
                cuts.append((entity.offset, entity.length))
        elif entity.type == MessageEntity.TEXT_MENTION and entity.user is not None and entity.user.id == bot_id:
            cuts.append((entity.offset, entity.length))
    if cuts:
        kept, at = [], 0
        for offset, length in sorted(cuts):
            kept.append(units[at * 2:offset * 2].decode("utf-16-le", "replace"))
            at = max(at, offset + length)
        kept.append(units[at * 2:].decode("utf-16-le", "replace"))
        text = re.sub(r"^[\s:,]+", "", re.sub(r"(?<=\S)  +(?=\S)", " ", "".join(kept))).strip()
    target: Literal["bot", "other"] | None = None
    command = _COMMAND.match(text)
    if command is not None:
        named = command.group(2)
        if named is None:
            target = "bot"
        elif username is not None and named.casefold() == username.casefold():
            target = "bot"
            text = text[:command.start(1)] + text[command.end(1):]
        else:
            target = "other"
    return TelegramGroupFacts(
        text=text, mentions_bot=bool(cuts), reply_to_bot=_replies_to_bot(message, bot_id), command_target=target
    )


def _replies_to_bot(message: Message, bot_id: int | None) -> bool:
    reply = message.reply_to_message
    if reply is None or bot_id is None or reply.from_user is None or reply.from_user.id != bot_id:
        return False
    return not (message.is_topic_message and reply.message_id == message.message_thread_id)
