"""A `Provider` for any OpenAI-compatible chat-completions endpoint, built on the openai SDK."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final

from orchestrator.providers.base import Completion, ToolCall
from orchestrator.errors import ProviderError, ProviderUnavailable

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAICompatProvider"]

# Local servers (llama.cpp, vLLM, Ollama) ignore the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY: Final = "not-needed"
_MAX_REASON_CHARS: Final = 200


class OpenAICompatProvider:
    """Complete chats through `openai.AsyncOpenAI` against one base URL.

    `messages` and `tools` must be plain JSON data (dicts, lists, strings, numbers): the
    registry and transcript hold them that way, so nothing is converted per request.

    Retries are the SDK's own: 408/409/429/5xx answers and connection failures are retried
    `max_retries` times with capped exponential backoff, honouring `Retry-After`.  What is
    left raises `ProviderUnavailable` (endpoint unreachable or timed out) or `ProviderError`
    (any other failure); no openai exception escapes.  Cancellation propagates unchanged.
    Call `aclose()` (or use `async with`) to release the connection pool.
    """

    __slots__ = (
        "_cast",
        "_client",
        "_name",
        "_sdk_error",
        "_status_error",
        "_timed_out",
        "_timeout_s",
        "_unreachable",
        "_url",
    )

    def __init__(
        self, *, name: str, base_url: str, api_key: str | None, timeout_s: float, max_retries: int
    ) -> None:
        # Imported here, not at module level: the SDK is slow to import and `--help` must not pay for it.
        import openai

        self._name = name
        self._url = base_url
        self._timeout_s = timeout_s
        self._timed_out: type[Exception] = openai.APITimeoutError
        self._unreachable: type[Exception] = openai.APIConnectionError  # includes APITimeoutError
        self._status_error: type[Exception] = openai.APIStatusError
        self._sdk_error: type[Exception] = openai.OpenAIError
        try:
            self._client: AsyncOpenAI = openai.AsyncOpenAI(
                base_url=base_url,
                api_key=api_key or _PLACEHOLDER_KEY,
                timeout=timeout_s,
                max_retries=max_retries,
            )
        except openai.OpenAIError as exc:
            raise ProviderError(name, base_url, f"cannot configure the client: {exc}") from exc
        from openai.types.chat import ChatCompletion

        # `chat.completions.create` first walks every message through the SDK's typed-dict
        # transform, which costs ~130 ms per request at 800 messages and changes nothing for
        # plain JSON bodies; the SDK's documented custom-request route (`client.post`) sends
        # the same body with the same auth, retries and errors, without that walk.
        self._cast = ChatCompletion

    async def __aenter__(self) -> OpenAICompatProvider:
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
    ) -> Completion:
        """Ask for one completion; raise `ProviderUnavailable` or `ProviderError` on failure."""
        body: dict[str, Any] = {"model": model, "messages": messages}
        if tools:
            body["tools"] = tools
        if temperature is not None:
            body["temperature"] = temperature
        try:
            response = await self._client.post("/chat/completions", body=body, cast_to=self._cast)
        except self._timed_out as exc:
            reason = f"no answer within {self._timeout_s:g} s"
            raise ProviderUnavailable(self._name, self._url, reason) from exc
        except self._unreachable as exc:
            raise ProviderUnavailable(self._name, self._url, _unreachable_reason(exc)) from exc
        except self._status_error as exc:
            raise ProviderError(self._name, self._url, _status_reason(exc)) from exc
        except self._sdk_error as exc:
            raise ProviderError(self._name, self._url, _shorten(str(exc))) from exc
        try:
            return _to_completion(response)
        except (AttributeError, IndexError, TypeError) as exc:
            # The SDK builds models without validation, so a malformed body surfaces here.
            reason = f"malformed completion: {_shorten(str(exc))}"
            raise ProviderError(self._name, self._url, reason) from exc

    async def aclose(self) -> None:
        """Close the client's connection pool; calling it again does nothing."""
        await self._client.close()


def _to_completion(response: Any) -> Completion:
    if not response.choices:
        raise IndexError("the response has no choices")
    message = response.choices[0].message
    calls = message.tool_calls
    if not calls:
        return Completion(text=message.content)
    return Completion(text=message.content, tool_calls=tuple(_to_tool_call(call) for call in calls))


def _to_tool_call(call: Any) -> ToolCall:
    function = getattr(call, "function", None)
    if function is None:
        raise TypeError(f"unsupported tool call type {getattr(call, 'type', None)!r}")
    return ToolCall(id=call.id, name=function.name, arguments=function.arguments)


def _unreachable_reason(exc: Exception) -> str:
    cause = exc.__cause__
    detail = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else str(exc)
    return _shorten(detail)


def _status_reason(exc: Any) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, Mapping) else body
    if not isinstance(message, str) or not message:
        message = "no error message"
    return f"HTTP {exc.status_code}: {_shorten(message)}"


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"
