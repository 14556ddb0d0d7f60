"""The Provider protocol the engine talks to, and the values it exchanges."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from orchestrator.config import SecretRef
from orchestrator.errors import ProviderOverrides

__all__ = ["Completion", "CompletionWatcher", "ModelBinding", "Provider", "ToolCall"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call the model asked for; `arguments` is the raw JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One model answer: text, tool calls, or both."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    # Set by a failover chain: the link that answered (None = the binding's own provider and model).
    provider: str | None = None
    model: str | None = None


class Provider(Protocol):
    """A chat-completions backend.

    Raises `ProviderUnavailable` when the endpoint cannot be reached and `ProviderError`
    for any other failure that retrying did not fix; never a foreign SDK exception.
    With `on_text`, the answer may be streamed: `on_text` is awaited with each piece of
    the reply text as it arrives (a provider that cannot stream may call it once with the
    whole text, or not at all), and the returned `Completion` is the same either way.
    What `on_text` raises propagates unchanged.
    """

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        temperature: float | None,
        on_text: Callable[[str], Awaitable[None]] | None = None,
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


CompletionWatcher = Callable[[ModelBinding, str], AbstractContextManager[object]]
"""Watches one request to one endpoint (each link of a failover chain its own): called with the
endpoint's binding and the model asked, entered before the request and exited after it, with the
`ProviderError` that ended it, if any (see `ProviderPool.watch`)."""
