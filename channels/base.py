"""The ChannelAdapter protocol and the values adapters exchange with the core.

Adapters move bytes between a platform and the core; they decide nothing. They never import
policy, seam or tools: the core hands them `Outbound` messages and `ApprovalPrompt`s and
receives `Inbound` messages and `ApprovalAnswer`s through the `deliver` callback.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol, TypeAlias, runtime_checkable

from orchestrator.errors import OrchestratorError

__all__ = [
    "Attachment",
    "AttachmentKind",
    "AttachmentTooLarge",
    "FileAdapter",
    "OutboundFile",
    "ReplyStream",
    "StreamingAdapter",
    "ApprovalAnswer",
    "ApprovalPrompt",
    "ChannelAdapter",
    "ChannelAuthError",
    "ChannelEnded",
    "ChannelError",
    "Deliver",
    "Inbound",
    "Outbound",
    "PromptArguments",
    "Ready",
    "report_degraded",
    "report_reconnecting",
    "report_recovered",
    "fit_arguments",
    "is_tool_progress_line",
]


AttachmentKind: TypeAlias = Literal["image", "document", "voice", "audio", "video"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One file that came with an inbound message, not yet downloaded.

    `handle` is the adapter's own reference (Telegram `file_id`, Slack `url_private`, Discord
    attachment URL); only the adapter that made it can `download` it. `size` is what the
    platform reported (None: unknown), so a cap can refuse before any byte is fetched.
    `pending` marks a file the platform only named (a Slack Connect file's id): its kind, mime
    and size are placeholders until `FileAdapter.describe` asks the platform, which the core
    does only for an agent that takes files at all.
    """

    kind: AttachmentKind
    mime: str
    handle: str
    size: int | None = None
    name: str | None = None
    pending: bool = False


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
    attachments: tuple[Attachment, ...] = ()
    # Group facts, for the route's group gate (decided in the core, never here): the message
    # mentions this bot (the mention is already cut out of `text`), replies to one of its
    # messages, or is a `/command` addressed to it ("bot": `/cmd`, `/cmd@thisbot`, its `@thisbot`
    # cut out of `text`) or to another bot ("other": `/cmd@otherbot`).
    mentions_bot: bool = False
    reply_to_bot: bool = False
    command_target: Literal["bot", "other"] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Outbound:
    """One reply to send; adapters chunk `text` to the platform's limit."""

    chat: str
    text: str
    thread: str | None = None
    reply_to: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboundFile:
    """One file to post to a chat (the `send_file` tool): `content` is the file the core opened and
    checked (a regular file of `size` bytes), read from where it stands; an adapter never opens a path."""

    chat: str
    content: io.BufferedReader
    size: int
    name: str
    mime: str
    thread: str | None = None
    caption: str | None = None


class PromptArguments(Protocol):
    """A tool call's arguments in full (the core's `ApprovalArguments`); adapters fit them."""

    def fit(self, limit: int) -> str:
        """Return every argument name, long values visibly cut, in at most `limit` characters."""
        ...

    @property
    def whole(self) -> str:
        """Return the arguments uncut (a prompt whose fitted text differs offers Show all)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPrompt:
    """Ask a chat whether a tool call may run; answered by an `ApprovalAnswer` with `request_id`.

    `arguments` is the whole call: the adapter fits it to what its platform's message holds,
    and when it had to cut, adds a Show all button (`ap:<id>:s`) where the platform has buttons.
    Every text here is already escaped for display (no surrogate, no invisible character).
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


class Deliver(Protocol):
    """The core's intake: returns once `item` is durably stored (or dropped), before the platform is told.

    `synced=False` lets an adapter that acknowledges a batch at once (Telegram's offset)
    skip the sync to disk for all but the last message of the batch: one sync makes every
    write before it durable. Only pass it when the batch is acknowledged after a later
    `synced=True` delivery returned.
    """

    def __call__(self, item: Inbound | ApprovalAnswer, /, *, synced: bool = True) -> Awaitable[None]: ...


Ready = Callable[[], None]


def report_degraded(ready: Ready, reason: str) -> None:
    """Tell the supervisor behind `ready` that the channel is connected but its platform fails
    requests the adapter retries in place (a plain callback, as tests pass, ignores it)."""
    degraded = getattr(ready, "degraded", None)
    if callable(degraded):
        degraded(reason)


def report_reconnecting(ready: Ready, reason: str) -> None:
    """Tell the supervisor behind `ready` that the connection was lost and the SDK reconnects in place
    (Slack's Socket Mode client, discord.py's RESUME); `report_recovered` once it is back."""
    reconnecting = getattr(ready, "reconnecting", None)
    if callable(reconnecting):
        reconnecting(reason)


def report_recovered(ready: Ready) -> None:
    """Tell the supervisor behind `ready` that the platform answers again (after `report_degraded`
    or `report_reconnecting`)."""
    recovered = getattr(ready, "recovered", None)
    if callable(recovered):
        recovered()


class ChannelError(OrchestratorError):
    """A platform operation failed in a way a retry may fix (network, 5xx, dropped socket)."""

    def __init__(self, channel: str, reason: str) -> None:
        self.channel, self.reason = channel, reason
        super().__init__(f"channel {channel!r}: {reason}")


