"""Transcript: the messages of one session, in OpenAI chat format."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Transcript"]


class Transcript:
    """An append-only message list with a history window that never starts mid-exchange."""

    __slots__ = ("dropped", "messages", "parent", "session")

    def __init__(
        self,
        *,
        session: str,
        messages: Iterable[dict[str, Any]] = (),
        parent: str | None = None,
        dropped: int = 0,
    ) -> None:
        self.session = session
        self.parent = parent
        self.messages: list[dict[str, Any]] = list(messages)
        self.dropped = dropped  # older messages no longer held in memory (still persisted)

    @property
    def total(self) -> int:
        """Return how many messages the session has had, including dropped ones."""
        return self.dropped + len(self.messages)

    def compact(self, keep: int) -> None:
        """Drop all but the last `keep` messages from memory (never leaving an orphan tool result)."""
        excess = len(self.messages) - keep
        if excess <= 0:
            return
        while excess < len(self.messages) and self.messages[excess]["role"] == "tool":
            excess += 1
        del self.messages[:excess]
        self.dropped += excess

    def append(self, message: dict[str, Any]) -> None:
        """Add one message at the end."""
        self.messages.append(message)

    def window(self, limit: int) -> list[dict[str, Any]]:
        """Return at most `limit` trailing messages, dropping leading orphan tool results."""
        messages = self.messages
        start = max(0, len(messages) - limit)
        while start < len(messages) and messages[start]["role"] == "tool":
            start += 1
        return messages[start:]
