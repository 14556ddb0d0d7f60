"""`assemble()`, the only constructor of an agent's tool set (a `ScopedToolRegistry`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orchestrator.config import AgentConfig, Config
from orchestrator.errors import SealViolation
from orchestrator.policy import SecurityPolicy, is_granted, matches_any
from orchestrator.seam._seal import SEAL
from orchestrator.seam.paths import ScopedAssembly
from orchestrator.seam.registry import PromptSection, ScopedToolRegistry, TurnContext
from orchestrator.tools import BUILTIN_TOOLS, MEMORY_TOOL_NAMES, SEND_FILE_NAME, SendFileTool, Tool, ToolSource

if TYPE_CHECKING:
    from orchestrator.mcp import McpPool, McpScope
    from orchestrator.memory import MemoryStore
    from orchestrator.peripherals import PeripheralPool
    from orchestrator.seam.execution import MemoryScope
    from orchestrator.seam.services import Services

__all__ = ["assemble"]


def assemble(
    config: Config,
    agent_name: str,
    agent: AgentConfig,
    *,
    assembly: ScopedAssembly,
    security: SecurityPolicy,
    mcp: McpPool | None = None,
    memory: MemoryStore | None = None,
    memory_scope: MemoryScope | None = None,
    peripherals: PeripheralPool | None = None,
    delegation: Services | None = None,
    chat: bool = False,
) -> ScopedToolRegistry:
    """Build one agent's registry; every source passes the same policy, knobs only narrow.

    Order (docs/architecture.md#construction-paths): peripherals (when connected) -> built-in allowed/excluded
    filter, with the memory tools bound to `memory` and `memory_scope` -> memory strip -> MCP bundles with per-tool gating (eager, or deferred behind
    `tool_search`) and pinned resources, from `mcp`'s current listings -> skills ->
    read-only autonomy -> `caller_allowed` -> final `excluded_tools` subtraction over
    everything (`tool_search` included) -> deferred MCP tools settled against what is left.
    """
    tools: dict[str, Tool] = {}
    sections: list[PromptSection] = []
    if assembly.connect_peripherals:
        tools.update(_peripheral_tools(config, agent, peripherals))
    for name, builtin in BUILTIN_TOOLS.items():
        if is_granted(name, allowed=agent.tools, excluded=agent.excluded_tools):
            tools[name] = builtin.bind(security)
    tools.update(_memory_tools(agent_name, memory, memory_scope))
    tools.update(_delegate_tools(config, agent_name, agent, delegation))
    if chat and SEND_FILE_NAME in agent.tools:  # only by its exact name, only where a chat is answered
        tools[SEND_FILE_NAME] = SendFileTool(security=security)
    if assembly.exclude_memory:
        for name in MEMORY_TOOL_NAMES:
            tools.pop(name, None)
    mcp_scope = _mcp_tools(config, agent_name, agent, mcp) if assembly.connect_mcp else None
    if mcp_scope is not None:
        tools.update(mcp_scope.tools())
    skill_tools, skill_sections = _skill_tools(config, agent, security)
    tools.update(skill_tools)
    if agent.autonomy == "read_only":
        tools = {n: t for n, t in tools.items() if t.spec.read_only}
    if assembly.caller_allowed is not None:
        allowed = assembly.caller_allowed
        tools = {n: t for n, t in tools.items() if matches_any(n, allowed)}
    tools = {n: t for n, t in tools.items() if not matches_any(n, agent.excluded_tools)}
    deferred: frozenset[str] = frozenset()
    turn_context: tuple[TurnContext, ...] = ()
    if mcp_scope is not None:
        finished = mcp_scope.finish(tools)
        tools, deferred = finished.tools, finished.deferred
        sections.extend(PromptSection(name=n, text=t) for n, t in finished.sections)
        turn_context = (mcp_scope.pinned,) if mcp_scope.pinned is not None else ()
    sections.extend(skill_sections)
    for name, tool in tools.items():
        source = tool.spec.source
        if tool.spec.name != name or (
            (source is ToolSource.BUILTIN and name not in BUILTIN_TOOLS)
            or (source is ToolSource.MCP and "__" not in name)
            or (source is ToolSource.PERIPHERAL and "__" not in name)
            or (source is ToolSource.SKILL and name.split("__", 1)[0] not in agent.skills)
            or (source is ToolSource.MEMORY and name not in MEMORY_TOOL_NAMES)
        ):
            raise SealViolation(f"tool {name!r} registered under a foreign name")
    return ScopedToolRegistry(
        tools=tools,
        prompt_sections=tuple(sections),
        deferred=deferred,
        turn_context=turn_context,
        unavailable=mcp_scope.unavailable if mcp_scope is not None else frozenset(),
        seal=SEAL,
    )


def _peripheral_tools(config: Config, agent: AgentConfig, pool: PeripheralPool | None) -> dict[str, Tool]:
    # `<name>__<command>` for each peripheral the agent lists; only called when the path
    # connects peripherals, and registering opens no port (the pool opens on first call).
    # No pool (nothing to call through) grants nothing: omission is never a grant.
    if pool is None or not agent.peripherals:
        return {}
    from orchestrator.peripherals import peripheral_tools

    tools: dict[str, Tool] = {}
    for name in agent.peripherals:
        if name in config.peripherals:
            tools.update(peripheral_tools(name, config.peripherals[name], pool=pool))
    return tools


def _delegate_tools(config: Config, agent_name: str, agent: AgentConfig, services: Services | None) -> dict[str, Tool]:
    # `delegate`, bound to the services a target is resolved with; the filters after this
    # (read_only autonomy, caller_allowed, excluded_tools) apply to it like to any tool.
    from orchestrator.seam.delegation import delegate_tools

    return delegate_tools(config, agent_name, agent, services)


def _memory_tools(agent_name: str, store: MemoryStore | None, scope: MemoryScope | None) -> dict[str, Tool]:
    # Bound here to (store, agent, read_from), so a tool can only write as this agent and
    # read this agent plus its read_from. No store (nothing opened) or no scope grants none.
    if store is None or scope is None or scope.mode != "agent":
        return {}
    from orchestrator.memory import memory_tools

    return memory_tools(store, agent=agent_name, read_from=scope.read_from)


def _mcp_tools(config: Config, agent_name: str, agent: AgentConfig, mcp: McpPool | None) -> McpScope | None:
    # The agent's bundles over the pool's current listings; without a pool (nothing
    # connected) MCP grants nothing: omission is never a grant.
    if mcp is None or not agent.mcp_bundles:
        return None
    from orchestrator.mcp import scope_mcp

    bundles = tuple(config.mcp.bundles[b] for b in agent.mcp_bundles if b in config.mcp.bundles)
    return scope_mcp(bundles, pool=mcp, agent=agent_name)


def _skill_tools(
    config: Config, agent: AgentConfig, security: SecurityPolicy
) -> tuple[dict[str, Tool], list[PromptSection]]:
    # Each skill the agent lists: its SKILL.md section, and its tools as `<skill>__<tool>`
    # bound to the agent's own SecurityPolicy (the filters after this apply to them).
    # Parsed once per config generation by the catalog; nothing is read per turn.
    if not agent.skills:
        return {}, []
    from orchestrator.skills import bind_skill_tools, skill_catalog

    catalog = skill_catalog(config)
    tools: dict[str, Tool] = {}
    sections: list[PromptSection] = []
    for name in agent.skills:
        skill = catalog.load(name)
        tools.update(bind_skill_tools(skill, security))
        section, text = skill.prompt_section()
        sections.append(PromptSection(name=section, text=text))
    return tools, sections
