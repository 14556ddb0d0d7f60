"""The delivery queue: replies the running daemon still owes, retried until the platform takes them.

A turn waits on its reply's sends for `[daemon] reply_deadline_s`; what is still unsent
then (the platform down, a long rate limit, the channel restarting) is parked in the inbox
as `queued` (`park_reply`). `serve_deliveries` runs for the daemon's whole life and sends
each queued reply through the channel's current adapter, oldest message first, with capped
exponential backoff plus jitter, never sooner than a rate limit's `retry_after`, until the
platform accepts it (`done`), refuses it for good (a 4xx: `done`, logged), or
`[daemon] reply_give_up_s` passes since it was parked (`given_up`, logged and counted).
The queue lives in the store, so a restart carries it over; the next start tries every
queued reply at once. A full disk is waited out: the queue keeps sending, and a reply it
sent is finished once space is back (never sent twice by this process).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable
from typing import Any, Final

from loguru import logger

from channels import Attachment, ChannelError, ChannelRateLimited, ChannelRefused, Inbound, Outbound, ReplyProgress
from orchestrator.daemon.channels import ChannelState
from orchestrator.daemon.replies import close_abandoned
from orchestrator.daemon.runtime import Runtime
from orchestrator.store import InboxRow, disk_full, state_fault

__all__ = ["RESENT", "RETRY_CAP_S", "inbound_of", "serve_deliveries"]

# What a half-shown stream says when the queue sends its reply in full in new messages.
RESENT: Final = "This reply could not be finished in place; it follows in full below."

_RETRY_FIRST_S: Final = 1.0
# The longest wait between two tries of a queued reply (a longer `retry_after` is honoured).
RETRY_CAP_S: Final = 300.0
# While the disk is full, the queue passes at most this often.
_FULL_DISK_PASS_S: Final = 1.0


async def serve_deliveries(runtime: Runtime, *, clock: Callable[[], float] = time.time) -> None:
    """Send queued replies until cancelled (a task in the runtime's TaskGroup)."""
    due_at = math.inf  # the first pass: everything a previous process left queued
    while True:
        runtime.replies_waiting.clear()
        try:
            await _pass(runtime, due_at, clock)
            upcoming = runtime.store.next_reply_due()
        except Exception as exc:
            if not disk_full(exc):
                raise
            runtime.disk.met()  # the queue waits out a full disk (said once) and tries again
            upcoming = clock()
        timeout = None if upcoming is None else max(upcoming - clock(), 0.0)
        if runtime.disk.full and timeout is not None:  # a retry time it could not store: not a busy loop
            timeout = max(timeout, _FULL_DISK_PASS_S)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await runtime.replies_waiting.wait()
        due_at = clock()


async def _pass(runtime: Runtime, due_at: float, clock: Callable[[], float]) -> None:
    """Try every reply due at `due_at` once, oldest first."""
    blocked: set[str] = set()  # channels that failed in this pass: their later replies wait
    for row in runtime.store.due_replies(due_at):
        if row.channel in blocked:
            _retry_at(runtime, row, clock() + _backoff(row.tries))
            continue
        try:
            sent = await _try(runtime, row, clock)
        except Exception as exc:  # a bug with one reply must not stop the queue
            if state_fault(exc) is not None or disk_full(exc):
                raise  # stopping the daemon, or waiting for space; the row stays queued
            logger.opt(exception=exc).error("the queued reply to {} failed", row.event_id)
            _retry_at(runtime, row, clock() + RETRY_CAP_S)
            sent = False
        if not sent:
            blocked.add(row.channel)


def _retry_at(runtime: Runtime, row: InboxRow, next_try: float) -> None:
    """Set when `row` is tried next (on a full disk it keeps its old time: the pass waits instead)."""
    runtime.disk.attempt(lambda: runtime.store.retry_reply(row.channel, row.event_id, next_try=next_try))


async def _try(runtime: Runtime, row: InboxRow, clock: Callable[[], float]) -> bool:
    """Try one queued reply once; False when the platform could not take it now."""
    store, inbound = runtime.store, inbound_of(row.body)
    give_up_s = runtime.config.daemon.reply_give_up_s
    if row.queued_at is not None and clock() - row.queued_at > give_up_s:
        logger.error(
            "gave up the reply to {} in chat {}: not accepted within reply_give_up_s={:g}s ({} tries)",
            row.event_id, inbound.chat, give_up_s, row.tries,
        )
        await runtime.disk.wait_out(lambda: store.mark(row.channel, row.event_id, "given_up"))
        runtime.replies_given_up += 1
        return True
    live = runtime.channels.get(row.channel)
    if live is None or live.state not in (ChannelState.READY, ChannelState.DEGRADED):  # degraded: sends may work
        _retry_at(runtime, row, clock() + _backoff(row.tries))
        return False

    def record(done: int) -> None:  # a full disk skips it: finishing the row supersedes it
        runtime.disk.attempt(lambda: store.reply_progress(row.channel, row.event_id, done))

    progress = ReplyProgress(row.sent, on_advance=record)
    message = Outbound(chat=inbound.chat, thread=inbound.thread, text=row.reply or "", reply_to=inbound.message_id)
    async with runtime.in_flight():  # a drain waits for a send in progress (a chunk is recorded once)
        try:
            if row.stream and row.sent == 0:  # a stream left half-shown: say the reply follows, once
                await close_abandoned(runtime, inbound, row.stream, RESENT)
                runtime.disk.attempt(lambda: store.stream_messages(row.channel, row.event_id, ()))
            await live.adapter.send(message, progress=progress)
        except ChannelRefused as exc:
            logger.error("{} refused the queued reply to {} in chat {}: {}", row.channel, row.event_id, inbound.chat, exc.reason)
        except ChannelError as exc:
            wait = _backoff(row.tries)
            if isinstance(exc, ChannelRateLimited):
                wait = max(wait, float(exc.retry_after_s))
            logger.warning("the queued reply to {} failed again ({}); next try in {:.0f}s", row.event_id, exc.reason, wait)
            _retry_at(runtime, row, clock() + wait)
            return False
    logger.info("sent the queued reply to {} in chat {} after {} tries", row.event_id, inbound.chat, row.tries + 1)
    # Sent: finished once space allows, never sent again by this process.
    await runtime.disk.wait_out(lambda: store.mark(row.channel, row.event_id, "done"))
    return True


def _backoff(tries: int) -> float:
    return float(min(_RETRY_FIRST_S * 2 ** min(tries, 20), RETRY_CAP_S) * random.uniform(0.5, 1.0))


def inbound_of(body: dict[str, Any]) -> Inbound:
    """Rebuild an accepted message from its inbox row (attachments were stored as plain dicts)."""
    attachments = tuple(Attachment(**a) for a in body.get("attachments") or ())
    return Inbound(**{**body, "attachments": attachments})
