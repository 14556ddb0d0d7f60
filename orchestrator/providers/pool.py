"""ProviderPool: one client per provider endpoint for the life of the process."""

from __future__ import annotations

import dataclasses
import os
from contextlib import ExitStack
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.config import SecretRef, resolve_secret
from orchestrator.errors import ProviderError
from orchestrator.providers.base import Completion, CompletionWatcher, ModelBinding, Provider
from orchestrator.providers.failover import FailoverProvider

__all__ = ["ProviderFactory", "ProviderPool", "openai_factory", "provider_factory", "warm_provider_sdk"]

ProviderFactory = Callable[[ModelBinding], Provider]


def provider_factory(secrets_base: Path | None = None) -> ProviderFactory:
    """Return a factory that builds each binding's client by its `kind`, resolving the key at first use."""

    def build(binding: ModelBinding) -> Provider:
        key = _api_key(binding, secrets_base)
        if binding.kind == "anthropic":
            from orchestrator.providers.anthropic import AnthropicProvider

            return AnthropicProvider(
                name=binding.provider,
                base_url=binding.base_url,
                api_key=key,
                timeout_s=binding.timeout_s,
                max_retries=binding.max_retries,
                max_tokens=binding.max_output_tokens,
                overrides=binding.overrides,
            )
        from orchestrator.providers.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(
            name=binding.provider,
            base_url=binding.base_url,
            api_key=key,
            timeout_s=binding.timeout_s,
            max_retries=binding.max_retries,
            overrides=binding.overrides,
            stream_usage=binding.stream_usage,
            max_output_tokens=binding.max_output_tokens,
            max_tokens_param=binding.max_tokens_param,
        )

    return build


# The name the pool's factory had when there was one kind; it builds every kind.
openai_factory = provider_factory


def _api_key(binding: ModelBinding, secrets_base: Path | None) -> str | None:
    if binding.api_key_env and os.environ.get(binding.api_key_env):
        return resolve_secret(SecretRef(f"env:{binding.api_key_env}"))  # registered for redaction
    if binding.api_key is not None:
        return resolve_secret(binding.api_key, base=secrets_base)
    return None


def warm_provider_sdk(kinds: Iterable[str] = ("openai",)) -> None:
    """Import the client SDKs of the given provider kinds (call from a worker thread after start-up)."""
    for kind in sorted(set(kinds)):
        if kind == "anthropic":
            import orchestrator.providers.anthropic  # noqa: F401
            import anthropic  # noqa: F401
        else:
            import orchestrator.providers.openai_compat  # noqa: F401
            import openai  # noqa: F401


class _LazyProvider:
    """Defers building the real client (and importing its SDK) to the first completion."""

    __slots__ = ("_binding", "_factory", "_real", "_watchers")

    def __init__(self, binding: ModelBinding, factory: ProviderFactory, watchers: list[CompletionWatcher]) -> None:
        self._binding = binding
        self._factory = factory
        self._real: Provider | None = None
        self._watchers = watchers  # the pool's own list: a watcher added later sees this client too

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
        real = self._real
        if real is None:
            real = self._real = self._factory(self._binding)
        watchers = self._watchers
        if not watchers:
            return await real.complete(
                model=model, messages=messages, tools=tools, temperature=temperature, on_text=on_text,
                max_tokens=max_tokens,
            )
        if len(watchers) == 1:  # the usual case: no ExitStack on every request
            with watchers[0](self._binding, model) as answered:
                completion = await real.complete(
                    model=model, messages=messages, tools=tools, temperature=temperature, on_text=on_text,
                    max_tokens=max_tokens,
                )
                if answered is not None:
                    answered(completion)
                return completion
        with ExitStack() as watching:
            heard = [watching.enter_context(watcher(self._binding, model)) for watcher in watchers]
            completion = await real.complete(
                model=model, messages=messages, tools=tools, temperature=temperature, on_text=on_text,
                max_tokens=max_tokens,
            )
            for answered in heard:
                if answered is not None:
                    answered(completion)
            return completion

    async def transcribe(self, *, model: str, audio: bytes, name: str, mime: str) -> str:
        real = self._real
        if real is None:
            real = self._real = self._factory(self._binding)
        transcribe = getattr(real, "transcribe", None)
        if transcribe is None:
            raise ProviderError(
                self._binding.provider, self._binding.base_url,
                reason=f"a {self._binding.kind!r} provider has no /audio/transcriptions endpoint",
            )
        text: str = await transcribe(model=model, audio=audio, name=name, mime=mime)
        return text

    async def aclose(self) -> None:
        if self._real is not None:
            await self._real.aclose()
            self._real = None


class ProviderPool:
    """Hands out one shared provider per endpoint, and per chain; `aclose()` closes them all."""

    def __init__(self, *, factory: ProviderFactory | None = None) -> None:
        self._factory = factory or provider_factory()
        self._providers: dict[tuple[object, ...], _LazyProvider] = {}
        self._chains: dict[tuple[object, ...], FailoverProvider] = {}
        self._watchers: list[CompletionWatcher] = []

    def watch(self, watcher: CompletionWatcher) -> Callable[[], None]:
        """Watch every request to every endpoint of this pool (metrics, traces); return a remover."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher)

    def get(self, binding: ModelBinding) -> Provider:
        """Return the pooled provider for `binding`'s endpoint (the model is per request).

        A binding with a `fallback` gets a `FailoverProvider` over its whole chain, each
        link's client the pooled one of that endpoint.
        """
        if not binding.fallback:
            return self._endpoint(binding)
        links = binding.chain
        key = tuple((_endpoint_key(link), link.model) for link in links)
        chain = self._chains.get(key)
        if chain is None:
            chain = self._chains[key] = FailoverProvider(links=[(link, self._endpoint(link)) for link in links])
        return chain

    def transcriber(self, binding: ModelBinding) -> _LazyProvider:
        """Return the pooled client of `binding`'s endpoint, for `transcribe` (no failover)."""
        return self._endpoint(dataclasses.replace(binding, fallback=()))

    def _endpoint(self, binding: ModelBinding) -> _LazyProvider:
        key = _endpoint_key(binding)
        provider = self._providers.get(key)
        if provider is None:
            provider = self._providers[key] = _LazyProvider(binding, self._factory, self._watchers)
        return provider

    async def aclose(self) -> None:
        """Close every client this pool created."""
        providers, self._providers, self._chains = list(self._providers.values()), {}, {}
        for provider in providers:
            await provider.aclose()


def _endpoint_key(binding: ModelBinding) -> tuple[object, ...]:
    return (binding.provider, binding.kind, binding.base_url, binding.api_key, binding.api_key_env,
            binding.timeout_s, binding.max_retries, binding.overrides, binding.stream_usage,
            binding.max_output_tokens, binding.max_tokens_param)
