"""FailoverProvider: a model binding's chain of endpoints, tried in order on structured failures."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from loguru import logger

from orchestrator.errors import ProviderError, ProviderUnavailable
from orchestrator.providers.base import Completion, ModelBinding, Provider

__all__ = ["FailoverProvider", "failover_reason"]


def failover_reason(exc: ProviderError) -> str | None:
    """Return why `exc` lets a chain try its next link, or None when it must not.

    Decided on the structured fields only, never on the text: still rate-limited (429)
    after the SDK's retries, a server error (5xx, Anthropic's 529 included), no connection,
    or no answer in time. Any other status (400, 401, 403, ...) and a request that could
    not be built or an answer that could not be read fail the same way everywhere: no
    failover.
    """
    status = exc.status
    if status is not None:
        if status == 429:
            return f"HTTP 429 {exc.error_type or 'rate limited'}"
        if status >= 500:
            return f"HTTP {status} {exc.error_type or 'server error'}"
        return None
    if isinstance(exc, ProviderUnavailable):
        return "timeout" if exc.timed_out else "connection failed"
    return None


class _Streamed:
    """Forward `on_text` and remember whether any text went out (a fallback would repeat it)."""

    __slots__ = ("on_text", "started")

    def __init__(self, on_text: Callable[[str], Awaitable[None]]) -> None:
        self.on_text = on_text
        self.started = False

    async def __call__(self, text: str) -> None:
        self.started = True
        await self.on_text(text)


class FailoverProvider:
    """Complete through the first link of a chain that answers; only the pool builds it.

    `links` pairs each link's binding (primary first) with its pooled client. A link that
    fails with what `failover_reason` accepts is logged (provider, model, reason; never
    message text or a key) and the next one is asked with its own model; any other error,
    the last link's error, and an error after part of a streamed answer went out propagate
    unchanged. The answer names the link that gave it (`Completion.provider` / `.model`).
    The chain has no clock of its own: the turn's `turn_timeout_s` bounds all of it (a
    cancellation propagates at once). It owns no client: `aclose()` does nothing, the pool
    closes them.
    """

    __slots__ = ("_links",)

    def __init__(self, *, links: Sequence[tuple[ModelBinding, Provider]]) -> None:
        if not links:
            raise ValueError("a failover chain needs at least one link")
        self._links = tuple(links)

    @property
    def links(self) -> tuple[tuple[str, str], ...]:
        """Return (provider, model) of every link, in the order they are tried."""
        return tuple((binding.provider, binding.model) for binding, _ in self._links)

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
        """Ask each link in turn until one answers; raise the error that ended the chain."""
        count = len(self._links)
        for index, (binding, client) in enumerate(self._links):
            link_model = model if index == 0 else binding.model  # the caller's model is the primary's
            streamed = _Streamed(on_text) if on_text is not None else None
            try:
                completion = await client.complete(
                    model=link_model, messages=messages, tools=tools, temperature=temperature, on_text=streamed,
                    max_tokens=max_tokens,
                )
            except ProviderError as exc:
                reason = failover_reason(exc)
                where = f"{binding.provider}/{link_model}"
                if reason is None:
                    logger.warning("failover: {} failed ({}); not a failover error", where, _label(exc))
                    raise
                if streamed is not None and streamed.started:
                    logger.warning("failover: {} failed ({}) after streaming part of the answer", where, reason)
                    raise
                if index == count - 1:
                    logger.warning("failover: {} failed ({}); the chain is spent ({} links)", where, reason, count)
                    raise
                following = self._links[index + 1][0]
                logger.warning(
                    "failover: {} failed ({}); trying {}/{} (link {} of {})",
                    where, reason, following.provider, following.model, index + 2, count,
                )
                continue
            if index:
                logger.info("failover: answered by {}/{} (link {} of {})", binding.provider, link_model, index + 1, count)
            return dataclasses.replace(completion, provider=binding.provider, model=link_model)
        raise AssertionError("unreachable: the last link returns or raises")

    async def aclose(self) -> None:
        """Do nothing: the links' clients belong to the pool."""


def _label(exc: ProviderError) -> str:
    # The class and status only: the reason text may carry what the API echoed back.
    return f"{type(exc).__name__}, HTTP {exc.status}" if exc.status is not None else type(exc).__name__
