"""A loopback fake of an OpenAI-compatible chat-completions server, scripted per test.

Usage::

    async with FakeOpenAI() as fake:
        fake.script(text("hello"), tool_call("search", {"q": "x"}), status(429, retry_after=0.001))
        ...  # point a client at fake.base_url
        assert fake.requests[0]["model"] == "m"

Each POST /v1/chat/completions takes the next scripted reply.  When the script is empty
the server answers `default` (`text("ok")` unless told otherwise), so benchmarks can send
thousands of requests without scripting each one.  Tests that must notice an unexpected
extra request pass `default=None`: an unscripted request then gets HTTP 500 with
`x-should-retry: false` (so the SDK does not retry it) and a message saying the script ran
out; `fake.pending` tells how many scripted replies are still queued.

A request with `"stream": true` gets the same scripted reply as Server-Sent Events in the
`chat.completion.chunk` format: the role, the text in word-sized pieces, each tool call as
a first delta (index, id, type, name, start of the arguments) followed by argument pieces,
the finish reason, then (when the request asks with `stream_options.include_usage`) a last
chunk with no choices and the usage, as OpenAI sends it, then `data: [DONE]`.  `cut_off(reply, after=N)` drops the connection
after N events instead, like a server that dies mid-answer; `paced(reply, over_s=2)` spreads
the events over about two seconds, like a model writing.  Error replies are sent as
plain JSON errors either way, as real servers do before a stream starts.

Usage is reported like a real server's: `prompt_tokens` is the request's messages and tools
as JSON, characters / 4 (at least 1), `completion_tokens` the reply's content and tool-call
arguments the same way; `with_usage(reply, prompt=..., completion=..., cached=...)` fixes
the figures instead (`cached` goes to `prompt_tokens_details.cached_tokens`), and
`fake.report_usage = False` leaves `usage` out, as some local servers do.  `usages` keeps
every usage reported, in order.
Media: every request's content parts (a user message whose `content` is a list) are kept in
`fake.parts`, one list per request, so a test sees which images a model was shown.
POST /v1/audio/transcriptions takes a multipart upload (`file`, `model`) as OpenAI does
(400 without either), records it in `fake.transcriptions` and answers
`{"text": fake.transcript}`; `fake.transcription_status` set to an HTTP status makes it fail.

`max_tokens` (or `max_completion_tokens`) is honoured as the real APIs do: a reply that
would write more is cut there (its text to 4 characters a token, a tool call's arguments
likewise, calls past the cut left out) with `finish_reason: "length"`, and reports that many
`completion_tokens`; `with_usage(..., completion=40_000)` is cut the same way.

Every answer has an `id` (`chatcmpl-fake-N`, N counting from 1) and names the model asked in
`model`, unless `fake.served_model` is set: then it names that one, as OpenAI answers a request
for `gpt-4o` with the dated snapshot that wrote it (`gpt-4o-2024-08-06`).

`fake.ignore_stream = True` answers a streamed request with the plain JSON completion
(`application/json`), as a server that ignores `stream: true` does.

`fake.refuse_key = True` switches on a fault: every chat request is answered 401 with a
message quoting the API key from its `Authorization` header back, as an echoing proxy does.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType, TracebackType
from typing import Any, Final, TypeAlias

from aiohttp import web

from tests.fakes.loopback import start_app

__all__ = [
    "FakeOpenAI",
    "Reply",
    "Responder",
    "cut_off",
    "paced",
    "status",
    "text",
    "tool_call",
    "tool_calls",
    "with_usage",
]

_JSON: Final = "application/json"
_SSE: Final = "text/event-stream"
_WORDS: Final = re.compile(r"\s*\S+|\s+")  # pieces that concatenate back to the text
_ARGUMENT_PIECE: Final = 8  # characters of tool-call arguments per streamed delta
_ERROR_TYPES: Final = MappingProxyType(
    {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_exceeded",
    }
)
_call_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One canned answer; build it with `text`, `tool_call`, `tool_calls` or `status`.

    For status 200, `body` holds the JSON members that follow `"model": ...` (the server
    splices in a fresh id and the requested model); otherwise it is the whole body.
    `cut_after` (streamed requests only) drops the connection after that many events.
    """

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes
    cut_after: int | None = None
    usage: tuple[int, int, int] | None = None  # (prompt, completion, cached); None = estimated
    gap_s: float = 0.0  # streamed requests: the pause before each event after the first
    # streamed requests: these bytes are the whole event stream, written as they are (50 ms apart)
    raw_stream: tuple[bytes, ...] | None = None


