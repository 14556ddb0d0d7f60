"""A loopback fake of Anthropic's Messages API (POST /v1/messages; GET /v1/models/{id}), scripted per test.

Usage::

    async with FakeAnthropic(api_key="sk-ant-test") as fake:
        fake.script(text("hello"), tool_use("search", {"q": "x"}), error(429, retry_after=0.001))
        ...  # point a client at fake.base_url (the origin: the SDK adds /v1/messages)
        assert fake.requests[0]["model"] == "m"

Each valid request takes the next scripted reply; an empty script answers `default`
(`text("ok")` unless told otherwise); with `default=None` an unscripted request gets a 500
`api_error` with `x-should-retry: false` saying the script ran out.

What the real API checks is checked first, and answered with its error shapes
(`{"type": "error", "error": {"type": ..., "message": ...}}`): the key, as an `x-api-key`
header or a bearer `Authorization` (the SDK's 2.x way), kept in `keys` (401
`authentication_error` without one; with `api_key` set it must match), `anthropic-version`
(400), then the body (400 `invalid_request_error`): `model`, `max_tokens`, a non-empty
`messages` list opening with a user turn, strictly alternating roles, no empty content,
every `tool_result` answering a `tool_use` id of the assistant turn just before it (and
every such `tool_use` answered, tool results first), every such id matching
`^[a-zA-Z0-9_-]+$`, tools with `name` and
`input_schema`, at most 4 `cache_control` breakpoints, no sampling parameter
(`temperature`, `top_p`, `top_k`) from API version 2026-10-21 on (the SDK 2.x default;
before it, temperature within [0, 1]).  A
rejected request is kept in `rejected` (message text) and does not take a scripted reply.

Usage is reported like the API's: `input_tokens`, `output_tokens` and the prompt cache's
`cache_creation_input_tokens` / `cache_read_input_tokens`.  Tokens are estimated as
characters / 4 of the request's canonical JSON, in the API's order (tools, system,
messages).  Each `cache_control` block marks the prefix up to it as cacheable; a later
request that repeats a marked prefix reads it from the cache.  `usages` keeps every
usage reported, in order.

`max_tokens` is honoured as the API does: a reply whose output would pass it is cut there
(text at 4 characters a token, a `tool_use` past the cut left out) with `stop_reason:
"max_tokens"`, and reports `output_tokens = max_tokens`.

With `"stream": true` the reply comes as Server-Sent Events: `message_start`, a `ping`,
per block `content_block_start`, `content_block_delta` (`text_delta` pieces or
`input_json_delta` pieces), `content_block_stop`, then `message_delta` (stop reason and
output usage) and `message_stop`.  `cut_off(reply, after=N)` drops the connection after
N events; `stream_error(429)` sends `message_start` and then an `event: error`.
`fake.ignore_stream = True` answers a streamed request with the plain JSON message instead,
as a server (a proxy) that ignores `stream: true` does.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType, TracebackType
from typing import Any, Final, TypeAlias

from aiohttp import web

from tests.fakes.loopback import start_app

__all__ = [
    "FakeAnthropic",
    "Reply",
    "Responder",
    "cut_off",
    "error",
    "stream_error",
    "text",
    "tool_use",
]

_JSON: Final = "application/json"
_WORDS: Final = re.compile(r"\s*\S+|\s+")
_TOOL_ID: Final = re.compile(r"[a-zA-Z0-9_-]+")  # the API's pattern for tool_use ids
_JSON_PIECE: Final = 8  # characters of tool input JSON per input_json_delta
_MAX_BREAKPOINTS: Final = 4
# From this API version on (the anthropic SDK 2.x default) sampling parameters are refused.
NO_SAMPLING_SINCE: Final = "2026-10-21"
_SAMPLING: Final = ("temperature", "top_p", "top_k")
ERROR_TYPES: Final = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        529: "overloaded_error",
    }
)
_tool_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One canned answer: content blocks and a stop reason, or an error (`status` != 200)."""

    status: int = 200
    content: tuple[Mapping[str, Any], ...] = ()
    stop_reason: str = "end_turn"
    error: Mapping[str, Any] | None = None  # the error body for status != 200, or a mid-stream error
    headers: tuple[tuple[str, str], ...] = ()
    cut_after: int | None = None
    gap_s: float = 0.0  # streamed requests: the pause before each event after the first (a model writing)


Responder: TypeAlias = Callable[[dict[str, Any]], Reply]
"""Build a reply from the decoded request body."""


def text(content: str) -> Reply:
    """Answer with one text block and `stop_reason: "end_turn"`."""
    return Reply(content=({"type": "text", "text": content},))


