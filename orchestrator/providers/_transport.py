"""What both SDK clients share: the request, the streamed read and the translation of failures.

`Endpoint` holds one provider's identity (name, URL, key, override variables) and its SDK's
exception classes, and turns whatever the SDK or the connection raises into `ProviderError`
or `ProviderUnavailable`. Each provider keeps only what differs: the body it sends, how an
HTTP error's body reads (`status_failure`), and how one stream event adds to its answer.

A streamed answer is read from the raw response, not through the SDK's event iterator: the
SDK's decoder, its per-event async generators and httpx's per-HTTP-chunk parsing cost about
250 us of CPU per token, ten times what the rest of a turn costs. Both clients run on their
SDK's aiohttp transport (`DefaultAioHttpClient`, the SDKs' documented option), whose C parser
hands over everything buffered in one read. `_read_events` splits the server-sent events
itself (hand-written because the format is a dozen lines: blank-line separated blocks of
`event:` and `data:` fields, and the SDK's decoder was the cost), parses the JSON of one
read's events in one call, hands each to the provider's `take`, and calls `on_text` once per
read with the text the read added. After a read that delivered text it rests `READ_GAP_S`
before reading again, with the socket's reading paused (`_rest`), so what a fast model
writes meanwhile waits in the kernel and arrives in one read: one
`on_text`, one trip through the engine and the chat's stream per rest instead of one per
token. The first text is delivered at once (the rest comes after it), and once the answer
says it is ending (`done`) there is no more resting, so the tail costs no latency.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from orchestrator.errors import ProviderError, ProviderOverrides, ProviderUnavailable
from orchestrator.providers._unicode import well_formed
from orchestrator.redaction import Redactor, redact

__all__ = ["READ_GAP_S", "Endpoint", "OnText", "Take", "connection_refused", "http_client"]

OnText = Callable[[str], Awaitable[None]]
Take = Callable[[str | None, Any], str]
"""One event's name (None when it has none) and data (its JSON value, or its bytes when it is
not JSON) -> the text it adds ("" when none); raises ValueError, TypeError, ... for an event
that is not shaped like one."""

# How long a stream rests after a read that delivered text: the text shown grows in steps of
# this much (5 a second), well under any platform's edit interval (1 s by default), and the
# end of an answer that arrives during a rest waits at most this long. `bench/streaming.py`
# (200 tokens over 1 s, 20 chats): 0.05 s cost 18 ms of CPU per streamed turn, 0.2 s 13.5-15
# ms, 0.5 s 13 ms; past 0.2 s what is left is the platform edits and the JSON, not the reads.
READ_GAP_S: Final = 0.2
_MAX_REASON_CHARS: Final = 200
# What a `take` raises for an event that is not shaped like one.
_MALFORMED: Final = (AttributeError, IndexError, KeyError, TypeError, ValueError)


class Endpoint:
    """One provider's endpoint as its errors name it, with the SDK's exception classes."""

    __slots__ = (
        "api", "key", "name", "overrides", "sdk_error", "timeout_s", "url",
        "_broken", "_own", "_read_timeout", "_status_error", "_status_failure", "_timed_out", "_unreachable", "_what",
    )

    def __init__(
        self,
        *,
        name: str,
        url: str,
        key: str | None,
        overrides: ProviderOverrides | None,
        timeout_s: float,
        api: str,
        what: str,
        sdk: Any,
        sdk_error: type[Exception],
        status_failure: Callable[[Any], ProviderError],
    ) -> None:
        import httpx2  # the SDKs' HTTP client: a streamed read raises its errors unwrapped

        self.name, self.url, self.key, self.overrides = name, url, key, overrides
        self.timeout_s, self.api, self._what = timeout_s, api, what
        self._timed_out: type[Exception] = sdk.APITimeoutError
        self._unreachable: type[Exception] = sdk.APIConnectionError  # includes APITimeoutError
        self._status_error: type[Exception] = sdk.APIStatusError
        self.sdk_error: type[Exception] = sdk_error
        self._broken: type[Exception] = httpx2.HTTPError
        self._read_timeout: type[Exception] = httpx2.TimeoutException
        self._status_failure = status_failure
        # The key this client was given, redacted in its errors even when no config registered it.
        self._own: Redactor | None = None
        if key:
            self._own = Redactor()
            self._own.register(key)

    # -- requests ------------------------------------------------------------------------------

    async def post(self, client: Any, path: str, body: Mapping[str, Any], cast_to: type[Any]) -> Any:
        """Post `body` through the SDK (its retries, auth and errors); return the parsed answer."""
        try:
            return await client.post(path, body=body, cast_to=cast_to)
        except self.sdk_error as exc:
            raise self.failure(exc) from exc
        except ValueError as exc:  # the SDK parses the body itself: one cut off mid-JSON lands here
            raise self.malformed(exc) from exc

    async def stream(
        self, client: Any, path: str, body: Mapping[str, Any], *, cast_to: type[Any], stream_cls: type[Any],
        take: Take, on_text: OnText, done: Callable[[], bool],
    ) -> Any | None:
        """Post a streamed request (the SDK retries until the stream starts), then read its events.

        Returns None once the events are read; a server that ignored `stream: true` and
        answered with one `application/json` body gets that body back, as the SDK builds the
        unstreamed answer (`cast_to`), for the caller to take as the whole answer.
        What `on_text` raises propagates unchanged; the connection is released however the
        read ends, cancellation included.
        """
        try:
            stream = await client.post(path, body=body, cast_to=cast_to, stream=True, stream_cls=stream_cls)
        except self.sdk_error as exc:
            raise self.failure(exc) from exc
        async with stream:  # `AsyncStream.close` closes the response
            response = stream.response
            if _is_json(response.headers.get("content-type")):
                return await self._whole(response, cast_to)
            await self._read_events(response.aiter_bytes(), take, on_text, done, _socket_of(response))
        return None

    async def _whole(self, response: Any, cast_to: type[Any]) -> Any:
        """Read an unstreamed answer to a streamed request and build it as the SDK builds one."""
        try:
            data = json.loads(await response.aread())
        except self._broken as exc:
            raise self.broken(exc) from exc
        except ValueError as exc:
            raise self.malformed(exc) from exc
        if not isinstance(data, dict):
            raise self.malformed(TypeError(f"the answer is a JSON {type(data).__name__}, not an object"))
        return cast_to.construct(**data)  # the SDK's own unvalidated build, as for an unstreamed answer

    async def _read_events(
        self, chunks: AsyncIterator[bytes], take: Take, on_text: OnText, done: Callable[[], bool],
        socket: asyncio.ReadTransport | None = None,
    ) -> None:
        rest = b""
        while True:
            try:
                data = await anext(chunks)
            except StopAsyncIteration:
                break
            except self._broken as exc:
                raise self.broken(exc) from exc
            rest += data
            if b"\r" in rest:  # the format allows CRLF and CR line ends
                rest = _one_line_end(rest)
            if b"\n\n" not in rest:
                continue
            *blocks, rest = rest.split(b"\n\n")
            text = self._take_all(take, blocks)
            if text:
                await on_text(well_formed(text))  # the answer itself is made so by the provider
                if not done():
                    await _rest(socket)
        if rest.strip():
            self._take_all(take, [rest.rstrip(b"\r")])

    def _take_all(self, take: Take, blocks: list[bytes]) -> str:
        """Hand each event of `blocks` to `take`; return the text they add."""
        events = [event for block in blocks if (event := _fields(block)) is not None]
        values = _values([data for _, data in events])
        try:
            return "".join([take(name, value) for (name, _), value in zip(events, values)])
        except _MALFORMED as exc:
            raise self.malformed(exc) from exc

    # -- failures ------------------------------------------------------------------------------

    def failure(self, exc: Exception) -> ProviderError:
        """Translate what the SDK raised."""
        if connection_refused(exc):
            parts = urlsplit(self.url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            return self.unavailable(f"connection refused by {parts.hostname}:{port}")
        if isinstance(exc, self._timed_out) and _timed_out(exc):
            return self.unavailable(f"no answer within {self.timeout_s:g} s", timed_out=True)
        if isinstance(exc, self._unreachable):
            cause = exc.__cause__
            detail = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else str(exc)
            return self.unavailable(self.shorten(detail))
        if isinstance(exc, self._status_error):
            return self._status_failure(exc)
        return self.error(self.shorten(str(exc)))

    def broken(self, exc: Exception) -> ProviderError:
        """Translate a connection failure while a stream was being read."""
        if isinstance(exc, self._read_timeout) and _timed_out(exc):
            return self.unavailable(f"no answer within {self.timeout_s:g} s", timed_out=True)
        return self.unavailable(self.shorten(f"the stream broke off: {exc}"))

    def malformed(self, exc: Exception) -> ProviderError:
        """An answer that is not shaped like one."""
        return self.error(f"malformed {self._what}: {self.shorten(str(exc))}")

    def error(self, reason: str, *, status: int | None = None, error_type: str | None = None, missing_v1: bool = False) -> ProviderError:
        """A failure that retrying elsewhere would not fix."""
        return ProviderError(
            self.name, self.url, reason, status=status, error_type=error_type, overrides=self.overrides, missing_v1=missing_v1
        )

    def unavailable(self, reason: str, *, status: int | None = None, error_type: str | None = None, timed_out: bool = False) -> ProviderUnavailable:
        """The endpoint unreachable, timed out, or still overloaded or rate-limited."""
        return ProviderUnavailable(
            self.name, self.url, reason, status=status, error_type=error_type, api=self.api, timed_out=timed_out,
            overrides=self.overrides,
        )

    def shorten(self, text: str) -> str:
        """Return foreign error text on one line, at most 200 characters, with no secret in it.

        Redacted first, then collapsed and cut: a key split by a newline or cut off at the
        end is still whole (or long enough) for the redactor, in every form it matches.
        """
        # A proxy may echo the key: the redactor knows keys from the config, a bare client its own.
        text = redact(text)
        if self._own is not None:
            text = self._own.redact(text)
        text = " ".join(text.split())
        return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"


def http_client(sdk: Any, error: type[Exception]) -> Any:
    """Return the SDK's aiohttp client (`sdk.DefaultAioHttpClient`), except that a refused
    connection raises `error` (the SDK's base error) at once.

    The SDKs retry every connection failure with backoff (7-9 s over the default retries)
    and their aiohttp transport reports a refused one as `ConnectTimeout`; nothing listens
    there, which a retry within that backoff does not change. Both SDKs pass their own base
    error through without retrying or wrapping it, and `Endpoint.failure` names the refusal.
    """
    return _refusal_not_retried(sdk.DefaultAioHttpClient, error)()


# One client class per (SDK client class, SDK error): made on first use.
_CLIENTS: dict[tuple[type[Any], type[Exception]], type[Any]] = {}


def _refusal_not_retried(base: type[Any], error: type[Exception]) -> type[Any]:
    found = _CLIENTS.get((base, error))
    if found is not None:
        return found

    class RefusalNotRetried(base):  # type: ignore[misc]
        async def send(self, request: Any, **kwargs: Any) -> Any:
            try:
                return await super().send(request, **kwargs)
            except Exception as exc:
                if not connection_refused(exc):
                    raise
                raise error("connection refused") from exc

    _CLIENTS[(base, error)] = RefusalNotRetried
    return RefusalNotRetried


def connection_refused(exc: BaseException) -> bool:
    """Return True when `exc`, or what caused it, is a refused TCP connection (nothing listens).

    A host with several addresses (`localhost`: ::1 and 127.0.0.1) fails with one OSError
    listing each attempt; it counts when every attempt was refused.
    """
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        if isinstance(seen, OSError) and seen.errno is None and str(seen).startswith("Multiple exceptions"):
            codes = re.findall(r"\[Errno (\d+)\]", str(seen))
            if codes and all(int(code) == errno.ECONNREFUSED for code in codes):
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def _is_json(content_type: str | None) -> bool:
    """Return True for an `application/json` (or `+json`) body, which is no event stream."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _socket_of(response: Any) -> asyncio.ReadTransport | None:
    """The connection's transport under the SDK's aiohttp stream, or None (another transport).

    Reached through the vendored `httpx_aiohttp` stream's `_aiohttp_response`: a private name,
    so anything unexpected on the way means no transport, and the rest only sleeps.
    """
    stream = getattr(response, "stream", None)
    stream = getattr(stream, "_stream", stream)  # httpx2 binds it to the response's timing
    aiohttp_response = getattr(stream, "_aiohttp_response", None)
    connection = getattr(aiohttp_response, "connection", None)
    transport = getattr(connection, "transport", None)
    return transport if isinstance(transport, asyncio.ReadTransport) else None


async def _rest(socket: asyncio.ReadTransport | None) -> None:
    """Rest `READ_GAP_S` with the socket's reading paused, so what arrives meanwhile waits in
    the kernel and comes in one read: a model that writes one packet per token otherwise wakes
    the loop (aiohttp's parser, its read timer) once per token even while the reader rests."""
    paused = socket is not None and socket.is_reading()
    if paused:
        socket.pause_reading()  # type: ignore[union-attr]
    try:
        await asyncio.sleep(READ_GAP_S)
    finally:
        if paused:
            socket.resume_reading()  # type: ignore[union-attr]


def _one_line_end(buffer: bytes) -> bytes:
    """Turn CRLF and CR into LF, holding back a CR at the end (its LF may come with the next read)."""
    held = buffer.endswith(b"\r")
    text = (buffer[:-1] if held else buffer).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return text + b"\r" if held else text


def _fields(block: bytes) -> tuple[str | None, bytes] | None:
    """Return one event's name (None without one) and data; None for a block without either."""
    if block.startswith(b"data: ") and b"\n" not in block:  # a lone data line: OpenAI's every event
        return None, block[6:]
    event: str | None = None
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[6:] if line.startswith(b"data: ") else line[5:])
        elif line.startswith(b"event:"):
            event = line[6:].strip().decode("utf-8", "replace")
    if not data and event is None:
        return None  # a comment (`: keep-alive`) or an `id:` / `retry:` line
    return event, b"\n".join(data)