class ChannelRefused(ChannelError):
    """The platform refused this request (a 4xx such as a bad chat id); resending cannot help."""


class ChannelRateLimited(ChannelError):
    """The platform rate-limited the request past what the adapter waits out; `retry_after_s` is its word."""

    def __init__(self, channel: str, reason: str, *, retry_after_s: float) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(channel, reason)


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


class IntakeDeferred(ChannelError):
    """The core could not store the message now (its disk is full) and has said so once.

    Raised by `deliver`; the adapter does not acknowledge the message, so the platform
    delivers it again, and logs no more than a quiet line of its own.
    """


class ChannelAuthError(ChannelError):
    """The platform refused the credentials; retrying cannot help."""


class ChannelUnusable(ChannelError):
    """This channel cannot run in this process (no terminal on stdin); it is disabled, not retried."""


class ChannelEnded(ChannelError):
    """The person at the channel ended it (Ctrl-D on the terminal); it stops, and is not restarted."""


class AttachmentTooLarge(ChannelRefused):
    """A download passed its byte cap while reading (or the platform's reported size did)."""


class ReplyStream(Protocol):
    """One reply streaming into a chat, made by `StreamingAdapter.open_stream` for one turn.

    `update` is called with the whole visible text so far (a short tool-progress line may be
    its last line) as often as the model produces text; the stream decides when the platform
    sees it (at most one edit per `stream_edit_interval_s`, rate limits honoured, an identical
    text never re-sent) and must never raise for a failed intermediate update (log it, keep
    going). `finish` replaces what was shown with the final text, which is exactly the
    persisted assistant text (formatted now), continuing in new messages past the platform's
    limit; it follows the `ReplyProgress` protocol of `ChannelAdapter.send`, so a retried
    finish never posts a chunk twice. `abort` ends the stream with `ending` ("Stopped.", the
    failure line) replacing or following the partial text. `message_ids` are the platform ids
    posted so far, kept in the inbox so a restart can close an abandoned stream.
    """

    @property
    def message_ids(self) -> Sequence[str]: ...

    async def update(self, text: str) -> None: ...

    async def finish(self, text: str, *, progress: ReplyProgress | None = None) -> None: ...

    async def abort(self, ending: str) -> None: ...


@runtime_checkable
class StreamStatus(Protocol):
    """A `ReplyStream` that can show a status beside its text (Slack's assistant status); optional.

    The core checks with `isinstance`. While `shows_status` is True, tool progress goes to
    `status`: `status("running file_read...")` while a tool runs (`"waiting for approval of
    file_write..."` while its call waits for a person), `status("is thinking...")`
    when it is done, and the text carries no tool line. While it is False (no thread to show
    a status in, the status refused) the line goes in the text, as on every other platform.
    `status` never raises; `finish` / `abort` clear what it set.
    """

    @property
    def shows_status(self) -> bool: ...

    async def status(self, text: str) -> None: ...


def is_tool_progress_line(line: str | None) -> bool:
    """Return whether `line` is the core's tool-progress line: `running X...`, or
    `waiting for approval of X...` while a person is asked (not part of the answer)."""
    return line is not None and line.endswith("...") and line.startswith(("running ", "waiting for approval of "))


@runtime_checkable
class StreamingAdapter(Protocol):
    """An adapter that can stream replies (optional: the core checks with `isinstance`)."""

    def open_stream(self, message: Outbound) -> ReplyStream | None:
        """Return a stream for a reply to `message.chat` (None: this chat cannot stream; send instead)."""
        ...

    def reopen_stream(self, message: Outbound, message_ids: Sequence[str]) -> ReplyStream | None:
        """After a restart: return a stream over the messages a crash left half-shown (`message_ids`,
        their text unknown), whose `finish` edits them into the final text (None: they cannot be
        edited; `close_abandoned` follows them up instead). A message that refuses the edit
        (deleted, too old) gets its part posted anew, as in any `finish`."""
        ...

    async def close_abandoned(self, chat: str, thread: str | None, message_ids: Sequence[str], ending: str) -> None:
        """After a restart: end a stream a crash left half-shown by following it up with `ending`."""
        ...


@runtime_checkable
class FileAdapter(Protocol):
    """An adapter that can fetch inbound attachments and post files (optional, like streaming)."""

    max_file_bytes: int  # the largest file this platform accepts from a bot

    async def describe(self, attachment: Attachment) -> Attachment:
        """Return `attachment` with its kind, mime and size known: a `pending` one is looked up on
        the platform (raises `ChannelError`, `ChannelRefused` when it will not say), others as they are."""
        ...

    async def download(self, attachment: Attachment, dest: BinaryIO, *, max_bytes: int) -> int:
        """Stream `attachment` into the open file `dest`, returning its size; raises `AttachmentTooLarge`
        as soon as more than `max_bytes` arrive, `ChannelError` when the fetch fails (the caller, which
        made `dest`, removes what was written)."""
        ...

    async def send_file(self, file: OutboundFile) -> str:
        """Post `file` to its chat (a photo when it is an image the platform shows inline); return the message id."""
        ...


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
