"""Streamed Telegram replies: drafts in private chats, send-then-edit in groups and topics.

Private chats get `sendMessageDraft`: one draft id per reply, shown with progressively longer
text (its last 4,096 UTF-16 units when it grows past one message), then the final reply is
sent as ordinary messages with entities, since a draft is only a preview that Telegram drops
after about 30 seconds. Groups and forum topics cannot show drafts: the first text is sent
as a message (answering the user's), then edited; past 4,096 units the text continues in a
new message (a code fence cut in two is closed and reopened). Every draft and edit of one
chat goes through that chat's `ChatPacer` (`channels.streaming`), so a chat sees at most one
change per `stream_edit_interval_s` however many replies stream into it; a 429 holds the
chat for its `retry_after`, and an edit to the text a message already shows ("message is
not modified") counts as done.

A Bot API server older than drafts (a self-hosted one before Bot API 9.3) answers
`sendMessageDraft` 404 "Not Found", which PTB raises as `InvalidToken` (Telegram answers a
malformed token the same way). The token has been used by then, so it is the method that is
missing: the stream tells the adapter (`drafts_missing`: drafts off for the bot, one log
line with that reason) and goes on as in a group, posting a message and editing it.

Intermediate text is plain: half-written Markdown would render wrongly, so the final text
is formatted once, by `finish`, with the same entities `send` uses.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from loguru import logger
from telegram import MessageEntity, ReplyParameters
from telegram.error import BadRequest, InvalidToken, RetryAfter

from channels.base import ChannelAuthError, ChannelError, ChannelRefused, Outbound, ReplyProgress, is_tool_progress_line
from channels.streaming import ChatPacer, StreamRateLimited, settle, split_to_limit
from channels.telegram_format import plain
from channels.telegram_ids import chat_id as _chat_id, retry_after_s as _retry_after_s, thread_id as _thread_id

if TYPE_CHECKING:
    from channels.telegram import TelegramAdapter

__all__ = ["TelegramStream", "close_abandoned"]

_T = TypeVar("_T")

LIMIT: Final = 4096  # UTF-16 units per message, drafts too
# Consecutive failed intermediate calls after which the flusher rests until the next update.
_MAX_FAILURES: Final = 3
# How often a final call waits out a rate limit before `finish` gives up with ChannelError.
# Draft ids are per reply and must be non-zero; a random start keeps two processes apart.
_draft_ids = itertools.count(random.randrange(1, 2**30))


def _units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def _method_missing(exc: ChannelError) -> str | None:
    """Return the server's answer when `exc` is its 404 "Not Found" (no such method), else None."""
    cause = exc.__cause__
    if isinstance(exc, ChannelAuthError) and isinstance(cause, InvalidToken) and cause.message.startswith("Not Found"):
        return cause.message
    return None


def _not_modified(exc: ChannelError) -> bool:
    return isinstance(exc.__cause__, BadRequest) and "not modified" in exc.__cause__.message.lower()


