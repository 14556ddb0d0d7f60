"""A loopback fake of Slack: the Web API, a Socket Mode websocket, and signed Events API posts.

Usage::

    async with FakeSlack() as fake:
        # point the channel at it: api_base_url = fake.api_base_url, tokens fake.bot_token / fake.app_token
        envelope = await fake.push_message("hello", user="U1")       # a DM, over Socket Mode
        await fake.push_mention("hi", user="U1", channel="C1")       # "<@UBOT> hi" in a channel
        await fake.wait_acked(envelope)                              # the adapter acknowledged it
        await fake.wait_posted(1); fake.posted[0]["text"]            # chat.postMessage payloads
        await fake.click(request_id, user="U2", approve=True)       # presses a posted button
        fake.fail_next("chat.postMessage", status=429, retry_after=1)
        await fake.drop_socket(); await fake.wait_connections(2)     # the client reconnected

Web API: `POST /api/<method>` for `auth.test`, `chat.postMessage` and `apps.connections.open`,
the files methods of `tests/fakes/slack_files.py`, and, through `messages`
(`slack_streams.SlackMessages`), `chat.update`, `chat.delete`, the chat stream methods and
`assistant.threads.setStatus` (other methods answer `unknown_method`); every call is recorded in `requests`. Tokens other
than `bot_token` / `app_token` get `invalid_auth`, a missing one `not_authed`, the bot token on
`apps.connections.open` `not_allowed_token_type`, like Slack (HTTP 200 with `ok: false`).

Socket Mode: `apps.connections.open` hands out `ws://127.0.0.1:PORT/socket`; each connection
gets `hello`, then the envelopes pushed with `push_*`/`click`; acknowledgements land in
`acked`. `drop_socket()` closes every connection (the client must reconnect); with
`socket_available = False` new websocket handshakes are refused with HTTP 503.

HTTP Events API: `post_event` / `post_interaction` send a body to the adapter's endpoint signed
the way Slack signs it (`x-slack-signature`, `x-slack-request-timestamp`), or, on request,
with a wrong signature or a stale timestamp. `message_event`, `mention_event` and
`block_actions` build the same payloads the socket pushes.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
from collections import defaultdict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final
from urllib.parse import urlencode

import aiohttp
from aiohttp import WSCloseCode, WSMsgType, web

from channels import encode_approval_button
from tests.fakes.loopback import start_app
from tests.fakes.slack_streams import METHODS as MESSAGE_METHODS
from tests.fakes.slack_streams import SlackMessages
from tests.fakes.slack_files import FakeSlackFiles

__all__ = [
    "ApiCall",
    "FakeSlack",
    "block_actions",
    "mention_event",
    "message_event",
    "post_event",
    "post_interaction",
    "post_signed",
]

MAX_SECTION_CHARS: Final = 3000  # a section block's text
BOT_USER_ID: Final = "UBOT"
_ids = itertools.count(1)
_MAX_BODY_BYTES: Final = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiCall:
    """One Web API request: the method, the bearer token it carried and its decoded arguments."""

    method: str
    token: str | None
    args: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Failure:
    status: int
    error: str
    retry_after: int | None


def _ts() -> str:
    return f"{time.time():.6f}"


def message_event(
    text: str,
    *,
    user: str = "U0001",
    channel: str = "D0001",
    channel_type: str = "im",
    thread_ts: str | None = None,
    subtype: str | None = None,
    bot_id: str | None = None,
    event_id: str | None = None,
    files: list[dict[str, Any]] | None = None,
    parent_user_id: str | None = None,
) -> dict[str, Any]:
    """Return an Events API `event_callback` body carrying a `message` event (`files`: see FakeSlackFiles.add;
    `parent_user_id`: who posted the thread's parent, as Slack adds to a reply in a thread)."""
    event: dict[str, Any] = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": _ts(),
        "channel": channel,
        "channel_type": channel_type,
        "event_ts": _ts(),
    }
    optional = {
        "thread_ts": thread_ts, "subtype": subtype, "bot_id": bot_id, "files": files, "parent_user_id": parent_user_id,
    }
    event.update({k: v for k, v in optional.items() if v is not None})
    return _callback(event, event_id)


