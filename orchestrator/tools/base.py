"""The Tool protocol every tool source (built-in, MCP, skill, peripheral) implements."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from orchestrator.policy import SecurityPolicy
    from orchestrator.tools.contract import ToolArguments

__all__ = ["BuiltinTool", "Tool", "ToolSource", "ToolSpec"]


class ToolSource(enum.Enum):
    """Where a tool comes from; every source passes the same filter."""

    BUILTIN = "builtin"
    MCP = "mcp"
    SKILL = "skill"
    PERIPHERAL = "peripheral"
    MEMORY = "memory"
    SEAM = "seam"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """What the model is told about a tool, plus how policy must treat it.

    A tool of ours gives its `contract` (the one declaration of its arguments) and its
    `parameters` are derived from it; only a foreign tool (an MCP server's, a skill's)
    gives `parameters` itself. Raises ValueError when both are given.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: _NO_PARAMETERS)
    contract: type[ToolArguments] | None = None
    read_only: bool = False
    untrusted_output: bool = False
    source: ToolSource = ToolSource.BUILTIN
    _openai: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.contract is not None:
            if self.parameters is not _NO_PARAMETERS:
                raise ValueError(f"tool {self.name!r}: give its contract or its parameters, not both")
            object.__setattr__(self, "parameters", self.contract.parameters())
        # built once per spec: every registry holding this tool shares it (never mutate it)
        wire = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": _thaw(self.parameters),
            },
        }
        object.__setattr__(self, "_openai", wire)

    def openai_spec(self) -> dict[str, Any]:
        """Return the OpenAI `tools` entry for this tool (shared; do not mutate)."""
        return self._openai


_NO_PARAMETERS: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": MappingProxyType({})})


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    return value


class Tool(Protocol):
    """A callable tool; raises `ToolFailure` for anything the model should hear about."""

    @property
    def spec(self) -> ToolSpec: ...

    async def invoke(self, arguments: Mapping[str, Any]) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class BuiltinTool:
    """A built-in tool's spec and the factory binding it to one agent's SecurityPolicy."""

    spec: ToolSpec
    bind: Callable[[SecurityPolicy], Tool]
