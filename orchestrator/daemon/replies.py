"""The reply protocol: a turn's reply is sent under the durable inbox, resumed after a restart."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Final

from loguru import logger

from channels import (
    ChannelError,
    ChannelRateLimited,
    ChannelRefused,
    Inbound,
    Outbound,
    ReplyProgress,
    ReplyStream,
    StreamingAdapter,
)
from orchestrator.daemon.runtime import Runtime
from orchestrator.redaction import redact

__all__ = [
    "CONTINUED", "close_abandoned", "deliver_reply", "finish_handed_over", "finish_row", "fit_reply", "park_reply",
    "reopen_abandoned",
    "resume_reply",
]

# Retrying a reply send: the first wait and the cap (the deadline is [daemon] reply_deadline_s).
_SEND_RETRY_FIRST_S: Final = 0.5
_SEND_RETRY_CAP_S: Final = 15.0
# What a half-shown stream says when its reply follows in full in new messages.
CONTINUED: Final = "This reply was interrupted by a restart; it follows in full below."


def fit_reply(text: str, limit: int) -> str:
    """Return `text` redacted, or its first `limit` characters (cut at a line or word) and a note.

    Redacted before the cut: a cut inside a secret would leave a part the redactor could miss.
    """
    text = redact(text)
    if len(text) <= limit:
        return text
    head = text[:limit]
    cut = max(head.rfind("\n"), head.rfind(" "))
    if cut >= limit - 500:  # a nearby boundary; else cut mid-word rather than lose much
        head = head[:cut]
    return f"{head.rstrip()}\n\n[The reply was cut here: {len(text):,} characters, the first {len(head):,} shown.]"


async def deliver_reply(
    runtime: Runtime,
    inbound: Inbound,
    text: str,
    *,
    reply_to: bool = True,
    sent: int = 0,
    stream: ReplyStream | None = None,
    patience_s: float | None = None,
    unsaved: Callable[[], None] | None = None,
) -> bool:
    """Send the reply to `inbound` under the durability protocol; True once it is finished.

    With `stream` (the reply streamed while the turn ran) the stream's `finish` puts the
    final text in place of what it showed, under the same protocol.

    The row is `replying` (with the text) before the first chunk goes out and records every
    chunk the platform accepts, so a restart sends only the rest; it is `done` only after
    the last chunk. Faults a retry may fix (5xx, network, timeouts, a rate limit) are retried
    with capped backoff plus jitter (never sooner than a rate limit's `retry_after`) for up
    to `[daemon] reply_deadline_s`; past that, or when the channel is gone (a reload
    restarting it), the rest moves to the delivery queue, which this process keeps retrying
    (`serve_deliveries`), and this returns False. A refused send (a 4xx) is not retried:
    the row is finished and the refusal logged.

    A full disk is waited out: storing the reply is retried for up to `patience_s` (default
    `reply_deadline_s`); past that the reply is sent without it (the user gets the answer),
    and finishing the row waits for space, after `unsaved` (the turn's transcript write that
    a full disk kept back, `Turn.unsaved`); so does parking it in the delivery queue. Stopped
    meanwhile, the row stays unfinished and the next start tells the user.
    """
    store, channel, event_id, disk = runtime.store, inbound.channel, inbound.event_id, runtime.disk
    stored = sent > 0  # the text is in the row
    if not stored:
        patience = runtime.config.daemon.reply_deadline_s if patience_s is None else patience_s
        stored = await disk.wait_out(lambda: store.begin_reply(channel, event_id, text), for_s=patience)
        if stored:
            await runtime.inbox_sync.wait()  # the transcript and this reply on disk before the user reads it
    progress = ReplyProgress(sent, on_advance=lambda done: _record(runtime, inbound, done))
    message = Outbound(
        chat=inbound.chat, thread=inbound.thread, text=text, reply_to=inbound.message_id if reply_to else None
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + runtime.config.daemon.reply_deadline_s
    delay = _SEND_RETRY_FIRST_S
    while True:
        live = runtime.channels.get(channel)
        if live is None:
            logger.warning("channel {} is gone; the reply to {} waits in the delivery queue", channel, event_id)
            await _park(runtime, inbound, text, progress, stored=stored, delay=_SEND_RETRY_FIRST_S, unsaved=unsaved)
            return False
        try:
            if stream is not None:
                await stream.finish(text, progress=progress)
            else:
                await live.adapter.send(message, progress=progress)
        except ChannelRefused as exc:
            logger.error("{} refused the reply to {} in chat {}: {}", channel, event_id, inbound.chat, exc.reason)
        except ChannelError as exc:
            wait = max(delay * random.uniform(0.5, 1.0), exc.retry_after_s if isinstance(exc, ChannelRateLimited) else 0.0)
            if loop.time() + wait > deadline:
                logger.warning(
                    "could not send the reply to {} in chat {} within reply_deadline_s ({}); it waits in the delivery queue",
                    event_id, inbound.chat, exc.reason,
                )
                await _park(runtime, inbound, text, progress, stored=stored, delay=wait, unsaved=unsaved)
                return False
            logger.warning("sending the reply to {} failed ({}); retrying in {:.1f}s", event_id, exc.reason, wait)
            await asyncio.sleep(wait)
            delay = min(delay * 2, _SEND_RETRY_CAP_S)
            continue
        await finish_row(runtime, inbound, unsaved=unsaved)
        return True


async def _park(
    runtime: Runtime, inbound: Inbound, text: str, progress: ReplyProgress, *, stored: bool, delay: float,
    unsaved: Callable[[], None] | None,
) -> None:
    """`park_reply`, waiting out a full disk: the queue sends from the row, so the row is written first.

    That is the turn's transcript (`unsaved`), the reply's text (unless `stored`) and the
    chunks already accepted (a full disk may have kept them from the row).
    """
    store, channel, event_id = runtime.store, inbound.channel, inbound.event_id
    if unsaved is not None:
        await runtime.disk.wait_out(unsaved)

    def write() -> None:
        if not stored:
            store.begin_reply(channel, event_id, text)
        store.reply_progress(channel, event_id, progress.done)
        park_reply(runtime, inbound, delay=delay)

    await runtime.disk.wait_out(write)


def _record(runtime: Runtime, inbound: Inbound, done: int) -> None:
    """Record an accepted chunk; on a full disk it is skipped (finishing the row supersedes it)."""
    runtime.disk.attempt(lambda: runtime.store.reply_progress(inbound.channel, inbound.event_id, done))


async def finish_row(runtime: Runtime, inbound: Inbound, *, unsaved: Callable[[], None] | None = None) -> None:
    """Mark the row of `inbound` done, waiting out a full disk (`unsaved`, the turn's transcript, first)."""
    if unsaved is not None:
        await runtime.disk.wait_out(unsaved)
    await runtime.disk.wait_out(lambda: runtime.store.mark(inbound.channel, inbound.event_id, "done"))


def park_reply(runtime: Runtime, inbound: Inbound, *, delay: float) -> None:
    """Move the rest of the reply to `inbound` to the delivery queue, first tried `delay` seconds from now."""
    runtime.store.queue_reply(inbound.channel, inbound.event_id, next_try=time.time() + delay)
    runtime.replies_waiting.set()


async def resume_reply(
    runtime: Runtime, inbound: Inbound, text: str, *, sent: int, notice: bool = False, stream: ReplyStream | None = None
) -> None:
    """Send what the previous process owed `inbound` (counted in flight, like a turn).

    With `stream` (`reopen_abandoned`) the text replaces the messages it left half-shown.
    """
    async with runtime.in_flight():
        await deliver_reply(runtime, inbound, text, reply_to=not notice, sent=sent, stream=stream)


async def finish_handed_over(
    runtime: Runtime, inbound: Inbound, text: str, stream: ReplyStream, *, unsaved: Callable[[], None] | None = None
) -> bool:
    """Finish a reply streamed through a channel's previous adapter (a reload restarted it mid-turn).

    The old adapter, kept open for it, puts the final text in place of what it showed, under
    the reply protocol. It no longer receives and may have lost its connection with the gateway
    (Discord's closes with it), so it is tried once: when it fails before any part was in place,
    the current adapter takes the shown messages over and edits them into the reply, as after
    a crash (one that cannot follows the partial message up with `CONTINUED` and sends the
    reply in full); after a part, the rest goes out through the current adapter (the chunks
    the old one got out are not sent again). True once it is finished.
    """
    store, channel, event_id = runtime.store, inbound.channel, inbound.event_id
    patience = 0.0 if unsaved is not None else runtime.config.daemon.reply_deadline_s
    await runtime.disk.wait_out(lambda: store.begin_reply(channel, event_id, text), for_s=patience)
    progress = ReplyProgress(0, on_advance=lambda done: _record(runtime, inbound, done))
    try:
        await stream.finish(text, progress=progress)
    except ChannelError as exc:
        logger.warning(
            "the old adapter of {} could not finish the streamed reply to {} ({}); closing it as after a restart",
            channel, event_id, exc.reason,
        )
    else:
        await finish_row(runtime, inbound, unsaved=unsaved)
        return True
    if progress.done == 0 and stream.message_ids:
        reopened = reopen_abandoned(runtime, inbound, stream.message_ids)
        if reopened is not None:  # the current adapter edits what the old one showed
            return await deliver_reply(runtime, inbound, text, stream=reopened, unsaved=unsaved)
        await close_abandoned(runtime, inbound, stream.message_ids, CONTINUED)
        # closed: a restart sends the rest anew, not in place (a full disk skips it: the edit in place then is the worst)
        runtime.disk.attempt(lambda: store.stream_messages(channel, event_id, ()))
    return await deliver_reply(runtime, inbound, text, sent=progress.done, unsaved=unsaved)


def reopen_abandoned(runtime: Runtime, inbound: Inbound, message_ids: Sequence[str]) -> ReplyStream | None:
    """Return a stream over the messages a crash left half-shown, to finish in place (None: it cannot be)."""
    live = runtime.channels.get(inbound.channel)
    if not message_ids or live is None or not isinstance(live.adapter, StreamingAdapter):
        return None
    message = Outbound(chat=inbound.chat, thread=inbound.thread, text="", reply_to=inbound.message_id)
    return live.adapter.reopen_stream(message, message_ids)


async def close_abandoned(runtime: Runtime, inbound: Inbound, message_ids: Sequence[str], ending: str) -> bool:
    """Ask the channel's adapter to close a half-shown stream; False when it cannot (no streaming adapter)."""
    live = runtime.channels.get(inbound.channel)
    if live is None or not isinstance(live.adapter, StreamingAdapter):
        return False
    try:
        await live.adapter.close_abandoned(inbound.chat, inbound.thread, message_ids, ending)
    except ChannelError as exc:  # the message may be gone; the reply or notice still follows
        logger.warning("could not close the interrupted reply to {}: {}", inbound.event_id, exc.reason)
        return False
    return True