def _values(datas: list[bytes]) -> list[Any]:
    """Return each event's data as JSON, or as its bytes when it is not JSON (`[DONE]`, empty).

    The objects among one read's events are parsed in one call, as one JSON array: one C call
    instead of one per token. The rest (`[DONE]`), and all of them when that call fails (an
    event that only looks like an object), are parsed one by one, so the one at fault is the
    one refused.
    """
    objects = [data[:1] == b"{" and data[-1:] == b"}" for data in datas]
    batch = [data for data, is_object in zip(datas, objects) if is_object]
    parsed: list[Any] = []
    if batch:
        try:
            parsed = json.loads(b"[" + b",".join(batch) + b"]")
        except ValueError:
            parsed = []
        if len(parsed) != len(batch):
            parsed = []
    if parsed and len(batch) == len(datas):
        return parsed
    ready = iter(parsed)
    out: list[Any] = []
    for data, is_object in zip(datas, objects):
        if is_object and parsed:
            out.append(next(ready))
            continue
        try:
            out.append(json.loads(data))
        except ValueError:
            out.append(data)
    return out


def _timed_out(exc: BaseException) -> bool:
    """Return True when a timeout error really comes from a timeout.

    The aiohttp transport reports every connection failure (a refused connection, a server
    that hung up) as `ConnectTimeout`; what really timed out has a `TimeoutError` below it.
    """
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