class TelegramStream:
    """One reply streaming into one Telegram chat; made by `TelegramAdapter.open_stream`.

    Made with `existing` (`TelegramAdapter.reopen_stream`), it takes over the messages a
    crashed process's stream posted: `finish` edits them into the final text.

    Lifecycle: `update` only records the newest text and returns; a flusher task (one per
    stream, made on the first update) shows it when the chat's pacer allows. `finish` or
    `abort` stops the flusher (an API call in flight completes, so its result is known) and
    ends the reply; both may be awaited once.
    """

    def __init__(
        self, adapter: TelegramAdapter, message: Outbound, *, pacer: ChatPacer, private: bool, existing: Sequence[str] = ()
    ) -> None:
        self._adapter = adapter
        self._message = message
        self._pacer = pacer
        self._private = private and not existing
        self._draft_id = next(_draft_ids) if self._private else 0
        # group messages posted so far; `existing` are a crashed process's (reopened after a
        # restart), whose text is unknown (""), so `finish` edits each one it keeps
        self._ids: list[str] = list(existing)
        self._shown: list[str] = [""] * len(self._ids)  # what each of them shows now
        self._drafted = ""  # the draft text shown (private chats)
        self._latest = ""
        self._lock = asyncio.Lock()  # one API call of this stream at a time
        self._flusher: asyncio.Task[None] | None = None
        self._ended = False

    @property
    def message_ids(self) -> Sequence[str]:
        """Return the ids of the messages posted so far (a draft has none)."""
        return tuple(self._ids)

    # -- streaming ---------------------------------------------------------------------------

    async def update(self, text: str) -> None:
        """Record `text` as the newest visible text; the flusher shows it when the chat may."""
        if self._ended or not text.strip():
            return
        self._latest = text
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    def _stale(self) -> bool:
        if self._private:
            return _draft_window(self._latest) != self._drafted
        return split_to_limit(self._latest, LIMIT, _units) != self._shown

    async def _flush_loop(self) -> None:
        failures = 0
        while not self._ended and failures < _MAX_FAILURES and self._stale():
            slot = await self._pacer.slot()
            if slot.waited_s > 0 and (self._ids or self._drafted):
                try:
                    await settle(self._pacer.interval_s)
                except asyncio.CancelledError:  # the reply ends: its final text takes this slot
                    self._pacer.give_back(slot)
                    raise
            async with self._lock:
                if self._ended:
                    self._pacer.give_back(slot)
                    return
                try:
                    try:
                        await self._show_latest()
                    finally:
                        self._pacer.answered()
                    failures = 0
                except StreamRateLimited as exc:
                    logger.info("channel {}: stream update rate limited, holding {:g}s", self._adapter.name, exc.retry_after)
                    self._pacer.hold(exc.retry_after)
                except ChannelError as exc:  # the next flush retries with the newest text
                    logger.warning("channel {}: stream update failed: {}", self._adapter.name, exc.reason)
                    failures += 1

    async def _show_latest(self) -> None:
        """Make one API call that brings the chat closer to the newest text."""
        if self._private and not self._adapter.drafts:  # another stream found the server has none
            self._private = False
        if self._private:
            window = _draft_window(self._latest)
            try:
                await self._draft(window)
            except ChannelError as exc:
                answer = _method_missing(exc)
                if answer is None:
                    raise
                self._adapter.drafts_missing(answer)
                self._private = False  # still stale: the next slot posts the text as a message
                return
            self._drafted = window
            return
        chunks = split_to_limit(self._latest, LIMIT, _units)
        for index, chunk in enumerate(chunks):
            if index < len(self._shown) and self._shown[index] == chunk:
                continue
            await self._show(index, chunk, ())
            return

    def cancel(self) -> None:
        """Stop showing updates at once (the adapter is closing); nothing more is sent."""
        self._ended = True
        if self._flusher is not None:
            self._flusher.cancel()

    async def _stop_flusher(self) -> None:
        self._ended = True
        flusher, self._flusher = self._flusher, None
        if flusher is not None and not flusher.done():
            async with self._lock:  # a call in flight completes: we know what it showed
                flusher.cancel()
            await asyncio.wait([flusher])

    # -- ending ------------------------------------------------------------------------------

    async def finish(self, text: str, *, progress: ReplyProgress | None = None) -> None:
        """Put the final text (formatted now) in place of what was shown, under `progress`.

        Private chats: the final text is sent as `send` sends it (the draft disappears).
        Groups: part 1 is the edit of the first message, later parts edit the messages the
        stream posted or are sent anew (so is a part whose message refuses the edit: deleted
        by an admin or a moderation bot meanwhile), and messages the final text no longer
        needs are deleted. Raises `ChannelError` when Telegram still refuses after the retries.
        """
        await self._stop_flusher()
        if self._private or not self._ids:
            await self._adapter.send(self._final_message(text), progress=progress)
            return
        parts = self._adapter.rendered(text)
        skip = progress.done if progress is not None else 0
        async with self._lock:
            for index, (chunk, entities) in enumerate(parts):
                if index < skip:
                    continue
                if entities or index >= len(self._ids) or self._shown[index] != chunk:  # else: shown as it is
                    await self._final_show(index, chunk, entities)
                if progress is not None:
                    progress.advance()
            for index in range(len(parts), len(self._ids)):
                await self._retire(self._ids[index])

    async def _final_show(self, index: int, chunk: str, entities: Sequence[MessageEntity]) -> None:
        """Show a final chunk; a message that refuses the edit (deleted by an admin or a bot) gets it posted anew."""
        try:
            await self._paced(lambda: self._show(index, chunk, entities))
        except ChannelRefused as exc:
            if index >= len(self._ids):
                raise
            logger.warning(
                "channel {}: message {} refused the final edit ({}); posting it anew",
                self._adapter.name, self._ids[index], exc.reason,
            )
            self._ids[index] = await self._paced(lambda: self._post(chunk, entities))
            self._shown[index] = chunk

    async def abort(self, ending: str) -> None:
        """End the reply with `ending` after the partial text (its tool line dropped)."""
        await self._stop_flusher()
        partial = _without_tool_line(self._latest)
        if self._private or not self._ids:
            text = f"{partial}\n\n{ending}" if partial else ending
            await self._adapter.send(self._final_message(text))
            return
        async with self._lock:
            last = len(self._ids) - 1
            shown = split_to_limit(partial, LIMIT, _units) if partial else []
            tail = shown[last] if last < len(shown) else self._shown[last]
            joined = f"{tail.rstrip()}\n\n{ending}"
            if _units(joined) <= LIMIT:
                await self._paced(lambda: self._show(last, joined, ()))
            else:
                await self._paced(lambda: self._show(len(self._ids), ending, ()))

    def _final_message(self, text: str) -> Outbound:
        reply_to = self._message.reply_to if not self._ids else None
        return Outbound(chat=self._message.chat, thread=self._message.thread, text=text, reply_to=reply_to)

    # -- the API calls -------------------------------------------------------------------------

    async def _draft(self, text: str) -> None:
        bot = self._adapter.bot
        await self._stream_call(
            "sendMessageDraft",
            functools.partial(
                bot.send_message_draft,
                chat_id=int(self._message.chat),
                draft_id=self._draft_id,
                text=text,
                message_thread_id=_thread_id(self._message.thread),
            ),
        )

    async def _show(self, index: int, chunk: str, entities: Sequence[MessageEntity]) -> None:
        """Make message `index` show `chunk`: an edit, or a new message when it does not exist yet."""
        if index < len(self._ids):
            if self._shown[index] == chunk and not entities:
                return
            try:
                await self._edit(self._ids[index], chunk, entities)
            except ChannelRefused as exc:
                if _not_modified(exc):
                    pass
                elif entities and isinstance(exc.__cause__, BadRequest) and "entit" in exc.reason:
                    logger.warning("channel {}: formatting refused ({}); plain text", self._adapter.name, exc.reason)
                    await self._edit(self._ids[index], chunk, ())
                else:
                    raise
            self._shown[index] = chunk
            return
        self._ids.append(await self._post(chunk, entities))
        self._shown.append(chunk)

    async def _edit(self, message_id: str, text: str, entities: Sequence[MessageEntity]) -> None:
        bot = self._adapter.bot
        await self._stream_call(
            "editMessageText",
            functools.partial(
                bot.edit_message_text,
                text,
                chat_id=_chat_id(self._message.chat),
                message_id=int(message_id),
                entities=tuple(entities) or None,
            ),
        )

    async def _post(self, text: str, entities: Sequence[MessageEntity]) -> str:
        bot = self._adapter.bot
        reply = None
        if not self._ids and self._message.reply_to is not None and self._message.reply_to.isdigit():
            reply = ReplyParameters(message_id=int(self._message.reply_to), allow_sending_without_reply=True)
        sent = await self._stream_call(
            "sendMessage",
            functools.partial(
                bot.send_message,
                chat_id=_chat_id(self._message.chat),
                text=text,
                message_thread_id=_thread_id(self._message.thread),
                reply_parameters=reply,
                entities=tuple(entities) or None,
            ),
        )
        return str(sent.message_id)

    async def _retire(self, message_id: str) -> None:
        bot = self._adapter.bot
        try:
            await self._paced(
                lambda: self._stream_call(
                    "deleteMessage",
                    functools.partial(bot.delete_message, chat_id=_chat_id(self._message.chat), message_id=int(message_id)),
                )
            )
        except ChannelError as exc:
            logger.warning("channel {}: could not remove streamed message {}: {}", self._adapter.name, message_id, exc.reason)

    async def _stream_call(self, action: str, call: Callable[[], Awaitable[_T]]) -> _T:
        """One API call with no rate-limit sleeping: a 429 is `StreamRateLimited` (the pacer holds)."""
        try:
            return await self._adapter.call(action, call, retries=0)
        except ChannelError as exc:
            if isinstance(exc.__cause__, RetryAfter):
                raise StreamRateLimited(self._adapter.name, _retry_after_s(exc.__cause__)) from exc.__cause__
            raise

    async def _paced(self, call: Callable[[], Awaitable[_T]]) -> _T:
        return await self._pacer.paced(call)


async def close_abandoned(adapter: TelegramAdapter, chat: str, thread: str | None, message_ids: Sequence[str], ending: str) -> None:
    """Follow up the last message of a stream a crash left half-shown with `ending` (as a reply to it).

    Its text is not known after the restart, so it is answered, not edited.
    """
    last = message_ids[-1] if message_ids else None
    await adapter.send(Outbound(chat=chat, thread=thread, text=ending, reply_to=last))


def _draft_window(text: str) -> str:
    """Return what a draft shows of `text`: all of it, or its last message's worth."""
    if _units(text) <= LIMIT:
        return text
    return plain(text, LIMIT)[-1][0]


def _without_tool_line(text: str) -> str:
    # The core's tool-progress line ("running file_read...") is the last line while a tool runs.
    head, _, last = text.rstrip().rpartition("\n")
    if is_tool_progress_line(last):
        return head.rstrip()
    return text.rstrip()

