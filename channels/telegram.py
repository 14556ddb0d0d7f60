"""Telegram adapter on python-telegram-bot's `Bot`: long polling by default, or a webhook.

Polling drives `Bot.get_updates` itself rather than PTB's `Updater`: the Updater asks for the
next batch (which confirms the previous offset to Telegram) while its handlers may not have
run yet. Here the offset advances past an update only after `deliver` returned, so an update
received but not yet delivered is fetched again after a restart. In webhook mode the answer
to Telegram's POST is that confirmation: 200 after `deliver` returned, 500 if it raised (so
Telegram redelivers), 403 without delivering when the secret-token header does not match.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import functools
import hmac
import random
import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO, Final, TypeVar
from urllib.parse import urlsplit

from loguru import logger
from telegram import (
    Bot,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    ReplyParameters,
    Update,
)
from telegram.constants import ChatAction, ChatType
from telegram.error import BadRequest, Forbidden, InvalidToken, RetryAfter, TelegramError

if TYPE_CHECKING:
    from aiohttp import web

from channels.base import (
    Attachment,
    ApprovalAnswer,
    ApprovalPrompt,
    ChannelAdapter,
    ChannelAuthError,
    ChannelError,
    ChannelRateLimited,
    ChannelRefused,
    Deliver,
    Inbound,
    IntakeDeferred,
    Outbound,
    OutboundFile,
    Ready,
    ReplyProgress,
    fit_arguments,
    report_degraded,
    report_recovered,
)
from channels.approval_codec import (
    approval_command,
    encode_approval_button,
    encode_show_button,
    parse_approval_button,
    parse_approval_command,
    parse_show_button,
    parse_show_command,
    show_command,
)
from channels.streaming import PacerBook
from channels.telegram_format import Rendered, plain, render
from channels.telegram_groups import group_facts, sent_via
from channels.telegram_http import AiohttpRequest
from channels.telegram_ids import chat_id as _chat_id, retry_after_s as _retry_after_s, thread_id as _thread_id
from channels import telegram_media
from channels.telegram_stream import TelegramStream, close_abandoned
from orchestrator.config import SecretRef
from orchestrator.config.channels import TelegramChannelConfig

__all__ = ["MAX_MESSAGE_CHARS", "TelegramAdapter", "create"]

T = TypeVar("T")

MAX_MESSAGE_CHARS: Final = 4096  # Telegram counts UTF-16 code units
DEFAULT_API_BASE_URL: Final = "https://api.telegram.org"
SECRET_HEADER: Final = "X-Telegram-Bot-Api-Secret-Token"
_ALLOWED_UPDATES: Final = ("message", "callback_query")
_RATE_LIMIT_RETRIES: Final = 3
# getUpdates failures retried in place (capped backoff) before the supervisor restarts the channel
_POLL_RETRIES: Final = 4
_POLL_RETRY_CAP_S: Final = 8.0
_MAX_RETRY_AFTER_S: Final = 60.0  # a longer flood wait fails the send instead of stalling the turn
_REQUEST_TIMEOUT_S: Final = 10.0
_SEND_CONNECTIONS: Final = 100  # as aiohttp's default (Slack); replies beyond wait FIFO for one
_CALLBACK_DATA_MAX_BYTES: Final = 64
_NAME_CHARS: Final = 200  # a tool or user name in the prompt (the arguments get the rest)
_SHOW_HINT: Final = "\nThe arguments are cut: press Show all or reply {} for the whole call."

class TelegramAdapter:
    """One Telegram bot; build it with `create`.

    Lifecycle: `run` probes the token (getMe), then polls or serves the webhook until
    cancelled; `send`, `prompt_approval` and `typing` work whether or not `run` is active;
    `aclose` releases the HTTP clients.
    """

    max_message_chars: int = MAX_MESSAGE_CHARS
    max_file_bytes: int = telegram_media.MAX_FILE_BYTES

    def __init__(
        self, *, name: str, config: TelegramChannelConfig, token: str, webhook_secret: str | None
    ) -> None:
        self.name = name
        self._config = config
        self._webhook_secret = webhook_secret
        api = (config.api_base_url or DEFAULT_API_BASE_URL).rstrip("/")
        # One connection for the long poll, a pool for sends, so a poll never delays a reply.
        self._poll_request = AiohttpRequest(
            connection_pool_size=1,
            read_timeout=_REQUEST_TIMEOUT_S,
            write_timeout=_REQUEST_TIMEOUT_S,
            connect_timeout=_REQUEST_TIMEOUT_S,
            pool_timeout=_REQUEST_TIMEOUT_S,
        )
        self._api_request = AiohttpRequest(
            connection_pool_size=_SEND_CONNECTIONS,
            read_timeout=_REQUEST_TIMEOUT_S,
            write_timeout=_REQUEST_TIMEOUT_S,
            connect_timeout=_REQUEST_TIMEOUT_S,
            pool_timeout=_REQUEST_TIMEOUT_S,
        )
        self._bot = Bot(
            token,
            base_url=f"{api}/bot",
            base_file_url=f"{api}/file/bot",
            request=self._api_request,
            get_updates_request=self._poll_request,
        )
        self._pacers = PacerBook(config.stream_edit_interval_s)  # streamed replies, per chat
        self._streams: weakref.WeakSet[TelegramStream] = weakref.WeakSet()  # stopped by aclose
        self._drafts = True  # False once the Bot API server answered sendMessageDraft "no such method"
        self._offset: int | None = None  # first update id not yet delivered
        self._username: str | None = None
        self._bot_id: int | None = None
        self._polling = False

    # -- ChannelAdapter -------------------------------------------------------------------

    async def run(self, deliver: Deliver, ready: Ready) -> None:
        """Receive until cancelled; raise `ChannelAuthError` for a refused token, else `ChannelError`."""
        await asyncio.gather(self._api_request.initialize(), self._poll_request.initialize())
        me = await self._call("getMe", self._bot.get_me)
        self._username, self._bot_id = me.username, me.id
        if self._config.mode == "webhook":
            await self._serve_webhook(deliver, ready)
        else:
            await self._poll(deliver, ready)

    async def send(self, message: Outbound, *, progress: ReplyProgress | None = None) -> None:
        """Send `message.text` in chunks of at most 4096 UTF-16 units, retrying rate limits.

        Chunks `progress` counts as accepted are skipped (a resumed reply); the first chunk
        sent answers `reply_to` only when no chunk was accepted before.

        With `format = "markdown"` (the default) the text is rendered as Markdown through
        message entities (`channels.telegram_format`); with "plain" it is sent as written.
        """
        skip = progress.done if progress is not None else 0
        reply = None
        if message.reply_to is not None and message.reply_to.isdigit() and skip == 0:
            reply = ReplyParameters(message_id=int(message.reply_to), allow_sending_without_reply=True)
        for index, (chunk, entities) in enumerate(self.rendered(message.text)):
            if index < skip:
                continue
            send = functools.partial(
                self._bot.send_message,
                chat_id=_chat_id(message.chat),
                text=chunk,
                message_thread_id=_thread_id(message.thread),
                reply_parameters=reply,
            )
            try:
                await self._call("sendMessage", functools.partial(send, entities=entities or None))
            except ChannelError as exc:
                if not entities or not isinstance(exc.__cause__, BadRequest):
                    raise
                # formatting Telegram would not take must not cost the reply: send it unformatted
                logger.warning("channel {}: formatting refused ({}); sending plain text", self.name, exc.reason)
                await self._call("sendMessage", send)
            reply = None  # only the first chunk answers the user's message
            if progress is not None:
                progress.advance()

    def rendered(self, text: str) -> Rendered:
        """Return the messages `text` is sent as (the channel's `format`), each within Telegram's limit."""
        if self._config.format == "markdown":
            return render(text, MAX_MESSAGE_CHARS)
        return plain(text, MAX_MESSAGE_CHARS)

    # -- streaming (channels.telegram_stream) ---------------------------------------------

    def open_stream(self, message: Outbound) -> TelegramStream:
        """Stream a reply: a draft in a private chat (positive id), send-then-edit elsewhere.

        A server without drafts (see `drafts_missing`) gets send-then-edit in private chats too.
        """
        # Telegram's private chat ids are the users' ids (positive); groups and channels are negative.
        drafts = self._drafts and message.chat.isdigit()
        stream = TelegramStream(self, message, pacer=self._pacers.pacer(message.chat), private=drafts)
        self._streams.add(stream)
        return stream

    def reopen_stream(self, message: Outbound, message_ids: Sequence[str]) -> TelegramStream | None:
        """Take over the messages a crashed stream left half-shown: `finish` edits them (None without any)."""
        if not message_ids:
            return None
        stream = TelegramStream(
            self, message, pacer=self._pacers.pacer(message.chat), private=False, existing=message_ids
        )
        self._streams.add(stream)
        return stream

    async def close_abandoned(self, chat: str, thread: str | None, message_ids: Sequence[str], ending: str) -> None:
        """Tell the chat a reply a crash left half-shown ended (a reply to its last message)."""
        await close_abandoned(self, chat, thread, message_ids, ending)

    @property
    def drafts(self) -> bool:
        """Return False once this bot's Bot API server has been found to lack `sendMessageDraft`."""
        return self._drafts

    def drafts_missing(self, answer: str) -> None:
        """Turn drafts off for this bot: its server answered `sendMessageDraft` as a method it lacks.

        Logged once, whatever number of streams find it out; from then on every reply streams by
        posting a message and editing it, as in groups.
        """
        if not self._drafts:
            return
        self._drafts = False
        logger.warning(
            "channel {}: the Bot API server at {} has no sendMessageDraft (it answered {!r}: a server older "
            "than Bot API 9.3); private replies now stream by editing a message instead of a draft",
            self.name, self._config.api_base_url or DEFAULT_API_BASE_URL, answer,
        )

    @property
    def bot(self) -> Bot:
        """Return the PTB `Bot` the adapter sends with (the stream calls it too)."""
        return self._bot

    async def call(self, action: str, call: Callable[[], Awaitable[T]], *, retries: int = _RATE_LIMIT_RETRIES) -> T:
        """Run one Bot API call as the adapter does (errors translated; see `_call`)."""
        return await self._call(action, call, retries=retries)

    async def prompt_approval(self, prompt: ApprovalPrompt) -> None:
        """Post the approval question with Approve / Deny buttons in the prompt's chat."""
        yes, no = (encode_approval_button(prompt.request_id, approved=flag) for flag in (True, False))
        text, cut = _approval_text(prompt)
        markup = None
        if len(yes.encode()) <= _CALLBACK_DATA_MAX_BYTES:
            row = [InlineKeyboardButton("Approve", callback_data=yes), InlineKeyboardButton("Deny", callback_data=no)]
            if cut:
                row.append(InlineKeyboardButton("Show all", callback_data=encode_show_button(prompt.request_id)))
            markup = InlineKeyboardMarkup((tuple(row),))
        else:  # Telegram caps callback_data at 64 bytes; the text commands still work
            logger.warning("channel {}: request id too long for buttons; asking for /approve text", self.name)
        await self._call(
            "sendMessage",
            functools.partial(
                self._bot.send_message,
                chat_id=_chat_id(prompt.chat),
                text=text,
                message_thread_id=_thread_id(prompt.thread),
                reply_markup=markup,
            ),
        )

    async def typing(self, chat: str, thread: str | None) -> None:
        """Show "typing…" once (Telegram clears it after ~5 s); a rate-limited one is skipped."""
        try:
            await self._call(
                "sendChatAction",
                functools.partial(
                    self._bot.send_chat_action,
                    chat_id=_chat_id(chat),
                    action=ChatAction.TYPING,
                    message_thread_id=_thread_id(thread),
                ),
                retries=0,
            )
        except ChannelError as exc:
            if not isinstance(exc.__cause__, RetryAfter):
                raise
            logger.debug("channel {}: typing indicator skipped: {}", self.name, exc.reason)

    # -- FileAdapter (channels.telegram_media) ----------------------------------------------

    async def describe(self, attachment: Attachment) -> Attachment:
        """Return `attachment`: a Telegram update carries every file in full."""
        return attachment

    async def download(self, attachment: Attachment, dest: BinaryIO, *, max_bytes: int) -> int:
        """Stream an inbound file (getFile, then the file endpoint) into `dest` under `max_bytes`."""
        return await telegram_media.download(
            self.name, self._bot, self._api_request, self._call, attachment, dest, max_bytes=max_bytes
        )

    async def send_file(self, file: OutboundFile) -> str:
        """Post `file` to its chat with sendPhoto or sendDocument; return the message id."""
        return await telegram_media.send_file(self.name, self._bot, self._call, file)

    async def aclose(self) -> None:
        """Confirm delivered updates to Telegram (polling mode) and close the HTTP clients."""
        for stream in list(self._streams):
            stream.cancel()
        try:
            if self._offset is not None and not self._polling and self._config.mode == "polling":
                # Saves Telegram re-sending the last batch after a clean restart; the core
                # de-duplicates event ids anyway, so a failure here loses nothing.
                try:
                    await self._bot.get_updates(offset=self._offset, limit=1, timeout=0)
                except TelegramError as exc:
                    logger.debug("channel {}: could not confirm offset on close: {}", self.name, exc.message)
        finally:
            await asyncio.gather(self._api_request.shutdown(), self._poll_request.shutdown())

    # -- receiving ------------------------------------------------------------------------

    async def _poll(self, deliver: Deliver, ready: Ready) -> None:
        # A webhook left over from webhook mode would make every getUpdates fail with 409.
        delete = functools.partial(self._bot.delete_webhook, drop_pending_updates=False)
        await self._call("deleteWebhook", delete)
        ready()
        timeout = dtm.timedelta(seconds=self._config.poll_timeout_s)
        self._polling = True
        try:
            failures = 0
            while True:
                try:
                    updates = await self._call(
                        "getUpdates",
                        functools.partial(
                            self._bot.get_updates,
                            offset=self._offset,
                            timeout=timeout,
                            allowed_updates=list(_ALLOWED_UPDATES),
                        ),
                    )
                except ChannelRefused:
                    raise  # e.g. 409: another poller holds this token; the supervisor reports it
                except ChannelError as exc:
                    # One bad answer (a proxy's HTML 502, a dropped connection) is one failed
                    # call, not a lost channel: retry it here a few times before giving up.
                    failures += 1
                    if failures > _POLL_RETRIES:
                        raise
                    delay = min(_POLL_RETRY_CAP_S, 0.25 * 2**failures) * random.uniform(0.5, 1.0)
                    report_degraded(ready, exc.reason)
                    logger.warning("channel {}: {}; polling again in {:.1f}s", self.name, exc.reason, delay)
                    await asyncio.sleep(delay)
                    continue
                if failures:
                    report_recovered(ready)
                failures = 0
                await self._deliver_batch(updates, deliver)
        finally:
            self._polling = False

    async def _serve_webhook(self, deliver: Deliver, ready: Ready) -> None:
        url, secret = self._config.webhook_url, self._webhook_secret
        if not url or not secret:
            # Without the secret header anyone who finds the URL could speak as any user.
            raise ChannelAuthError(self.name, "mode 'webhook' needs webhook_url and webhook_secret")
        from aiohttp import web  # webhook mode only: polling daemons never pay for the server

        app = web.Application()
        app.router.add_post(urlsplit(url).path or "/", functools.partial(self._on_webhook, deliver, secret))
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._config.webhook_listen, self._config.webhook_port)
            try:
                await site.start()
            except OSError as exc:
                where = f"{self._config.webhook_listen}:{self._config.webhook_port}"
                raise ChannelError(self.name, f"cannot listen on {where}: {exc.strerror}") from exc
            try:
                await self._call(
                    "setWebhook",
                    functools.partial(
                        self._bot.set_webhook,
                        url=url,
                        secret_token=secret,
                        allowed_updates=list(_ALLOWED_UPDATES),
                        max_connections=self._config.webhook_max_connections,
                    ),
                )
            except ChannelError as exc:
                if isinstance(exc.__cause__, BadRequest):  # bad URL or secret: retrying cannot help
                    raise ChannelAuthError(self.name, exc.reason) from exc.__cause__
                raise
            ready()
            await asyncio.Event().wait()  # serve until cancelled
        finally:
            await runner.cleanup()

    async def _on_webhook(self, deliver: Deliver, secret: str, request: web.Request) -> web.Response:
        from aiohttp import web

        given = request.headers.get(SECRET_HEADER, "")
        if not hmac.compare_digest(given.encode(), secret.encode()):
            logger.warning("channel {}: webhook call with a wrong secret from {}", self.name, request.remote)
            return web.Response(status=403)
        try:
            data = await request.json()
            update = Update.de_json(data, self._bot) if isinstance(data, dict) else None
        except Exception as exc:  # untrusted input: any parse failure is the sender's problem
            logger.warning("channel {}: unreadable webhook update: {}", self.name, exc)
            update = None
        if update is None:
            return web.Response(status=400)
        try:
            await self._handle(update, deliver)
        except IntakeDeferred as exc:  # the core said why once: Telegram sends it again
            logger.info("channel {}: update {} not delivered: {}", self.name, update.update_id, exc.reason)
            return web.Response(status=500)
        except Exception as exc:  # not delivered: a non-2xx answer makes Telegram send it again
            logger.opt(exception=exc).error("channel {}: update {} not delivered", self.name, update.update_id)
            return web.Response(status=500)
        return web.Response()

    async def _deliver_batch(self, updates: Sequence[Update], deliver: Deliver) -> None:
        """Deliver one getUpdates batch in order; the offset moves past what is on disk.

        Only the batch's last message is synced to disk (one fsync covers every write before
        it), so the offset, which the next getUpdates confirms to Telegram, moves past the
        messages before it only once that delivery returned.
        """
        items = [
            self._inbound(u.update_id, u.message) if u.callback_query is None and u.message is not None else None
            for u in updates
        ]
        last = max((i for i, item in enumerate(items) if isinstance(item, Inbound)), default=-1)
        for index, (update, item) in enumerate(zip(updates, items)):
            if update.callback_query is not None:
                await self._handle_click(update.update_id, update.callback_query, deliver)
            elif item is not None:
                await deliver(item, synced=index >= last)
            if index >= last:
                self._offset = update.update_id + 1  # confirmed by the next getUpdates

    async def _handle(self, update: Update, deliver: Deliver) -> None:
        if update.callback_query is not None:
            await self._handle_click(update.update_id, update.callback_query, deliver)
        elif update.message is not None:
            item = self._inbound(update.update_id, update.message)
            if item is not None:
                await deliver(item)

    def _inbound(self, update_id: int, message: Message) -> Inbound | ApprovalAnswer | None:
        text = message.text if message.text is not None else message.caption
        user = message.from_user
        attachments = telegram_media.attachments_of(message) if message.text is None else ()
        if (not text and not attachments) or user is None or user.is_bot or sent_via(message, self._bot_id):
            return None  # stickers, service messages, channel posts, our own inline results: nothing to answer
        facts = group_facts(message, text or "", bot_id=self._bot_id, username=self._username)
        text = facts.text
        chat, sender = str(message.chat.id), str(user.id)
        show = parse_show_command(text, bot_username=self._username)
        if show is not None:  # `/show@thisbot ID` in a group is the core's `/show ID`
            text = show_command(show)
        command = parse_approval_command(text, bot_username=self._username)
        if command is not None:
            request_id, approved = command
            return ApprovalAnswer(
                channel=self.name, request_id=request_id, sender=sender, approved=approved, chat=chat
            )
        # Only forum topics are threads one can post into; replies in plain groups also
        # carry a message_thread_id, which sendMessage would reject there.
        topic = message.message_thread_id if message.is_topic_message else None
        return Inbound(
            channel=self.name,
            chat=chat,
            sender=sender,
            text=text,
            event_id=str(update_id),
            message_id=str(message.message_id),
            thread=str(topic) if topic else None,
            sender_name=user.full_name,
            is_direct=message.chat.type == ChatType.PRIVATE,
            attachments=attachments,
            mentions_bot=facts.mentions_bot,
            reply_to_bot=facts.reply_to_bot,
            command_target=facts.command_target,
        )

    async def _handle_click(self, update_id: int, query: CallbackQuery, deliver: Deliver) -> None:
        answer = parse_approval_button(query.data)
        show = parse_show_button(query.data)
        toast = None
        if show is not None and query.message is not None:  # Show all: the presser's `/show ID`
            message = query.message
            topic = getattr(message, "message_thread_id", None) if getattr(message, "is_topic_message", False) else None
            await deliver(
                Inbound(
                    channel=self.name, chat=str(message.chat.id), sender=str(query.from_user.id),
                    text=show_command(show), event_id=str(update_id), thread=str(topic) if topic else None,
                    sender_name=query.from_user.full_name, is_direct=message.chat.type == ChatType.PRIVATE,
                    command_target="bot",  # a press on the bot's own prompt is addressed to it
                )
            )
            toast = "Showing the whole call"
        elif answer is not None:
            request_id, approved = answer
            chat = str(query.message.chat.id) if query.message is not None else None
            sender = str(query.from_user.id)
            await deliver(
                ApprovalAnswer(
                    channel=self.name, request_id=request_id, sender=sender, approved=approved, chat=chat
                )
            )
            toast = "Approval sent" if approved else "Denial sent"
        try:  # acknowledged after deliver, so the client's spinner means "not recorded yet"
            acknowledge = functools.partial(self._bot.answer_callback_query, query.id, text=toast)
            await self._call("answerCallbackQuery", acknowledge, retries=0)
        except ChannelAuthError:
            raise
        except ChannelError as exc:  # an expired query id must not stop the channel
            logger.warning("channel {}: could not acknowledge a button press: {}", self.name, exc.reason)

    # -- calling the API ------------------------------------------------------------------

    async def _call(
        self, action: str, call: Callable[[], Awaitable[T]], *, retries: int = _RATE_LIMIT_RETRIES
    ) -> T:
        """Run one Bot API call, sleeping out up to `retries` rate limits; translate its errors."""
        attempt = 0
        while True:
            try:
                return await call()
            except RetryAfter as exc:
                delay = _retry_after_s(exc)
                if attempt >= retries or delay > _MAX_RETRY_AFTER_S:
                    reason = f"{action}: rate limited (retry after {delay:g}s), gave up after {attempt} retries"
                    raise ChannelRateLimited(self.name, reason, retry_after_s=delay) from exc
                attempt += 1
                logger.info("channel {}: {} rate limited; retrying in {:g}s", self.name, action, delay)
                await asyncio.sleep(delay)
            except InvalidToken as exc:
                reason = f"{action}: Telegram rejected the bot token ({exc.message})"
                raise ChannelAuthError(self.name, reason) from exc
            except (BadRequest, Forbidden) as exc:  # a 4xx: the same request fails again
                raise ChannelRefused(self.name, f"{action}: {exc.message}") from exc
            except TelegramError as exc:  # network errors, timeouts, 5xx: a retry may work
                raise ChannelError(self.name, f"{action}: {exc.message}") from exc


