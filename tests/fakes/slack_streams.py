"""What FakeSlack's messages look like to a user: posts, edits, chat streams and the assistant status.

`SlackMessages` answers `chat.update`, `chat.delete`, `chat.startStream`, `chat.appendStream`,
`chat.stopStream` and `assistant.threads.setStatus` the way Slack does (as far as its reference
and the behaviour peers report go):

- A stream is a reply in a thread (`thread_ts` required) to one user: `recipient_team_id` and
  `recipient_user_id` are both required (`missing_recipient_team_id` /
  `missing_recipient_user_id`). It is `in_progress` until `chat.stopStream`; appending to or
  stopping a stream that is not (stopped, expired after `stream_lifetime_s`, or a plain
  message) answers `message_not_in_streaming_state`. One `markdown_text` holds at most 12,000
  characters (`msg_too_long`).
- `stream_scope = False` answers the three stream methods with `missing_scope` (a workspace that
  has not granted `chat:write` for streaming, or an older plan); `status_scope = False` does the
  same for `assistant.threads.setStatus`, naming `chat:write` as needed: the method's documented
  bot scope (Slack's 2026-03-05 changelog: it takes `chat:write`, and `assistant:write` only
  until that is retired). It also needs a thread.
- A streamed message's text lives in a markdown block: `chat.update` without `blocks` keeps the
  blocks (so the visible text does not change), as on Slack; with `blocks=[]` the text shows.
- `update_min_interval_s` (default off) answers a second `chat.update` / `chat.appendStream` in one
  channel within that time with HTTP 429 `ratelimited` and `Retry-After`.

Every visible change is recorded in `changes` with its `time.monotonic()`, so tests and
benches can see when text became visible and how often it changed.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = ["MAX_MARKDOWN_CHARS", "SlackMessage", "SlackMessages", "VisibleChange"]

MAX_MARKDOWN_CHARS: Final = 12_000
METHODS: Final = frozenset(
    {
        "chat.update",
        "chat.delete",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
        "assistant.threads.setStatus",
    }
)
_STREAM_METHODS: Final = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})
_ts = itertools.count(1)


@dataclass(frozen=True, slots=True)
class VisibleChange:
    """One change a user could see: `kind` is post, update, delete, stream_start, append, stop, status."""

    at: float
    kind: str
    channel: str
    ts: str
    text: str


@dataclass(slots=True)
class SlackMessage:
    """One message as Slack holds it; `visible` is what a client shows."""

    channel: str
    ts: str
    thread_ts: str | None
    text: str = ""
    markdown: str | None = None  # set for streamed messages: the markdown block's text
    state: str = "plain"  # plain | in_progress | completed
    started_at: float = 0.0
    deleted: bool = False

    @property
    def visible(self) -> str:
        return self.markdown if self.markdown is not None else self.text


@dataclass
class SlackMessages:
    """The messages of a FakeSlack workspace; see the module docstring."""

    stream_scope: bool = True
    status_scope: bool = True
    stream_lifetime_s: float = 300.0
    update_min_interval_s: float | None = None
    messages: dict[str, SlackMessage] = field(default_factory=dict)
    changes: list[VisibleChange] = field(default_factory=list)
    statuses: list[tuple[float, str, str, str]] = field(default_factory=list)  # (at, channel, thread, status)
    _last_update: dict[str, float] = field(default_factory=dict)

    def visible(self, channel: str | None = None) -> list[str]:
        """Return the texts of the live messages (of `channel`), oldest first."""
        return [m.visible for m in self.messages.values() if not m.deleted and channel in (None, m.channel)]

    def record_post(self, channel: str, ts: str, text: str, thread_ts: str | None) -> None:
        """Register a chat.postMessage (FakeSlack answers it itself)."""
        self.messages[ts] = SlackMessage(channel=channel, ts=ts, thread_ts=thread_ts, text=text)
        self._change("post", channel, ts, text)

    def _change(self, kind: str, channel: str, ts: str, text: str) -> None:
        self.changes.append(VisibleChange(time.monotonic(), kind, channel, ts, text))

    def answer(self, method: str, args: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        """Return (HTTP status, JSON body, headers) for one of `METHODS`."""
        if method in _STREAM_METHODS and not self.stream_scope:
            return _missing_scope("chat:write")
        if method == "assistant.threads.setStatus":
            return self._set_status(args)
        channel = args.get("channel")
        if not isinstance(channel, str) or not channel:
            return _fail("channel_not_found")
        if method in ("chat.update", "chat.appendStream"):
            limited = self._rate_limit(channel)
            if limited is not None:
                return limited
        if method == "chat.startStream":
            return self._start(channel, args)
        message = self.messages.get(str(args.get("ts")))
        if message is None or message.deleted or message.channel != channel:
            return _fail("message_not_found") if method in ("chat.update", "chat.delete") else _fail(
                "message_not_in_streaming_state"
            )
        if method == "chat.update":
            return self._update(message, args)
        if method == "chat.delete":
            message.deleted = True
            self._change("delete", channel, message.ts, "")
            return _ok({"channel": channel, "ts": message.ts})
        self._expire(message)
        if message.state != "in_progress":
            return _fail("message_not_in_streaming_state")
        text, error = _markdown(args)
        if error is not None:
            return _fail(error)
        message.markdown = (message.markdown or "") + text
        if method == "chat.appendStream":
            self._change("append", channel, message.ts, message.visible)
        else:
            message.state = "completed"
            self._change("stop", channel, message.ts, message.visible)
        return _ok({"channel": channel, "ts": message.ts})

    def _rate_limit(self, channel: str) -> tuple[int, dict[str, Any], dict[str, str]] | None:
        if self.update_min_interval_s is None:
            return None
        now = time.monotonic()
        last = self._last_update.get(channel)
        if last is not None and now - last < self.update_min_interval_s:
            return 429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}
        self._last_update[channel] = now
        return None

    def _start(self, channel: str, args: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        thread_ts = args.get("thread_ts")
        if not isinstance(thread_ts, str) or not thread_ts:
            return _fail("invalid_arguments")
        for key in ("recipient_team_id", "recipient_user_id"):
            if not args.get(key):
                return _fail(f"missing_{key}")
        text, error = _markdown(args)
        if error is not None:
            return _fail(error)
        ts = f"{time.time():.0f}.{next(_ts):06d}"
        self.messages[ts] = SlackMessage(
            channel=channel, ts=ts, thread_ts=thread_ts, markdown=text, state="in_progress", started_at=time.monotonic()
        )
        self._change("stream_start", channel, ts, text)
        return _ok({"channel": channel, "ts": ts})

    def _expire(self, message: SlackMessage) -> None:
        if message.state == "in_progress" and time.monotonic() - message.started_at > self.stream_lifetime_s:
            message.state = "completed"

    def expire_streams(self) -> None:
        """End every open stream now, as Slack does after a stream's lifetime."""
        for message in self.messages.values():
            if message.state == "in_progress":
                message.state = "completed"

    def _update(self, message: SlackMessage, args: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        text = args.get("text")
        blocks = args.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        if not isinstance(text, str) or not text:
            return _fail("no_text")
        if len(text) > 40_000:
            return _fail("msg_too_long")
        message.text = text
        if blocks is not None:
            message.markdown = None  # the new blocks (none here) replace the streamed markdown
        self._change("update", message.channel, message.ts, message.visible)
        return _ok({"channel": message.channel, "ts": message.ts, "text": text})

    def _set_status(self, args: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        if not self.status_scope:
            return _missing_scope("chat:write")
        channel, thread_ts, status = args.get("channel_id"), args.get("thread_ts"), args.get("status")
        if not isinstance(channel, str) or not isinstance(thread_ts, str) or not isinstance(status, str):
            return _fail("invalid_arguments")
        now = time.monotonic()
        self.statuses.append((now, channel, thread_ts, status))
        self._change("status", channel, thread_ts, status)
        return _ok({})


def _markdown(args: dict[str, Any]) -> tuple[str, str | None]:
    """Return the text a stream call adds (markdown_text or markdown chunks) or an error code."""
    text = args.get("markdown_text") or ""
    chunks = args.get("chunks") or []
    if isinstance(chunks, str):
        chunks = json.loads(chunks)
    for chunk in chunks:
        if isinstance(chunk, dict) and chunk.get("type") == "markdown_text":
            text += str(chunk.get("text", ""))
    if len(text) > MAX_MARKDOWN_CHARS:
        return "", "msg_too_long"
    return text, None


def _ok(body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, {"ok": True, **body}, {}


def _fail(error: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, {"ok": False, "error": error}, {}


def _missing_scope(needed: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, {"ok": False, "error": "missing_scope", "needed": needed, "provided": "chat:write,im:history"}, {}
