"""How the Bot API takes the core's chat and thread ids, and how long a `RetryAfter` asks to wait.

The adapter (`telegram.py`) and its streams (`telegram_stream.py`) share these, so a chat id
means the same to a send, an edit and a draft.
"""

from __future__ import annotations

import datetime as dtm

from telegram.error import RetryAfter

__all__ = ["chat_id", "retry_after_s", "thread_id"]


def chat_id(chat: str) -> int | str:
    """Return a numeric chat id as int; `@channelname` stays a string."""
    try:
        return int(chat)
    except ValueError:
        return chat


def thread_id(thread: str | None) -> int | None:
    """Return the forum topic (`message_thread_id`) as int, None outside topics."""
    return int(thread) if thread else None


def retry_after_s(exc: RetryAfter) -> float:
    """Return the wait in seconds; PTB 22 gives an int or float, a later major a timedelta."""
    value = exc.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)