def tool_use(
    name: str, arguments: Mapping[str, Any], *, id: str | None = None, content: str | None = None
) -> Reply:
    """Answer with (optional text and) one `tool_use` block and `stop_reason: "tool_use"`."""
    call = {"type": "tool_use", "id": id or f"toolu_fake{next(_tool_ids):04d}", "name": name, "input": dict(arguments)}
    blocks: tuple[Mapping[str, Any], ...] = ({"type": "text", "text": content},) if content else ()
    return Reply(content=(*blocks, call), stop_reason="tool_use")


def _error_body(code: int, message: str | None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message or f"fake error {code}"}}


def error(
    code: int, *, message: str | None = None, retry_after: float | None = None, should_retry: bool | None = None
) -> Reply:
    """Answer with an HTTP error in the API's shape (`retry_after` seconds as `retry-after-ms`/`retry-after`)."""
    headers: list[tuple[str, str]] = [("request-id", "req_fake")]
    if retry_after is not None:
        headers.append(("retry-after-ms", f"{retry_after * 1000:g}"))
        headers.append(("retry-after", str(math.ceil(retry_after))))
    if should_retry is not None:
        headers.append(("x-should-retry", "true" if should_retry else "false"))
    return Reply(status=code, error=_error_body(code, message), headers=tuple(headers))


def stream_error(code: int, *, message: str | None = None) -> Reply:
    """Start a streamed answer, then send an `event: error` (as an overloaded API does mid-stream)."""
    return Reply(error=_error_body(code, message))


def cut_off(reply: Reply, *, after: int) -> Reply:
    """Stream `reply` but drop the connection after `after` events."""
    return replace(reply, cut_after=after)


class _Invalid(Exception):
    """A request the real API would refuse with 400 invalid_request_error."""


class FakeAnthropic:
    """Serve POST /v1/messages on 127.0.0.1 from a script; use as `async with FakeAnthropic() as fake:`."""

    def __init__(
        self,
        *,
        default: Reply | Responder | None = text("ok"),
        api_key: str | None = None,
        latency_s: float = 0.0,
        min_cacheable_tokens: int = 0,
        models: tuple[str, ...] | None = None,
    ) -> None:
        self.default = default
        self.models = models  # what GET /v1/models/{id} knows; None = any id
        self.api_key = api_key
        self.latency_s = latency_s
        self.min_cacheable_tokens = min_cacheable_tokens
        self.refuse_key = False
        # A server that ignores `stream: true`: a streamed request gets the plain JSON message.
        self.ignore_stream = False
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.keys: list[str | None] = []
        self.rejected: list[str] = []
        self.usages: list[dict[str, int]] = []
        self._cache: set[str] = set()
        self._queue: deque[Reply | Responder] = deque()
        self._ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        """Return the `http://127.0.0.1:PORT` origin clients should use."""
        if self._base_url is None:
            raise RuntimeError("FakeAnthropic is not running; use `async with FakeAnthropic() as fake:`")
        return self._base_url

    @property
    def pending(self) -> int:
        """Return how many scripted replies have not been served yet."""
        return len(self._queue)

    def script(self, *replies: Reply | Responder) -> None:
        """Queue replies, served one per valid request, in order."""
        self._queue.extend(replies)

    async def __aenter__(self) -> FakeAnthropic:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_get("/v1/models/{model_id}", self._model)
        self._runner, port = await start_app(app)
        self._base_url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        runner, self._runner, self._base_url = self._runner, None, None
        if runner is not None:
            await runner.cleanup()

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        try:
            body = json.loads(await request.read())
        except ValueError:
            return self._reject(error(400, message="request body is not valid JSON"))
        self.requests.append(body)
        key = _presented_key(request)
        self.keys.append(key)
        if not key:
            return self._reject(error(401, message="x-api-key header is required"))
        if self.refuse_key or (self.api_key is not None and key != self.api_key):
            return self._reject(error(401, message=f"invalid x-api-key: {key}", should_retry=False))
        version = request.headers.get("anthropic-version")
        if not version:
            return self._reject(error(400, message="anthropic-version: header is required"))
        try:
            if not isinstance(body, dict):
                raise _Invalid("request body must be a JSON object")
            _validate(body, version)
        except _Invalid as exc:
            return self._reject(error(400, message=str(exc)))
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        reply = self._next_reply(body)
        if reply.status != 200:
            return _error_response(reply)
        message = self._message(body, reply)
        if body.get("stream") and not self.ignore_stream:
            return await _stream(request, reply, message)
        return web.Response(body=json.dumps(message).encode(), content_type=_JSON)

    async def _model(self, request: web.Request) -> web.Response:
        """GET /v1/models/{id}: the model's record, or 404 `not_found_error` as the API answers."""
        key = _presented_key(request)
        if not key:
            return _error_response(error(401, message="x-api-key header is required"))
        if self.refuse_key or (self.api_key is not None and key != self.api_key):
            return _error_response(error(401, message=f"invalid x-api-key: {key}", should_retry=False))
        model = request.match_info["model_id"]
        if self.models is not None and model not in self.models:
            return _error_response(error(404, message=f"model: {model}"))
        record = {"type": "model", "id": model, "display_name": model, "created_at": "2026-01-01T00:00:00Z"}
        return web.Response(body=json.dumps(record), content_type=_JSON)

    def _reject(self, reply: Reply) -> web.Response:
        assert reply.error is not None
        self.rejected.append(reply.error["error"]["message"])
        return _error_response(reply)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        scripted = self._queue.popleft() if self._queue else self.default
        if scripted is None:
            return error(500, message=f"FakeAnthropic: script exhausted at request #{len(self.requests)}", should_retry=False)
        return scripted if isinstance(scripted, Reply) else scripted(body)

    def _message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        reply = _honour_max_tokens(reply, body["max_tokens"])
        usage = self._usage(body, reply)
        self.usages.append(usage)
        return {
            "id": f"msg_fake{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [dict(block) for block in reply.content],
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, int]:
        parts, marks = _prompt_parts(body)
        prefix_chars, total = [], 0
        for part in parts:
            total += len(part)
            prefix_chars.append(total)
        digest = hashlib.sha256()
        marked: list[tuple[str, int]] = []  # (hash of the prefix up to a breakpoint, its tokens)
        for index, part in enumerate(parts):
            digest.update(part.encode())
            if index in marks:
                marked.append((digest.copy().hexdigest(), _tokens(prefix_chars[index])))
        read = max((tokens for key, tokens in marked if key in self._cache), default=0)
        cacheable = [(key, tokens) for key, tokens in marked if tokens >= self.min_cacheable_tokens]
        written = max((tokens for _, tokens in cacheable), default=0)
        self._cache.update(key for key, _ in cacheable)
        creation = max(0, written - read)
        output = _output_tokens(reply)
        if reply.stop_reason == "max_tokens":
            output = min(output, body["max_tokens"])
        return {
            "input_tokens": max(0, _tokens(total) - read - creation),
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "output_tokens": output,
        }


