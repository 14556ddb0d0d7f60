"""ScopedToolRegistry and `assemble()`, the only constructor of an agent's tool set."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from orchestrator.config.models import AgentConfig, Config
from orchestrator.errors import SealViolation
from orchestrator.policy import SecurityPolicy, is_granted, matches_any
from orchestrator.seam._seal import SEAL
from orchestrator.seam.paths import ScopedAssembly
from orchestrator.tools import BUILTIN_TOOLS, Tool, ToolSource

__all__ = ["PromptSection", "ScopedToolRegistry", "assemble"]

# Names of the memory surface's tools; the ACP strip removes exactly these.
MEMORY_TOOL_NAMES = frozenset({"memory_store", "memory_recall", "memory_forget"})


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSection:
    """A named part of the system prompt contributed by a surface."""

    name: str
    text: str


class ScopedToolRegistry:
    """The only tools one execution may run; minted by `assemble()` alone."""

    __slots__ = ("_by_name", "_names", "_specs", "prompt_sections")

    _by_name: Mapping[str, Tool]
    _names: tuple[str, ...]
    _specs: tuple[dict[str, Any], ...]
    prompt_sections: tuple[PromptSection, ...]

    def __init__(
        self, *, tools: Mapping[str, Tool], prompt_sections: tuple[PromptSection, ...], seal: object
    ) -> None:
        if seal is not SEAL:
            raise SealViolation("ScopedToolRegistry")
        names = tuple(sorted(tools))
        object.__setattr__(self, "_by_name", MappingProxyType(dict(tools)))
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_specs", tuple(tools[n].spec.openai_spec() for n in names))
        object.__setattr__(self, "prompt_sections", prompt_sections)

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

    def get(self, name: str) -> Tool | None:
        """Return the tool called `name`, or None when this registry does not hold it."""
        return self._by_name.get(name)

    def provider_specs(self) -> tuple[dict[str, Any], ...]:
        """Return the OpenAI `tools` list sent to the provider (exactly this registry)."""
        return self._specs


def assemble(
    config: Config,
    agent_name: str,
    agent: AgentConfig,
    *,
    assembly: ScopedAssembly,
    security: SecurityPolicy,
) -> ScopedToolRegistry:
    """Build one agent's registry; every source passes the same policy, knobs only narrow.

    Order (DESIGN.md section 4): peripherals (when connected) -> built-in allowed/excluded
    filter -> memory strip -> MCP bundles with per-tool gating -> skills -> read-only
    autonomy -> `caller_allowed` -> final `excluded_tools` subtraction over everything.
    """
    tools: dict[str, Tool] = {}
    sections: list[PromptSection] = []
    if assembly.connect_peripherals:
        tools.update(_peripheral_tools(config, agent))
    for name, builtin in BUILTIN_TOOLS.items():
        if is_granted(name, allowed=agent.tools, excluded=agent.excluded_tools):
            tools[name] = builtin.bind(security)
    if assembly.exclude_memory:
        for name in MEMORY_TOOL_NAMES:
            tools.pop(name, None)
    if assembly.connect_mcp:
        mcp_tools, mcp_sections = _mcp_tools(config, agent)
        tools.update(mcp_tools)
        sections.extend(mcp_sections)
    skill_tools, skill_sections = _skill_tools(config, agent)
    tools.update(skill_tools)
    sections.extend(skill_sections)
    if agent.autonomy == "read_only":
        tools = {n: t for n, t in tools.items() if t.spec.read_only}
    if assembly.caller_allowed is not None:
        allowed = assembly.caller_allowed
        tools = {n: t for n, t in tools.items() if matches_any(n, allowed)}
    tools = {n: t for n, t in tools.items() if not matches_any(n, agent.excluded_tools)}
    for name, tool in tools.items():
        if tool.spec.name != name or (
            tool.spec.source is ToolSource.BUILTIN and name not in BUILTIN_TOOLS
        ):
            raise SealViolation(f"tool {name!r} registered under a foreign name")
    return ScopedToolRegistry(tools=tools, prompt_sections=tuple(sections), seal=SEAL)


def _peripheral_tools(config: Config, agent: AgentConfig) -> dict[str, Tool]:
    # Hook point for the peripherals surface (serial devices): not built yet, so an agent
    # listing `peripherals` gets no tools from them; omission is never a grant.
    return {}


def _mcp_tools(config: Config, agent: AgentConfig) -> tuple[dict[str, Tool], list[PromptSection]]:
    # Hook point for the MCP surface (pooled servers, bundles, per-tool gating): not built
    # yet, so `mcp_bundles` grant nothing until it lands.
    return {}, []


def _skill_tools(config: Config, agent: AgentConfig) -> tuple[dict[str, Tool], list[PromptSection]]:
    # Hook point for the skills surface (SKILL.md prompt sections and skill tools).
    return {}, []
