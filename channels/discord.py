"""The Discord channel: a discord.py gateway client for DMs and guild channels.

discord.py keeps its REST base (`discord.http.Route.BASE`) and its gateway URL
(`DiscordWebSocket.DEFAULT_GATEWAY`) in class attributes, so one process can point all its
Discord channels at one API base only. Config validation refuses Discord channels of one config
that disagree (`orchestrator check` reports it, `config/channels.py`); `create` still refuses a
channel of another config in the same process (a library caller, a test) with different
endpoints while the first is alive, and the last one to close restores discord.py's defaults.

Gateway drops are handled by discord.py itself (`connect(reconnect=True)` RESUMEs, and Discord
replays what was missed); `run` raises only when discord.py gives up (a close code it cannot
recover from) or when login fails. A zombie connection (heartbeats sent, never ACKed) is closed
by `_watch_heartbeats` at the first missed ACK, as Discord's docs ask, and then resumed the same
way; discord.py alone would wait for its `heartbeat_timeout` (60 s) of silence.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Final, TypeVar

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route
from loguru import logger

from channels import discord_files
from channels.base import (
    ApprovalAnswer,
    ApprovalPrompt,
    Attachment,
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
    report_reconnecting,
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
from channels.chunking import chunk_text
from channels.discord_stream import close_abandoned_stream, open_edit_stream
from channels.streaming import EditStream, PacerBook
from orchestrator.config.channels import DiscordChannelConfig
from orchestrator.config.secrets import SecretRef
from orchestrator.errors import ConfigError, ConfigProblem

# A text bot: discord.py warns at every start that PyNaCl and davey (voice, and its end-to-end
# encryption) are missing, about features this adapter never uses; these are the flags it
# checks (once per process) before warning.
discord.VoiceClient.warn_nacl = False
discord.VoiceClient.warn_dave = False

__all__ = ["DiscordAdapter", "create"]

MAX_MESSAGE_CHARS: Final = 2000
_NAME_CHARS: Final = 200  # a tool name in the prompt (the arguments get the rest)
_CUSTOM_ID_MAX: Final = 100
_AUTH_CLOSE_CODES: Final = frozenset({4004})  # Authentication failed
# discord.py waits out a 429 up to this long (its minimum); a longer retry_after fails the
# send with ChannelError instead of stalling the turn.
_MAX_RATELIMIT_WAIT_S: Final = 30.0
_SDK_DEFAULT_BASE: Final = Route.BASE
_SDK_DEFAULT_GATEWAY: Final = DiscordWebSocket.DEFAULT_GATEWAY
# `@otherbot /cmd`: a command addressed to someone else (Discord has no `/cmd@bot`)
_OTHERS_COMMAND: Final = re.compile(r"<@!?\d+>\s*/\w")
_CHATTY_TYPES: Final = frozenset({discord.MessageType.default, discord.MessageType.reply})
# How often the zombie-connection watchdog looks at the heartbeat state (Discord's interval
# is ~41 s, so a missed ACK is noticed well within one interval of the next beat being due).
_WATCH_EVERY_S: Final = 0.25
_MISSED_ACK_INTERVALS: Final = 1.5
_ZOMBIE_CLOSE_CODE: Final = 4000  # not 1000/1001: discord.py RESUMEs after it, as Discord asks


@dataclass(frozen=True, slots=True)
class _Endpoints:
    api_base: str
    gateway: str | None


_T = TypeVar("_T")
_live: weakref.WeakSet[DiscordAdapter] = weakref.WeakSet()


def create(name: str, config: DiscordChannelConfig, *, secrets: Callable[[SecretRef], str]) -> DiscordAdapter:
    """Build the adapter; point discord.py at the configured API base (process-wide).

    Raises `ConfigError` when another live Discord channel in this process already uses a
    different API base or gateway URL (discord.py can only hold one).
    """
    api_base, gateway = config.endpoints
    endpoints = _Endpoints(api_base=api_base or _SDK_DEFAULT_BASE, gateway=gateway)
    for other in _live:
        if other.endpoints != endpoints:
            raise ConfigError(
                [
                    ConfigProblem(
                        "config",
                        f"channels.{name}.api_base_url",
                        f"discord.py holds one API base and gateway URL per process; channel "
                        f"{other.name!r} already uses {other.endpoints.api_base!r} / "
                        f"{other.endpoints.gateway!r}, this one asks for {endpoints.api_base!r} / "
                        f"{endpoints.gateway!r}",
                    )
                ]
            )
    Route.BASE = endpoints.api_base
    if endpoints.gateway is not None:
        DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(endpoints.gateway)
    adapter = DiscordAdapter(
        name=name,
        token=secrets(config.token),
        endpoints=endpoints,
        guild_ready_timeout_s=config.guild_ready_timeout_s,
        stream=config.stream,
        stream_edit_interval_s=config.stream_edit_interval_s,
    )
    _live.add(adapter)
    return adapter


class DiscordAdapter:
    """One Discord bot. DMs and guild messages are delivered with their group facts (a mention
    of the bot, stripped; a reply to one of its messages; a leading `/command`); the core's
    route gate decides what a guild message needs. Messages from bots (itself included) are ignored.

    `chat` is the channel id (for a thread, its parent channel's id, with `thread` = the
    thread's id); `sender` the author's user id; `event_id` the message id. Approval prompts
    carry Approve / Deny buttons (custom ids `ap:<request_id>:y|n`); a click is delivered as
    an `ApprovalAnswer`, acknowledged to Discord at once (a deferred update, type 6).
    """

    max_message_chars = MAX_MESSAGE_CHARS
    max_file_bytes: int = discord_files.MAX_FILE_BYTES
    # A download that sends no byte for this long fails with ChannelError (the core may retry).
    download_idle_timeout_s: float = 30.0

    def __init__(
        self,
        *,
        name: str,
        token: str,
        endpoints: _Endpoints,
        guild_ready_timeout_s: float,
        stream: bool = True,
        stream_edit_interval_s: float = 1.0,
    ) -> None:
        self.name = name
        self.endpoints = endpoints
        self._token = token
        self._guild_ready_timeout_s = guild_ready_timeout_s
        self._client: _GatewayClient | None = None
        self._closed = False
        self._stream = stream
        self._pacers = PacerBook(stream_edit_interval_s)  # one edit pace per channel, shared by its streams

    # -- receiving -------------------------------------------------------------------------

    async def run(self, deliver: Deliver, ready: Ready) -> None:
        """Log in, connect to the gateway and deliver messages and clicks until cancelled.

        Deliveries are awaited one at a time, in the order Discord sent them; a button press
        is acknowledged to Discord only after its delivery returned.

        Raises `ChannelAuthError` when Discord refuses the token (401 on login, gateway close
        code 4004) or the bot lacks a privileged intent it needs (message content), and
        `ChannelError` for any other failure to connect or a close discord.py cannot resume.
        """
        if self._closed:
            raise ChannelError(self.name, "the adapter is closed")
        inbox: asyncio.Queue[_Delivery | None] = asyncio.Queue()
        client = _GatewayClient(adapter=self, inbox=inbox, ready=ready, intents=_intents(), options=self._options())
        self._client = client
        try:
            async with asyncio.TaskGroup() as tasks:
                pump = tasks.create_task(_pump(self.name, inbox, deliver))
                watchdog = tasks.create_task(_watch_heartbeats(self.name, client))
                try:
                    await self._connect(client)
                except ChannelError as exc:
                    failure = exc
                else:
                    failure = ChannelError(self.name, "the gateway connection closed")
                finally:
                    watchdog.cancel()
                    # hand over what was received before the drop, then stop the pump
                    inbox.put_nowait(None)
                await pump
        finally:
            self._client = None
            client.abandon_pending()
            await client.close()
        raise failure

    async def _connect(self, client: _GatewayClient) -> None:
        try:
            await client.login(self._token)
            if self.endpoints.gateway is None and self.endpoints.api_base != _SDK_DEFAULT_BASE:
                # discord.py's Client never asks GET /gateway/bot itself (only the sharded one does)
                _shards, url, _limits = await client.http.get_bot_gateway()
                DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)
            await client.connect(reconnect=True)
        except discord.LoginFailure as exc:
            raise ChannelAuthError(self.name, "Discord rejected the bot token (401 on /users/@me)") from exc
        except discord.PrivilegedIntentsRequired as exc:
            raise ChannelAuthError(
                self.name,
                "Discord refused the MESSAGE CONTENT privileged intent (gateway close 4014): enable it "
                "for this bot under Developer Portal -> Bot -> Privileged Gateway Intents",
            ) from exc
        except discord.ConnectionClosed as exc:
            if exc.code in _AUTH_CLOSE_CODES:
                raise ChannelAuthError(self.name, f"the gateway rejected the token (close code {exc.code})") from exc
            raise ChannelError(self.name, f"the gateway closed the connection (code {exc.code})") from exc
        except discord.GatewayNotFound as exc:
            raise ChannelError(self.name, "GET /gateway/bot failed: no gateway URL") from exc
        except discord.HTTPException as exc:
            raise _http_error(self.name, "login", exc) from exc
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ChannelError(self.name, f"cannot connect to Discord: {type(exc).__name__}: {exc}") from exc
        except Exception as exc:  # discord.py 2.7 hits AttributeError if the first socket closes before HELLO
            raise ChannelError(self.name, f"discord.py failed: {type(exc).__name__}: {exc}") from exc

    def _options(self) -> dict[str, Any]:
        return {
            "guild_ready_timeout": self._guild_ready_timeout_s,
            "max_ratelimit_timeout": _MAX_RATELIMIT_WAIT_S,
            "max_messages": None,  # no message cache: the core keeps transcripts
            "chunk_guilds_at_startup": False,
            "member_cache_flags": discord.MemberCacheFlags.none(),
            # model output must not ping @everyone or roles
            "allowed_mentions": discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=False),
        }

    def translate(self, message: discord.Message, me: discord.ClientUser) -> Inbound | ApprovalAnswer | None:
        """Return what the core should see for `message`, or None to ignore it."""
        if message.author.bot or message.author.id == me.id or message.type not in _CHATTY_TYPES:
            return None
        is_direct = isinstance(message.channel, discord.DMChannel)
        mentioned = any(user.id == me.id for user in message.mentions)
        text = re.sub(rf"<@!?{me.id}>", " ", message.content).strip()
        chat, thread = _chat_and_thread(message.channel, message.channel.id)
        command = parse_approval_command(text)
        if command is not None:
            # answers to our own prompt need no mention; the core checks who may answer
            request_id, approved = command
            return ApprovalAnswer(
                channel=self.name, request_id=request_id, sender=str(message.author.id), approved=approved, chat=chat
            )
        show = parse_show_command(text)
        if show is not None:  # like an answer, `/show ID` about our own prompt needs no mention
            text, mentioned = show_command(show), True
        attachments = discord_files.attachments_of(message)
        if not text and not attachments:
            return None
        replied = message.reference.resolved if message.reference is not None else None
        return Inbound(
            channel=self.name,
            chat=chat,
            sender=str(message.author.id),
            text=text,
            event_id=str(message.id),
            message_id=str(message.id),
            thread=thread,
            sender_name=message.author.display_name,
            is_direct=is_direct,
            attachments=attachments,
            mentions_bot=mentioned,
            reply_to_bot=isinstance(replied, discord.Message) and replied.author.id == me.id,
            command_target="bot" if text.startswith("/") else "other" if _OTHERS_COMMAND.match(text) else None,
        )

    # -- sending ---------------------------------------------------------------------------

    async def send(self, message: Outbound, *, progress: ReplyProgress | None = None) -> None:
        """Post `message.text` in chunks of at most 2,000 characters (the first one replying
        to `reply_to` when given), skipping the chunks `progress` counts as accepted.
        discord.py waits out 429s (retry_after, up to 5 tries, each wait at most 30 s);
        raises `ChannelError` when it gives up, `ChannelRefused` for a 4xx."""
        skip = progress.done if progress is not None else 0
        channel = self._channel(message.chat, message.thread)
        self._pacers.pacer(str(channel.id)).posted_by_other()  # a reply streaming above moves below it
        reference = (
            discord.MessageReference(message_id=int(message.reply_to), channel_id=channel.id, fail_if_not_exists=False)
            if message.reply_to and message.reply_to.isdigit()
            else None
        )
        for index, chunk in enumerate(chunk_text(message.text, MAX_MESSAGE_CHARS)):
            if index < skip:
                continue
            kwargs: dict[str, Any] = {"reference": reference} if index == 0 and reference is not None else {}
            await self._call("send a message", channel.send(chunk, **kwargs))
            if progress is not None:
                progress.advance()

    def open_stream(self, message: Outbound) -> EditStream | None:
        """Return a send-then-edit stream into the reply's channel or thread (None with `stream = false`)."""
        return self._edit_stream(message, ()) if self._stream else None

    def reopen_stream(self, message: Outbound, message_ids: Sequence[str]) -> EditStream | None:
        """Take over the messages a crashed stream left half-shown: `finish` edits them (None: cannot)."""
        return self._edit_stream(message, [m for m in message_ids if m.isdigit()]) if message_ids else None

    def _edit_stream(self, message: Outbound, existing: Sequence[str]) -> EditStream | None:
        try:
            channel = self._channel(message.chat, message.thread)
        except ChannelError:
            return None  # not connected or not a channel id: `send` reports it (and is retried)
        return open_edit_stream(
            name=self.name, channel=channel, reply_to=message.reply_to, pacers=self._pacers, call=self._call,
            existing=existing,
        )

    async def close_abandoned(self, chat: str, thread: str | None, message_ids: Sequence[str], ending: str) -> None:
        """Reply to the last message a crashed stream left with `ending` (raises like `send`)."""
        await close_abandoned_stream(
            channel=self._channel(chat, thread), message_ids=message_ids, ending=ending, call=self._call
        )

    async def prompt_approval(self, prompt: ApprovalPrompt) -> None:
        """Post the approval question with Approve / Deny buttons in the prompt's chat or thread."""
        channel = self._channel(prompt.chat, prompt.thread)
        self._pacers.pacer(str(channel.id)).posted_by_other()
        text, cut = _prompt_text(prompt)
        await self._call("post an approval prompt", channel.send(text, view=_buttons(prompt.request_id, show=cut)))

    async def typing(self, chat: str, thread: str | None) -> None:
        """Show "typing..." once (Discord keeps it for about 10 s or until the bot posts)."""
        await self._call("send typing", self._channel(chat, thread).typing())

    # -- files (FileAdapter) ---------------------------------------------------------------

    async def describe(self, attachment: Attachment) -> Attachment:
        """Return `attachment`: a Discord message carries every attachment in full."""
        return attachment

    async def download(self, attachment: Attachment, dest: BinaryIO, *, max_bytes: int) -> int:
        """Stream an attachment from Discord's CDN into `dest` (no token is sent there).

        Raises `AttachmentTooLarge` past `max_bytes` (the core removes dest), `ChannelRefused` when the
        CDN refuses (an expired link is a 404) or the URL is not Discord's, and `ChannelError`
        when the fetch fails or stalls for `download_idle_timeout_s`.
        """
        custom = None if self.endpoints.api_base == _SDK_DEFAULT_BASE else self.endpoints.api_base
        return await discord_files.download(
            attachment,
            dest,
            channel=self.name,
            api_base=custom,
            max_bytes=max_bytes,
            idle_timeout_s=self.download_idle_timeout_s,
        )

    async def send_file(self, file: OutboundFile) -> str:
        """Post `file` as an attachment (images show inline), the caption as its text; return the message id.

        Raises `ChannelRefused` for a file over `max_file_bytes` or one Discord refuses (413 /
        40005 past the channel's limit, no permission to attach files), `ChannelError` otherwise.
        """
        return await discord_files.post_file(
            self._channel(file.chat, file.thread), file, channel=self.name, call=self._call, max_chars=MAX_MESSAGE_CHARS
        )

    async def aclose(self) -> None:
        """Disconnect, and restore discord.py's default endpoints if no Discord channel is left."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        _live.discard(self)
        if not _live:
            Route.BASE = _SDK_DEFAULT_BASE
            DiscordWebSocket.DEFAULT_GATEWAY = _SDK_DEFAULT_GATEWAY

    def _channel(self, chat: str, thread: str | None) -> discord.PartialMessageable:
        """Return the channel to post in: the thread if any (a thread is a channel), else `chat`."""
        client = self._client
        if client is None or client.user is None:
            raise ChannelError(self.name, "not connected to Discord")
        target = thread or chat
        if not target.isdigit():
            raise ChannelError(self.name, f"{target!r} is not a Discord channel id")
        return client.get_partial_messageable(int(target))

    async def _call(self, what: str, operation: Awaitable[_T]) -> _T:
        try:
            return await operation
        except discord.HTTPException as exc:
            raise _http_error(self.name, what, exc) from exc
        except discord.RateLimited as exc:
            reason = f"cannot {what}: rate limited for {exc.retry_after:.0f}s"
            raise ChannelRateLimited(self.name, reason, retry_after_s=exc.retry_after) from exc
        except (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError, RuntimeError) as exc:
            raise ChannelError(self.name, f"cannot {what}: {type(exc).__name__}: {exc}") from exc


# -- the discord.py client ---------------------------------------------------------------------


@dataclass(slots=True)
class _Delivery:
    item: Inbound | ApprovalAnswer
    done: asyncio.Future[bool] | None = None


class _GatewayClient(discord.Client):
    """discord.py's event handlers; they only queue work for `run`'s pump, in arrival order."""

    def __init__(
        self,
        *,
        adapter: DiscordAdapter,
        inbox: asyncio.Queue[_Delivery | None],
        ready: Ready,
        intents: discord.Intents,
        options: dict[str, Any],
    ) -> None:
        super().__init__(intents=intents, **options)
        # prefixed: discord.Client has private attributes of its own (e.g. _ready)
        self._orc_adapter, self._orc_inbox, self._orc_ready = adapter, inbox, ready
        self._orc_announced = False
        self._orc_pending: set[asyncio.Future[bool]] = set()

    async def on_connect(self) -> None:
        # discord.py fires on_ready only after guild_ready_timeout passes with no further
        # GUILD_CREATE, even for a bot in no guild; such a bot is receiving already.
        if not self.guilds:
            await self.on_ready()

    async def on_ready(self) -> None:
        if not self._orc_announced:
            self._orc_announced = True
            self._orc_ready()
        else:  # a new session after a lost one (IDENTIFY again)
            report_recovered(self._orc_ready)

    async def on_disconnect(self) -> None:
        # discord.py reconnects (RESUME, else IDENTIFY) itself; the channel says so meanwhile.
        if self._orc_announced and not self.is_closed():
            report_reconnecting(self._orc_ready, "the gateway connection closed; discord.py is reconnecting")

    async def on_resumed(self) -> None:
        report_recovered(self._orc_ready)

    async def on_message(self, message: discord.Message) -> None:
        me = self.user
        if me is None:
            return
        item = self._orc_adapter.translate(message, me)
        if item is not None:
            self._orc_inbox.put_nowait(_Delivery(item))

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        if interaction.type is not discord.InteractionType.component or interaction.data is None:
            return
        custom_id = str(interaction.data.get("custom_id", ""))
        button, show = parse_approval_button(custom_id), parse_show_button(custom_id)
        channel_id = interaction.channel_id
        where = None if channel_id is None else _chat_and_thread(interaction.channel, channel_id)
        answer: Inbound | ApprovalAnswer
        if show is not None and where is not None:  # Show all: the presser's `/show ID`
            answer = Inbound(
                channel=self._orc_adapter.name, chat=where[0], thread=where[1], sender=str(interaction.user.id),
                text=show_command(show), event_id=str(interaction.id),
                is_direct=isinstance(interaction.channel, discord.DMChannel),
                command_target="bot",  # a press on the bot's own prompt is addressed to it
            )
        elif button is not None:
            request_id, approved = button
            answer = ApprovalAnswer(
                channel=self._orc_adapter.name,
                request_id=request_id,
                sender=str(interaction.user.id),
                approved=approved,
                chat=None if where is None else where[0],
            )
        else:
            return
        # Acknowledge at once (a deferred update, type 6): Discord fails an interaction not
        # answered within 3 s (10062), and what the press leads to (a reply in the chat, a
        # turn resuming) may take longer. An approval answer is not durable state to lose.
        try:
            await interaction.response.defer()
        except discord.DiscordException as exc:
            logger.warning("channel {}: cannot acknowledge a button press: {}", self._orc_adapter.name, exc)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._orc_pending.add(done)
        self._orc_inbox.put_nowait(_Delivery(answer, done))
        try:
            await done
        finally:
            self._orc_pending.discard(done)

    def abandon_pending(self) -> None:
        """Cancel clicks still waiting for delivery (run is ending)."""
        for done in self._orc_pending:
            done.cancel()


async def _watch_heartbeats(name: str, client: discord.Client) -> None:
    """Close the gateway socket when the heartbeat sent last was not ACKed in time.

    Discord ACKs every heartbeat before the next one is due, so no ACK for 1.5 intervals
    means the beat sent half an interval ago went unanswered: the first missed ACK. Reads
    discord.py's keep-alive state (`DiscordWebSocket._keep_alive`: `interval` and
    `_last_ack`, a `time.perf_counter()` stamp); if a discord.py release renames them,
    this finds nothing and discord.py's own 60 s `heartbeat_timeout` is the fallback.
    """
    closed_for: object = None
    while True:
        await asyncio.sleep(_WATCH_EVERY_S)
        ws = getattr(client, "ws", None)
        keep_alive = getattr(ws, "_keep_alive", None)
        if ws is None or keep_alive is None or keep_alive is closed_for:
            continue
        interval, acked = getattr(keep_alive, "interval", None), getattr(keep_alive, "_last_ack", None)
        if not isinstance(interval, float) or not isinstance(acked, float):
            continue
        if time.perf_counter() - acked > _MISSED_ACK_INTERVALS * interval:
            closed_for = keep_alive  # one close per connection; the resumed one has its own handler
            logger.warning("channel {}: the gateway did not ACK a heartbeat; reconnecting", name)
            await ws.close(code=_ZOMBIE_CLOSE_CODE)


async def _pump(name: str, inbox: asyncio.Queue[_Delivery | None], deliver: Deliver) -> None:
    """Deliver queued items one at a time until the `None` sentinel."""
    while (delivery := await inbox.get()) is not None:
        try:
            await deliver(delivery.item)
        except IntakeDeferred as exc:  # the core said why once
            logger.info("channel {}: delivering {} failed: {}", name, type(delivery.item).__name__, exc.reason)
            ok = False
        except Exception as exc:  # one failed delivery must not drop the connection
            logger.opt(exception=exc).error("channel {}: delivering {} failed", name, type(delivery.item).__name__)
            ok = False
        else:
            ok = True
        if delivery.done is not None and not delivery.done.done():
            delivery.done.set_result(ok)


# -- translation helpers -----------------------------------------------------------------------


def _intents() -> discord.Intents:
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    return intents


def _chat_and_thread(channel: object, channel_id: int) -> tuple[str, str | None]:
    """Return (chat, thread): a thread's chat is its parent channel."""
    if isinstance(channel, discord.Thread):
        return str(channel.parent_id), str(channel.id)
    return str(channel_id), None


