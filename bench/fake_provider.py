"""The benchmarks' in-process model: a `Provider` without I/O that answers at once.

Each bench gives it an `Answer` (what to reply to the messages so far), so the orchestrator,
not a model, is what gets measured::

    provider = FakeProvider(echo)
    services = Services(providers=ProviderPool(factory=provider.factory))
"""

from __future__ import annotations

__bench__ = False  # imported by the benches, not one: tests/test_benches.py runs no --quick of it

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from orchestrator.providers import Completion, ModelBinding, Provider, ToolCall

__all__ = ["Answer", "FakeProvider", "calls_then_text", "echo"]

Answer = Callable[[Sequence[Mapping[str, Any]]], Completion]


class FakeProvider:
    """A `Provider` answering `answer(messages)` at once; it never streams and holds nothing to close."""

    __slots__ = ("_answer",)

    def __init__(self, answer: Answer) -> None:
        self._answer = answer

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        temperature: float | None,
        on_text: Callable[[str], Awaitable[None]] | None = None,  # never streams
        max_tokens: int | None = None,  # answers are short
    ) -> Completion:
        return self._answer(messages)

    async def aclose(self) -> None:
        return None

    def factory(self, binding: ModelBinding) -> Provider:
        """Return this provider for every binding (a `ProviderPool` factory)."""
        return self


def echo(messages: Sequence[Mapping[str, Any]]) -> Completion:
    """Answer `re: <last message>`."""
    return Completion(text=f"re: {messages[-1]['content']}")


def calls_then_text(calls: Sequence[ToolCall], final: str) -> Answer:
    """Ask for `calls` after a user message and answer `final` once their results are in."""
    asking = Completion(text=None, tool_calls=tuple(calls))
    done = Completion(text=final)

    def answer(messages: Sequence[Mapping[str, Any]]) -> Completion:
        return done if messages[-1]["role"] == "tool" else asking

    return answer
