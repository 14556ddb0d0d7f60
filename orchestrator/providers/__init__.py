"""Model providers: the Provider protocol, the pool, and the OpenAI-compatible and Anthropic clients."""

from orchestrator.providers.base import Completion, ModelBinding, Provider, ToolCall
from orchestrator.providers.pool import ProviderFactory, ProviderPool, openai_factory, provider_factory, warm_provider_sdk

__all__ = [
    "Completion",
    "ModelBinding",
    "Provider",
    "ProviderFactory",
    "ProviderPool",
    "ToolCall",
    "openai_factory",
    "provider_factory",
    "warm_provider_sdk",
]