def _output_tokens(reply: Reply) -> int:
    return sum(_tokens(len(json.dumps(block))) for block in reply.content) or 1


def _honour_max_tokens(reply: Reply, limit: int) -> Reply:
    """Cut `reply` at `max_tokens`, as the API stops writing there (`stop_reason: "max_tokens"`)."""
    if _output_tokens(reply) <= limit:
        return reply
    room = limit * 4
    kept: list[Mapping[str, Any]] = []
    for block in reply.content:
        if room <= 0 or block.get("type") != "text":
            break  # a tool_use past the cut, or one it was writing, is not in the answer
        piece = str(block.get("text", ""))[:room]
        kept.append({**block, "text": piece})
        room -= len(piece) + 20  # the block's own JSON counts too
    return replace(reply, content=tuple(kept), stop_reason="max_tokens")


def _presented_key(request: web.Request) -> str | None:
    # The API takes the key as `x-api-key`; anthropic SDK 2.x sends it as a bearer token.
    key = request.headers.get("x-api-key")
    if key:
        return key
    authorization = request.headers.get("Authorization", "")
    return authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else None


def _tokens(chars: int) -> int:
    return math.ceil(chars / 4)


def _prompt_parts(body: Mapping[str, Any]) -> tuple[list[str], set[int]]:
    """Split the prompt into canonical pieces in the API's order; return them and the breakpoint indexes."""
    parts: list[str] = []
    marks: set[int] = set()

    def add(block: Any, prefix: str = "") -> None:
        if isinstance(block, Mapping) and "cache_control" in block:
            marks.add(len(parts))
            block = {k: v for k, v in block.items() if k != "cache_control"}
        parts.append(prefix + json.dumps(block, sort_keys=True, separators=(",", ":")))

    for tool in body.get("tools") or ():
        add(tool, "tool:")
    system = body.get("system")
    for block in [{"type": "text", "text": system}] if isinstance(system, str) else system or ():
        add(block, "system:")
    for message in body["messages"]:
        content = message["content"]
        for block in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            add(block, f"{message['role']}:")
    return parts, marks


