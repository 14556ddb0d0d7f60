"""A `Provider` for Anthropic's Messages API, built on the official anthropic SDK."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any, Final

from orchestrator.errors import ProviderError, ProviderOverrides
from orchestrator.providers._anthropic_messages import StreamedMessage, to_completion, to_request
from orchestrator.providers._transport import Endpoint, http_client
from orchestrator.providers._unicode import well_formed_completion
from orchestrator.providers.base import DEFAULT_MAX_OUTPUT_TOKENS, Completion

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicProvider"]

DEFAULT_MAX_TOKENS: Final = DEFAULT_MAX_OUTPUT_TOKENS
# A keyless proxy in front of the API ignores the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY: Final = "not-needed"
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
    tokens (`[providers.X] max_output_tokens`, `DEFAULT_MAX_TOKENS` = 4096 unless told
    otherwise), less when the engine's allowance (what the token budgets leave) is smaller.  `temperature` is never
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

    __slots__ = ("_cast", "_client", "_endpoint", "_max_tokens", "_stream_cls")

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
        from anthropic.types import Message, RawMessageStreamEvent

        self._endpoint = Endpoint(
            name=name, url=base_url, key=api_key, overrides=overrides, timeout_s=timeout_s, api=_API,
            what="message", sdk=anthropic, sdk_error=anthropic.AnthropicError, status_failure=self._status_failure,
        )
        self._max_tokens = max_tokens
        origin = base_url.rstrip("/").removesuffix("/v1")
        try:
            self._client: AsyncAnthropic = anthropic.AsyncAnthropic(
                base_url=origin, api_key=api_key or _PLACEHOLDER_KEY, timeout=timeout_s, max_retries=max_retries,
                http_client=http_client(anthropic, anthropic.AnthropicError),
            )
        except anthropic.AnthropicError as exc:
            raise ProviderError(name, base_url, f"cannot configure the client: {self._endpoint.shorten(str(exc))}") from exc
        # `messages.create` is the same `post` plus per-call checks (deprecated-model
        # warnings, a timeout guess from max_tokens) that an explicit timeout makes moot.
        self._cast = Message
        # The stream is only opened through the SDK (retries, errors); its events are read raw.
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
        max_tokens: int | None = None,
    ) -> Completion:
        """Ask for one completion; raise `ProviderUnavailable` or `ProviderError` on failure.

        With `on_text`, stream the answer and await `on_text` with each non-empty piece of
        its text, in order (a piece may hold several deltas); what `on_text` raises
        propagates unchanged. `max_tokens` (None: the client's `max_tokens`, which also caps
        it) bounds the answer; one stopped there (`stop_reason: "max_tokens"`) comes back `cut`.
        """
        try:
            request = to_request(messages, tools)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._endpoint.error(f"cannot map the chat: {self._endpoint.shorten(str(exc))}") from exc
        limit = self._max_tokens if max_tokens is None else max(1, min(max_tokens, self._max_tokens))
        body: dict[str, Any] = {"model": model, "max_tokens": limit, "messages": request.messages}
        if request.system:
            body["system"] = request.system
        if request.tools:
            body["tools"] = request.tools
        if on_text is not None:
            return well_formed_completion(await self._stream(body, on_text))
        return self._completion(await self._endpoint.post(self._client, "/v1/messages", body, self._cast))

    def _completion(self, response: Any) -> Completion:
        try:
            return well_formed_completion(to_completion(response))
        except (AttributeError, TypeError) as exc:
            # The SDK builds models without validation, so a malformed body surfaces here.
            raise self._endpoint.malformed(exc) from exc

    async def _stream(self, body: dict[str, Any], on_text: Callable[[str], Awaitable[None]]) -> Completion:
        body["stream"] = True
        reply = StreamedMessage(on_error=self._stream_error)
        whole = await self._endpoint.stream(
            self._client, "/v1/messages", body, cast_to=self._cast, stream_cls=self._stream_cls,
            take=reply.take, on_text=on_text, done=reply.ending,
        )
        if whole is not None:  # the server ignored `stream: true`: its one message is the whole answer
            completion = self._completion(whole)
            if completion.text:
                await on_text(completion.text)
            return completion
        try:
            return reply.completion()
        except (TypeError, ValueError) as exc:
            raise self._endpoint.malformed(exc) from exc

    def _status_failure(self, exc: Any) -> ProviderError:
        error_type = getattr(exc, "type", None) if isinstance(getattr(exc, "type", None), str) else None
        api_message = getattr(exc, "api_message", None)
        message = api_message if isinstance(api_message, str) and api_message else None
        return self._api_failure(exc.status_code, error_type, message)

    def _stream_error(self, body: Any) -> ProviderError:
        """Translate an `event: error` inside a 200 stream: its type says what the status would have been."""
        inner = body.get("error") if isinstance(body, Mapping) else None
        inner = inner if isinstance(inner, Mapping) else {}
        error_type = inner.get("type") if isinstance(inner.get("type"), str) else None
        message = inner.get("message") if isinstance(inner.get("message"), str) else None
        return self._api_failure(_STREAM_ERROR_STATUS.get(error_type or "", 500), error_type, message)

    def _api_failure(self, code: int, error_type: str | None, message: str | None) -> ProviderError:
        label = f"HTTP {code} {error_type}" if error_type else f"HTTP {code}"
        reason = f"{label}: {self._endpoint.shorten(message or 'no error message')}"
        if code == 429 or code >= 500:  # overloaded or rate-limited: the SDK's retries did not help
            return self._endpoint.unavailable(reason, status=code, error_type=error_type)
        return self._endpoint.error(reason, status=code, error_type=error_type)

    async def aclose(self) -> None:
        """Close the client's connection pool; calling it again does nothing."""
        await self._client.close()

