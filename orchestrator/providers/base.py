"""The Provider protocol the engine talks to, and the values it exchanges."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from orchestrator.config import SecretRef
from orchestrator.errors import ProviderOverrides

__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS", "Completion", "CompletionWatcher", "ModelBinding", "Prices", "Provider", "ToolCall",
    "Usage",
]

# What one call asks for at most when `[providers.X] max_output_tokens` is not set: every
# current hosted model allows at least this much output, and local servers take it.
DEFAULT_MAX_OUTPUT_TOKENS: Final = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call the model asked for; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """The tokens one model call used, as the provider reported them.

    `input_tokens` counts the whole prompt, `cached_tokens` the part of it read from the
    provider's prompt cache and `cache_write_tokens` the part written into it (so
    `cached_tokens + cache_write_tokens <= input_tokens`); `output_tokens` is what the
    model wrote. Anthropic reports cache reads and writes apart from `input_tokens`: its
    client adds them in, so both kinds count the same way.
    """

    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        """Return input plus output tokens (what a token budget counts)."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """`[providers.X.prices]`: what a million tokens cost, in the operator's currency.

    `cache_write` None is the `input` price (the seam resolves `[providers.X.prices]` to a
    number; None is for values built in code).
    """

    input: float
    output: float
    cached_input: float
    cache_write: float | None = None

    def cost(self, usage: Usage) -> float:
        """Return what `usage` cost: plain input, cache reads, cache writes and output at their prices."""
        written = usage.cache_write_tokens
        plain = max(0, usage.input_tokens - usage.cached_tokens - written)
        write_price = self.input if self.cache_write is None else self.cache_write
        return (
            plain * self.input + usage.cached_tokens * self.cached_input + written * write_price
            + usage.output_tokens * self.output
        ) / 1e6


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One model answer: text, tool calls, or both.

    `usage` is None when the provider reported none; it is not part of equality (the same
    answer streamed or not, or from a cache, is the same answer). `cut` is True when the
    answer stopped at the request's `max_tokens` (OpenAI `finish_reason: "length"`,
    Anthropic `stop_reason: "max_tokens"`): its text is partial, and a tool call it was
    writing is left out (its arguments are incomplete).
    """

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = field(default=None, compare=False)
    cut: bool = field(default=False, compare=False)
    # Set by a failover chain: the link that answered (None = the binding's own provider and model).
    provider: str | None = None
    model: str | None = None
    # What the server said of its answer, for traces (None where it said nothing): its `id`, the
    # `model` that wrote it (often a dated snapshot of the one asked) and why it stopped, in the
    # API's own words (OpenAI `finish_reason` "stop"/"length"/"tool_calls", Anthropic `stop_reason`
    # "end_turn"/"max_tokens"/"tool_use").
    response_id: str | None = field(default=None, compare=False)
    response_model: str | None = field(default=None, compare=False)
    finish_reason: str | None = field(default=None, compare=False)


class Provider(Protocol):
    """A chat-completions backend.

    Raises `ProviderUnavailable` when the endpoint cannot be reached and `ProviderError`
    for any other failure that retrying did not fix; never a foreign SDK exception.
    With `on_text`, the answer may be streamed: `on_text` is awaited with each piece of
    the reply text as it arrives (a provider that cannot stream may call it once with the
    whole text, or not at all), and the returned `Completion` is the same either way.
    What `on_text` raises propagates unchanged. `max_tokens` is the most output the answer
    may take (the engine passes what is left of the tightest token budget, within the
    binding's `max_output_tokens`); None leaves it to the client's own default.
    """

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        temperature: float | None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
        max_tokens: int | None = None,
    ) -> Completion: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelBinding:
    """The provider endpoint, model and sampling settings an agent runs with."""

    provider: str
    kind: Literal["openai", "anthropic"]  # which API the endpoint speaks: picks the client
    base_url: str
    model: str
    temperature: float | None
    api_key: SecretRef | None
    api_key_env: str | None
    # `[providers.X]`'s override variables, named in error texts; `base_url_from_env`: `base_url` is `base_url_env`'s value.
    base_url_env: str | None
    model_env: str | None
    base_url_from_env: bool
    timeout_s: float
    max_retries: int
    # Tried in order when this endpoint fails structurally (see `FailoverProvider`); each has none of its own.
    fallback: tuple[ModelBinding, ...] = ()
    # `[providers.X.prices]`: turns recorded usage into cost (None = no cost recorded).
    prices: Prices | None = None
    # OpenAI kind: ask a streamed answer for its usage (`stream_options.include_usage`).
    stream_usage: bool = True
    # `[providers.X] max_output_tokens`: the most output one call asks for (the model's own limit).
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    # OpenAI kind: the request member that carries it (`max_completion_tokens` for OpenAI's reasoning models).
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"

    @property
    def overrides(self) -> ProviderOverrides:
        """Return the override variables, for the client's error texts."""
        return ProviderOverrides(
            base_url_env=self.base_url_env,
            api_key_env=self.api_key_env,
            model_env=self.model_env,
            url_from_env=self.base_url_from_env,
        )

    @property
    def chain(self) -> tuple[ModelBinding, ...]:
        """Return every link, primary first, each without a fallback of its own."""
        if not self.fallback:
            return (self,)
        return (dataclasses.replace(self, fallback=()), *self.fallback)


CompletionWatcher = Callable[[ModelBinding, str], AbstractContextManager[Callable[[Completion], None] | None]]
"""Watches one request to one endpoint (each link of a failover chain its own): called with the
endpoint's binding and the model asked, entered before the request and exited after it, with the
`ProviderError` that ended it, if any (see `ProviderPool.watch`). What entering it gives, when not
None, is called with the answer before the exit (a span records the usage and the response there)."""
