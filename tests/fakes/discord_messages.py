"""What FakeDiscord's bot messages look like to a user, and Discord's per-channel rate limits.

`DiscordMessages` keeps every bot message by id and answers `PATCH` / `DELETE
/channels/{channel}/messages/{message}` like Discord: content over 2,000 characters is a 400
(50035 `BASE_TYPE_MAX_LENGTH`), an unknown message a 404 (10008). Edits in one channel share a
bucket of `edit_limit` requests per `edit_window_s` (Discord's observed 5 per 5 s); every
answer carries the `X-RateLimit-Limit`, `-Remaining`, `-Reset`, `-Reset-After` and `-Bucket`
headers, and a request past the limit gets a 429 with `Retry-After`, the `Via` header of
Discord's edge and the JSON body `{"message", "retry_after", "global": false}`, as Discord
sends them. `post_limit` / `post_window_s` (off by default) do the same for new messages.

Every visible change lands in `changes` with its `time.monotonic()`; `rate_limited` counts the
429s answered, so a test can assert a well-paced client never saw one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["Bucket", "DiscordMessages", "VisibleChange"]

MAX_CONTENT_CHARS: Final = 2000


@dataclass(frozen=True, slots=True)
class VisibleChange:
    """One change a user could see: `kind` is create, edit or delete."""

    at: float
    kind: str
    channel_id: str
    message_id: str
    content: str


@dataclass(slots=True)
class Bucket:
    """A fixed-window rate limit: `limit` requests per `window_s`, starting at the first one."""

    name: str
    limit: int
    window_s: float
    started: float = 0.0
    used: int = 0

    def take(self) -> tuple[bool, dict[str, str], float]:
        """Count one request; return (allowed, the X-RateLimit headers, retry_after)."""
        now = time.monotonic()
        if now - self.started >= self.window_s:
            self.started, self.used = now, 0
        reset_after = max(self.started + self.window_s - now, 0.001)
        allowed = self.used < self.limit
        if allowed:
            self.used += 1
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(self.limit - self.used, 0)),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
            "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": self.name,
        }
        return allowed, headers, reset_after


@dataclass
class DiscordMessages:
    """Bot messages by id, their visible history and the per-channel limits; see the module docstring."""

    edit_limit: int = 5
    edit_window_s: float = 5.0
    post_limit: int | None = None
    post_window_s: float = 5.0
    contents: dict[str, str] = field(default_factory=dict)  # message id -> content (live ones)
    channels: dict[str, str] = field(default_factory=dict)  # message id -> channel id
    changes: list[VisibleChange] = field(default_factory=list)
    rate_limited: int = 0
    _buckets: dict[tuple[str, str], Bucket] = field(default_factory=dict)

    def visible(self, channel_id: str | None = None) -> list[str]:
        """Return the live bot messages' contents (of one channel), oldest first."""
        return [text for mid, text in self.contents.items() if channel_id in (None, self.channels[mid])]

    def limit(self, kind: str, channel_id: str) -> tuple[dict[str, str], float | None]:
        """Count a request of `kind` (edit | post) in the channel; return headers and a retry_after if refused."""
        if kind == "post" and self.post_limit is None:
            return {}, None
        limit, window = (self.edit_limit, self.edit_window_s) if kind == "edit" else (self.post_limit or 0, self.post_window_s)
        bucket = self._buckets.get((kind, channel_id))
        if bucket is None:
            bucket = self._buckets[(kind, channel_id)] = Bucket(f"fake-{kind}-bucket", limit, window)
        allowed, headers, retry_after = bucket.take()
        if allowed:
            return headers, None
        self.rate_limited += 1
        return headers | {"Retry-After": str(math.ceil(retry_after)), "Via": "1.1 google", "X-RateLimit-Scope": "user"}, retry_after

    def created(self, channel_id: str, message_id: str, content: str) -> None:
        """Record a new bot message (FakeDiscord answers the POST itself)."""
        self.contents[message_id] = content
        self.channels[message_id] = channel_id
        self.changes.append(VisibleChange(time.monotonic(), "create", channel_id, message_id, content))

    def edit(self, channel_id: str, message_id: str, body: Any) -> tuple[int, dict[str, Any]]:
        """Apply a PATCH; return (status, JSON body) with the updated message fields on success."""
        if self.channels.get(message_id) != channel_id or message_id not in self.contents:
            return 404, {"message": "Unknown Message", "code": 10008}
        content = str((body or {}).get("content") or "") if isinstance(body, dict) else ""
        if len(content) > MAX_CONTENT_CHARS:
            return 400, too_long()
        self.contents[message_id] = content
        self.changes.append(VisibleChange(time.monotonic(), "edit", channel_id, message_id, content))
        return 200, {"content": content}

    def delete(self, channel_id: str, message_id: str) -> int:
        """Apply a DELETE; return the status (204, or 404 for an unknown message)."""
        if self.channels.get(message_id) != channel_id or message_id not in self.contents:
            return 404
        del self.contents[message_id]
        self.changes.append(VisibleChange(time.monotonic(), "delete", channel_id, message_id, ""))
        return 204


def too_long() -> dict[str, Any]:
    """Return Discord's 400 body for content past 2,000 characters."""
    return {
        "code": 50035,
        "message": "Invalid Form Body",
        "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}},
    }
