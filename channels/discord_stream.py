"""Discord streamed replies: send the first text, then edit it within the channel's edit limits.

Discord has no draft or stream API, so a reply is an `EditStream` over `channel.send`, `PATCH`
(`PartialMessage.edit`) and `DELETE`: edits of one channel are paced by that channel's
`ChatPacer` (Discord's per-channel edit bucket is about 5 per 5 s; the default interval of 1 s
stays inside it), discord.py reads the `X-RateLimit-*` headers and waits out a bucket that is
exhausted or a 429 by itself, and a wait longer than the adapter's cap comes back as
`StreamRateLimited`, so the stream holds the channel instead of failing. Past 2,000 characters
the reply continues in a new message (code fences closed and reopened).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import discord

from channels.base import ChannelError
from channels.streaming import EditStream, PacerBook, StreamRateLimited

__all__ = ["close_abandoned_stream", "open_edit_stream"]

MAX_MESSAGE_CHARS: Final = 2000
_T = TypeVar("_T")
Call = Callable[[str, Awaitable[Any]], Awaitable[Any]]


def open_edit_stream(
    *,
    name: str,
    channel: discord.PartialMessageable,
    reply_to: str | None,
    pacers: PacerBook,
    call: Call,
    existing: Sequence[str] = (),
) -> EditStream:
    """Return a stream into `channel` (a channel or thread), its first message replying to `reply_to`.

    With `existing` (a crashed process's messages, reopened after a restart) the stream starts
    with those, and its `finish` edits them into the final text.
    """

    async def guarded(what: str, operation: Awaitable[_T]) -> _T:
        try:
            result: _T = await call(what, operation)
            return result
        except ChannelError as exc:
            cause = exc.__cause__
            if isinstance(cause, discord.RateLimited):
                raise StreamRateLimited(name, cause.retry_after) from cause
            if isinstance(cause, discord.HTTPException) and cause.status == 429:
                raise StreamRateLimited(name, _retry_after(cause)) from cause
            raise

    posted: list[str] = list(existing)

    async def post(text: str) -> str:
        kwargs: dict[str, Any] = {}
        if not posted and reply_to is not None and reply_to.isdigit():  # only the first message replies
            kwargs["reference"] = discord.MessageReference(
                message_id=int(reply_to), channel_id=channel.id, fail_if_not_exists=False
            )
        message: discord.Message = await guarded("stream a reply", channel.send(text, **kwargs))
        posted.append(str(message.id))
        return str(message.id)

    async def edit(message_id: str, text: str) -> None:
        await guarded("edit a streamed reply", channel.get_partial_message(int(message_id)).edit(content=text))

    async def delete(message_id: str) -> None:
        await guarded("delete a streamed message", channel.get_partial_message(int(message_id)).delete())

    return EditStream(
        channel=name,
        post=post,
        edit=edit,
        delete=delete,
        limit=MAX_MESSAGE_CHARS,
        pacer=pacers.pacer(str(channel.id)),
        existing=existing,
    )


async def close_abandoned_stream(
    *, channel: discord.PartialMessageable, message_ids: Sequence[str], ending: str, call: Call
) -> None:
    """Follow the last message a crashed stream left with `ending`, as a reply to it."""
    last = next((mid for mid in reversed(message_ids) if mid.isdigit()), None)
    kwargs: dict[str, Any] = {}
    if last is not None:
        kwargs["reference"] = discord.MessageReference(
            message_id=int(last), channel_id=channel.id, fail_if_not_exists=False
        )
    await call("close an abandoned reply", channel.send(ending[:MAX_MESSAGE_CHARS], **kwargs))


def _retry_after(exc: discord.HTTPException) -> float:
    header = exc.response.headers.get("Retry-After") if exc.response is not None else None
    try:
        return float(header) if header is not None else 1.0
    except ValueError:
        return 1.0