def create(name: str, config: TelegramChannelConfig, *, secrets: Callable[[SecretRef], str]) -> ChannelAdapter:
    """Build the adapter for `[channels.<name>]`, resolving its secrets now."""
    webhook_secret = secrets(config.webhook_secret) if config.webhook_secret is not None else None
    try:
        token = secrets(config.token)
        return TelegramAdapter(name=name, config=config, token=token, webhook_secret=webhook_secret)
    except InvalidToken as exc:  # PTB refuses an empty token before any request
        raise ChannelAuthError(name, f"invalid bot token: {exc.message}") from exc


def _approval_text(prompt: ApprovalPrompt) -> tuple[str, bool]:
    """Return the question, the arguments fitted to what one message holds (UTF-16 units),
    and whether they had to be cut."""
    head = f"Approval needed: the agent wants to run {prompt.tool[:_NAME_CHARS]}\nArguments: "
    tail = (
        f"\nRequested by user {prompt.requester[:_NAME_CHARS]}; answer within {prompt.timeout_s:g} s "
        f"or it is denied.\n"
        f"Request {prompt.request_id}: press a button, or reply "
        f"{approval_command(prompt.request_id, approved=True)} or "
        f"{approval_command(prompt.request_id, approved=False)}"
    )
    hint = _SHOW_HINT.format(show_command(prompt.request_id))
    room = MAX_MESSAGE_CHARS - _utf16_units(head + tail + hint)
    shown = fit_arguments(prompt.arguments, room, size=_utf16_units)
    cut = shown != prompt.arguments.whole
    return head + shown + tail + (hint if cut else ""), cut


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2
