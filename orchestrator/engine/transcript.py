"""Transcript: the messages of one session, in OpenAI chat format."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Transcript"]


class Transcript:
    """An append-only message list with a history window that never starts mid-exchange."""

    __slots__ = ("messages", "parent", "session")

    def __init__(
        self, *, session: str, messages: Iterable[dict[str, Any]] = (), parent: str | None = None
    ) -> None:
        self.session = session
        self.parent = parent
        self.messages: list[dict[str, Any]] = list(messages)

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
