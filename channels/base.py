"""The ChannelAdapter protocol and the values adapters exchange with the core.

Adapters move bytes between a platform and the core; they decide nothing. They never import
policy, seam or tools: the core hands them `Outbound` messages and `ApprovalPrompt`s and
receives `Inbound` messages and `ApprovalAnswer`s through the `deliver` callback.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from orchestrator.errors import OrchestratorError

__all__ = [
    "ApprovalAnswer",
    "ApprovalPrompt",
    "ChannelAdapter",
    "ChannelAuthError",
    "ChannelError",
    "Deliver",
    "Inbound",
    "Outbound",
    "PromptArguments",
    "Ready",
    "fit_arguments",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Inbound:
    """One user message from a platform.

    `event_id` is the platform's unique id for the delivery (Telegram update id, Slack
    event id, Discord message id); the core de-duplicates on (channel, event_id), so a
    re-delivery after a restart is never processed twice.
    """

    channel: str
    chat: str
    sender: str
    text: str
    event_id: str
    message_id: str | None = None
    thread: str | None = None
    sender_name: str | None = None
    is_direct: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Outbound:
    """One reply to send; adapters chunk `text` to the platform's limit."""

    chat: str
    text: str
    thread: str | None = None
    reply_to: str | None = None


class PromptArguments(Protocol):
    """A tool call's arguments in full (the core's `ApprovalArguments`); adapters fit them."""

    def fit(self, limit: int) -> str:
        """Return every argument name, long values visibly cut, in at most `limit` characters."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPrompt:
    """Ask a chat whether a tool call may run; answered by an `ApprovalAnswer` with `request_id`.

    `arguments` is the whole call: the adapter fits it to what its platform's message holds.
    """

    request_id: str
    chat: str
    thread: str | None
    requester: str
    tool: str
    arguments: PromptArguments
    timeout_s: float


def fit_arguments(arguments: PromptArguments, room: int, *, size: Callable[[str], int] = len) -> str:
    """Return the arguments fitted so that `size` of the text (as the platform measures the
    text the adapter makes of it: escaped, in UTF-16 units) is at most `room`."""
    limit = max(room, 0)
    while True:
        text = arguments.fit(limit)
        measured = size(text)
        if measured <= room or limit == 0:
            return text
        limit = max(min(limit - 1, limit * room // measured), 0)  # strictly smaller each time


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAnswer:
    """Someone pressed approve/deny (or typed `/approve ID` / `/deny ID`)."""

    channel: str
    request_id: str
    sender: str
    approved: bool
    chat: str | None = None


Deliver = Callable[[Inbound | ApprovalAnswer], Awaitable[None]]
Ready = Callable[[], None]


class ChannelError(OrchestratorError):
    """A platform operation failed in a way a retry may fix (network, 5xx, dropped socket)."""

    def __init__(self, channel: str, reason: str) -> None:
        self.channel, self.reason = channel, reason
        super().__init__(f"channel {channel!r}: {reason}")


class ChannelRefused(ChannelError):
    """The platform refused this request (a 4xx such as a bad chat id); resending cannot help."""


class ReplyProgress:
    """How many chunks of one reply the platform has accepted (the durability protocol).

    An adapter's `send` skips the first `done` chunks and calls `advance()` after each chunk
    the platform accepted, so a retried or resumed reply continues where it stopped and never
    posts a chunk twice.
    """

    __slots__ = ("done", "_on_advance")

    def __init__(self, done: int = 0, on_advance: Callable[[int], None] | None = None) -> None:
        self.done = done
        self._on_advance = on_advance

    def advance(self) -> None:
        """Record one more accepted chunk."""
        self.done += 1
        if self._on_advance is not None:
            self._on_advance(self.done)


class ChannelAuthError(ChannelError):
    """The platform refused the credentials; retrying cannot help."""


class ChannelUnusable(ChannelError):
    """This channel cannot run in this process (no terminal on stdin); it is disabled, not retried."""


class ChannelAdapter(Protocol):
    """One configured channel (a bot on one platform).

    `run` connects, calls `ready()` once it is receiving, then delivers every inbound
    message and approval answer through `deliver` until cancelled; it raises
    `ChannelAuthError` for bad credentials and `ChannelError` when the connection is lost
    (the supervisor reconnects with backoff). `send` skips the chunks `progress` says were
    accepted and advances it after each one; it raises `ChannelRefused` when the platform
    refused the request and `ChannelError` for what a retry may fix (5xx, network, timeouts).
    `deliver` must be awaited before the platform
    is told the message was received (that is the durability point). Sends retry rate limits
    (retry_after) themselves and raise `ChannelError` when they give up.
    """

    name: str
    max_message_chars: int

    async def run(self, deliver: Deliver, ready: Ready) -> None: ...

    async def send(self, message: Outbound, *, progress: ReplyProgress | None = None) -> None: ...

    async def prompt_approval(self, prompt: ApprovalPrompt) -> None: ...

    async def typing(self, chat: str, thread: str | None) -> None: ...

    async def aclose(self) -> None: ...
