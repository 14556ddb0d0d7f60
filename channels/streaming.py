"""A platform-neutral streamed reply: post a message, then edit it as the text grows.

`EditStream` implements `ReplyStream` from what an adapter gives it: `post(text) -> id`,
`edit(id, text)`, an optional `delete(id)`, the platform's message limit and how the platform
measures it (characters for Discord and Slack, UTF-16 units for Telegram). The rules:

- Pacing: every platform call of one chat goes through that chat's `ChatPacer`, so a chat sees
  at most one call per `interval_s` however many streams (sessions) write into it, counted from
  when the previous call came back (the platform counts arrivals; a slow call followed at its
  slot's pace by a fast one would reach it closer together). The first
  post of a reply goes out at once when the chat has been quiet for `interval_s`.
- Coalescing: `update` only records the latest text and returns; one flusher task per stream
  shows the newest text when the pacer allows. Texts in between are never sent, and a message is
  never edited to the text it already shows.
- Settling: an edit whose slot had to be waited for holds back a moment (`settle`, 0.3 s at
  most, a quarter of the interval); when the reply ends meanwhile the slot is given back unused
  (`ChatPacer.give_back`) and the final text goes out in it. Otherwise an answer that ends just
  after an edit shows its last words one whole interval later, in a second call. The first
  post never waits.
- Failures: an intermediate post or edit that fails is logged, and the next flush retries with
  the newest text; a `StreamRateLimited` (the adapter's translation of a 429) holds the whole
  chat for `retry_after` seconds.
- Overflow: past the limit the text continues in a new message, split like `send` splits
  (paragraph, line, word; a code fence cut in two is closed and reopened).
- Order: when the adapter posts a message of its own into the chat while a reply streams (an
  approval prompt, a notice; `ChatPacer.posted_by_other`), the streamed messages are removed at
  the next change and the text goes on below it, so the answer is always the last message.
- `finish` edits the first message into chunk 1 of the final text and continues with the
  following messages (edited, or posted when the stream had fewer), following the
  `ReplyProgress` protocol; messages the final text no longer needs are deleted (or, without
  `delete`, emptied to a "…"). `abort(ending)` appends `ending` to the partial text, or posts it
  when it does not fit.
- Reopening: made with `existing` (the ids a crashed process's stream posted), the stream
  starts with those messages and no known text, so `finish` edits them into the final text
  (a restart's replay: the half-shown reply is replaced, not followed).

Lifecycle: the flusher task is created on the first deferred update and always joined by
`finish` / `abort`; without them it ends by itself after the last pending flush, so a stream
the core forgets holds no task forever.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, NamedTuple, TypeVar

from channels.base import ChannelError, ChannelRefused, ReplyProgress
from channels.chunking import chunk_text

__all__ = ["ChatPacer", "EditStream", "PacerBook", "Slot", "StreamRateLimited", "settle", "split_to_limit"]

_log: Final = logging.getLogger(__name__)
# How often `finish` and `abort` wait out a rate limit before giving up with ChannelError.
_FINAL_ATTEMPTS: Final = 5
_MAX_HOLD_S: Final = 60.0
RECENT_CHATS: Final = 1024  # pacers a book keeps for chats nobody streams to now
_EMPTIED: Final = "…"

Post = Callable[[str], Awaitable[str]]
Edit = Callable[[str, str], Awaitable[None]]
Delete = Callable[[str], Awaitable[None]]
Measure = Callable[[str], int]
_R = TypeVar("_R")
# Consecutive failed intermediate calls after which the flusher rests until the next update.
_MAX_FAILURES: Final = 3
# `settle`: how long an edit in a slot it waited for holds back, at most a quarter of the chat's
# interval: a provider hands on text every 0.2 s while the model writes (`READ_GAP_S`), and the
# end of a reply follows its last text within milliseconds, so an answer that ends up to one
# read after the slot opened gets its final text into that slot.
_SETTLE_S: Final = 0.3


class StreamRateLimited(ChannelError):
    """The platform asked us to wait `retry_after` seconds (a 429); the adapter raises it."""

    def __init__(self, channel: str, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(channel, f"rate limited, retry after {retry_after:g}s")


class Slot(NamedTuple):
    """A slot taken from a `ChatPacer`: its number, and how long it was waited for."""

    ticket: int
    waited_s: float


class ChatPacer:
    """Space the platform calls of one chat at least `interval_s` apart (a shared clock)."""

    __slots__ = ("interval_s", "_next_at", "_taken_at", "_lock", "calls", "others", "__weakref__")

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next_at = 0.0
        self._taken_at = 0.0
        self._lock = asyncio.Lock()
        self.calls = 0
        self.others = 0  # messages posted into the chat by anything but a stream (see `posted_by_other`)

    def posted_by_other(self) -> None:
        """Record that the adapter posted a message of its own into this chat (an approval
        prompt, a notice, a plain reply): a stream shown above it moves below it."""
        self.others += 1

    async def slot(self) -> Slot:
        """Wait for this chat's next free slot and take it (cancellable while waiting)."""
        async with self._lock:
            loop = asyncio.get_running_loop()
            delay = self._next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            self._taken_at = loop.time()
            self._next_at = self._taken_at + self.interval_s
            self.calls += 1
            return Slot(self.calls, max(delay, 0.0))

    def give_back(self, slot: Slot) -> None:
        """Return `slot` unused (no call was made in it): the next taker may go at once. Nothing
        changes when anything happened since (another slot taken, a call answered, a hold)."""
        if slot.ticket == self.calls and self._next_at == self._taken_at + self.interval_s:
            self._next_at = self._taken_at
            self.calls -= 1

    def answered(self) -> None:
        """Record that the call of the slot just taken came back: the next slot is `interval_s`
        after this, not only after the slot began, since the platform counts when a call
        arrives: a slow call that reached it late must not be followed closely by a fast one."""
        self._next_at = max(self._next_at, asyncio.get_running_loop().time() + self.interval_s)

    def hold(self, seconds: float) -> None:
        """Give the chat no slot for `seconds` from now (the platform's retry_after)."""
        until = asyncio.get_running_loop().time() + min(max(seconds, 0.0), _MAX_HOLD_S)
        self._next_at = max(self._next_at, until)

    async def paced(self, call: Callable[[], Awaitable[_R]]) -> _R:
        """Run one call that must land (a stream's final text) in the chat's pace, waiting out
        rate limits a few times; the last `StreamRateLimited` is raised."""
        for attempt in range(_FINAL_ATTEMPTS):
            await self.slot()
            try:
                return await call()
            except StreamRateLimited as exc:
                if attempt == _FINAL_ATTEMPTS - 1:
                    raise
                self.hold(exc.retry_after)
            finally:
                self.answered()
        raise AssertionError("unreachable")


