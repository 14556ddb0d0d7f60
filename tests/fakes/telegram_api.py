"""A loopback fake of the Telegram Bot API (the methods the adapter uses), scriptable per test.

Usage::

    async with FakeTelegram() as fake:
        config = {"kind": "telegram", "token": "env:TG", "api_base_url": fake.api_base_url}
        fake.push_message(chat_id=42, user_id=7, text="hi")       # a user writes to the bot
        ...                                                       # run the adapter
        assert fake.sent[0]["text"] == "hello"                    # what the bot sent
        fake.press_button(user_id=7, text="Approve")              # click the last keyboard
        fake.fail_next("sendMessage", status=429, retry_after=0.2)
        fake.drop_connections()                                   # cut in-flight long polls
        fake.push_photo(chat_id=42, user_id=7, data=jpeg)         # a captionless photo
        assert fake.downloads == 1 and fake.uploads[0]["method"] == "sendDocument"

It serves `/bot<token>/<method>` like the real server (form, JSON or query parameters) and
answers in the Bot API's `{"ok": ..., "result" | "error_code", "description"}` shape; an
unknown token gets 401 Unauthorized.  Updates stay queued per bot until confirmed, as on
Telegram: by a later getUpdates whose `offset` passes them, or (once `setWebhook` was
called) by a 2xx answer of the webhook, which the fake POSTs them to in order, with the
`X-Telegram-Bot-Api-Secret-Token` header, retrying every 50 ms until one is accepted.

Files: `push_photo`, `push_document`, `push_voice`, `push_audio` and `push_video_note` queue
a message carrying a file stored in the fake; `getFile` answers its `file_path` (refusing
files over the Bot API's 20 MB as Telegram does), `/file/bot<token>/<path>` streams it in
chunks and counts `downloads`; `sendPhoto` and `sendDocument` take multipart uploads
(`uploads` records them, with their bytes) under Telegram's 50 MB file limit. `sendPhoto` holds
a photo to the Bot API's documented rules: at most 10 MB (else 400 "PHOTO_SAVE_FILE_INVALID",
the name Telegram gives a photo file it will not save), an image it can read (a PNG, JPEG, GIF
or WebP whose header gives its size; else 400 "IMAGE_PROCESS_FAILED"), and "width and height
must not exceed 10000 in total, width and height ratio must be at most 20" (else 400
"PHOTO_INVALID_DIMENSIONS"); the photo message it answers carries that width and height.

Streaming as Telegram allows it: `sendMessageDraft` works in private chats only (400
elsewhere, and for a zero `draft_id`); `fake.without_drafts = True` makes the fake a Bot API
server older than the method (a self-hosted one before Bot API 9.3): it answers it 404 "Not
Found", as Telegram answers any method it does not have; `editMessageText` to the text (and entities and
markup) a message already shows is 400 "message is not modified"; an edit or draft in a chat
less than `edit_gap_s` after its previous one is 429 with `retry_after` (counted in
`rate_limited`); `deleteMessage` removes a message. `visible` records every change a user
could see (send, edit, delete, draft) with its `time.monotonic()` stamp, and `shown(chat)`
what the bot's messages in a chat read now.

`parallel_webhooks()` delivers as Telegram does with `max_connections` (default 40): up to
that many POSTs at once, the updates of one chat in sequence (the next only after the
previous was accepted), different chats concurrently; `webhook_peak` records the most POSTs
that were in flight together.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

import aiohttp
from aiohttp import web

from tests.fakes.loopback import start_app
from tests.fakes.telegram_groups import entities_of, privacy_lets_through

__all__ = ["Call", "FakeTelegram", "DEFAULT_TOKEN", "Visible"]

# the shape BotFather issues (the bot id, a colon, 35 characters): `check` refuses any other
DEFAULT_TOKEN: Final = "123456:AAFakeTestTokenOfTheLoopbackFake_01"
MAX_TEXT_UTF16: Final = 4096
MAX_GET_FILE_BYTES: Final = 20 * 1024 * 1024
MAX_PHOTO_BYTES: Final = 10 * 1024 * 1024
MAX_PHOTO_SIDES: Final = 10_000  # sendPhoto: "width and height must not exceed 10000 in total"
MAX_PHOTO_RATIO: Final = 20  # sendPhoto: "width and height ratio must be at most 20"
MAX_UPLOAD_BYTES: Final = 50 * 1024 * 1024
_FILE_CHUNK: Final = 32 * 1024
_SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
# Parameters whose form value is a plain string, never JSON (a text "123" stays a string).
_RAW_STRINGS: Final = frozenset(
    {"text", "caption", "url", "secret_token", "callback_query_id", "action", "parse_mode", "data"}
)
_WEBHOOK_RETRY_S: Final = 0.05
_LINK_SCHEMES: Final = ("http://", "https://", "tg://")
_ENTITY_TYPES: Final = frozenset(
    {
        "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold", "italic",
        "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote", "code", "pre",
        "text_link", "text_mention", "custom_emoji",
    }
)


@dataclass(slots=True)
class Call:
    """One request the fake received; `status` is set once it was answered (0 = dropped)."""

    method: str
    token: str
    payload: dict[str, Any]
    at: float
    status: int | None = None
    answered_at: float | None = None  # when the answer was handed to the connection


@dataclass(frozen=True, slots=True)
class Visible:
    """One change a user could see: a message sent, edited or deleted, or a draft shown."""

    at: float  # time.monotonic() when the fake accepted it
    chat_id: int
    kind: str  # "send", "edit", "delete" or "draft"
    id: int  # the message id (the draft id for drafts)
    text: str


@dataclass(slots=True)
class _Failure:
    status: int
    retry_after: float | None
    description: str | None
    drop: bool
    html: bool = False


@dataclass(slots=True)
class _File:
    data: bytes
    path: str
    reported_size: int | None  # what the message says (a lying client may understate it)


@dataclass(slots=True)
class _Bot:
    token: str
    id: int
    username: str
    pending: deque[dict[str, Any]] = field(default_factory=deque)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    webhook: dict[str, Any] | None = None
    privacy: bool = False  # BotFather's privacy mode (off here unless a test turns it on)
    admin_in: set[int] = field(default_factory=set)  # group chats where the bot is an admin

    def user(self) -> dict[str, Any]:
        return {"id": self.id, "is_bot": True, "first_name": "Fake Bot", "username": self.username}

    def notify(self) -> None:
        # Waiters hold the old event; setting it wakes them, the fresh one serves the next wait.
        self.changed.set()
        self.changed = asyncio.Event()


class FakeTelegram:
    """Serve the Telegram Bot API on 127.0.0.1 for one or more bot tokens.

    Use as `async with FakeTelegram() as fake:`; the server listens only inside the block.
    """

    def __init__(
        self, *, token: str = DEFAULT_TOKEN, username: str = "fake_bot", edit_gap_s: float = 0.9
    ) -> None:
        self.requests: list[Call] = []
        # Called with each request as it arrives, before it is answered (a test's probe of the client's state then).
        self.on_request: Callable[[Call], None] | None = None
        self.visible: list[Visible] = []  # every change a user could see, in order
        # Edits and drafts in one chat closer together than this get 429 with retry_after, as
        # Telegram's flood control answers (about one change per chat per second).
        self.edit_gap_s = edit_gap_s
        self.rate_limited = 0  # how many edits or drafts were answered 429 by that rule
        self._last_change: dict[int, float] = {}  # chat id -> when its last edit or draft was accepted
        self.webhook_attempts: list[tuple[int, int]] = []  # (update_id, HTTP status or 0)
        self.webhook_peak = 0  # most webhook POSTs in flight at once
        self._webhook_connections = 1  # > 1: parallel delivery (see parallel_webhooks)
        self._chats_in_order = True
        self._posting: set[int] = set()  # update_ids being POSTed right now
        self._bots: dict[str, _Bot] = {}
        self._default_token = token
        self._update_ids = itertools.count(1000)
        self._message_ids = itertools.count(1)
        self._callback_ids = itertools.count(1)
        self._chats: dict[int, dict[str, Any]] = {}
        self._messages: dict[int, tuple[str, dict[str, Any]]] = {}  # message_id -> (token, message)
        self._failures: dict[str, deque[_Failure]] = {}
        self._delays: dict[str, deque[float]] = {}
        self._inflight: dict[int, web.Request] = {}  # id(request) -> request (unhashable)
        self._wake = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._pusher: asyncio.Task[None] | None = None
        self._api_base_url: str | None = None
        self.downloads = 0  # file downloads started on the file endpoint
        self.downloaded_bytes = 0
        self.uploads: list[dict[str, Any]] = []  # accepted sendPhoto / sendDocument, with their bytes
        self.without_drafts = False  # True: an older Bot API server, with no sendMessageDraft (404)
        self._files: dict[str, _File] = {}
        self._file_ids = itertools.count(1)
        self.add_bot(token, username=username)

    # -- set-up -------------------------------------------------------------------------

    @property
    def api_base_url(self) -> str:
        """Return the server root (`http://127.0.0.1:PORT`), the channel's `api_base_url`."""
        if self._api_base_url is None:
            raise RuntimeError("FakeTelegram is not running; use `async with FakeTelegram() as fake:`")
        return self._api_base_url

    @property
    def token(self) -> str:
        """Return the default bot's token."""
        return self._default_token

    def add_bot(self, token: str, *, username: str) -> None:
        """Accept another bot token, with its own update queue and webhook."""
        self._bots[token] = _Bot(token=token, id=int(token.split(":")[0]), username=username)

    async def __aenter__(self) -> FakeTelegram:
        app = web.Application(client_max_size=MAX_UPLOAD_BYTES + 1024 * 1024)  # uploads, as the Bot API
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._serve_file)
        self._runner, port = await start_app(app)
        self._session = aiohttp.ClientSession()
        # Owned by this context (cancelled and awaited in __aexit__), not a TaskGroup: pytest
        # fixtures may enter and exit the fake in different tasks, which a TaskGroup forbids.
        self._pusher = asyncio.create_task(self._push_webhooks())
        self._api_base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._api_base_url = None
        pusher, self._pusher = self._pusher, None
        try:
            if pusher is not None:
                pusher.cancel()
                await asyncio.gather(pusher, return_exceptions=True)
        finally:
            if self._session is not None:
                await self._session.close()
            if self._runner is not None:
                await self._runner.cleanup()

    # -- what happened --------------------------------------------------------------------

    def calls(self, method: str, *, token: str | None = None) -> list[dict[str, Any]]:
        """Return the decoded parameters of every `method` request, in arrival order."""
        token = token or self._default_token
        return [c.payload for c in self.requests if c.method == method and c.token == token]

    @property
    def sent(self) -> list[dict[str, Any]]:
        """Return the parameters of every accepted sendMessage, for any bot, in order."""
        return [c.payload for c in self.requests if c.method == "sendMessage" and c.status == 200]

    def pending(self, *, token: str | None = None) -> list[dict[str, Any]]:
        """Return the updates not yet confirmed by the bot."""
        return list(self._bot(token).pending)

    def webhook(self, *, token: str | None = None) -> dict[str, Any] | None:
        """Return the parameters of the bot's current setWebhook, or None."""
        return self._bot(token).webhook

    def inflight(self, method: str) -> int:
        """Return how many `method` requests are waiting for an answer right now."""
        return sum(1 for r in self._inflight.values() if r.match_info.get("method") == method)

    async def wait_for(self, predicate: Callable[[], object], *, timeout: float = 5.0) -> None:
        """Wait until `predicate()` is true; raise TimeoutError after `timeout` seconds."""
        async with asyncio.timeout(timeout):
            while not predicate():
                await asyncio.sleep(0.01)

    # -- scripting ------------------------------------------------------------------------

    def push_message(
        self,
        chat_id: int,
        user_id: int,
        text: str,
        *,
        chat_type: str = "private",
        thread_id: int | None = None,
        first_name: str | None = None,
        username: str | None = None,
        token: str | None = None,
        reply_to: int | None = None,
        text_mentions: Iterable[tuple[str, dict[str, Any]]] = (),
        via_bot: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a user's text message to the bot and return the update (with `update_id`).

        In a group (`chat_type` "group" or "supergroup") the message carries the entities
        Telegram marks (`telegram_groups.entities_of`; `text_mentions` adds text_mention ones),
        `reply_to` names an earlier message (the bot's or a user's) it replies to, `via_bot` the
        bot whose inline mode posted it; a bot in privacy mode that is not an admin of the chat
        gets only what privacy mode lets through: otherwise nothing is queued and the answer is
        `{"withheld": True, "message": ...}` (no `update_id`).
        """
        bot = self._bot(token)
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name or f"User{user_id}"}
        if username is not None:
            sender["username"] = username
        chat = self._chat(chat_id, chat_type=chat_type, sender=sender, forum=thread_id is not None)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
            "text": text,
        }
        if thread_id is not None:
            message |= {"message_thread_id": thread_id, "is_topic_message": True}
        entities = entities_of(text, text_mentions)
        if entities:
            message["entities"] = entities
        if reply_to is not None:
            message["reply_to_message"] = self._messages[reply_to][1]
        if via_bot is not None:
            message["via_bot"] = via_bot
        if chat_type != "private" and bot.privacy and chat_id not in bot.admin_in:
            if not privacy_lets_through(message, bot_id=bot.id, username=bot.username):
                return {"withheld": True, "message": message}
        self._messages[message["message_id"]] = (bot.token, message)  # so a later message can reply to it
        return self._push(bot, {"message": message})

    def sent_messages(self, chat_id: int) -> list[dict[str, Any]]:
        """Return the messages of `chat_id` the fake holds (the bot's and those pushed), oldest first."""
        return [m for _, (_, m) in sorted(self._messages.items()) if m["chat"]["id"] == chat_id]

    def bot_user(self, *, token: str | None = None) -> dict[str, Any]:
        """Return the bot's own user object (for `text_mentions` and `via_bot`)."""
        return self._bot(token).user()

    def set_privacy(self, on: bool, *, admin_in: Iterable[int] = (), token: str | None = None) -> None:
        """Turn the bot's privacy mode on or off, and make it an admin of the chats `admin_in`."""
        bot = self._bot(token)
        bot.privacy, bot.admin_in = on, set(admin_in)

    # -- files ----------------------------------------------------------------------------

    def add_file(self, data: bytes, *, reported_size: int | None = None, suffix: str = "") -> dict[str, Any]:
        """Store `data` as a Telegram file; return its `file_id`, `file_unique_id` and `file_size`."""
        number = next(self._file_ids)
        file_id = f"FILE{number:04d}-{len(data)}"
        size = len(data) if reported_size is None else reported_size
        self._files[file_id] = _File(data=data, path=f"files/file_{number}{suffix}", reported_size=size)
        return {"file_id": file_id, "file_unique_id": f"U{number:04d}", "file_size": size}

    def push_photo(
        self, chat_id: int, user_id: int, data: bytes, *, caption: str | None = None, token: str | None = None
    ) -> dict[str, Any]:
        """Queue a photo (Telegram sends three sizes; the last is the original) with an optional caption."""
        big = self.add_file(data, suffix=".jpg")
        small = self.add_file(data[: max(1, len(data) // 10)], suffix=".jpg")
        sizes = [small | {"width": 90, "height": 90}, big | {"width": 1280, "height": 960}]
        return self._push_file(chat_id, user_id, {"photo": sizes}, caption=caption, token=token)

    def push_document(
        self, chat_id: int, user_id: int, data: bytes, *, file_name: str, mime_type: str,
        caption: str | None = None, reported_size: int | None = None, token: str | None = None,
    ) -> dict[str, Any]:
        """Queue a file sent as a document (`reported_size`: what the message claims)."""
        doc = self.add_file(data, reported_size=reported_size) | {"file_name": file_name, "mime_type": mime_type}
        return self._push_file(chat_id, user_id, {"document": doc}, caption=caption, token=token)

    def push_voice(
        self, chat_id: int, user_id: int, data: bytes, *, duration: int = 3, token: str | None = None
    ) -> dict[str, Any]:
        """Queue a voice note (OGG/Opus, as Telegram records them)."""
        voice = self.add_file(data, suffix=".oga") | {"duration": duration, "mime_type": "audio/ogg"}
        return self._push_file(chat_id, user_id, {"voice": voice}, caption=None, token=token)

    def push_audio(
        self, chat_id: int, user_id: int, data: bytes, *, file_name: str = "song.mp3",
        mime_type: str = "audio/mpeg", token: str | None = None,
    ) -> dict[str, Any]:
        """Queue an audio file."""
        audio = self.add_file(data) | {"duration": 5, "file_name": file_name, "mime_type": mime_type}
        return self._push_file(chat_id, user_id, {"audio": audio}, caption=None, token=token)

    def push_video_note(self, chat_id: int, user_id: int, data: bytes, *, token: str | None = None) -> dict[str, Any]:
        """Queue a round video note."""
        note = self.add_file(data, suffix=".mp4") | {"length": 240, "duration": 4}
        return self._push_file(chat_id, user_id, {"video_note": note}, caption=None, token=token)

    def _push_file(
        self, chat_id: int, user_id: int, fields: dict[str, Any], *, caption: str | None, token: str | None
    ) -> dict[str, Any]:
        bot = self._bot(token)
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"}
        chat = self._chat(chat_id, chat_type="private", sender=sender, forum=False)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids), "date": int(time.time()), "chat": chat, "from": sender, **fields,
        }
        if caption is not None:
            message["caption"] = caption
        return self._push(bot, {"message": message})

    async def _get_file(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        stored = self._files.get(str(params.get("file_id", "")))
        if stored is None:
            return _error(400, "Bad Request: wrong file_id or the file is temporarily unavailable")
        if len(stored.data) > MAX_GET_FILE_BYTES:
            return _error(400, "Bad Request: file is too big")
        file_id = str(params["file_id"])
        return _ok({"file_id": file_id, "file_unique_id": f"U{file_id}", "file_size": stored.reported_size,
                    "file_path": stored.path})

    async def _serve_file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] not in self._bots:
            return web.Response(status=401, text="Unauthorized")
        path = request.match_info["path"]
        stored = next((f for f in self._files.values() if f.path == path), None)
        if stored is None:
            return web.Response(status=404, text="Not Found")
        self.downloads += 1
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await response.prepare(request)  # chunked: the size is known only to who reads it all
        for start in range(0, len(stored.data), _FILE_CHUNK):
            await response.write(stored.data[start : start + _FILE_CHUNK])
            self.downloaded_bytes += min(_FILE_CHUNK, len(stored.data) - start)
        await response.write_eof()
        return response

    async def _send_upload(self, bot: _Bot, params: dict[str, Any], *, method: str, field: str) -> web.Response:
        upload = params.get(field)
        if not isinstance(upload, dict) or "data" not in upload:
            return _error(400, f"Bad Request: there is no {field} in the request")
        data: bytes = upload["data"]
        if len(data) > MAX_UPLOAD_BYTES:
            return _error(413, "Request Entity Too Large")
        size = _photo_size(data) if field == "photo" else None
        if field == "photo":
            refusal = _photo_refusal(data, size)
            if refusal is not None:
                return _error(400, f"Bad Request: {refusal}")
        chat_id = int(params["chat_id"])
        stored = self.add_file(data)
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chats.get(chat_id, {"id": chat_id, "type": "private", "first_name": "User"}),
            "from": bot.user(),
        }
        if field == "photo":
            width, height = size or (0, 0)
            message["photo"] = [stored | {"width": width, "height": height}]
        else:
            message["document"] = stored | {"file_name": upload["filename"], "mime_type": upload["content_type"]}
        if params.get("caption"):
            message["caption"] = params["caption"]
        self._messages[message["message_id"]] = (bot.token, message)
        self.uploads.append({
            "method": method, "chat_id": chat_id, "filename": upload["filename"], "data": data,
            "caption": params.get("caption"), "message_id": message["message_id"],
        })
        return _ok(message)

    async def _send_photo(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        return await self._send_upload(bot, params, method="sendPhoto", field="photo")

    async def _send_document(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        return await self._send_upload(bot, params, method="sendDocument", field="document")

    def push_callback(
        self, message_id: int, user_id: int, data: str, *, token: str | None = None
    ) -> dict[str, Any]:
        """Queue a press on an inline button of the bot's message `message_id`; return the update."""
        owner, message = self._messages[message_id]
        bot = self._bot(token or owner)
        query = {
            "id": f"cbq-{next(self._callback_ids)}",
            "from": {"id": user_id, "is_bot": False, "first_name": f"User{user_id}"},
            "message": message,
            "chat_instance": f"ci-{message['chat']['id']}",
            "data": data,
        }
        return self._push(bot, {"callback_query": query})

    def press_button(
        self, user_id: int, text: str, *, message_id: int | None = None, token: str | None = None
    ) -> dict[str, Any]:
        """Press the button labelled `text` on message `message_id` (default: the bot's latest
        message with an inline keyboard); return the queued update."""
        token = token or self._default_token
        if message_id is None:
            with_keyboard = [
                mid for mid, (owner, msg) in self._messages.items() if owner == token and "reply_markup" in msg
            ]
            if not with_keyboard:
                raise LookupError("the bot has sent no message with an inline keyboard")
            message_id = with_keyboard[-1]
        _, message = self._messages[message_id]
        for row in message.get("reply_markup", {}).get("inline_keyboard", []):
            for button in row:
                if button.get("text") == text and "callback_data" in button:
                    return self.push_callback(message_id, user_id, button["callback_data"], token=token)
        raise LookupError(f"message {message_id} has no button {text!r}")

    def fail_next(
        self,
        method: str,
        *,
        status: int = 429,
        retry_after: float | None = None,
        description: str | None = None,
        times: int = 1,
        after: int = 0,
        html: bool = False,
    ) -> None:
        """Answer `times` requests of `method` with an error (429 carries retry_after), once
        `after` more have been answered normally. `html`: the body is a proxy's HTML error
        page, not Bot API JSON."""
        if status == 429 and retry_after is None:
            retry_after = 1
        failure = _Failure(status, retry_after, description, drop=False, html=html)
        queue = self._failures.setdefault(method, deque())
        queue.extend([_Failure(200, None, None, drop=False)] * after)  # answered normally
        queue.extend([failure] * times)

    def parallel_webhooks(self, max_connections: int = 40, *, chats_in_order: bool = True) -> None:
        """Deliver webhook updates over up to `max_connections` POSTs at once.

        As many as the bot's setWebhook `max_connections` allows (Telegram's default 40).
        `chats_in_order=False` also sends one chat's updates concurrently, which Telegram's
        documentation does not rule out.
        """
        self._webhook_connections = max_connections
        self._chats_in_order = chats_in_order
        self._wake.set()

    def drop_next(self, method: str, *, times: int = 1) -> None:
        """Close the connection of the next `times` requests of `method` without answering."""
        failure = _Failure(0, None, None, drop=True)
        self._failures.setdefault(method, deque()).extend([failure] * times)

    def heal(self, method: str) -> None:
        """Forget the faults still queued for `method`."""
        self._failures.pop(method, None)
        self._delays.pop(method, None)

    def slow_next(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Answer the next `times` requests of `method` only after `seconds` (a slow Bot API)."""
        self._delays.setdefault(method, deque()).extend([seconds] * times)

    def drop_connections(self) -> int:
        """Close the connection of every request still waiting (long polls); return how many."""
        dropped = list(self._inflight.values())
        for request in dropped:
            if request.transport is not None:
                request.transport.abort()
        return len(dropped)

    # -- the server -----------------------------------------------------------------------

    def _bot(self, token: str | None) -> _Bot:
        return self._bots[token or self._default_token]

    def _chat(self, chat_id: int, *, chat_type: str, sender: dict[str, Any], forum: bool) -> dict[str, Any]:
        if chat_type == "private":
            chat: dict[str, Any] = {"id": chat_id, "type": "private", "first_name": sender["first_name"]}
        else:
            chat = {"id": chat_id, "type": chat_type, "title": f"Chat {chat_id}"}
            if forum:
                chat["is_forum"] = True
        self._chats[chat_id] = chat
        return chat

    def _push(self, bot: _Bot, body: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": next(self._update_ids), **body}
        bot.pending.append(update)
        bot.notify()
        self._wake.set()
        return update

    async def _handle(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        token = request.match_info["token"]
        call = Call(method=method, token=token, payload=await _parameters(request), at=time.monotonic())
        self.requests.append(call)
        if self.on_request is not None:
            self.on_request(call)
        self._inflight[id(request)] = request
        try:
            response = await self._answer(request, call)
        except asyncio.CancelledError:
            call.status = 0  # the client went away (or drop_connections cut it)
            raise
        finally:
            self._inflight.pop(id(request), None)
        call.status = response.status
        call.answered_at = time.monotonic()
        return response

    async def _answer(self, request: web.Request, call: Call) -> web.Response:
        bot = self._bots.get(call.token)
        if bot is None:
            return _error(401, "Unauthorized")
        delays = self._delays.get(call.method)
        if delays:
            await asyncio.sleep(delays.popleft())
            if request.transport is None or request.transport.is_closing():
                # The client went away while the (slow) platform was still receiving: like
                # Telegram, nothing was processed, so nothing was sent.
                return web.Response(status=499)
        failures = self._failures.get(call.method)
        failure = failures.popleft() if failures else None
        if failure is not None and failure.status != 200:  # 200: a normal answer before the faults
            if failure.drop:
                if request.transport is not None:
                    request.transport.abort()
                await asyncio.Event().wait()  # the handler is cancelled as the connection closes
            if failure.html:
                page = f"<html><body><h1>{failure.status} Bad Gateway</h1>nginx</body></html>"
                return web.Response(status=failure.status, text=page, content_type="text/html")
            return _error(failure.status, failure.description, retry_after=failure.retry_after)
        handler = _METHODS.get(call.method)
        if handler is None or (self.without_drafts and call.method == "sendMessageDraft"):
            return _error(404, "Not Found")
        return await handler(self, bot, call.payload)

    async def _get_me(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        return _ok(bot.user() | {"can_join_groups": True, "can_read_all_group_messages": False,
                                 "supports_inline_queries": False})

    async def _get_updates(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        if bot.webhook is not None:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active; "
                          "use deleteWebhook to delete the webhook first")
        offset = int(params.get("offset") or 0)
        while bot.pending and bot.pending[0]["update_id"] < offset:
            bot.pending.popleft()  # confirmed
        limit = int(params.get("limit") or 100)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(params.get("timeout") or 0)
        while not bot.pending and loop.time() < deadline:
            try:
                async with asyncio.timeout_at(deadline):
                    await bot.changed.wait()
            except TimeoutError:
                break
        return _ok(list(itertools.islice(bot.pending, limit)))

    async def _send_message(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        units = len(text.encode("utf-16-le")) // 2
        if units > MAX_TEXT_UTF16:
            return _error(400, "Bad Request: message is too long")
        entities = params.get("entities") or []
        for entity in entities:  # as Telegram: each span inside the text (UTF-16 units), a known type
            offset, length = entity.get("offset", -1), entity.get("length", 0)
            if entity.get("type") not in _ENTITY_TYPES or offset < 0 or length < 1 or offset + length > units:
                return _error(400, f"Bad Request: can't parse entities: bad entity {entity}")
            if entity["type"] == "text_link" and not str(entity.get("url", "")).startswith(_LINK_SCHEMES):
                return _error(400, "Bad Request: can't parse entities: wrong HTTP URL")
        chat_id = int(params["chat_id"])
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": self._chats.get(chat_id, {"id": chat_id, "type": "private", "first_name": "User"}),
            "from": bot.user(),
            "text": text,
        }
        if params.get("message_thread_id") is not None:
            message |= {"message_thread_id": int(params["message_thread_id"]), "is_topic_message": True}
        if params.get("reply_markup") is not None:
            message["reply_markup"] = params["reply_markup"]
        if entities:
            message["entities"] = entities
        self._messages[message["message_id"]] = (bot.token, message)
        self._seen(chat_id, "send", message["message_id"], text)
        return _ok(message)

    async def _edit_message_text(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        found = self._messages.get(int(params.get("message_id") or 0))
        if found is None or found[0] != bot.token:
            return _error(400, "Bad Request: message to edit not found")
        message = found[1]
        text = params.get("text")
        refused = _check_text(text, params.get("entities") or [])
        if refused is not None:
            return refused
        entities = params.get("entities") or []
        markup = params.get("reply_markup")
        if text == message["text"] and entities == message.get("entities", []) and markup == message.get("reply_markup"):
            return _error(
                400,
                "Bad Request: message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message",
            )
        chat_id = int(message["chat"]["id"])
        limited = self._flood(chat_id)
        if limited is not None:
            return limited
        message["text"] = text
        if entities:
            message["entities"] = entities
        else:
            message.pop("entities", None)
        if markup is not None:
            message["reply_markup"] = markup
        else:
            message.pop("reply_markup", None)
        self._seen(chat_id, "edit", message["message_id"], str(text))
        return _ok(message)

    async def _send_message_draft(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        chat_id = int(params.get("chat_id") or 0)
        chat = self._chats.get(chat_id, {"type": "private" if chat_id > 0 else "group"})
        if chat["type"] != "private":
            return _error(400, "Bad Request: message drafts can be sent only to private chats")
        draft_id = int(params.get("draft_id") or 0)
        if draft_id == 0:
            return _error(400, "Bad Request: draft_id must be non-zero")
        text = params.get("text") or ""
        if len(str(text).encode("utf-16-le")) // 2 > MAX_TEXT_UTF16:
            return _error(400, "Bad Request: message is too long")
        limited = self._flood(chat_id)
        if limited is not None:
            return limited
        self._seen(chat_id, "draft", draft_id, str(text))
        return _ok(True)

    async def _delete_message(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        found = self._messages.get(int(params.get("message_id") or 0))
        if found is None or found[0] != bot.token:
            return _error(400, "Bad Request: message to delete not found")
        message = self._messages.pop(int(params["message_id"]))[1]
        self._seen(int(message["chat"]["id"]), "delete", message["message_id"], "")
        return _ok(True)

    def _flood(self, chat_id: int) -> web.Response | None:
        """Answer 429 when this chat changed less than `edit_gap_s` ago; else count the change."""
        now = time.monotonic()
        last = self._last_change.get(chat_id)
        if last is not None and now - last < self.edit_gap_s:
            self.rate_limited += 1
            wait = max(self.edit_gap_s - (now - last), 0.001)
            return _error(429, f"Too Many Requests: retry after {wait:.3f}", retry_after=round(wait, 3))
        self._last_change[chat_id] = now
        return None

    def _seen(self, chat_id: int, kind: str, ident: int, text: str) -> None:
        self.visible.append(Visible(at=time.monotonic(), chat_id=chat_id, kind=kind, id=ident, text=text))

    def delete_as_admin(self, message_id: int) -> None:
        """Delete a message as a chat admin (or a moderation bot) would: later edits find nothing."""
        message = self._messages.pop(message_id)[1]
        self._seen(int(message["chat"]["id"]), "delete", message["message_id"], "")

    def shown(self, chat_id: int) -> list[str]:
        """Return the texts of the bot messages in `chat_id` as they read now, oldest first."""
        return [m["text"] for _, m in self._messages.values() if m["chat"]["id"] == chat_id and m["from"]["is_bot"]]

    async def _true(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        return _ok(True)

    async def _set_webhook(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        if not params.get("url"):
            return _error(400, "Bad Request: bad webhook: an HTTPS URL must be provided for webhook")
        bot.webhook = params
        self._wake.set()
        return _ok(True)

    async def _get_webhook_info(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        hook = bot.webhook or {}
        return _ok({"url": hook.get("url", ""), "has_custom_certificate": False,
                    "pending_update_count": len(bot.pending)})

    async def _delete_webhook(self, bot: _Bot, params: dict[str, Any]) -> web.Response:
        bot.webhook = None
        if params.get("drop_pending_updates"):
            bot.pending.clear()
        return _ok(True)

    async def _push_webhooks(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not await self._post_pending():
                await asyncio.sleep(_WEBHOOK_RETRY_S)
                self._wake.set()

    async def _post_pending(self) -> bool:
        """POST each webhook bot's queued updates in order; return False if one was refused."""
        if self._webhook_connections > 1:
            return await self._post_parallel()
        for bot in self._bots.values():
            while bot.webhook is not None and bot.pending:
                update = bot.pending[0]
                if not await self._post(bot, update):
                    return False
                if bot.pending and bot.pending[0] is update:
                    bot.pending.popleft()
        return True

    async def _post_parallel(self) -> bool:
        """POST queued updates concurrently: one chat's in sequence, chats side by side."""
        refused = False
        in_flight: dict[asyncio.Task[bool], tuple[_Bot, dict[str, Any]]] = {}
        try:
            while True:
                busy_chats = {_chat_of(update) for _bot, update in in_flight.values()}
                for bot in self._bots.values():
                    if bot.webhook is None or refused:
                        continue
                    limit = min(self._webhook_connections, int(bot.webhook.get("max_connections") or 40))
                    for update in list(bot.pending):
                        if len(in_flight) >= limit:
                            break
                        chat = _chat_of(update)
                        if update["update_id"] in self._posting or (self._chats_in_order and chat in busy_chats):
                            busy_chats.add(chat)  # later updates of this chat wait for this one
                            continue
                        busy_chats.add(chat)
                        self._posting.add(update["update_id"])
                        in_flight[asyncio.create_task(self._post(bot, update))] = (bot, update)
                self.webhook_peak = max(self.webhook_peak, len(in_flight))
                if not in_flight:
                    return not refused
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    bot, update = in_flight.pop(task)
                    self._posting.discard(update["update_id"])
                    if task.result():
                        if update in bot.pending:
                            bot.pending.remove(update)
                    else:
                        refused = True  # retried after the pause, as Telegram backs off
        finally:
            for task in in_flight:
                task.cancel()

    async def _post(self, bot: _Bot, update: dict[str, Any]) -> bool:
        assert self._session is not None and bot.webhook is not None
        headers = {}
        if bot.webhook.get("secret_token"):
            headers[_SECRET_HEADER] = str(bot.webhook["secret_token"])
        try:
            async with self._session.post(
                bot.webhook["url"], json=update, headers=headers, timeout=aiohttp.ClientTimeout(total=10)
            ) as response:
                status = response.status
        except (aiohttp.ClientError, TimeoutError):
            status = 0
        self.webhook_attempts.append((update["update_id"], status))
        return 200 <= status < 300


def _check_text(text: object, entities: list[dict[str, Any]]) -> web.Response | None:
    """Refuse a message text as Telegram does: empty, too long, or entities outside it."""
    if not isinstance(text, str) or not text.strip():
        return _error(400, "Bad Request: message text is empty")
    units = len(text.encode("utf-16-le")) // 2
    if units > MAX_TEXT_UTF16:
        return _error(400, "Bad Request: message is too long")
    for entity in entities:
        offset, length = entity.get("offset", -1), entity.get("length", 0)
        if entity.get("type") not in _ENTITY_TYPES or offset < 0 or length < 1 or offset + length > units:
            return _error(400, f"Bad Request: can't parse entities: bad entity {entity}")
        if entity["type"] == "text_link" and not str(entity.get("url", "")).startswith(_LINK_SCHEMES):
            return _error(400, "Bad Request: can't parse entities: wrong HTTP URL")
    return None


def _photo_refusal(data: bytes, size: tuple[int, int] | None) -> str | None:
    """Return the error Telegram answers `data` sent as a photo with, or None when it takes it."""
    if len(data) > MAX_PHOTO_BYTES:
        return "PHOTO_SAVE_FILE_INVALID"
    if size is None:
        return "IMAGE_PROCESS_FAILED"
    width, height = size
    if width + height > MAX_PHOTO_SIDES or max(width, height) > MAX_PHOTO_RATIO * min(width, height):
        return "PHOTO_INVALID_DIMENSIONS"
    return None


def _photo_size(data: bytes) -> tuple[int, int] | None:
    """Return the (width, height) an image's header gives, as Telegram reads it; None when it is not one."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
            found = struct.unpack(">II", data[16:24])
        elif data[:6] in (b"GIF87a", b"GIF89a"):
            found = struct.unpack("<HH", data[6:10])
        elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            found = _webp_size(data)
        elif data[:2] == b"\xff\xd8":
            found = _jpeg_size(data)
        else:
            return None
    except struct.error:  # cut short
        return None
    return (found[0], found[1]) if found and min(found) > 0 else None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    if chunk == b"VP8L":
        packed = struct.unpack("<I", data[21:25])[0]
        return (packed & 0x3FFF) + 1, ((packed >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    offset = 2
    while offset + 4 <= len(data):
        if data[offset] != 0xFF:
            return None
        marker = data[offset + 1]
        if marker == 0xFF:  # fill
            offset += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):
            offset += 2
            continue
        (length,) = struct.unpack(">H", data[offset + 2 : offset + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[offset + 5 : offset + 9])
            return width, height
        if marker in (0xD9, 0xDA):
            return None
        offset += 2 + length
    return None


def _chat_of(update: dict[str, Any]) -> object:
    message = update.get("message") or (update.get("callback_query") or {}).get("message") or {}
    return (message.get("chat") or {}).get("id", update["update_id"])


_Handler = Callable[[FakeTelegram, _Bot, dict[str, Any]], Awaitable[web.Response]]
_METHODS: Final[dict[str, _Handler]] = {
    "getMe": FakeTelegram._get_me,
    "getUpdates": FakeTelegram._get_updates,
    "sendMessage": FakeTelegram._send_message,
    "editMessageText": FakeTelegram._edit_message_text,
    "sendMessageDraft": FakeTelegram._send_message_draft,
    "deleteMessage": FakeTelegram._delete_message,
    "sendChatAction": FakeTelegram._true,
    "answerCallbackQuery": FakeTelegram._true,
    "setWebhook": FakeTelegram._set_webhook,
    "deleteWebhook": FakeTelegram._delete_webhook,
    "getWebhookInfo": FakeTelegram._get_webhook_info,
    "getFile": FakeTelegram._get_file,
    "sendPhoto": FakeTelegram._send_photo,
    "sendDocument": FakeTelegram._send_document,
}


async def _parameters(request: web.Request) -> dict[str, Any]:
    """Decode query, JSON or form parameters; form values are JSON unless plain strings."""
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else {}
        params |= body if isinstance(body, dict) else {}
        return params
    if request.can_read_body:
        form = await request.post()
        params |= {k: v for k, v in form.items() if isinstance(v, str)}
        # a multipart upload's file parts, as the platform stores them (sendPhoto, sendDocument)
        params |= {
            k: {"filename": v.filename, "content_type": v.content_type, "data": v.file.read()}
            for k, v in form.items() if isinstance(v, web.FileField)
        }
    for key, value in params.items():
        if key not in _RAW_STRINGS and isinstance(value, str):
            try:
                params[key] = json.loads(value)
            except ValueError:
                pass
    return params


def _ok(result: object) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str | None, *, retry_after: float | None = None) -> web.Response:
    if description is None:
        description = {
            401: "Unauthorized",
            403: "Forbidden: bot was blocked by the user",
            429: f"Too Many Requests: retry after {retry_after}",
        }.get(status, f"Error {status}")
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)
