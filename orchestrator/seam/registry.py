"""ScopedToolRegistry: the sealed set of tools one execution may run (minted by `assemble()`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from orchestrator.errors import SealViolation
from orchestrator.seam._seal import SEAL, sealed_class, vouch
from orchestrator.tools import Tool

__all__ = ["PromptSection", "ScopedToolRegistry", "TurnContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSection:
    """A named part of the system prompt contributed by a surface."""

    name: str
    text: str


class TurnContext(Protocol):
    """Outside content read at the start of every turn (pinned MCP resources).

    `read` returns `(source, text)` pairs; the engine wraps each as untrusted data in the
    system prompt and caps it like a tool result. It reports failures in the text
    instead of raising.
    """

    async def read(self) -> Sequence[tuple[str, str]]: ...


@sealed_class("ScopedToolRegistry")
class ScopedToolRegistry:
    """The only tools one execution may run; minted by `assemble()` alone.

    `deferred` tools (MCP bundles in deferred mode) are in the registry, so a call by
    name runs, but their specs are withheld from the provider: the model learns them
    through `tool_search`, which searches exactly these.
    """

    __slots__ = (
        "__weakref__", "_by_name", "_deferred", "_names", "_specs", "_unavailable", "prompt_sections", "turn_context",
    )

    _by_name: Mapping[str, Tool]
    _deferred: frozenset[str]
    _names: tuple[str, ...]
    _specs: tuple[dict[str, Any], ...]
    _unavailable: frozenset[str]
    prompt_sections: tuple[PromptSection, ...]
    turn_context: tuple[TurnContext, ...]

    def __init__(
        self,
        *,
        tools: Mapping[str, Tool],
        prompt_sections: tuple[PromptSection, ...],
        seal: object,
        deferred: frozenset[str] = frozenset(),
        turn_context: tuple[TurnContext, ...] = (),
        unavailable: frozenset[str] = frozenset(),
    ) -> None:
        if seal is not SEAL:
            raise SealViolation("ScopedToolRegistry")
        names = tuple(sorted(tools))
        object.__setattr__(self, "_by_name", MappingProxyType(dict(tools)))
        object.__setattr__(self, "_deferred", deferred & frozenset(names))
        object.__setattr__(self, "_names", names)
        object.__setattr__(
            self, "_specs", tuple(tools[n].spec.openai_spec() for n in names if n not in deferred)
        )
        object.__setattr__(self, "prompt_sections", prompt_sections)
        object.__setattr__(self, "turn_context", turn_context)
        object.__setattr__(self, "_unavailable", unavailable)
        vouch(self)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("ScopedToolRegistry is immutable")

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    @property
    def names(self) -> tuple[str, ...]:
        """Return the tool names, sorted."""
        return self._names

    @property
    def deferred(self) -> frozenset[str]:
        """Return the names whose specs are found through `tool_search` instead of sent."""
        return self._deferred

    def unavailable_server(self, name: str) -> str | None:
        """Return the granted MCP server `name` would belong to when it is not connected now."""
        server, sep, _ = name.partition("__")
        return server if sep and server in self._unavailable else None

    def get(self, name: str) -> Tool | None:
        """Return the tool called `name`, or None when this registry does not hold it."""
        return self._by_name.get(name)

    def provider_specs(self) -> tuple[dict[str, Any], ...]:
        """Return the OpenAI `tools` list sent to the provider: every tool but the deferred."""
        return self._specs
