"""Models answer in Markdown; Telegram shows it through message entities, not markup.

`telegramify-markdown` parses the Markdown (CommonMark, via pyromark) into plain text plus
Telegram `MessageEntity` spans and splits both at Telegram's limit, clipping an entity that
spans a split into both parts (a long code block stays code in every message). Sending
entities instead of `parse_mode` means nothing the model writes can make Telegram refuse
the message ("can't parse entities") or be read as markup it did not mean. It is imported
on the first reply, not at start-up.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Final

from loguru import logger
from telegram import MessageEntity

from channels.chunking import chunk_text

if TYPE_CHECKING:
    from telegramify_markdown import RenderConfig

__all__ = ["Rendered", "plain", "render"]

Rendered = list[tuple[str, tuple[MessageEntity, ...]]]

_ENTITY_FIELDS: Final = ("url", "language", "custom_emoji_id")
_LINK_SCHEMES: Final = ("http://", "https://", "tg://")


def render(markdown: str, limit: int) -> Rendered:
    """Return the messages (text and entities, each at most `limit` UTF-16 units) for `markdown`.

    Falls back to `plain` if the converter fails on some input: a reply is never lost to
    formatting.
    """
    try:
        from telegramify_markdown import convert, split_entities

        text, entities = convert(markdown, latex_escape=False, config=_config())
        parts = split_entities(text, entities, limit)
    except Exception as exc:  # a third-party parser on model output: any failure means plain text
        logger.opt(exception=exc).warning("telegram: Markdown rendering failed; sending plain text")
        return plain(markdown, limit)
    if not parts:  # only whitespace or markup that renders as nothing
        return plain(markdown, limit)
    return [(part, tuple(_entity(e) for e in spans if _sendable(e))) for part, spans in parts]


def plain(text: str, limit: int) -> Rendered:
    """Return `text` as it is, in chunks of at most `limit` UTF-16 units, without entities."""
    astral = len(text.encode("utf-16-le")) // 2 != len(text)
    return [(chunk, ()) for chunk in chunk_text(text, limit // 2 if astral else limit)]


def _sendable(span: Any) -> bool:
    # Telegram refuses the whole message for a link it cannot open (a relative path, a
    # mailto:, ...); such a link is shown as its text alone.
    return span.type != "text_link" or str(span.url or "").startswith(_LINK_SCHEMES)


def _entity(span: Any) -> MessageEntity:
    extra = {name: getattr(span, name) for name in _ENTITY_FIELDS if getattr(span, name, None) is not None}
    return MessageEntity(type=span.type, offset=span.offset, length=span.length, **extra)


@functools.cache
def _config() -> RenderConfig:
    """Headings as bold text and "•" bullets: no emoji the model did not write."""
    from telegramify_markdown import RenderConfig

    config = RenderConfig.isolated()
    symbols = config.markdown_symbol
    for level in range(1, 7):
        setattr(symbols, f"heading_level_{level}", "")
    symbols.link = ""
    symbols.image = ""
    symbols.unordered_list_item = "•"
    return config
