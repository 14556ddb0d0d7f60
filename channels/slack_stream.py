"""Slack streamed replies: chat streams in threads, post + `chat.update` everywhere else.

A reply in a thread to a user we know (the adapter remembers who asked in which thread) opens a
Slack chat stream: `chat.startStream` with the first text, `chat.appendStream` with what the
text grew by, `chat.stopStream` at the end. A stream only appends, so whenever the visible text
stops extending what was appended (a tool-progress line replaced, a chunk boundary moved) the
stream is stopped and that message is edited with `chat.update` from then on. The same fallback
covers what Slack refuses:

- the workspace or the token cannot stream (`missing_scope`, `unknown_method`,
  `not_allowed_token_type`, ...): this reply is posted with `chat.postMessage` and edited, and the
  adapter stops trying streams (logged once);
- one stream cannot start (`missing_recipient_user_id`, `invalid_arguments`, ...): this reply
  posts instead;
- a stream that ended under us (`message_not_in_streaming_state` after Slack's ~5 minute
  lifetime, `stopped_by_user`, `streaming_state_conflict`): the message is edited instead.

Outside threads (or for a thread whose asker we do not know, say after a restart) the reply is
posted and edited from the start. Either way the pacing, coalescing, overflow (4,000 characters
per message, like `send`) and the endings are `EditStream`'s; text is escaped like `send`.

`status(text)` sets the assistant thread status (`assistant.threads.setStatus`, scope
`chat:write`, the one replies need: Slack folded `assistant:write` into it in March 2026 and
will stop accepting the old scope), and the adapter's `typing` sets "is thinking..." in a thread the same way:
the typing indicator Slack lacks. In a thread the core shows the running tool there
(`StreamStatus.shows_status`) instead of as a line in the text, so the text only grows and the
chat stream stays one stream. The end of a stream clears the status (a posted reply clears it
on Slack's side). A refused status is logged once and the adapter stops asking; the tool line
then goes in the text.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.base import ChannelError, ReplyProgress
from channels.slack_payloads import escape
from channels.streaming import ChatPacer, EditStream, StreamRateLimited

__all__ = ["Askers", "SlackStream", "StreamSupport", "close_abandoned_stream", "set_thread_status"]

TEXT_LIMIT: Final = 4000
_ASKERS_KEPT: Final = 2048
# The workspace or token cannot stream at all: stop trying for this adapter.
_NO_STREAMS: Final = frozenset(
    {
        "missing_scope",
        "unknown_method",
        "not_allowed_token_type",
        "method_deprecated",
        "feature_not_enabled",
        "not_allowed",
        "team_not_allowed",
    }
)
# This message is no longer a live stream: edit it instead.
_STREAM_GONE: Final = frozenset(
    {"message_not_in_streaming_state", "stopped_by_user", "streaming_state_conflict", "message_not_found"}
)
_log: Final = logging.getLogger(__name__)
# What a reopened stream (after a restart) knows it appended: nothing a text starts with.
_UNKNOWN_STREAM: Final = "\x00"

_T = TypeVar("_T")
Api = Callable[[str, Awaitable[Any]], Awaitable[Any]]


@dataclass(slots=True)
class StreamSupport:
    """What this adapter learnt the workspace refuses (kept for the adapter's life), and the
    threads whose assistant status it set and has not cleared."""

    streams: bool = True
    status: bool = True
    statuses: set[tuple[str, str]] = field(default_factory=set)


async def set_thread_status(
    *, name: str, client: AsyncWebClient, api: Api, support: StreamSupport, chat: str, thread: str, text: str
) -> None:
    """Set (or with "" clear) a thread's assistant status; never raises (a refusal is logged once)."""
    if not support.status:
        return
    try:
        await api(
            "assistant.threads.setStatus",
            client.assistant_threads_setStatus(channel_id=chat, thread_ts=thread, status=text),
        )
    except ChannelError as exc:
        code, cause = _error_code(exc)
        if code in _NO_STREAMS:
            support.status = False
            data = cause.response.data if cause is not None else None
            needed = data.get("needed") if isinstance(data, Mapping) else None
            _log.warning(
                "%s: assistant status refused (%s%s); the thread status needs the bot scope chat:write "
                "(which replies need too), and replies still arrive without it", name, code,
                f", Slack says it needs {needed}" if isinstance(needed, str) and needed else "",
            )
        else:
            _log.info("%s: assistant status not set: %s", name, exc)
        return
    if text:
        support.statuses.add((chat, thread))
    else:
        support.statuses.discard((chat, thread))


@dataclass(slots=True)
class Askers:
    """Who asked last in each (chat, thread): Slack streams need the recipient user and team."""

    team_id: str | None = None
    _users: OrderedDict[tuple[str, str], str] = field(default_factory=OrderedDict)

    def remember(self, chat: str, thread: str, user: str, team_id: str | None) -> None:
        """Record that `user` asked in `thread` of `chat` (the newest few thousand are kept)."""
        self._users[(chat, thread)] = user
        self._users.move_to_end((chat, thread))
        if team_id:
            self.team_id = team_id
        while len(self._users) > _ASKERS_KEPT:
            self._users.popitem(last=False)

    def recipient(self, chat: str, thread: str) -> tuple[str, str] | None:
        """Return (team id, user id) of the asker in this thread, or None when unknown."""
        user = self._users.get((chat, thread))
        return None if user is None or self.team_id is None else (self.team_id, user)


def _error_code(exc: BaseException) -> tuple[str | None, SlackApiError | None]:
    cause = exc.__cause__
    if not isinstance(cause, SlackApiError):
        return None, None
    data = cause.response.data
    code = data.get("error") if isinstance(data, Mapping) else None
    return (code if isinstance(code, str) else None), cause


class SlackStream:
    """One streamed Slack reply (a `ReplyStream`); see the module docstring.

    Made with `existing` (`SlackAdapter.reopen_stream`), it takes over the messages a crashed
    process's reply posted: `finish` stops what may still stream and edits them into the final text.
    """

    def __init__(
        self,
        *,
        name: str,
        client: AsyncWebClient,
        api: Api,
        chat: str,
        thread: str | None,
        recipient: tuple[str, str] | None,
        pacer: ChatPacer,
        support: StreamSupport,
        existing: Sequence[str] = (),
    ) -> None:
        self._name, self._client, self._api = name, client, api
        self._chat, self._thread = chat, thread
        self._recipient = recipient
        self._support = support
        self._native = thread is not None and recipient is not None and support.streams and not existing
        # ts of a live chat stream -> the text appended so far. A crashed process's messages
        # (`existing`) may still be live streams with unknown text: the first edit of each stops
        # it (best effort) and edits it with chat.update, as for a stream the text left behind.
        self._streaming: dict[str, str] = dict.fromkeys(existing, _UNKNOWN_STREAM)
        self._edits = EditStream(
            channel=name,
            post=self._post,
            edit=self._edit,
            delete=self._delete,
            limit=TEXT_LIMIT,
            pacer=pacer,
            render=escape,
            existing=existing,
        )

    @property
    def message_ids(self) -> Sequence[str]:
        """Return the ts of every message this reply posted, in order."""
        return self._edits.message_ids

    @property
    def native(self) -> bool:
        """Return True while new messages of this reply start as Slack chat streams."""
        return self._native

    async def update(self, text: str) -> None:
        """Show `text` (paced, coalesced; see `EditStream.update`)."""
        await self._edits.update(text)

    async def finish(self, text: str, *, progress: ReplyProgress | None = None) -> None:
        """Show the final `text` and stop every live stream (see `EditStream.finish`)."""
        try:
            await self._edits.finish(text, progress=progress)
        finally:
            await self._end()

    async def abort(self, ending: str) -> None:
        """End with `ending` after the partial text, then stop every live stream."""
        try:
            await self._edits.abort(ending)
        finally:
            await self._end()

    @property
    def shows_status(self) -> bool:
        """Return True while tool progress can show as the thread's status (a thread; status not refused)."""
        return self._thread is not None and self._support.status

    async def status(self, text: str) -> None:
        """Set the thread's assistant status ("is thinking...", "running file_read..."); never raises.

        Outside a thread there is no status to set; an empty `text` clears it.
        """
        if self._thread is None:
            return
        await set_thread_status(
            name=self._name, client=self._client, api=self._api, support=self._support,
            chat=self._chat, thread=self._thread, text=text,
        )

    # -- the three platform calls EditStream makes ------------------------------------------------

    async def _post(self, text: str) -> str:
        if self._native and self._support.streams and self._recipient is not None and self._thread is not None:
            team, user = self._recipient
            try:
                answer = await self._guard(
                    "chat.startStream",
                    self._client.chat_startStream(
                        channel=self._chat,
                        thread_ts=self._thread,
                        markdown_text=text,
                        recipient_team_id=team,
                        recipient_user_id=user,
                    ),
                )
            except _Refused as refused:
                self._native = False
                if refused.code in _NO_STREAMS:
                    self._support.streams = False
                    _log.warning("%s: chat streams refused (%s); replies are edited instead", self._name, refused.code)
                else:
                    _log.info("%s: chat.startStream refused (%s); posting instead", self._name, refused.code)
            else:
                ts = str(answer["ts"])
                self._streaming[ts] = text
                return ts
        answer = await self._guard(
            "chat.postMessage", self._client.chat_postMessage(channel=self._chat, text=text, thread_ts=self._thread)
        )
        return str(answer["ts"])

    async def _edit(self, ts: str, text: str) -> None:
        appended = self._streaming.get(ts)
        if appended is not None and text.startswith(appended):
            try:
                await self._guard(
                    "chat.appendStream",
                    self._client.chat_appendStream(channel=self._chat, ts=ts, markdown_text=text[len(appended):]),
                )
                self._streaming[ts] = text
                return
            except _Refused as refused:
                _log.info("%s: stream %s ended (%s); editing it instead", self._name, ts, refused.code)
                self._streaming.pop(ts, None)
        elif appended is not None:
            await self._stop(ts)  # the text no longer extends the stream: edit from now on
        await self._update(ts, text)

    async def _update(self, ts: str, text: str) -> None:
        # a streamed message shows a markdown block: blocks=[] replaces it with the new text
        await self._guard("chat.update", self._client.chat_update(channel=self._chat, ts=ts, text=text, blocks=[]))

    async def _delete(self, ts: str) -> None:
        await self._stop(ts)
        await self._guard("chat.delete", self._client.chat_delete(channel=self._chat, ts=ts))

    async def _stop(self, ts: str) -> None:
        """Stop a live stream (best effort: Slack ends it after its lifetime anyway)."""
        if self._streaming.pop(ts, None) is None:
            return
        try:
            await self._guard("chat.stopStream", self._client.chat_stopStream(channel=self._chat, ts=ts))
        except (_Refused, ChannelError) as exc:
            _log.info("%s: chat.stopStream %s: %s", self._name, ts, exc)

    async def _end(self) -> None:
        for ts in list(self._streaming):
            await self._stop(ts)
        if self._thread is not None and (self._chat, self._thread) in self._support.statuses:
            await self.status("")  # a chat stream's end does not clear it, unlike a posted reply

    async def _guard(self, method: str, call: Awaitable[_T]) -> _T:
        """Run one Web API call: a 429 becomes `StreamRateLimited`, a stream refusal `_Refused`."""
        try:
            result: _T = await self._api(method, call)
            return result
        except ChannelError as exc:
            code, cause = _error_code(exc)
            if cause is not None and cause.response.status_code == 429:
                raise StreamRateLimited(self._name, _retry_after(cause)) from exc
            if method in ("chat.startStream", "chat.appendStream", "chat.stopStream") and code is not None:
                if code in _NO_STREAMS or code in _STREAM_GONE or method == "chat.startStream":
                    raise _Refused(self._name, method, code) from exc
            raise


class _Refused(ChannelError):
    """Slack refused a stream call with `code`; the stream falls back to posts and edits."""

    def __init__(self, channel: str, method: str, code: str) -> None:
        self.method, self.code = method, code
        super().__init__(channel, f"{method}: {code}")


def _retry_after(exc: SlackApiError) -> float:
    value = exc.response.headers.get("Retry-After") or exc.response.headers.get("retry-after")
    try:
        return float(value) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


async def close_abandoned_stream(
    *, client: AsyncWebClient, api: Api, chat: str, thread: str | None, message_ids: Sequence[str], ending: str
) -> None:
    """End what a crash left: stop a stream still live, then follow up with `ending` in its thread."""
    for ts in message_ids:
        try:
            await api("chat.stopStream", client.chat_stopStream(channel=chat, ts=ts))
        except ChannelError as exc:  # most often not a live stream any more (or never one)
            _log.debug("chat.stopStream %s after a restart: %s", ts, exc)
    await api("chat.postMessage", client.chat_postMessage(channel=chat, text=escape(ending), thread_ts=thread))
