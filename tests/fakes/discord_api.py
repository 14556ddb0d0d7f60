"""A loopback fake of Discord: the REST API (v10) and the gateway websocket, driven by tests.

Usage::

    async with FakeDiscord(token="good-token") as fake:
        # config: api_base_url = fake.api_base_url, gateway_url = fake.gateway_url (optional:
        # without it the client asks GET /gateway/bot, which answers fake.gateway_url)
        await fake.wait_identified()
        await fake.push_message(channel_id=10, author_id=42, content="hi")      # a DM
        await fake.push_message(20, 42, "<@BOT> hi", guild_id=5, mentions=[fake.bot_id])
        await fake.click("ap:req-1:y", user_id=42, channel_id=10)             # a button press
        await fake.drop_gateway()                                               # code 4000: resumable
        fake.fail_next("POST", "/channels/{id}/messages", status=429, retry_after=0.2)
        await fake.wait_until(lambda: len(fake.created_messages) == 1)
        fake.created_messages[0]["content"], fake.interaction_responses[0]["type"], fake.typing

The gateway speaks enough of the real protocol for discord.py: HELLO (op 10), IDENTIFY (op 2)
-> READY (+ GUILD_CREATE per added guild), HEARTBEAT (op 1) -> ACK (op 11), RESUME (op 6) ->
replay of missed dispatches + RESUMED, sequence numbers per session, JSON encoding, and the
`compress=zlib-stream` transport compression discord.py always asks for (binary frames from
one zlib context, each flushed with Z_SYNC_FLUSH, like Discord). Dispatches pushed while the
client is disconnected are kept in the session and replayed on RESUME, as Discord does.
A bad token gets 401 on REST and close code 4004 on IDENTIFY.

Bot messages can be edited (PATCH) and deleted within Discord's per-channel edit rate limit,
with the `X-RateLimit-*` headers and 429 answers Discord sends; `messages`
(`discord_messages.DiscordMessages`) holds what a user sees and when each change happened.
Attachments live on a CDN route and message posts may be multipart with files
(`tests/fakes/discord_files.py`, `fake.cdn`).
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final

from aiohttp import WSMsgType, web

from tests.fakes import discord_payloads as payloads
from tests.fakes.discord_messages import DiscordMessages
from tests.fakes.discord_files import MAX_UPLOAD_BYTES, FakeDiscordCdn, UploadedFile, parse_multipart
from tests.fakes.loopback import start_app

__all__ = ["FakeDiscord", "RecordedRequest"]

MAX_CONTENT_CHARS: Final = 2000  # a message's content, as Discord counts it
_API: Final = "/api/v10"
GATEWAY_MESSAGE_CONTENT_LIMITED: Final = 1 << 19  # the application flag of the intent switched on (unverified app)
_MAX_BODY_BYTES: Final = 64 * 1024 * 1024
_MESSAGE_CONTENT_INTENT: Final = 1 << 15
_PRIVILEGED_INTENTS: Final = (1 << 1) | (1 << 8) | _MESSAGE_CONTENT_INTENT


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One REST request the fake received (path without the /api/v10 prefix)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    files: tuple[UploadedFile, ...] = ()


@dataclass(slots=True)
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    retry_after: float | None
    remaining: int


@dataclass(slots=True)
class _Session:
    id: str
    seq: int = 0
    events: list[tuple[int, str, Any]] = field(default_factory=list)
    socket: _Connection | None = None


@dataclass(slots=True, eq=False)
class _Connection:
    ws: web.WebSocketResponse
    zlib_stream: bool
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    compressor: Any = field(default_factory=zlib.compressobj)

    async def send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload, separators=(",", ":"))
        async with self.lock:
            if self.ws.closed:
                return
            if self.zlib_stream:
                frame = self.compressor.compress(data.encode()) + self.compressor.flush(zlib.Z_SYNC_FLUSH)
                await self.ws.send_bytes(frame)
            else:
                await self.ws.send_str(data)


class FakeDiscord:
    """Serve Discord's REST API and gateway on 127.0.0.1; use as `async with FakeDiscord():`.

    Recorded state (append-only, in arrival order): `requests` (every REST call),
    `created_messages` (POST /channels/{id}/messages bodies plus `channel_id` and the `id`
    assigned), `interaction_responses` (callback bodies plus `interaction_id`), `typing`
    (channel ids), `gateway_connections` (one dict per websocket: `path`, `query`, and
    `op` = "identify" | "resume" once the client says which).
    """

    def __init__(
        self,
        *,
        token: str = "fake-discord-token",
        bot_id: str = "1100000000000000001",
        bot_name: str = "fakebot",
        heartbeat_interval_ms: int = 41_250,
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.bot_name = bot_name
        self.application_id = bot_id
        self.heartbeat_interval_ms = heartbeat_interval_ms
        # the Message Content intent off: close 4014 on IDENTIFY asking for it, no flag on /applications/@me
        self.refuse_privileged_intents = False
        self.gateway_rejects_token = False  # close 4004 on IDENTIFY (a token revoked after login)
        self.requests: list[RecordedRequest] = []
        self.created_messages: list[dict[str, Any]] = []
        self.interaction_responses: list[dict[str, Any]] = []
        self.typing: list[str] = []
        self.gateway_connections: list[dict[str, Any]] = []
        self.identify_payloads: list[dict[str, Any]] = []
        self._bot_messages: list[dict[str, Any]] = []
        # bot messages as a user sees them, edits and their per-channel rate limits (discord_messages.py)
        self.messages = DiscordMessages()
        self._guilds: dict[str, dict[str, Any]] = {}
        self._channels: dict[str, dict[str, Any]] = {}
        self._failures: list[_Failure] = []
        self._delays: list[_Failure] = []  # status unused: retry_after holds the delay
        # Discord answers 10062 "Unknown interaction" to a first response later than this.
        self.interaction_deadline_s = 3.0
        self._interactions: dict[str, float] = {}  # interaction id -> when it was created
        self._sessions: dict[str, _Session] = {}
        self._current: _Session | None = None
        self._connections: set[_Connection] = set()
        self._zombies: set[_Connection] = set()  # connections that swallow heartbeats and send nothing
        self.heartbeats: list[tuple[float, bool]] = []  # (time.monotonic(), ACKed) per heartbeat
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._origin: str | None = None
        self.cdn = FakeDiscordCdn(origin=lambda: self._require_origin("http"), notify=self._notify)

    # -- addresses -------------------------------------------------------------------------

    @property
    def api_base_url(self) -> str:
        """Return `http://127.0.0.1:PORT/api/v10`, the value for `api_base_url`."""
        return self._require_origin("http") + _API

    @property
    def gateway_url(self) -> str:
        """Return the `ws://` URL of the gateway (what GET /gateway/bot answers)."""
        return self._require_origin("ws") + "/gateway"

    @property
    def resume_gateway_url(self) -> str:
        """Return the `ws://` URL READY names for RESUME (same server, distinct path)."""
        return self._require_origin("ws") + "/gateway-resume"

    def _require_origin(self, scheme: str) -> str:
        if self._origin is None:
            raise RuntimeError("FakeDiscord is not running; use `async with FakeDiscord() as fake:`")
        return f"{scheme}://{self._origin}"

    # -- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> FakeDiscord:
        app = web.Application(client_max_size=_MAX_BODY_BYTES)  # file posts: past aiohttp's 1 MiB default
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/gateway-resume", self._gateway)
        app.router.add_route("*", _API + "/{tail:.*}", self._rest)
        self.cdn.install(app)
        self._runner, port = await start_app(app)
        self._origin = f"127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for connection in list(self._connections):
            await connection.ws.close(code=1001)
        runner, self._runner, self._origin = self._runner, None, None
        if runner is not None:
            await runner.cleanup()

    # -- scripting -------------------------------------------------------------------------

    async def add_guild(
        self, guild_id: int | str, *, text_channels: Iterable[int | str] = (), threads: dict[int | str, int | str] | None = None
    ) -> None:
        """Add a guild with text channels and threads (`{thread_id: parent_id}`).

        Sent as GUILD_CREATE after READY; if a session is live it is sent now.
        """
        gid = str(guild_id)
        channels = [payloads.text_channel(str(c), gid) for c in text_channels]
        thread_objs = [payloads.thread(str(t), str(p), gid) for t, p in (threads or {}).items()]
        for obj in channels + thread_objs:
            self._channels[obj["id"]] = obj
        self._guilds[gid] = payloads.guild(gid, channels, thread_objs)
        if self._current is not None and self._current.socket is not None:
            await self._dispatch("GUILD_CREATE", self._guilds[gid])

    def fail_next(
        self, method: str, path: str, *, status: int = 429, retry_after: float | None = None, times: int = 1
    ) -> None:
        """Answer the next `times` matching REST calls with `status`.

        `path` is relative to /api/v10; a `{...}` segment matches any one segment, so
        "/channels/{id}/messages" matches every channel. 429 answers carry `retry_after`
        (body and Retry-After header) and the `Via` header Discord's edge adds.
        """
        parts = [("[^/]+" if re.fullmatch(r"\{[^/]*\}", p) else re.escape(p)) for p in path.split("/")]
        pattern = re.compile("/".join(parts))
        self._failures.append(_Failure(method.upper(), pattern, status, retry_after, times))

    def heal(self) -> None:
        """Forget every failure and delay still queued."""
        self._failures.clear()
        self._delays.clear()

    def slow_next(self, method: str, path: str, seconds: float, *, times: int = 1) -> None:
        """Answer the next `times` matching REST calls only after `seconds` (same `path` syntax)."""
        parts = [("[^/]+" if re.fullmatch(r"\{[^/]*\}", p) else re.escape(p)) for p in path.split("/")]
        self._delays.append(_Failure(method.upper(), re.compile("/".join(parts)), 0, seconds, times))

    async def push_message(
        self,
        channel_id: int | str,
        author_id: int | str,
        content: str,
        *,
        guild_id: int | str | None = None,
        mentions: Iterable[int | str] = (),
        bot: bool = False,
        message_id: int | str | None = None,
        username: str | None = None,
        attachments: Iterable[dict[str, Any]] = (),
        reply_to: str | None = None,
    ) -> str:
        """Dispatch MESSAGE_CREATE; return the message id (pass `message_id` to redeliver one).

        `reply_to` names a message the bot posted: the message replies to it (type 19, with
        `message_reference` and the `referenced_message` Discord includes).

        `attachments` are objects from `fake.cdn.attachment(...)`; a voice one flags the
        message IS_VOICE_MESSAGE, as Discord does.
        """
        mid = str(message_id) if message_id is not None else payloads.snowflake()
        payload = payloads.user_message(
            mid,
            str(channel_id),
            payloads.user(str(author_id), username=username, bot=bot),
            content,
            guild_id=None if guild_id is None else str(guild_id),
            mentions=[payloads.user(str(u), bot=str(u) == self.bot_id) for u in mentions],
        )
        if reply_to is not None:
            (replied,) = [m for m in self._bot_messages if m["id"] == str(reply_to)]
            payload |= {
                "type": 19, "referenced_message": replied,
                "message_reference": {"message_id": replied["id"], "channel_id": replied["channel_id"]}
                | ({"guild_id": str(guild_id)} if guild_id is not None else {}),
            }
        files = list(attachments)
        if files:
            voice = any("waveform" in item for item in files)
            payload |= {"attachments": files, "flags": (1 << 13) if voice else 0}
        await self._dispatch("MESSAGE_CREATE", payload)
        return mid

    async def click(
        self,
        custom_id: str,
        user_id: int | str,
        channel_id: int | str,
        *,
        guild_id: int | str | None = None,
    ) -> str:
        """Press the button `custom_id` (on the newest bot message that has it); return the interaction id."""
        cid, gid = str(channel_id), None if guild_id is None else str(guild_id)
        clicker = payloads.user(str(user_id))
        channel = self._channels.get(cid) or (
            {"id": cid, "type": 1, "recipients": [clicker]} if gid is None else payloads.text_channel(cid, gid)
        )
        message = next((m for m in reversed(self._bot_messages) if custom_id in payloads.custom_ids(m)), None)
        payload = payloads.component_interaction(
            app_id=self.application_id, custom_id=custom_id, clicker=clicker, channel=channel,
            guild_id=gid, message=message,
        )
        self._interactions[str(payload["id"])] = time.monotonic()
        await self._dispatch("INTERACTION_CREATE", payload)
        return str(payload["id"])

    async def drop_gateway(self, code: int = 4000) -> None:
        """Close every gateway websocket with `code` (4000 = unknown error, resumable)."""
        for connection in list(self._connections):
            await connection.ws.close(code=code)

    def zombie_gateway(self) -> None:
        """Turn every open gateway connection into a zombie: heartbeats are never ACKed and no
        dispatch reaches it (they wait in the session for a RESUME, as on Discord). New
        connections are healthy."""
        for connection in self._connections:
            self._zombies.add(connection)
        for session in self._sessions.values():
            if session.socket in self._zombies:
                session.socket = None

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until `predicate()` holds (checked after every request/gateway event)."""
        async with asyncio.timeout(timeout):
            async with self._changed:
                await self._changed.wait_for(predicate)

    async def wait_identified(self, count: int = 1, timeout: float = 10.0) -> None:
        """Wait until `count` IDENTIFYs have been answered with READY."""
        await self.wait_until(lambda: sum(c.get("op") == "identify" for c in self.gateway_connections) >= count, timeout)

    def _bot_user(self) -> dict[str, Any]:
        return payloads.user(self.bot_id, username=self.bot_name, bot=True)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- REST ------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        raw = await request.read()
        files: list[UploadedFile] = []
        if request.content_type == "multipart/form-data":
            body, files = parse_multipart(request.headers["Content-Type"], raw)
        else:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        self.requests.append(
            RecordedRequest(request.method, path, dict(request.query), dict(request.headers), body, tuple(files))
        )
        try:
            return await self._answer(request, path, body, files)
        finally:
            await self._notify()

    async def _answer(
        self, request: web.Request, path: str, body: Any, files: list[UploadedFile]
    ) -> web.StreamResponse:
        # interaction callbacks are authorised by the interaction token in the path, not the bot token
        token_in_path = path.startswith(("/interactions/", "/webhooks/"))
        if not token_in_path and request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401)
        for delay in self._delays:
            if delay.remaining > 0 and delay.method == request.method and delay.pattern.fullmatch(path):
                delay.remaining -= 1
                await asyncio.sleep(delay.retry_after or 0)
                break
        failure = self._take_failure(request.method, path)
        if failure is not None:
            return failure
        method = request.method
        if method == "GET" and path == "/users/@me":
            return _json(
                self._bot_user() | {"verified": True, "flags": 0, "mfa_enabled": False}
            )
        if method == "GET" and path in ("/applications/@me", "/oauth2/applications/@me"):
            # One switch, as on the Developer Portal: the intent off shows in the application's
            # flags and makes the gateway refuse an IDENTIFY that asks for it.
            flags = 0 if self.refuse_privileged_intents else GATEWAY_MESSAGE_CONTENT_LIMITED
            return _json(payloads.application(self.application_id, self.bot_name, flags=flags))
        if method == "GET" and path in ("/gateway", "/gateway/bot"):
            answer: dict[str, Any] = {"url": self.gateway_url}
            if path == "/gateway/bot":
                answer |= {"shards": 1, "session_start_limit": {
                    "total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}}
            return _json(answer)
        if match := re.fullmatch(r"/channels/(\d+)/messages/(\d+)", path):
            return self._message_route(method, match[1], match[2], body)
        if match := re.fullmatch(r"/channels/(\d+)/messages", path):
            if method == "POST" and isinstance(body, dict):
                headers, retry_after = self.messages.limit("post", match[1])
                if retry_after is not None:
                    return _rate_limited(retry_after, headers)
                if len(str(body.get("content") or "")) > MAX_CONTENT_CHARS:  # as Discord: the form is refused
                    return _json(
                        {"code": 50035, "message": "Invalid Form Body", "errors": {"content": {"_errors": [
                            {"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}},
                        status=400,
                    )
                if sum(len(f.content) for f in files) > MAX_UPLOAD_BYTES:  # as Discord, for a bot by default
                    return _json({"message": "Request entity too large", "code": 40005}, status=413)
                channel = self._channels.get(match[1])
                message = payloads.bot_message(
                    match[1], self._bot_user(), body, guild_id=None if channel is None else channel["guild_id"]
                )
                message["attachments"] = [
                    self.cdn.attachment(
                        channel_id=match[1], filename=f.filename or "file", content=f.content,
                        content_type=f.content_type,
                    )
                    for f in files
                ]
                self._bot_messages.append(message)
                record = dict(body) | {"channel_id": match[1], "id": message["id"]}
                if files:
                    record["files"] = files
                self.created_messages.append(record)
                self.messages.created(match[1], message["id"], str(body.get("content") or ""))
                return _json(message, headers=headers)
        if (match := re.fullmatch(r"/channels/(\d+)/typing", path)) and method == "POST":
            self.typing.append(match[1])
            return web.Response(status=204)
        if (match := re.fullmatch(r"/channels/(\d+)", path)) and method == "GET":
            if match[1] in self._channels:
                return _json(self._channels[match[1]])
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        if (match := re.fullmatch(r"/interactions/(\d+)/([^/]+)/callback", path)) and method == "POST":
            created = self._interactions.get(match[1])
            if created is not None and time.monotonic() - created > self.interaction_deadline_s:
                return _json({"message": "Unknown interaction", "code": 10062}, status=404)
            self.interaction_responses.append(dict(body or {}) | {"interaction_id": match[1]})
            if request.query.get("with_response") in ("1", "true"):
                return _json(
                    {"interaction": {"id": match[1], "type": 3, "response_message_loading": False,
                                     "response_message_ephemeral": False}}
                )
            return web.Response(status=204)
        return _json({"message": "404: Not Found", "code": 0}, status=404)

    def _message_route(self, method: str, channel_id: str, message_id: str, body: Any) -> web.Response:
        """PATCH (edit) or DELETE one bot message, inside the channel's edit rate limit."""
        if method not in ("PATCH", "DELETE"):
            return _json({"message": "405: Method Not Allowed", "code": 0}, status=405)
        headers, retry_after = self.messages.limit("edit", channel_id)
        if retry_after is not None:
            return _rate_limited(retry_after, headers)
        if method == "DELETE":
            status = self.messages.delete(channel_id, message_id)
            if status == 404:
                return _json({"message": "Unknown Message", "code": 10008}, status=404, headers=headers)
            return web.Response(status=204, headers=headers)
        status, answer = self.messages.edit(channel_id, message_id, body)
        if status != 200:
            return _json(answer, status=status, headers=headers)
        message = next(m for m in reversed(self._bot_messages) if m["id"] == message_id)
        message["content"] = answer["content"]
        message["edited_timestamp"] = "2026-01-01T00:00:00.000000+00:00"
        return _json(message, headers=headers)

    def _take_failure(self, method: str, path: str) -> web.Response | None:
        for failure in self._failures:
            if failure.remaining > 0 and failure.method == method and failure.pattern.fullmatch(path):
                failure.remaining -= 1
                if failure.status != 429:
                    return _json({"message": f"fake error {failure.status}", "code": 0}, status=failure.status)
                retry_after = failure.retry_after if failure.retry_after is not None else 0.05
                return _json(
                    {"message": "You are being rate limited.", "retry_after": retry_after, "global": False},
                    status=429,
                    headers={"Retry-After": f"{retry_after:g}", "Via": "1.1 google", "X-RateLimit-Scope": "user"},
                )
        return None

    # -- gateway ---------------------------------------------------------------------------

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoclose=True, max_msg_size=0)
        await ws.prepare(request)
        record: dict[str, Any] = {"path": request.path, "query": dict(request.query)}
        self.gateway_connections.append(record)
        connection = _Connection(ws=ws, zlib_stream=request.query.get("compress") == "zlib-stream")
        self._connections.add(connection)
        session: _Session | None = None
        try:
            if request.query.get("encoding", "json") != "json":
                await ws.close(code=4002)  # decode error: this fake speaks JSON only
                return ws
            await connection.send({"op": 10, "d": {"heartbeat_interval": self.heartbeat_interval_ms}, "s": None, "t": None})
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(msg.data)
                op, data = payload.get("op"), payload.get("d")
                if op == 1:
                    acked = connection not in self._zombies
                    self.heartbeats.append((time.monotonic(), acked))
                    if acked:
                        await connection.send({"op": 11, "d": None, "s": None, "t": None})
                elif op == 2:
                    session = await self._identify(connection, data, record)
                elif op == 6:
                    session = await self._resume(connection, data, record)
                await self._notify()
        finally:
            self._connections.discard(connection)
            self._zombies.discard(connection)
            if session is not None and session.socket is connection:
                session.socket = None
            await self._notify()
        return ws

    async def _identify(self, connection: _Connection, data: dict[str, Any], record: dict[str, Any]) -> _Session | None:
        self.identify_payloads.append(data)
        if data.get("token") != self.token or self.gateway_rejects_token:
            await connection.ws.close(code=4004)  # Authentication failed
            return None
        if self.refuse_privileged_intents and int(data.get("intents", 0)) & _PRIVILEGED_INTENTS:
            await connection.ws.close(code=4014)  # Disallowed intent(s)
            return None
        session = _Session(id=secrets.token_hex(16))
        self._sessions[session.id] = session
        self._current = session
        session.socket = connection
        ready = {
            "v": 10,
            "user": self._bot_user() | {"verified": True, "flags": 0, "mfa_enabled": False},
            "guilds": [{"id": gid, "unavailable": True} for gid in self._guilds],
            "session_id": session.id,
            "resume_gateway_url": self.resume_gateway_url,
            "application": {"id": self.application_id, "flags": 1 << 19},
            "private_channels": [],
            "relationships": [],
        }
        record["op"] = "identify"
        await self._dispatch("READY", ready)
        for guild in self._guilds.values():
            await self._dispatch("GUILD_CREATE", guild)
        return session

    async def _resume(self, connection: _Connection, data: dict[str, Any], record: dict[str, Any]) -> _Session | None:
        record["op"] = "resume"
        session = self._sessions.get(str(data.get("session_id")))
        if session is None or data.get("token") != self.token:
            await connection.send({"op": 9, "d": False, "s": None, "t": None})  # invalid session
            return None
        last = int(data.get("seq") or 0)
        # Replay until caught up, then attach: no await between the last check and attaching,
        # so a dispatch racing the replay is neither lost nor sent twice nor out of order.
        while missed := [event for event in session.events if event[0] > last]:
            for seq, event, payload in missed:
                await connection.send({"op": 0, "s": seq, "t": event, "d": payload})
                last = seq
        session.socket = connection
        await self._dispatch("RESUMED", {}, session)
        return session

    async def _dispatch(self, event: str, payload: Any, session: _Session | None = None) -> None:
        """Sequence `event` in the current session; send it now if the client is connected."""
        session = session or self._current
        if session is None:
            raise RuntimeError(f"FakeDiscord: no gateway session to dispatch {event} to (call wait_identified first)")
        session.seq += 1
        session.events.append((session.seq, event, payload))
        if session.socket is not None:
            await session.socket.send({"op": 0, "s": session.seq, "t": event, "d": payload})


def _rate_limited(retry_after: float, headers: dict[str, str]) -> web.Response:
    body = {"message": "You are being rate limited.", "retry_after": round(retry_after, 3), "global": False}
    return _json(body, status=429, headers=headers)


def _json(data: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # exactly "application/json": discord.py decodes JSON only for that exact content type
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={"Content-Type": "application/json"} | (headers or {})
    )