Responder: TypeAlias = Callable[[dict[str, Any]], Reply]
"""Build a reply from the decoded request body, for answers that depend on the request."""

_Scripted: TypeAlias = Reply | Responder


def _completion(message: Mapping[str, Any], finish_reason: str) -> Reply:
    choice = {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
    choices = json.dumps([choice], separators=(",", ":")).encode()
    return Reply(body=b'"choices":' + choices + b"}")


def text(content: str) -> Reply:
    """Answer with assistant text and `finish_reason: "stop"`."""
    return _completion({"role": "assistant", "content": content, "refusal": None}, "stop")


def tool_call(
    name: str, arguments: Mapping[str, Any] | str, *, id: str | None = None, content: str | None = None
) -> Reply:
    """Answer with one function tool call; `arguments` is JSON-encoded unless already a string."""
    return _tool_call_reply(((name, arguments, id),), content)


def tool_calls(*calls: tuple[str, Mapping[str, Any] | str], content: str | None = None) -> Reply:
    """Answer with several function tool calls, each `(name, arguments)`, ids generated."""
    return _tool_call_reply(tuple((name, arguments, None) for name, arguments in calls), content)


def _tool_call_reply(
    calls: tuple[tuple[str, Mapping[str, Any] | str, str | None], ...], content: str | None
) -> Reply:
    encoded = [
        {
            "id": call_id if call_id is not None else f"call_{next(_call_ids)}",
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
        for name, arguments, call_id in calls
    ]
    message = {"role": "assistant", "content": content, "refusal": None, "tool_calls": encoded}
    return _completion(message, "tool_calls")


def status(
    code: int,
    *,
    retry_after: float | None = None,
    message: str | None = None,
    should_retry: bool | None = None,
) -> Reply:
    """Answer with an HTTP error in OpenAI's error JSON shape.

    `retry_after` (seconds) is sent as `retry-after-ms` and `retry-after`.  The SDK only
    honours a positive delay: 0 counts as unspecified and it falls back to its own backoff
    (0.5 s and up), so fast tests pass a tiny positive value such as 0.001.
    `should_retry` sets the `x-should-retry` header the SDK obeys when present.
    """
    error_type = _ERROR_TYPES.get(code, "server_error" if code >= 500 else "invalid_request_error")
    error = {
        "message": message if message is not None else f"fake error {code}",
        "type": error_type,
        "param": None,
        "code": error_type if code == 429 else None,
    }
    headers: list[tuple[str, str]] = []
    if retry_after is not None:
        headers.append(("retry-after-ms", f"{retry_after * 1000:g}"))
        headers.append(("retry-after", str(math.ceil(retry_after))))
    if should_retry is not None:
        headers.append(("x-should-retry", "true" if should_retry else "false"))
    body = json.dumps({"error": error}, separators=(",", ":")).encode()
    return Reply(status=code, headers=tuple(headers), body=body)


def with_usage(reply: Reply, *, prompt: int, completion: int, cached: int = 0) -> Reply:
    """Report exactly these token counts for `reply` instead of the estimate."""
    return replace(reply, usage=(prompt, completion, cached))


def paced(reply: Reply, *, over_s: float) -> Reply:
    """Stream `reply` slowly, its events spread evenly over about `over_s` seconds (a model writing)."""
    events = sum(1 for _ in _events(reply.body, b"{"))
    return replace(reply, gap_s=over_s / max(events, 1))


def cut_off(reply: Reply, *, after: int) -> Reply:
    """Stream `reply` but drop the connection after `after` events (no `[DONE]`)."""
    return replace(reply, cut_after=after)


class FakeOpenAI:
    """Serve POST /v1/chat/completions and GET /v1/models on 127.0.0.1 from a script.

    Use as `async with FakeOpenAI() as fake:`; the server listens only inside the block.
    `requests` collects every decoded chat-completions body, in arrival order.
    """

    def __init__(
        self,
        *,
        default: Reply | Responder | None = text("ok"),
        latency_s: float = 0.0,
        models: tuple[str, ...] = ("fake-model",),
    ) -> None:
        self.default = default
        self.latency_s = latency_s
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.model_list_authorizations: list[str | None] = []  # GET /v1/models, kept apart from the chat calls
        self.refuse_key = False
        self.served_model: str | None = None  # the `model` answers name (None: the one asked)
        # A server that ignores `stream: true`: a streamed request gets the plain JSON answer.
        self.ignore_stream = False
        self.report_usage = True
        self.usages: list[dict[str, Any]] = []
        self.parts: list[list[dict[str, Any]]] = []  # per request: its user messages' content parts
        self.transcriptions: list[dict[str, Any]] = []
        self.transcript = "hello from the voice note"
        self.transcription_status: int | None = None
        # time.monotonic() when the first text piece of each streamed reply was written
        self.first_text_at: list[float] = []
        self._queue: deque[_Scripted] = deque()
        self._ids = itertools.count(1)
        self._created = b'","object":"chat.completion","created":%d,"model":' % int(time.time())
        self._models = json.dumps(
            {
                "object": "list",
                "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models],
            }
        ).encode()
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        """Return the `http://127.0.0.1:PORT/v1` URL clients should use."""
        if self._base_url is None:
            raise RuntimeError("FakeOpenAI is not running; use `async with FakeOpenAI() as fake:`")
        return self._base_url

    @property
    def pending(self) -> int:
        """Return how many scripted replies have not been served yet."""
        return len(self._queue)

    def script(self, *replies: Reply | Responder) -> None:
        """Queue replies, served one per chat-completions request, in order."""
        self._queue.extend(replies)

    async def __aenter__(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)  # image parts make large bodies
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)
        app.router.add_get("/v1/models", self._list_models)
        self._runner, port = await start_app(app)
        self._base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        runner, self._runner, self._base_url = self._runner, None, None
        if runner is not None:
            await runner.cleanup()

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return _error_response(status(400, message="request body is not valid JSON"))
        if not isinstance(body, dict):
            return _error_response(status(400, message="request body must be a JSON object"))
        self.requests.append(body)
        self.parts.append([
            part for message in body.get("messages") or () if isinstance(message, dict)
            and isinstance(message.get("content"), list) for part in message["content"]
        ])
        self.authorizations.append(request.headers.get("Authorization"))
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        authorization = request.headers.get("Authorization") or ""
        if self.refuse_key:
            key = authorization.removeprefix("Bearer ")
            return _error_response(status(401, message=f"Incorrect API key provided: {key}", should_retry=False))
        reply = _honour_max_tokens(self._next_reply(body), body)
        if reply.status != 200:
            return _error_response(reply)
        head = b'{"id":"chatcmpl-fake-%d' % next(self._ids) + self._created
        model = json.dumps(self.served_model if self.served_model is not None else body.get("model")).encode()
        usage = self._usage(body, reply) if self.report_usage else None
        streamed = bool(body.get("stream")) and not self.ignore_stream
        if streamed and reply.raw_stream is not None:
            return await _raw_stream(request, reply.raw_stream)
        if streamed:
            chunk_head = head.replace(b'"chat.completion"', b'"chat.completion.chunk"')
            options = body.get("stream_options")
            wanted = usage if isinstance(options, dict) and options.get("include_usage") else None
            return await _stream(request, reply, chunk_head + model, wanted, self.first_text_at)
        members = b',"usage":' + json.dumps(usage).encode() if usage is not None else b""
        return web.Response(body=head + model + members + b"," + reply.body, content_type=_JSON)

    def _usage(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        if reply.usage is not None:
            prompt, completion, cached = reply.usage
        else:
            sent = json.dumps(body.get("messages")) + json.dumps(body.get("tools") or [])
            prompt, completion, cached = max(1, len(sent) // 4), max(1, _reply_chars(reply.body) // 4), 0
        usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        if cached:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        self.usages.append(usage)
        return usage

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        scripted = self._queue.popleft() if self._queue else self.default
        if scripted is None:
            message = f"FakeOpenAI: script exhausted at request #{len(self.requests)}"
            return status(500, message=message, should_retry=False)
        return scripted if isinstance(scripted, Reply) else scripted(body)

    async def _transcriptions(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload, model = form.get("file"), form.get("model")
        if not isinstance(upload, web.FileField) or not isinstance(model, str) or not model:
            return _error_response(status(400, message="'file' and 'model' are required", should_retry=False))
        data = upload.file.read()
        self.transcriptions.append(
            {"model": model, "filename": upload.filename, "content_type": upload.content_type, "size": len(data),
             "authorization": request.headers.get("Authorization")}
        )
        if self.transcription_status is not None:
            return _error_response(status(self.transcription_status, message="transcription failed", should_retry=False))
        return web.json_response({"text": self.transcript})

    async def _list_models(self, request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        self.model_list_authorizations.append(authorization)
        if self.refuse_key:  # as OpenAI: listing models needs a valid key too
            key = (authorization or "").removeprefix("Bearer ")
            return _error_response(status(401, message=f"Incorrect API key provided: {key}", should_retry=False))
        return web.Response(body=self._models, content_type=_JSON)


def _honour_max_tokens(reply: Reply, body: Mapping[str, Any]) -> Reply:
    """Cut `reply` at the request's `max_tokens` / `max_completion_tokens`, as a real server stops there."""
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if not isinstance(limit, int) or reply.status != 200 or reply.raw_stream is not None:
        return reply
    written = reply.usage[1] if reply.usage is not None else max(1, _reply_chars(reply.body) // 4)
    if written <= limit:
        return reply
    try:
        members = json.loads(b"{" + reply.body)
    except ValueError:
        return reply
    for choice in members.get("choices") or ():
        message = choice.get("message") or {}
        room = limit * 4
        content = message.get("content")
        if isinstance(content, str):
            message["content"] = content[:room]
            room -= len(message["content"])
        kept = []
        for call in message.get("tool_calls") or ():
            if room <= 0:
                break
            arguments = call["function"]["arguments"]
            call["function"]["arguments"] = arguments[:room]
            room -= len(arguments)
            kept.append(call)
        if message.get("tool_calls"):
            message["tool_calls"] = kept or None
        choice["finish_reason"] = "length"
    cut = json.dumps(members, separators=(",", ":")).encode()[1:]
    usage = (reply.usage[0], limit, reply.usage[2]) if reply.usage is not None else None
    return replace(reply, body=cut, usage=usage)


def _reply_chars(members: bytes) -> int:
    """Count the characters of a reply's text and tool-call arguments (what the model wrote)."""
    try:
        reply = json.loads(b"{" + members)
    except ValueError:
        return 0
    chars = 0
    for choice in reply.get("choices") or ():
        message = choice.get("message") or {}
        chars += len(message.get("content") or "")
        chars += sum(len(call["function"]["arguments"]) for call in message.get("tool_calls") or ())
    return chars


async def _stream(
    request: web.Request, reply: Reply, head: bytes, usage: dict[str, Any] | None, first_text_at: list[float]
) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": _SSE, "Cache-Control": "no-cache"})
    await response.prepare(request)
    events = list(_events(reply.body, head))
    if usage is not None:
        events.append(head + b',"choices":[],"usage":' + json.dumps(usage).encode() + b"}")
    for sent, event in enumerate(events):
        if sent and reply.gap_s:
            await asyncio.sleep(reply.gap_s)
        if sent == reply.cut_after:
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write(b"data: " + event + b"\n\n")
        if sent == 1:  # the event after the role: the first piece of the answer
            first_text_at.append(time.monotonic())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


async def _raw_stream(request: web.Request, writes: tuple[bytes, ...]) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": _SSE, "Cache-Control": "no-cache"})
    await response.prepare(request)
    for index, data in enumerate(writes):
        if index:
            await asyncio.sleep(0.05)  # apart, so that the client reads them apart
        await response.write(data)
    await response.write_eof()
    return response


def _events(members: bytes, head: bytes) -> Iterator[bytes]:
    """Yield the chunk JSON of each event for a reply whose body members are `members`."""
    try:
        reply = json.loads(b"{" + members)
    except ValueError:  # a deliberately malformed reply: send it as one event, unparsed
        yield head + b"," + members
        return
    for choice in reply.get("choices") or ():
        for delta in _deltas(choice.get("message") or {}):
            yield _chunk(head, choice.get("index", 0), delta, None)
        yield _chunk(head, choice.get("index", 0), {}, choice.get("finish_reason"))
    if not reply.get("choices"):
        yield head + b',"choices":[]}'


def _deltas(message: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    content = message.get("content")
    yield {"role": "assistant", "content": "" if isinstance(content, str) else None}
    for piece in _WORDS.findall(content or ""):
        yield {"content": piece}
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        arguments = function["arguments"]
        first = {"name": function["name"], "arguments": arguments[:_ARGUMENT_PIECE]}
        yield {"tool_calls": [{"index": index, "id": call["id"], "type": "function", "function": first}]}
        for start in range(_ARGUMENT_PIECE, len(arguments), _ARGUMENT_PIECE):
            piece = arguments[start : start + _ARGUMENT_PIECE]
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _chunk(head: bytes, index: int, delta: Mapping[str, Any], finish_reason: str | None) -> bytes:
    choice = {"index": index, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
    return head + b',"choices":' + json.dumps([choice], separators=(",", ":")).encode() + b"}"


def _error_response(reply: Reply) -> web.Response:
    return web.Response(status=reply.status, headers=reply.headers, body=reply.body, content_type=_JSON)