def _prompt_text(prompt: ApprovalPrompt) -> tuple[str, bool]:
    """Return the question, the arguments fitted to what one message's content holds, and
    whether they had to be cut."""
    head = f"**Approval needed** — <@{prompt.requester}> wants to run `{prompt.tool[:_NAME_CHARS]}`:\n```\n"
    tail = (
        f"\n```\n"
        f"Answer within {prompt.timeout_s:.0f}s with the buttons, or "
        f"`{approval_command(prompt.request_id, approved=True)}` / "
        f"`{approval_command(prompt.request_id, approved=False)}`."
    )
    hint = f" The arguments are cut: press Show all or send `{show_command(prompt.request_id)}`."
    room = MAX_MESSAGE_CHARS - len(head) - len(tail) - len(hint)
    preview = fit_arguments(prompt.arguments, room, size=lambda text: len(_in_code_block(text)))
    cut = preview != prompt.arguments.whole
    return head + _in_code_block(preview) + tail + (hint if cut else ""), cut


def _in_code_block(text: str) -> str:
    """Keep `text` inside its code block: a fence in it would end the block early."""
    return text.replace("``", "`\u200b`")  # no run of three backticks survives, however long


def _buttons(request_id: str, *, show: bool) -> discord.ui.View:
    """Build the Approve / Deny (/ Show all) row; clicks arrive through `on_interaction`, not the View."""
    view = discord.ui.View(timeout=None)
    approve, deny = (encode_approval_button(request_id, approved=flag) for flag in (True, False))
    if len(approve) <= _CUSTOM_ID_MAX:
        view.add_item(discord.ui.Button(style=discord.ButtonStyle.success, label="Approve", custom_id=approve))
        view.add_item(discord.ui.Button(style=discord.ButtonStyle.danger, label="Deny", custom_id=deny))
        if show:
            view.add_item(
                discord.ui.Button(style=discord.ButtonStyle.secondary, label="Show all", custom_id=encode_show_button(request_id))
            )
    # A stopped view is not stored by discord.py: clicks are handled by on_interaction, which
    # also works for prompts posted before a restart.
    view.stop()
    return view


def _http_error(name: str, what: str, exc: discord.HTTPException) -> ChannelError:
    reason = f"cannot {what}: HTTP {exc.status} {exc.text or ''}".rstrip()
    if exc.status == 401:
        return ChannelAuthError(name, f"Discord rejected the bot token ({reason})")
    if 400 <= exc.status < 500 and exc.status != 429:  # refused: the same request fails again
        return ChannelRefused(name, reason)
    return ChannelError(name, reason)
