"""Model providers: the Provider protocol, the pool, failover chains, and the OpenAI-compatible and Anthropic clients."""

from orchestrator.providers.base import (
    DEFAULT_MAX_OUTPUT_TOKENS,
    Completion, CompletionWatcher, ModelBinding, Prices, Provider, ToolCall, Usage,
)
from orchestrator.providers.failover import FailoverProvider, failover_reason
from orchestrator.providers.pool import ProviderFactory, ProviderPool, openai_factory, provider_factory, warm_provider_sdk

__all__ = [
    "DEFAULT_MAX_OUTPUT_TOKENS",
    "Completion",
    "CompletionWatcher",
    "FailoverProvider",
    "ModelBinding",
    "Prices",
    "Provider",
    "ProviderFactory",
    "ProviderPool",
    "ToolCall",
    "Usage",
    "failover_reason",
    "openai_factory",
    "provider_factory",
    "warm_provider_sdk",
]
