"""A `Provider` for any OpenAI-compatible chat-completions endpoint, built on the openai SDK."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Literal
from urllib.parse import urlsplit

from orchestrator.errors import ProviderError, ProviderOverrides
from orchestrator.providers._transport import Endpoint, http_client
from orchestrator.providers._unicode import well_formed, well_formed_completion
from orchestrator.providers.base import DEFAULT_MAX_OUTPUT_TOKENS, Completion, ToolCall, Usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAICompatProvider"]

# Local servers (llama.cpp, vLLM, Ollama) ignore the key, but the SDK refuses to start without one.
_PLACEHOLDER_KEY: Final = "not-needed"


class OpenAICompatProvider:
    """Complete chats through `openai.AsyncOpenAI` against one base URL.

    `messages` and `tools` must be plain JSON data (dicts, lists, strings, numbers): the
    registry and transcript hold them that way, so nothing is converted per request.

    Retries are the SDK's own: 408/409/429/5xx answers and connection failures are retried
    `max_retries` times with capped exponential backoff, honouring `Retry-After`.  What is
    left raises `ProviderUnavailable` (endpoint unreachable, timed out, or still 429) or
    `ProviderError` (any other failure, 5xx included); an HTTP answer's status and error
    type stay on the error as `status` and `error_type`.  No openai exception escapes.  Cancellation propagates unchanged.
    With `on_text` the answer is streamed (`stream: true`, its events read by
    `Endpoint.stream`, a few pieces a second): retries cover the request until the stream
    starts, and a stream that breaks off raises the same errors.
    Every request asks for at most `max_tokens` output tokens (the engine's allowance,
    never above `max_output_tokens`), in the member `max_tokens_param` names
    (`max_tokens`, which every local server reads, or `max_completion_tokens`, which
    OpenAI's reasoning models require); an answer stopped there (`finish_reason: "length"`)
    comes back `cut`, without the tool call it was writing.
    Call `aclose()` (or use `async with`) to release the connection pool.
    """

    __slots__ = ("_cast", "_client", "_endpoint", "_max_output", "_max_param", "_stream_cls", "_stream_usage")

    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        api_key: str | None,
        timeout_s: float,
        max_retries: int,
        overrides: ProviderOverrides | None = None,
        stream_usage: bool = True,
        max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS,
        max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
    ) -> None:
        # Imported here, not at module level: the SDK is slow to import and `--help` must not pay for it.
        import openai

        self._endpoint = Endpoint(
            name=name, url=base_url, key=api_key, overrides=overrides, timeout_s=timeout_s,
            api="OpenAI-compatible endpoint", what="completion", sdk=openai, sdk_error=openai.OpenAIError,
            status_failure=self._status_failure,
        )
        self._stream_usage = stream_usage
        self._max_output = max_output_tokens
        self._max_param = max_tokens_param
        try:
            self._client: AsyncOpenAI = openai.AsyncOpenAI(
                base_url=base_url,
                api_key=api_key or _PLACEHOLDER_KEY,
                timeout=timeout_s,
                max_retries=max_retries,
                http_client=http_client(openai, openai.OpenAIError),
            )
        except openai.OpenAIError as exc:
            raise ProviderError(name, base_url, f"cannot configure the client: {exc}") from exc
        from openai.types.chat import ChatCompletion

        # `chat.completions.create` first walks every message through the SDK's typed-dict
        # transform, which costs ~130 ms per request at 800 messages and changes nothing for
        # plain JSON bodies; the SDK's documented custom-request route (`client.post`) sends
        # the same body with the same auth, retries and errors, without that walk.
        self._cast = ChatCompletion
        # The stream is only opened through the SDK (retries, errors); its events are read raw.
        self._stream_cls = openai.AsyncStream[object]

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
        on_text: Callable[[str], Awaitable[None]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """Ask for one completion; raise `ProviderUnavailable` or `ProviderError` on failure.

        With `on_text`, stream the answer and await `on_text` with each non-empty piece of
        its text, in order (a piece may hold several tokens); what `on_text` raises
        propagates unchanged. `max_tokens` (None: `max_output_tokens`) bounds the answer.
        """
        limit = self._max_output if max_tokens is None else max(1, min(max_tokens, self._max_output))
        body: dict[str, Any] = {"model": model, "messages": messages, self._max_param: limit}
        if tools:
            body["tools"] = tools
        if temperature is not None:
            body["temperature"] = temperature
        if on_text is not None:
            return well_formed_completion(await self._stream(body, on_text))
        return self._completion(await self._endpoint.post(self._client, "/chat/completions", body, self._cast))

    def _completion(self, response: Any) -> Completion:
        try:
            return well_formed_completion(_to_completion(response))
        except (AttributeError, IndexError, TypeError) as exc:
            # The SDK builds models without validation, so a malformed body surfaces here.
            raise self._endpoint.malformed(exc) from exc

    async def _stream(self, body: dict[str, Any], on_text: Callable[[str], Awaitable[None]]) -> Completion:
        body["stream"] = True
        # A streamed answer reports its usage only when asked (a last chunk with no choices);
        # `[providers.X] stream_usage = false` for a server that rejects the member.
        if self._stream_usage:
            body["stream_options"] = {"include_usage": True}
        reply = _StreamedReply(self._endpoint)
        whole = await self._endpoint.stream(
            self._client, "/chat/completions", body, cast_to=self._cast, stream_cls=self._stream_cls,
            take=reply.take, on_text=on_text, done=reply.ending,
        )
        if whole is not None:  # the server ignored `stream: true`: its one answer is the whole answer
            completion = self._completion(whole)
            if completion.text:
                await on_text(completion.text)
            return completion
        try:
            return reply.completion()
        except (IndexError, TypeError) as exc:
            raise self._endpoint.malformed(exc) from exc

    def _status_failure(self, exc: Any) -> ProviderError:
        code: int = exc.status_code
        endpoint = self._endpoint
        reason, error_type = endpoint.shorten(_status_reason(exc)), _error_type(exc)
        if code == 429:  # still rate-limited after the SDK's retries: a failover may go elsewhere
            return endpoint.unavailable(reason, status=code, error_type=error_type)
        return endpoint.error(
            reason, status=code, error_type=error_type,
            missing_v1=code == 404 and not urlsplit(endpoint.url).path.rstrip("/").endswith("/v1"),
        )

    async def transcribe(self, *, model: str, audio: bytes, name: str, mime: str) -> str:
        """Return the text spoken in `audio`, a file called `name` (`/audio/transcriptions`).

        The caller read the file (from the descriptor it checked); raises `ProviderUnavailable`
        or `ProviderError` like `complete`.
        """
        try:
            result = await self._client.audio.transcriptions.create(
                model=model, file=(name, audio, mime), response_format="json"
            )
        except self._endpoint.sdk_error as exc:
            raise self._endpoint.failure(exc) from exc
        except ValueError as exc:
            raise self._endpoint.malformed(exc) from exc
        text = getattr(result, "text", None)
        if not isinstance(text, str):
            raise self._endpoint.malformed(TypeError("the transcription has no text"))
        return well_formed(text)

    async def aclose(self) -> None:
        """Close the client's connection pool; calling it again does nothing."""
        await self._client.close()


def _to_completion(response: Any) -> Completion:
    if not response.choices:
        raise IndexError("the response has no choices")
    choice = response.choices[0]
    message = choice.message
    calls = message.tool_calls
    usage = _to_usage(getattr(response, "usage", None))
    reason = getattr(choice, "finish_reason", None)
    cut = reason == "length"  # stopped at max_tokens: a call it wrote is partial
    return Completion(
        text=message.content, tool_calls=() if cut or not calls else tuple(_to_tool_call(call) for call in calls),
        usage=usage, cut=cut, response_id=_said(getattr(response, "id", None)),
        response_model=_said(getattr(response, "model", None)), finish_reason=_said(reason),
    )


def _said(value: Any) -> str | None:
    """Return what a response member said when it is a non-empty string (None otherwise)."""
    return value if isinstance(value, str) and value else None


def _member(value: Any, name: str) -> Any:
    """`value.name`, or `value[name]` for a stream chunk kept as plain JSON."""
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


def _to_usage(usage: Any) -> Usage | None:
    """Map `usage` (`prompt_tokens` counts the cached part too); None when absent or not numbers."""
    if usage is None:
        return None
    prompt, completion = _member(usage, "prompt_tokens"), _member(usage, "completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None  # a server that reports no usable figures: the budget falls back to an estimate
    details = _member(usage, "prompt_tokens_details")
    cached = _member(details, "cached_tokens") if details is not None else None
    cached = cached if isinstance(cached, int) else 0
    return Usage(input_tokens=max(0, prompt), output_tokens=max(0, completion), cached_tokens=min(max(0, cached), max(0, prompt)))


def _to_tool_call(call: Any) -> ToolCall:
    function = getattr(call, "function", None)
    if function is None:
        raise TypeError(f"unsupported tool call type {getattr(call, 'type', None)!r}")
    return ToolCall(id=call.id, name=function.name, arguments=function.arguments)


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamedReply:
    """Assemble `chat.completion.chunk`s into the `Completion` the unstreamed answer gives.

    The SDK's `ChatCompletionStreamState` is not used: it re-serialises the whole message
    on every chunk and raises on `finish_reason: "length"`, which the unstreamed path does not.
    """

    __slots__ = (
        "_calls", "_cut", "_endpoint", "_ending", "_has_text", "_id", "_model", "_reason", "_seen", "_text", "_usage",
    )

    def __init__(self, endpoint: Endpoint) -> None:
        self._endpoint = endpoint
        self._ending = False  # a finish_reason came: only the usage chunk and `[DONE]` follow
        self._cut = False  # the finish_reason was "length": the answer stopped at max_tokens
        self._usage: Usage | None = None
        self._text: list[str] = []
        self._has_text = False  # content `null` throughout means text None, as unstreamed
        self._seen = False
        self._calls: dict[int, _PartialCall] = {}
        self._id: str | None = None  # every chunk repeats the answer's id and model: the first is kept
        self._model: str | None = None
        self._reason: str | None = None

    def ending(self) -> bool:
        """Return True once the answer said it is finished."""
        return self._ending

    def take(self, event: str | None, chunk: Any) -> str:
        """Take one server-sent event's data; return the text it adds.

        Raises ValueError for data that is not JSON and `ProviderError` for an error event.
        """
        if type(chunk) is dict and "error" not in chunk:  # what JSON objects parse to: the common case first
            return self.add(chunk)
        if isinstance(chunk, bytes):
            if chunk.startswith(b"[DONE]"):
                self._ending = True
                return ""
            raise ValueError(f"an event whose data is not JSON: {chunk[:80]!r}")
        if isinstance(chunk, Mapping) and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, Mapping) else None
            raise self._endpoint.error(self._endpoint.shorten(message if isinstance(message, str) and message else "an error occurred during streaming"))
        return self.add(chunk)

    def add(self, chunk: Any) -> str:
        """Take one chunk (its JSON object); return the text it adds ("" when none).

        Raises AttributeError or TypeError for a chunk that is not shaped like one.
        """
        piece = ""
        if self._id is None:
            self._id, self._model = _said(chunk.get("id")), _said(chunk.get("model"))
        usage = chunk.get("usage")
        if usage is not None:  # the last chunk (`include_usage`), or every chunk on some servers
            self._usage = _to_usage(usage) or self._usage
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:  # the first choice, as the unstreamed path reads
                continue
            self._seen = True
            if reason := choice.get("finish_reason"):
                self._ending = True
                self._cut = reason == "length"
                self._reason = _said(reason)
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if isinstance(content, str):
                self._has_text = True
                piece += content
            for call in delta.get("tool_calls") or ():
                self._add_call(call)
        if piece:
            self._text.append(piece)
        return piece

    def _add_call(self, call: Any) -> None:
        index = call.get("index")
        if index is None:  # some servers send each call whole, without an index
            index = len(self._calls)
        partial = self._calls.setdefault(index, _PartialCall())
        # A call's id and name arrive whole; some servers repeat them in later chunks.
        call_id = call.get("id")
        if call_id and not partial.id:
            partial.id = str(call_id)
        function = call.get("function")
        if function is None:
            return
        name, arguments = function.get("name"), function.get("arguments")
        if name and not partial.name:
            partial.name = str(name)
        if arguments:
            partial.arguments.append(str(arguments))

    def completion(self) -> Completion:
        """Return the assembled answer; raise IndexError or TypeError when it is incomplete."""
        if not self._seen:
            raise IndexError("the response has no choices")
        text = "".join(self._text) if self._has_text else None
        calls: list[ToolCall] = []
        for index, partial in sorted(self._calls.items()):
            if self._cut:  # stopped at max_tokens: a call it was writing is partial
                break
            if not (partial.id and partial.name):
                raise TypeError(f"streamed tool call {index} has no id or no function name")
            calls.append(ToolCall(id=partial.id, name=partial.name, arguments="".join(partial.arguments)))
        return Completion(
            text=text, tool_calls=tuple(calls), usage=self._usage, cut=self._cut, response_id=self._id,
            response_model=self._model, finish_reason=self._reason,
        )


def _status_reason(exc: Any) -> str:
    body = exc.body
    message = body.get("message") if isinstance(body, Mapping) else body
    if not isinstance(message, str) or not message:
        message = "no error message"
    return f"HTTP {exc.status_code}: {message}"


def _error_type(exc: Any) -> str | None:
    body = exc.body
    kind = body.get("type") if isinstance(body, Mapping) else None
    return kind if isinstance(kind, str) and kind else None