async def settle(interval_s: float) -> None:
    """Hold back an edit `_SETTLE_S` (at most a quarter of `interval_s`) in a slot that had to be
    waited for, so that a reply ending meanwhile shows its final text in the slot instead: see
    the module docstring (Settling). Cancelled when the reply ends."""
    await asyncio.sleep(min(_SETTLE_S, interval_s / 4))


class PacerBook:
    """One `ChatPacer` per chat for one adapter, so streams in one chat share its pace.

    The book holds the pacers of the `RECENT_CHATS` chats used last, and any other pacer a
    stream still holds (weakly: it leaves with its last stream), so a bot that meets new
    chats for weeks keeps a bounded book. A chat whose pacer left starts a fresh one: its
    pace (at most a `_MAX_HOLD_S` hold) was long over.
    """

    __slots__ = ("interval_s", "_recent", "_held")

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._recent: OrderedDict[str, ChatPacer] = OrderedDict()
        self._held: weakref.WeakValueDictionary[str, ChatPacer] = weakref.WeakValueDictionary()

    def size(self) -> int:
        """Return how many pacers the book holds strongly (at most `RECENT_CHATS`; not `__len__`,
        so an empty book is still true)."""
        return len(self._recent)

    def pacer(self, chat: str) -> ChatPacer:
        """Return the pacer of `chat`, made on first use."""
        found = self._recent.get(chat)
        if found is not None:
            self._recent.move_to_end(chat)
            return found
        found = self._held.get(chat)
        if found is None:
            found = self._held[chat] = ChatPacer(self.interval_s)
        self._recent[chat] = found
        if len(self._recent) > RECENT_CHATS:
            self._recent.popitem(last=False)
        return found


