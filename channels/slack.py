"""Slack adapter: slack-bolt's AsyncApp over Socket Mode (default) or the HTTP Events API.

Only `channels.create_adapter` imports this module, and only when a `kind = "slack"` channel is
configured, so importing the SDK at the top here keeps `import channels` SDK-free.

Behaviour:

- `run` probes `auth.test` (bad bot token -> `ChannelAuthError`, no retry), then serves:
  - Socket Mode: probes `apps.connections.open` with the app token (a bad one ->
    `ChannelAuthError`; the SDK's own connect loop would retry it forever), connects slack_sdk's
    aiohttp `SocketModeClient` and lets it reconnect after a drop. If it stays disconnected for
    `_GRACE_PINGS` ping intervals, `run` raises `ChannelError` and the supervisor takes over.
  - HTTP: an aiohttp server at `http_listen:http_port` + `http_path`; bolt verifies the
    signature and rejects a timestamp older than 5 minutes with 401 before anything is
    delivered, and answers `url_verification` challenges.
- Bolt runs with `process_before_response=True`: `deliver` finishes before the envelope is
  acknowledged (Socket Mode) or the HTTP 200 is returned, so a crash before the ack makes Slack
  redeliver with the same `event_id`, which the core de-duplicates. A failing `deliver`
  leaves the event unacknowledged for the same reason.
- Sends go through one `AsyncWebClient` whose `AsyncRateLimitErrorRetryHandler` honours
  `Retry-After` on HTTP 429 up to `_RATE_LIMIT_RETRIES` times; then `ChannelError`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO, Final, TypeVar

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from channels import slack_files
from channels.base import (
    ApprovalPrompt,
    Attachment,
    ChannelAuthError,
    ChannelError,
    ChannelRateLimited,
    ChannelRefused,
    Deliver,
    Inbound,
    Outbound,
    OutboundFile,
    Ready,
    ReplyProgress,
    report_reconnecting,
    report_recovered,
)
from channels.chunking import chunk_text
from channels.slack_payloads import approval_message, escape, from_block_actions, from_event
from channels.slack_stream import Askers, SlackStream, StreamSupport, close_abandoned_stream, set_thread_status
from channels.streaming import PacerBook

if TYPE_CHECKING:
    from orchestrator.config import SecretRef
    from orchestrator.config.channels import SlackChannelConfig

__all__ = ["SlackAdapter", "create"]

# We post plain `text` (not section blocks, which cap at 3,000): Slack asks to keep `text` under
# 4,000 characters (it truncates at 40,000), and longer messages render badly in clients.
_TEXT_LIMIT: Final = 4000
_RATE_LIMIT_RETRIES: Final = 3
_GRACE_PINGS: Final = 6
# Answers that no retry can fix: a wrong, revoked or wrong-kind token, or a missing scope.
_AUTH_ERRORS: Final = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
        "missing_scope",
    }
)
_ANY: Final = re.compile(".*")
_log: Final = logging.getLogger(__name__)

T = TypeVar("T")


def create(name: str, config: SlackChannelConfig, *, secrets: Callable[[SecretRef], str]) -> SlackAdapter:
    """Build the adapter for `[channels.<name>]`, resolving its secrets now (fail fast)."""
    return SlackAdapter(
        name=name,
        config=config,
        bot_token=secrets(config.bot_token),
        app_token=None if config.app_token is None else secrets(config.app_token),
        signing_secret=None if config.signing_secret is None else secrets(config.signing_secret),
    )


class SlackAdapter:
    """One Slack app (bot user) in one workspace; see the module docstring for behaviour."""

    max_message_chars: int = _TEXT_LIMIT
    max_file_bytes: int = slack_files.MAX_FILE_BYTES
    # A download that sends no byte for this long fails with ChannelError (the core may retry).
    download_idle_timeout_s: float = 30.0

    def __init__(
        self,
        *,
        name: str,
        config: SlackChannelConfig,
        bot_token: str,
        app_token: str | None,
        signing_secret: str | None,
    ) -> None:
        self.name = name
        self._config = config
        self._bot_token = bot_token
        self._app_token = app_token
        self._signing_secret = signing_secret
        self._session: aiohttp.ClientSession | None = None
        self._client: AsyncWebClient | None = None
        self._http_url: str | None = None
        self._askers = Askers()  # who asked in which thread: a chat stream names its recipient
        self._stream_support = StreamSupport()
        self._pacers = PacerBook(config.stream_edit_interval_s)

    @property
    def http_url(self) -> str | None:
        """Return the URL the HTTP Events API endpoint listens on while `run` serves it."""
        return self._http_url

    async def __aenter__(self) -> SlackAdapter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the Web API session; `run` closes its own connection when it ends."""
        session, self._session, self._client = self._session, None, None
        if session is not None:
            await session.close()

    # -- receiving ---------------------------------------------------------------------------

    async def run(self, deliver: Deliver, ready: Ready) -> None:
        """Connect, call `ready()`, and deliver inbound messages and answers until cancelled.

        Raises `ChannelAuthError` when Slack refuses a token and `ChannelError` when Slack is
        unreachable, the socket cannot be (re)established, or the HTTP port cannot be bound.
        """
        client = self._web_client()
        auth = await self._api("auth.test", client.auth_test())
        team_id = auth.get("team_id")
        self._askers.team_id = team_id if isinstance(team_id, str) and team_id else self._askers.team_id
        bot_user_id = auth.get("user_id")
        app = self._bolt_app(client, deliver, bot_user_id if isinstance(bot_user_id, str) else None)
        if self._config.mode == "http":
            await self._serve_http(app, ready)
        else:
            await self._serve_socket(app, client, ready)

    def _bolt_app(self, client: AsyncWebClient, deliver: Deliver, bot_user_id: str | None) -> AsyncApp:
        app = AsyncApp(
            name=f"channels.slack.{self.name}",
            logger=_log,
            client=client,
            signing_secret=self._signing_secret or "",  # "" skips bolt's SLACK_SIGNING_SECRET lookup
            process_before_response=True,  # deliver() completes before Slack gets its ack
        )
        channel = self.name

        async def on_event(body: dict[str, Any]) -> None:
            item = from_event(channel, body, bot_user_id=bot_user_id)
            if isinstance(item, Inbound):
                team = body.get("team_id")
                self._askers.remember(
                    item.chat, item.thread or item.message_id or "", item.sender, team if isinstance(team, str) else None
                )
            if item is not None:
                await deliver(item)

        async def on_action(ack: AsyncAck, body: dict[str, Any]) -> None:
            answer = from_block_actions(channel, body)
            if answer is not None:
                await deliver(answer)
            await ack()  # stops the spinner in the clicker's client

        # Catch-alls: an event or click bolt finds no listener for is answered 404 and never
        # acknowledged, so Slack would keep redelivering it; we acknowledge and ignore those.
        app.event(_ANY)(on_event)
        app.action(_ANY)(on_action)
        return app

    async def _serve_socket(self, app: AsyncApp, client: AsyncWebClient, ready: Ready) -> None:
        if self._app_token is None:
            raise ChannelAuthError(self.name, "socket mode needs app_token")
        # Probe the app token ourselves: the SDK's connect loop would retry a refused one forever.
        # The URL is dropped (the SDK asks for its own); an unused Socket Mode URL just expires.
        await self._api("apps.connections.open", client.apps_connections_open(app_token=self._app_token))
        ping_s = self._config.socket_ping_interval_s
        grace_s = ping_s * _GRACE_PINGS
        handler = AsyncSocketModeHandler(app, self._app_token, logger=_log, web_client=client, ping_interval=ping_s)
        connection: Any = handler  # bolt leaves connect_async / close_async unannotated
        try:
            try:
                async with asyncio.timeout(grace_s):
                    await connection.connect_async()
            except TimeoutError:
                raise ChannelError(self.name, f"socket mode: no websocket within {grace_s:g}s") from None
            ready()
            await self._watch_socket(handler, ping_s, grace_s, ready)
        finally:
            await connection.close_async()

    async def _watch_socket(self, handler: AsyncSocketModeHandler, ping_s: float, grace_s: float, ready: Ready) -> None:
        """Return never; raise `ChannelError` once the SDK has not reconnected for `grace_s`.

        Meanwhile the channel is reported reconnecting (the SDK reconnects in place), and
        recovered once the SDK is connected again.
        """
        loop = asyncio.get_running_loop()
        connected_at = loop.time()
        lost = False
        while True:
            await asyncio.sleep(ping_s)
            if await handler.client.is_connected():
                connected_at = loop.time()
                if lost:
                    lost = False
                    report_recovered(ready)
                continue
            if not lost:
                lost = True
                report_reconnecting(ready, "socket mode: disconnected; the SDK is reconnecting")
            if loop.time() - connected_at > grace_s:
                raise ChannelError(self.name, f"socket mode: disconnected for over {grace_s:g}s")

    async def _serve_http(self, app: AsyncApp, ready: Ready) -> None:
        async def handle(request: web.Request) -> web.Response:
            response: web.Response = await to_aiohttp_response(await app.async_dispatch(await to_bolt_request(request)))
            return response

        web_app = web.Application()
        web_app.router.add_post(self._config.http_path, handle)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        try:
            host, port = self._config.http_listen, self._config.http_port
            try:
                await web.TCPSite(runner, host, port).start()
            except OSError as exc:
                raise ChannelError(self.name, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
            bound_host, bound_port = runner.addresses[0][:2]
            self._http_url = f"http://{bound_host}:{bound_port}{self._config.http_path}"
            ready()
            await asyncio.Event().wait()  # serve until cancelled
        finally:
            self._http_url = None
            await runner.cleanup()

    # -- sending -----------------------------------------------------------------------------

    async def send(self, message: Outbound, *, progress: ReplyProgress | None = None) -> None:
        """Post `message.text` escaped and chunked to 4,000 characters, in its thread if any.

        Slack has no reply-to other than threads, so `reply_to` is not used. Chunks `progress`
        counts as accepted are skipped. Raises `ChannelRefused` when Slack refuses the post
        and `ChannelError` when it still rate-limits after the retries or fails (5xx, network).
        """
        client = self._web_client()
        skip = progress.done if progress is not None else 0
        self._pacers.pacer(message.chat).posted_by_other()  # a reply streaming above moves below it
        for index, chunk in enumerate(chunk_text(escape(message.text), self.max_message_chars)):
            if index < skip:
                continue
            await self._api(
                "chat.postMessage", client.chat_postMessage(channel=message.chat, text=chunk, thread_ts=message.thread)
            )
            if progress is not None:
                progress.advance()
        if message.thread is not None:  # Slack clears a thread's assistant status when the app replies
            self._stream_support.statuses.discard((message.chat, message.thread))

    def open_stream(self, message: Outbound) -> SlackStream | None:
        """Return a stream for this reply: a chat stream in a thread, post + edit elsewhere (see slack_stream).

        None with `stream = false`.
        """
        client = self._client
        if not self._config.stream or client is None:
            return None  # not running (or closed): `send` reports it, and is retried
        thread = message.thread
        return SlackStream(
            name=self.name,
            client=client,
            api=self._api,
            chat=message.chat,
            thread=thread,
            recipient=None if thread is None else self._askers.recipient(message.chat, thread),
            pacer=self._pacers.pacer(message.chat),
            support=self._stream_support,
        )

    def reopen_stream(self, message: Outbound, message_ids: Sequence[str]) -> SlackStream | None:
        """Take over the messages a crashed reply left half-shown: `finish` edits them (None: cannot)."""
        client = self._client
        if not message_ids or client is None:
            return None
        return SlackStream(
            name=self.name,
            client=client,
            api=self._api,
            chat=message.chat,
            thread=message.thread,
            recipient=None,
            pacer=self._pacers.pacer(message.chat),
            support=self._stream_support,
            existing=message_ids,
        )

    async def close_abandoned(self, chat: str, thread: str | None, message_ids: Sequence[str], ending: str) -> None:
        """Stop a stream a crash left live and follow it up with `ending` (raises like `send`)."""
        await close_abandoned_stream(
            client=self._web_client(), api=self._api, chat=chat, thread=thread, message_ids=message_ids, ending=ending
        )

    async def prompt_approval(self, prompt: ApprovalPrompt) -> None:
        """Post the tool name, an argument preview and Approve / Deny buttons in the chat."""
        client = self._web_client()
        message = approval_message(prompt)
        self._pacers.pacer(prompt.chat).posted_by_other()
        await self._api(
            "chat.postMessage",
            client.chat_postMessage(
                channel=prompt.chat, thread_ts=prompt.thread, text=message["text"], blocks=message["blocks"]
            ),
        )

    async def typing(self, chat: str, thread: str | None) -> None:
        """Show "is thinking..." as the thread's assistant status (Slack has no typing indicator
        for apps); outside threads do nothing. Never raises: a refused status is logged once."""
        client = self._client
        if thread is None or client is None:  # no status outside threads; none once closed
            return
        await set_thread_status(
            name=self.name, client=client, api=self._api, support=self._stream_support,
            chat=chat, thread=thread, text="is thinking...",
        )

    # -- files (FileAdapter) -----------------------------------------------------------------

    async def describe(self, attachment: Attachment) -> Attachment:
        """Look a Slack Connect stub up with `files.info`; return a full attachment as it is.

        Raises `ChannelRefused` when Slack will not describe the file (not shared with the
        app, unknown, no `files:read`), `ChannelError` when the call may succeed later.
        """
        return await slack_files.describe(self._web_client(), attachment, channel=self.name, api=self._api)

    async def download(self, attachment: Attachment, dest: BinaryIO, *, max_bytes: int) -> int:
        """Stream a file's `url_private` into `dest` with the bot token (`files:read`).

        Raises `AttachmentTooLarge` past `max_bytes` (the core removes dest), `ChannelRefused` when Slack
        refuses (401/403/404, a redirect to the sign-in page) or the URL is not Slack's, and
        `ChannelError` when the fetch fails or stalls for `download_idle_timeout_s`.
        """
        if attachment.pending:  # a stub's url_private is known only once files.info answers
            attachment = await self.describe(attachment)
        _client, session = self._http()
        return await slack_files.download(
            session,
            attachment,
            dest,
            channel=self.name,
            bot_token=self._bot_token,
            api_base_url=self._config.api_base_url,
            max_bytes=max_bytes,
            idle_timeout_s=self.download_idle_timeout_s,
        )

    async def send_file(self, file: OutboundFile) -> str:
        """Share `file` in its chat or thread (`files:write`), the caption as its comment; return the file id."""
        client, session = self._http()
        comment = escape(file.caption) if file.caption else None
        return await slack_files.upload(client, session, file, channel=self.name, api=self._api, initial_comment=comment)

    # -- Web API -----------------------------------------------------------------------------

    def _web_client(self) -> AsyncWebClient:
        if self._client is None:
            self._session = aiohttp.ClientSession()
            self._client = AsyncWebClient(
                token=self._bot_token,
                base_url=self._config.api_base_url or AsyncWebClient.BASE_URL,
                session=self._session,
                logger=_log,
                retry_handlers=[
                    AsyncConnectionErrorRetryHandler(),
                    AsyncRateLimitErrorRetryHandler(max_retry_count=_RATE_LIMIT_RETRIES),
                ],
            )
        return self._client

    def _http(self) -> tuple[AsyncWebClient, aiohttp.ClientSession]:
        """Return the Web API client and the aiohttp session it uses (file transfers share it)."""
        client = self._web_client()
        session = self._session
        if session is None:  # pragma: no cover - _web_client always makes both
            raise ChannelError(self.name, "the Web API session is closed")
        return client, session

    async def _api(self, method: str, call: Awaitable[T]) -> T:
        """Await one Web API call, translating SDK and network errors into channel errors."""
        try:
            return await call
        except SlackApiError as exc:
            error = exc.response.get("error") if isinstance(exc.response.data, Mapping) else None
            reason = f"{method}: {error or f'HTTP {exc.response.status_code}'}"
            if error in _AUTH_ERRORS:
                raise ChannelAuthError(self.name, reason) from exc
            status = exc.response.status_code
            if status < 500 and status != 429:  # Slack answered and refused: resending cannot help
                raise ChannelRefused(self.name, reason) from exc
            if status == 429:  # past the SDK's own retries
                wait = _retry_after(exc.response.headers)
                raise ChannelRateLimited(self.name, reason, retry_after_s=wait) from exc
            raise ChannelError(self.name, reason) from exc
        except (SlackClientError, aiohttp.ClientError, OSError) as exc:
            raise ChannelError(self.name, f"{method}: {type(exc).__name__}: {exc}") from exc


def _retry_after(headers: Mapping[str, Any] | None) -> float:
    """Return the seconds a 429's `Retry-After` asks for (1 s when it is missing or unreadable)."""
    for name, value in (headers or {}).items():
        if name.lower() == "retry-after":
            raw = value[0] if isinstance(value, (list, tuple)) and value else value
            try:
                return max(float(raw), 0.0)
            except (TypeError, ValueError):
                break
    return 1.0
