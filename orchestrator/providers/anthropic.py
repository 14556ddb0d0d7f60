"""A `Provider` for Anthropic's Messages API, built on the official anthropic SDK."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Final

from orchestrator.errors import ProviderError, ProviderOverrides, ProviderUnavailable
from orchestrator.providers._anthropic_messages import StreamedMessage, to_completion, to_request
from orchestrator.providers.base import Completion
from orchestrator.redaction import redact

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicProvider"]

DEFAULT_MAX_TOKENS: Final = 4096
# A keyless proxy in front of the API ignores the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY: Final = "not-needed"
_MAX_REASON_CHARS: Final = 200
_API: Final = "Anthropic Messages API endpoint"
_STREAM_ERROR_STATUS: Final = MappingProxyType(
    {"invalid_request_error": 400, "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}
)


class AnthropicProvider:
    """Complete chats through `anthropic.AsyncAnthropic` against one base URL.

    `messages` and `tools` are the engine's OpenAI-shaped plain JSON; they are mapped to
    the Messages API (system prompt apart, `tool_use` / `tool_result` blocks, alternating
    turns) and the answer mapped back, so the engine never sees the difference.  The
    system prompt and the last tool spec carry `cache_control` breakpoints, so repeated
    turns read that prefix from the prompt cache.  `base_url` is the API's origin
    (`https://api.anthropic.com`); a trailing `/v1` is dropped, as the SDK adds it.

    The API requires `max_tokens`: every request asks for at most `max_tokens` output
    tokens (`DEFAULT_MAX_TOKENS`, 4096, unless told otherwise).  `temperature` is never
    sent: the API version the SDK speaks (`anthropic-version: 2026-10-21`) refuses every
    sampling parameter with a 400, and the SDK no longer has them.

    Retries are the SDK's own: 408/409/429/5xx (529 overloaded included) answers and
    connection failures are retried `max_retries` times with capped exponential backoff,
    honouring `Retry-After`.  What is left raises `ProviderUnavailable` (unreachable, timed
    out, or still 429/5xx: `status` and `error_type` tell which) or `ProviderError` (any
    other failure, e.g. 400/401 with the API's message); no anthropic exception escapes and
    the key never appears in an error.  Cancellation propagates unchanged.  With `on_text`
    the answer is streamed (`stream: true`): `on_text` is awaited with each text delta and
    the returned `Completion` is the same as unstreamed; a stream that breaks off raises
    the same errors.  Call `aclose()` (or use `async with`) to release the connection pool.
    """

    __slots__ = (
        "_broken_stream",
        "_cast",
        "_client",
        "_key",
        "_max_tokens",
        "_name",
        "_overrides",
        "_sdk_error",
        "_status_error",
        "_stream_cls",
        "_timed_out",
        "_timeout_s",
        "_unreachable",
        "_url",
    )

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        overrides: ProviderOverrides | None = None,
    ) -> None:
        # Imported here, not at module level: the SDK is slow to import and `--help` must not pay for it.
        import anthropic
        import httpx2  # the SDK's HTTP client: a stream that breaks off raises its errors unwrapped
        from anthropic.types import Message, RawMessageStreamEvent

        self._name = name
        self._overrides = overrides
        self._url = base_url
        self._key = api_key
        self._timeout_s = timeout_s
        self._max_tokens = max_tokens
        self._timed_out: type[Exception] = anthropic.APITimeoutError
        self._unreachable: type[Exception] = anthropic.APIConnectionError  # includes APITimeoutError
        self._status_error: type[Exception] = anthropic.APIStatusError
        self._sdk_error: type[Exception] = anthropic.AnthropicError
        self._broken_stream: type[Exception] = httpx2.HTTPError
        origin = base_url.rstrip("/").removesuffix("/v1")
        try:
            self._client: AsyncAnthropic = anthropic.AsyncAnthropic(
                base_url=origin, api_key=api_key or _PLACEHOLDER_KEY, timeout=timeout_s, max_retries=max_retries
            )
        except anthropic.AnthropicError as exc:
            raise ProviderError(name, base_url, f"cannot configure the client: {self._shorten(str(exc))}") from exc
        # `messages.create` is the same `post` plus per-call checks (deprecated-model
        # warnings, a timeout guess from max_tokens) that an explicit timeout makes moot.
        self._cast = Message
        self._stream_cls = anthropic.AsyncStream[RawMessageStreamEvent]

    async def __aenter__(self) -> AnthropicProvider:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        temperature: float | None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
    ) -> Completion:
        """Ask for one completion; raise `ProviderUnavailable` or `ProviderError` on failure.

        With `on_text`, stream the answer and await `on_text` with every non-empty piece
        of its text, in order; what `on_text` raises propagates unchanged.
        """
        try:
            request = to_request(messages, tools)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ProviderError(self._name, self._url, overrides=self._overrides, reason=f"cannot map the chat: {self._shorten(str(exc))}") from exc
        body: dict[str, Any] = {"model": model, "max_tokens": self._max_tokens, "messages": request.messages}
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = request.tools
        if on_text is not None:
            return await self._stream(body, on_text)
        try:
            response = await self._client.post("/v1/messages", body=body, cast_to=self._cast)
        except self._sdk_error as exc:
            raise self._failure(exc) from exc
        except ValueError as exc:  # the SDK parses the body itself: one cut off mid-JSON lands here
            raise self._malformed(exc) from exc
        try:
            return to_completion(response)
        except (AttributeError, TypeError) as exc:
            # The SDK builds models without validation, so a malformed body surfaces here.
            raise self._malformed(exc) from exc

    async def _stream(self, body: dict[str, Any], on_text: Callable[[str], Awaitable[None]]) -> Completion:
        body["stream"] = True
        try:
            stream = await self._client.post(
                "/v1/messages", body=body, cast_to=self._cast, stream=True, stream_cls=self._stream_cls
            )
        except self._sdk_error as exc:
            raise self._failure(exc) from exc
        reply = StreamedMessage()
        async with stream:  # releases the connection however the loop ends, cancellation included
            while (event := await self._next_event(stream)) is not None:
                try:
                    piece = reply.add(event)
                except (AttributeError, KeyError, TypeError) as exc:
                    raise self._malformed(exc) from exc
                if piece:
                    await on_text(piece)
        try:
            return reply.completion()
        except (TypeError, ValueError) as exc:
            raise self._malformed(exc) from exc

    async def _next_event(self, stream: AsyncIterator[Any]) -> Any:
        # Only the read is guarded: what `on_text` raises must not be mistaken for the SDK's.
        try:
            return await anext(stream)
        except StopAsyncIteration:
            return None
        except self._sdk_error as exc:  # an `event: error` mid-stream arrives as a status error
            raise self._failure(exc) from exc
        except self._broken_stream as exc:
            raise ProviderUnavailable(self._name, self._url, overrides=self._overrides, reason=self._shorten(f"the stream broke off: {exc}"), api=_API) from exc
        except ValueError as exc:  # an event whose data is not JSON
            raise self._malformed(exc) from exc

    def _failure(self, exc: Exception) -> ProviderError:
        if isinstance(exc, self._timed_out):
            return ProviderUnavailable(self._name, self._url, overrides=self._overrides, reason=f"no answer within {self._timeout_s:g} s", api=_API, timed_out=True)
        if isinstance(exc, self._unreachable):
            return ProviderUnavailable(self._name, self._url, overrides=self._overrides, reason=self._unreachable_reason(exc), api=_API)
        if isinstance(exc, self._status_error):
            return self._status_failure(exc)
        return ProviderError(self._name, self._url, overrides=self._overrides, reason=self._shorten(str(exc)))

    def _status_failure(self, exc: Any) -> ProviderError:
        code: int = exc.status_code
        error_type = getattr(exc, "type", None) if isinstance(getattr(exc, "type", None), str) else None
        api_message = getattr(exc, "api_message", None)
        message = api_message if isinstance(api_message, str) and api_message else None
        if message is None and isinstance(exc.body, Mapping):  # `event: error` bodies
            inner = exc.body.get("error")
            if isinstance(inner, Mapping):
                message = inner.get("message") if isinstance(inner.get("message"), str) else None
                error_type = error_type or (inner.get("type") if isinstance(inner.get("type"), str) else None)
        if code < 400:  # an `event: error` inside a 200 stream: its type says what the status would have been
            code = _STREAM_ERROR_STATUS.get(error_type or "", 500)
        label = f"HTTP {code} {error_type}" if error_type else f"HTTP {code}"
        reason = f"{label}: {self._shorten(message or 'no error message')}"
        if code == 429 or code >= 500:  # overloaded or rate-limited: the SDK's retries did not help
            return ProviderUnavailable(self._name, self._url, overrides=self._overrides, reason=reason, status=code, error_type=error_type, api=_API)
        return ProviderError(self._name, self._url, overrides=self._overrides, reason=reason, status=code, error_type=error_type)

    def _malformed(self, exc: Exception) -> ProviderError:
        return ProviderError(self._name, self._url, overrides=self._overrides, reason=f"malformed message: {self._shorten(str(exc))}")

    def _unreachable_reason(self, exc: Exception) -> str:
        cause = exc.__cause__
        detail = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else str(exc)
        return self._shorten(detail)

    def _shorten(self, text: str) -> str:
        # Error text comes from outside (a proxy may echo the key): no secret stays in it.
        if self._key:
            text = text.replace(self._key, "***")
        text = " ".join(redact(text).split())
        return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"

    async def aclose(self) -> None:
        """Close the client's connection pool; calling it again does nothing."""
        await self._client.close()