def _validate(body: Mapping[str, Any], version: str) -> None:
    """Raise `_Invalid` with the API's kind of message for what the real API refuses."""
    if version >= NO_SAMPLING_SINCE:
        for name in _SAMPLING:
            if name in body:
                raise _Invalid(f"{name}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise _Invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise _Invalid("max_tokens: Field required")
    if max_tokens < 1:
        raise _Invalid("max_tokens: must be greater than or equal to 1")
    temperature = body.get("temperature")
    if temperature is not None and not 0 <= temperature <= 1:
        raise _Invalid("temperature: range: 0 <= temperature <= 1")
    for index, tool in enumerate(body.get("tools") or ()):
        if not isinstance(tool, Mapping) or not tool.get("name") or not isinstance(tool.get("input_schema"), Mapping):
            raise _Invalid(f"tools.{index}: name and input_schema are required")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        if not isinstance(system, list) or any(not isinstance(b, Mapping) or b.get("type") != "text" for b in system):
            raise _Invalid("system: Input should be a valid string or a list of text blocks")
    _validate_messages(body.get("messages"))
    breakpoints = sum(1 for _ in _cache_controls(body))
    if breakpoints > _MAX_BREAKPOINTS:
        raise _Invalid(f"A maximum of {_MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}.")


def _validate_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise _Invalid("messages: at least one message is required")
    expected_results: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role not in ("user", "assistant"):
            raise _Invalid(f"messages.{index}.role: Input should be 'user' or 'assistant'")
        if index == 0 and role != "user":
            raise _Invalid("messages: first message must use the \"user\" role")
        if index > 0 and role == messages[index - 1]["role"]:
            raise _Invalid(f"messages: roles must alternate between \"user\" and \"assistant\" (messages.{index})")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        last = index == len(messages) - 1
        if not isinstance(blocks, list) or (not blocks and not (last and role == "assistant")):
            raise _Invalid(f"messages.{index}: all messages must have non-empty content")
        for block in blocks:
            if block.get("type") == "text" and not block.get("text") and not (last and role == "assistant"):
                raise _Invalid(f"messages.{index}: text content blocks must be non-empty")
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        for position, block in enumerate(blocks):
            kind = block.get("type")
            if kind == "image":  # as the API: base64 of a supported type, or a URL
                source = block.get("source") or {}
                ok = (source.get("type") == "base64" and source.get("media_type") in _IMAGE_TYPES
                      and isinstance(source.get("data"), str) and _is_base64(source["data"])) or (
                    source.get("type") == "url" and isinstance(source.get("url"), str))
                if not ok:
                    raise _Invalid(f"messages.{index}.content.{position}.image.source: invalid image source")
            if kind in ("tool_use", "tool_result"):
                member = "id" if kind == "tool_use" else "tool_use_id"
                if not isinstance(block.get(member), str) or not _TOOL_ID.fullmatch(block[member]):
                    raise _Invalid(
                        f"messages.{index}.content.{position}.{kind}.{member}: String should match pattern "
                        "'^[a-zA-Z0-9_-]+$'"
                    )
        if role == "user":
            if results and any(b.get("type") != "tool_result" for b in blocks[: len(results)]):
                raise _Invalid(f"messages.{index}: tool_result blocks must come first in the content")
            for tool_use_id in results:
                if tool_use_id not in expected_results:
                    raise _Invalid(
                        f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` block "
                        "in the previous message."
                    )
            missing = expected_results - set(results)
            if missing:
                raise _Invalid(
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
                    f"after: {', '.join(sorted(missing))}"
                )
            expected_results = set()
        else:
            expected_results = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            if any(not isinstance(b.get("input"), Mapping) for b in blocks if b.get("type") == "tool_use"):
                raise _Invalid(f"messages.{index}: tool_use.input: Input should be a valid dictionary")


_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})


def _is_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except ValueError:
        return False
    return True


def _cache_controls(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        if "cache_control" in value:
            yield value["cache_control"]
        for member in value.values():
            yield from _cache_controls(member)
    elif isinstance(value, list):
        for member in value:
            yield from _cache_controls(member)


async def _stream(request: web.Request, reply: Reply, message: dict[str, Any]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for sent, (name, data) in enumerate(_events(reply, message)):
        if sent and reply.gap_s:
            await asyncio.sleep(reply.gap_s)
        if sent == reply.cut_after:
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
    await response.write_eof()
    return response


def _events(reply: Reply, message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    yield "ping", {"type": "ping"}
    if reply.error is not None:
        yield "error", dict(reply.error)
        return
    for index, block in enumerate(message["content"]):
        if block["type"] == "tool_use":
            opening = {**block, "input": {}}
            pieces = json.dumps(block["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": pieces[i : i + _JSON_PIECE]}
                for i in range(0, len(pieces), _JSON_PIECE)
            ]
        else:
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _WORDS.findall(block.get("text", ""))]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        for delta in deltas:
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    stop = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


def _error_response(reply: Reply) -> web.Response:
    body = json.dumps(reply.error).encode()
    return web.Response(status=reply.status, headers=reply.headers, body=body, content_type=_JSON)