def mention_event(
    text: str,
    *,
    user: str = "U0001",
    channel: str = "C0001",
    thread_ts: str | None = None,
    event_id: str | None = None,
    files: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Return an `event_callback` body with an `app_mention` whose text starts `<@UBOT> `."""
    event: dict[str, Any] = {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER_ID}> {text}",
        "ts": _ts(),
        "channel": channel,
        "event_ts": _ts(),
    }
    if thread_ts is not None:
        event["thread_ts"] = thread_ts
    if files is not None:
        event["files"] = files
    return _callback(event, event_id)


def _callback(event: dict[str, Any], event_id: str | None) -> dict[str, Any]:
    return {
        "token": "legacy-verification-token",
        "team_id": "T0001",
        "api_app_id": "A0001",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_ids):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T0001", "user_id": BOT_USER_ID, "is_bot": True}],
    }


def block_actions(message: Mapping[str, Any], action_id: str, *, user: str) -> dict[str, Any]:
    """Return the `block_actions` payload Slack sends when `user` presses a button of `message`.

    `message` is a recorded chat.postMessage payload (plus the `ts` the fake gave it); the
    button with `action_id` must be in one of its actions blocks.
    """
    block, button = _find_button(message, lambda element: element.get("action_id") == action_id)
    action = {
        "type": "button",
        "action_id": action_id,
        "block_id": block.get("block_id", ""),
        "text": button["text"],
        "value": button.get("value"),
        "action_ts": _ts(),
    }
    channel = message["channel"]
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": "T0001"},
        "api_app_id": "A0001",
        "token": "legacy-verification-token",
        "container": {"type": "message", "message_ts": message["ts"], "channel_id": channel},
        "trigger_id": f"trigger-{next(_ids)}",
        "team": {"id": "T0001", "domain": "fake"},
        "channel": {"id": channel, "name": "fake"},
        "message": {"type": "message", "ts": message["ts"], "text": message.get("text", "")},
        "response_url": "http://127.0.0.1:9/response",
        "actions": [action],
    }


def _find_button(
    message: Mapping[str, Any], wanted: Callable[[Mapping[str, Any]], bool]
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    for block in message.get("blocks") or ():
        if block.get("type") != "actions":
            continue
        for element in block.get("elements", ()):
            if element.get("type") == "button" and wanted(element):
                return block, element
    raise LookupError(f"no such button in {message.get('blocks')!r}")


def _has_button(message: Mapping[str, Any], wanted: Callable[[Mapping[str, Any]], bool]) -> bool:
    try:
        _find_button(message, wanted)
    except LookupError:
        return False
    return True


class FakeSlack:
    """Serve the Slack Web API and Socket Mode on 127.0.0.1; use as `async with FakeSlack() as fake:`."""

    bot_user_id: Final = BOT_USER_ID

    def __init__(self, *, bot_token: str = "xoxb-fake-bot-token", app_token: str = "xapp-fake-app-token") -> None:
        self.bot_token: Final = bot_token
        self.app_token: Final = app_token
        self.requests: list[ApiCall] = []
        self.posted: list[dict[str, Any]] = []
        self.acked: list[str] = []
        self.connections = 0
        self.socket_available = True
        # posts, edits, chat streams and the assistant status as a user sees them (slack_streams.py)
        self.messages = SlackMessages()
        self._failures: defaultdict[str, deque[_Failure]] = defaultdict(deque)
        self._delays: defaultdict[str, deque[float]] = defaultdict(deque)
        self._sockets: set[web.WebSocketResponse] = set()
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None
        self._origin: str | None = None
        self.files = FakeSlackFiles(
            bot_token=self.bot_token, origin=lambda: self._require_origin("http"), notify=self._notify
        )

    @property
    def api_base_url(self) -> str:
        """Return the Web API base URL (`http://127.0.0.1:PORT/api/`) for `api_base_url`."""
        return f"{self._require_origin('http')}/api/"

    def calls(self, method: str) -> list[ApiCall]:
        """Return the recorded requests to one Web API method, in order."""
        return [call for call in self.requests if call.method == method]

    def fail_next(
        self,
        method: str,
        *,
        status: int = 200,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
    ) -> None:
        """Make the next `times` calls to `method` fail (429 -> `ratelimited` with Retry-After)."""
        default = "ratelimited" if status == 429 else "internal_error"
        failure = _Failure(status=status, error=error or default, retry_after=retry_after)
        self._failures[method].extend([failure] * times)

    def heal(self, method: str) -> None:
        """Forget the failures and delays still queued for `method`."""
        self._failures.pop(method, None)
        self._delays.pop(method, None)

    def slow_next(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Answer the next `times` calls to `method` only after `seconds` (a slow Web API)."""
        self._delays[method].extend([seconds] * times)

    # -- lifecycle -----------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        app = web.Application(client_max_size=_MAX_BODY_BYTES)  # file posts: past aiohttp's 1 MiB default
        app.router.add_post("/api/{method}", self._web_api)
        app.router.add_get("/api/{method}", self._web_api)  # slack_sdk GETs a few methods (files.info)
        app.router.add_get("/socket", self._socket)
        self.files.install(app)
        self._runner, port = await start_app(app)
        self._origin = f"127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        runner, self._runner, self._origin = self._runner, None, None
        await self.drop_socket()
        if runner is not None:
            await runner.cleanup()

    def _require_origin(self, scheme: str) -> str:
        if self._origin is None:
            raise RuntimeError("FakeSlack is not running; use `async with FakeSlack() as fake:`")
        return f"{scheme}://{self._origin}"

    # -- waiting ---------------------------------------------------------------------------------

    async def _wait(self, predicate: Callable[[], bool], what: str, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout), self._changed:
                await self._changed.wait_for(predicate)
        except TimeoutError:
            raise AssertionError(f"FakeSlack: timed out after {timeout}s waiting for {what}") from None

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def wait_posted(self, count: int, *, timeout: float = 10.0) -> None:
        """Wait until at least `count` messages were posted with chat.postMessage."""
        await self._wait(lambda: len(self.posted) >= count, f"{count} posted messages", timeout)

    async def wait_until(self, predicate: Callable[[], bool], what: str, *, timeout: float = 10.0) -> None:
        """Wait until `predicate()` holds (checked after every Web API call)."""
        await self._wait(predicate, what, timeout)

    async def wait_acked(self, envelope_id: str, *, timeout: float = 10.0) -> None:
        """Wait until the adapter acknowledged the envelope."""
        await self._wait(lambda: envelope_id in self.acked, f"the ack of {envelope_id}", timeout)

    async def wait_connections(self, count: int, *, timeout: float = 10.0) -> None:
        """Wait until `count` websocket connections were opened in total and one is live."""
        await self._wait(lambda: self.connections >= count and bool(self._sockets), f"connection #{count}", timeout)

    # -- Socket Mode -------------------------------------------------------------------------------

    async def push(self, kind: str, payload: Mapping[str, Any], *, retry_attempt: int = 0) -> str:
        """Send one envelope (`events_api`, `interactive`, ...) to the live socket; return its id."""
        await self._wait(lambda: bool(self._sockets), "a live socket to push to", 10.0)
        envelope_id = f"env-{next(_ids)}"
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        socket = next(iter(self._sockets))
        await socket.send_str(json.dumps(envelope))
        return envelope_id

    async def push_event(self, body: Mapping[str, Any], *, retry_attempt: int = 0) -> str:
        """Send an `event_callback` body (see `message_event`) as an `events_api` envelope."""
        return await self.push("events_api", body, retry_attempt=retry_attempt)

    async def push_message(self, text: str, *, retry_attempt: int = 0, **fields: Any) -> str:
        """Push a `message` event (a DM unless told otherwise); see `message_event` for fields."""
        return await self.push_event(message_event(text, **fields), retry_attempt=retry_attempt)

    async def push_mention(self, text: str, **fields: Any) -> str:
        """Push an `app_mention` event (`<@UBOT> text` in a channel); see `mention_event`."""
        return await self.push_event(mention_event(text, **fields))

    async def push_channel_message(
        self, text: str, *, user: str, channel: str, thread_ts: str | None = None, parent_user_id: str | None = None,
    ) -> str:
        """Push what Slack sends an app subscribed to `message.channels` and `app_mention` when a person
        posts `text` (its mentions raw, `<@UBOT>`) in a channel: the `message` event, and first, when it
        mentions the bot, an `app_mention` for the same message; return the `message` envelope's id."""
        body = message_event(
            text, user=user, channel=channel, channel_type="channel", thread_ts=thread_ts, parent_user_id=parent_user_id
        )
        if f"<@{BOT_USER_ID}>" in text:
            event = {k: v for k, v in body["event"].items() if k not in ("channel_type", "parent_user_id")}
            await self.push_event(_callback(event | {"type": "app_mention"}, None))
        return await self.push_event(body)

    def find_prompt(self, request_id: str) -> dict[str, Any]:
        """Return the last posted message with an Approve button for `request_id` (the codec's payload)."""
        payload = encode_approval_button(request_id, approved=True)
        found = [m for m in self.posted if _has_button(m, lambda element: element.get("value") == payload)]
        if found:
            return found[-1]
        raise LookupError(f"no posted message has a button for request {request_id!r}")

    async def click(self, request_id: str, *, user: str, approve: bool = True) -> str:
        """Press Approve (or Deny) on the posted prompt for `request_id` as `user`; return the envelope id."""
        message = self.find_prompt(request_id)
        payload = encode_approval_button(request_id, approved=approve)
        _, button = _find_button(message, lambda element: element.get("value") == payload)
        return await self.push("interactive", block_actions(message, str(button["action_id"]), user=user))

    async def drop_socket(self) -> None:
        """Close every live websocket connection with a close frame, as Slack does on a refresh."""
        sockets, self._sockets = list(self._sockets), set()
        for socket in sockets:
            await socket.close(code=WSCloseCode.GOING_AWAY, message=b"fake drop")

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        if not self.socket_available:
            return web.Response(status=503, text="socket mode unavailable (FakeSlack.socket_available)")
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._sockets.add(socket)
        self.connections += 1
        hello = {"type": "hello", "num_connections": 1, "connection_info": {"app_id": "A0001"}}
        await socket.send_str(json.dumps(hello))
        await self._notify()
        try:
            async for message in socket:
                if message.type != WSMsgType.TEXT:
                    continue
                reply = json.loads(message.data)
                if isinstance(reply, dict) and isinstance(reply.get("envelope_id"), str):
                    self.acked.append(reply["envelope_id"])
                    await self._notify()
        finally:
            self._sockets.discard(socket)
            await self._notify()
        return socket

    # -- Web API -------------------------------------------------------------------------------------

    async def _web_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            args.update(await request.json())
        else:
            args.update(await request.post())
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        self.requests.append(ApiCall(method=method, token=token, args=args))
        await self._notify()
        if self._delays[method]:
            await asyncio.sleep(self._delays[method].popleft())
        failures = self._failures[method]
        if failures:
            failure = failures.popleft()
            headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
            return web.json_response({"ok": False, "error": failure.error}, status=failure.status, headers=headers)
        wanted = self.app_token if method == "apps.connections.open" else self.bot_token
        if token is None:
            return _error("not_authed")
        if token != wanted:
            known = token in (self.bot_token, self.app_token)
            return _error("not_allowed_token_type" if known else "invalid_auth")
        if method == "auth.test":
            return web.json_response(
                {
                    "ok": True,
                    "url": "https://fake.slack.com/",
                    "team": "Fake",
                    "user": "bot",
                    "team_id": "T0001",
                    "user_id": self.bot_user_id,
                    "bot_id": "B0001",
                    "is_enterprise_install": False,
                }
            )
        if method == "apps.connections.open":
            return web.json_response({"ok": True, "url": f"{self._require_origin('ws')}/socket"})
        if method == "chat.postMessage":
            return await self._post_message(args)
        if method in MESSAGE_METHODS:
            status, body, headers = self.messages.answer(method, args)
            await self._notify()
            return web.json_response(body, status=status, headers=headers)
        answer = await self.files.api(method, args)
        if answer is not None:
            return web.json_response(answer)
        return _error("unknown_method")

    async def _post_message(self, args: dict[str, Any]) -> web.Response:
        if not isinstance(args.get("channel"), str):
            return _error("channel_not_found")
        blocks = args.get("blocks")
        if isinstance(blocks, str):  # form-encoded posts carry blocks as a JSON string
            args["blocks"] = json.loads(blocks)
        for block in args.get("blocks") or []:  # as Slack: a section's text holds 3,000 characters
            if block.get("type") == "section" and len(block.get("text", {}).get("text", "")) > MAX_SECTION_CHARS:
                return _error("invalid_blocks")
        ts = f"{time.time():.6f}"
        message = {**args, "ts": ts}
        self.posted.append(message)
        thread_ts = args.get("thread_ts")
        self.messages.record_post(args["channel"], ts, str(args.get("text", "")), thread_ts if thread_ts else None)
        await self._notify()
        text = args.get("text", "")
        reply = {"type": "message", "user": self.bot_user_id, "bot_id": "B0001", "text": text, "ts": ts}
        return web.json_response({"ok": True, "channel": args["channel"], "ts": ts, "message": reply})


def _error(error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error})


