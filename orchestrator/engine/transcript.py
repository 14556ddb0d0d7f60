"""Transcript: the messages of one session, in OpenAI chat format."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from loguru import logger

__all__ = ["MAX_ENTRY_CHARS", "Backlog", "Summary", "Transcript", "capped_entry"]

# What one user or assistant entry may hold in history: a 1 MB model answer would
# otherwise ride along in every later request of the session (tool results have their
# own cap, `max_tool_result_chars`, applied before the model sees them).
MAX_ENTRY_CHARS: Final = 32_000
_CAPPED_ROLES: Final = frozenset({"user", "assistant"})
# Without a store behind it, a folding transcript holds what the summary does not cover yet,
# up to this many times `keep` messages (a summarizer down for that long loses the oldest, logged).
_UNFOLDED_HOLD: Final = 8

Backlog: TypeAlias = Callable[[int, int], list[dict[str, Any]]]
"""Read a session's persisted messages `start..stop` (positions from the session's first message)."""


def capped_entry(message: dict[str, Any]) -> dict[str, Any]:
    """Return `message`, or a copy whose text content is cut to `MAX_ENTRY_CHARS` with a note."""
    content = message.get("content")
    if message.get("role") not in _CAPPED_ROLES or not isinstance(content, str) or len(content) <= MAX_ENTRY_CHARS:
        return message
    note = f"\n[cut from history: {len(content):,} characters, the first {MAX_ENTRY_CHARS:,} kept]"
    return {**message, "content": content[:MAX_ENTRY_CHARS] + note}


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """The running summary of a session: a model's digest of its first `covers` messages."""

    text: str
    covers: int


class Transcript:
    """An append-only message list with a history window that never starts mid-exchange.

    User and assistant entries longer than `MAX_ENTRY_CHARS` are cut with a note as they
    are appended or loaded, so what is persisted and sent again later stays bounded.
    `summary` (never a message: it is sent as context, not shown) folds the oldest
    messages; `token_scale` is how much the provider's reported prompt tokens exceeded
    the local estimate on the session's last call (at least 1).

    `backlog` reads back messages no longer held in memory (the session store's); with
    none, a `folding` transcript (a `summarize` agent's: the engine sets it) keeps in
    memory what its summary does not cover yet, so a summarizer outage loses nothing.
    """

    __slots__ = ("backlog", "dropped", "folding", "messages", "parent", "session", "summary", "token_scale")

    def __init__(
        self,
        *,
        session: str,
        messages: Iterable[dict[str, Any]] = (),
        parent: str | None = None,
        dropped: int = 0,
        summary: Summary | None = None,
        backlog: Backlog | None = None,
    ) -> None:
        self.session = session
        self.parent = parent
        self.messages: list[dict[str, Any]] = [capped_entry(m) for m in messages]
        self.dropped = dropped  # older messages no longer held in memory (still persisted)
        self.summary = summary
        self.token_scale = 1.0
        self.backlog = backlog
        self.folding = False

    @property
    def total(self) -> int:
        """Return how many messages the session has had, including dropped ones."""
        return self.dropped + len(self.messages)

    def compact(self, keep: int) -> None:
        """Drop all but the last `keep` messages from memory (never leaving an orphan tool result).

        A folding transcript without a `backlog` keeps the messages its summary does not
        cover yet, up to `_UNFOLDED_HOLD` times `keep`.
        """
        excess = len(self.messages) - keep
        if excess <= 0:
            return
        if self.folding and self.backlog is None:
            covered = max(0, (self.summary.covers if self.summary else 0) - self.dropped)  # held and folded
            excess = max(min(excess, covered), len(self.messages) - keep * _UNFOLDED_HOLD)
            if excess <= 0:
                return
            if excess > covered:
                logger.warning(
                    "session {}: {} messages left memory before they were summarized (the summarizer "
                    "has failed for long); the summary will not cover them", self.session, excess - covered,
                )
        while excess < len(self.messages) and self.messages[excess]["role"] == "tool":
            excess += 1
        del self.messages[:excess]
        self.dropped += excess

    def append(self, message: dict[str, Any]) -> None:
        """Add one message at the end (cut to `MAX_ENTRY_CHARS` if it is user or assistant text)."""
        self.messages.append(capped_entry(message))

    def window(self, limit: int) -> list[dict[str, Any]]:
        """Return at most `limit` trailing messages, dropping leading orphan tool results."""
        messages = self.messages
        start = max(0, len(messages) - limit)
        while start < len(messages) and messages[start]["role"] == "tool":
            start += 1
        return messages[start:]