def split_to_limit(text: str, limit: int, measure: Measure = len) -> list[str]:
    """Split `text` like `chunk_text`, so that `measure` of every chunk is at most `limit`."""
    chars = limit
    while True:
        chunks = chunk_text(text, chars)
        longest = max((measure(chunk) for chunk in chunks), default=0)
        if longest <= limit:
            return chunks
        # measure counts at least one unit per character, so this shrinks towards the answer
        chars = max(16, min(chars - 1, chars * limit // longest))


class EditStream:
    """One reply streamed by post-then-edit; see the module docstring for the rules."""

    def __init__(
        self,
        *,
        channel: str,
        post: Post,
        edit: Edit,
        limit: int,
        pacer: ChatPacer,
        measure: Measure = len,
        delete: Delete | None = None,
        render: Callable[[str], str] | None = None,
        existing: Sequence[str] = (),
    ) -> None:
        self._channel = channel
        self._post, self._edit, self._delete = post, edit, delete
        self._limit, self._measure = limit, measure
        self._pacer = pacer
        self._render = render or (lambda text: text)
        # `existing`: messages a previous process posted (a stream reopened after a restart);
        # what they show is unknown (""), so `finish` edits every one it keeps
        self._ids: list[str] = list(existing)
        self._shown: list[str] = [""] * len(self._ids)  # what each message in `_ids` shows now
        self._latest_text = ""  # the newest text from `update`
        self._latest_chunks: list[str] | None = []  # its chunks (None: not split yet)
        self._lock = asyncio.Lock()  # one platform call of this stream at a time
        self._flusher: asyncio.Task[None] | None = None
        self._ended = False
        self._others_seen = pacer.others

    @property
    def message_ids(self) -> Sequence[str]:
        """Return the platform ids of the messages this stream posted, in order."""
        return tuple(self._ids)

    @property
    def ended(self) -> bool:
        """Return True once `finish` or `abort` began."""
        return self._ended

    # -- streaming ---------------------------------------------------------------------------

    async def update(self, text: str) -> None:
        """Record `text` as the newest visible text; the flusher shows it when the chat may."""
        if self._ended:
            return
        if not text.strip():
            return  # platforms refuse empty messages; nothing worth showing yet
        # split only when a flush shows it: most texts are superseded before that (coalesced)
        self._latest_text, self._latest_chunks = text, None
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())

    @property
    def _latest(self) -> list[str]:
        """Return the chunks of the newest text from `update`, split on first use."""
        if self._latest_chunks is None:
            self._latest_chunks = split_to_limit(self._render(self._latest_text), self._limit, self._measure)
        return self._latest_chunks

    def _pending(self) -> int | None:
        """Return the index of the first message that does not show the newest text, or None."""
        for index, chunk in enumerate(self._latest):
            if index >= len(self._shown) or self._shown[index] != chunk:
                return index
        return None

    async def _flush_loop(self) -> None:
        failures = 0
        while not self._ended and failures < _MAX_FAILURES and self._pending() is not None:
            slot = await self._pacer.slot()
            if slot.waited_s > 0 and self._ids:
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
                    if await self._unbury():
                        slot = await self._pacer.slot()  # the removal took this turn's slot
                    index = self._pending()
                    if index is None:
                        self._pacer.give_back(slot)
                        return
                    try:
                        await self._show(index, self._latest[index])
                    finally:
                        self._pacer.answered()
                    failures = 0
                except StreamRateLimited as exc:
                    _log.info("%s: stream update rate limited, holding %.1fs", self._channel, exc.retry_after)
                    self._pacer.hold(exc.retry_after)
                except ChannelError as exc:
                    # the next flush retries with the newest text; the final text is what counts
                    _log.warning("%s: stream update failed: %s", self._channel, exc)
                    failures += 1
                except Exception:  # an adapter bug must not kill the turn: `update` never raises
                    _log.exception("%s: stream update failed unexpectedly", self._channel)
                    failures += 1

    async def _unbury(self) -> bool:
        """If another message was posted into the chat below ours (an approval prompt), remove
        ours, so the text goes on in a new message under it: the answer ends up last.

        Returns True when it removed messages."""
        if self._pacer.others == self._others_seen:
            return False
        self._others_seen = self._pacer.others
        if not self._ids:
            return False
        for index in range(len(self._ids)):
            await self._retire(index, retry=False)
        self._ids.clear()
        self._shown.clear()
        return True

    async def _show(self, index: int, chunk: str) -> None:
        """Make message `index` show `chunk`: an edit, or a post when it does not exist yet."""
        if index < len(self._ids):
            await self._edit(self._ids[index], chunk)
            self._shown[index] = chunk
        else:
            message_id = await self._post(chunk)
            self._ids.append(message_id)
            self._shown.append(chunk)

    async def _stop_flusher(self) -> None:
        """Mark the stream ended and wait until no intermediate call is in flight."""
        self._ended = True
        flusher, self._flusher = self._flusher, None
        if flusher is not None and not flusher.done():
            async with self._lock:  # an edit in flight completes; we know what it showed
                flusher.cancel()
            await asyncio.wait([flusher])

    # -- ending ------------------------------------------------------------------------------

    async def finish(self, text: str, *, progress: ReplyProgress | None = None) -> None:
        """Replace what was shown with the final `text`, message by message.

        Chunk 1 is the edit of the first message; chunks `progress` counts as accepted are
        skipped and each accepted chunk advances it. A message that refuses the edit (deleted
        by a user) gets its chunk posted anew. Raises `ChannelError` when the platform still
        refuses or rate-limits after the retries.
        """
        await self._stop_flusher()
        chunks = split_to_limit(self._render(text), self._limit, self._measure)
        skip = progress.done if progress is not None else 0
        async with self._lock:
            if skip == 0:
                await self._unbury()
            for index, chunk in enumerate(chunks):
                if index < skip:
                    continue
                await self._final_show(index, chunk)
                if progress is not None:
                    progress.advance()
            for index in range(len(chunks), len(self._ids)):
                await self._retire(index)

    async def _final_show(self, index: int, chunk: str) -> None:
        if index < len(self._ids) and self._shown[index] == chunk:
            return  # already showing exactly this
        try:
            await self._paced(lambda: self._show(index, chunk))
        except ChannelRefused:
            if index >= len(self._ids):
                raise
            _log.warning("%s: message %s refused the final edit; posting it anew", self._channel, self._ids[index])
            message_id = await self._paced(lambda: self._post(chunk))
            self._ids[index], self._shown[index] = message_id, chunk

    async def _retire(self, index: int, *, retry: bool = True) -> None:
        """Remove message `index`, which the text no longer needs (without `delete`: empty it)."""
        message_id = self._ids[index]
        run = self._paced if retry else self._once
        try:
            if self._delete is not None:
                await run(lambda: self._delete_one(message_id))
            elif self._shown[index] != _EMPTIED:
                await run(lambda: self._edit(message_id, _EMPTIED))
                self._shown[index] = _EMPTIED
        except ChannelError as exc:
            _log.warning("%s: could not remove streamed message %s: %s", self._channel, message_id, exc)

    async def _delete_one(self, message_id: str) -> None:
        assert self._delete is not None
        await self._delete(message_id)

    async def abort(self, ending: str) -> None:
        """End the stream with `ending` after the partial text (in the last message if it fits)."""
        await self._stop_flusher()
        async with self._lock:
            if self._ids:
                last = len(self._ids) - 1
                joined = f"{self._shown[last].rstrip()}\n\n{self._render(ending)}"
                if self._measure(joined) <= self._limit and self._shown[last] != _EMPTIED:
                    try:
                        await self._paced(lambda: self._show(last, joined))
                        return
                    except ChannelRefused as exc:
                        _log.warning("%s: could not append the ending: %s", self._channel, exc)
            for chunk in split_to_limit(self._render(ending), self._limit, self._measure):
                await self._paced(lambda: self._show(len(self._ids), chunk))

    async def _once(self, call: Callable[[], Awaitable[_R]]) -> _R:
        """Run one call in the chat's pace, without retrying a rate limit."""
        await self._pacer.slot()
        try:
            return await call()
        finally:
            self._pacer.answered()

    async def _paced(self, call: Callable[[], Awaitable[_R]]) -> _R:
        return await self._pacer.paced(call)