# -- HTTP Events API: requests signed like Slack's -----------------------------------------------


async def post_signed(
    url: str,
    body: str,
    *,
    secret: str,
    content_type: str = "application/json",
    timestamp: int | None = None,
    bad_signature: bool = False,
    retry_num: int | None = None,
) -> tuple[int, str]:
    """POST `body` to the adapter signed with `secret` (v0 HMAC-SHA256); return (status, text).

    `timestamp` defaults to now (pass an old one to test the 5-minute window);
    `bad_signature` signs with a wrong secret; `retry_num` sets `x-slack-retry-num`.
    """
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    key = (secret + "-wrong" if bad_signature else secret).encode()
    digest = hmac.new(key, f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": stamp,
        "X-Slack-Signature": f"v0={digest}",
    }
    if retry_num is not None:
        headers["X-Slack-Retry-Num"] = str(retry_num)
        headers["X-Slack-Retry-Reason"] = "http_timeout"
    async with aiohttp.ClientSession() as session, session.post(url, data=body.encode(), headers=headers) as response:
        return response.status, await response.text()


async def post_event(url: str, body: Mapping[str, Any], *, secret: str, **options: Any) -> tuple[int, str]:
    """POST an Events API body (JSON), signed; see `post_signed` for options."""
    return await post_signed(url, json.dumps(body), secret=secret, **options)


async def post_interaction(url: str, payload: Mapping[str, Any], *, secret: str, **options: Any) -> tuple[int, str]:
    """POST an interaction payload form-encoded as `payload=<json>`, signed, as Slack does."""
    body = urlencode({"payload": json.dumps(payload)})
    return await post_signed(url, body, secret=secret, content_type="application/x-www-form-urlencoded", **options)
