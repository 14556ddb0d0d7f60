"""Per-agent MCP gating: the seam's `assemble()` calls `scope_mcp` and `McpScope.finish`, nobody else.

An agent gets only the servers its bundles list, and of those only the tools each bundle
lists for that server (names or globs on the server's own tool names; a bundle listing no
tools for a server grants none). The seam then applies its filters (read-only autonomy,
`caller_allowed`, `excluded_tools`) to the whole tool set, and `finish` settles the
deferred part: `tool_search` searches exactly the deferred tools that survived, and when
`tool_search` itself was filtered out, the deferred tools and their prompt section go too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from loguru import logger

from orchestrator.config import McpBundleConfig
from orchestrator.mcp.resources import PinnedResources
from orchestrator.mcp.tool_search import ToolSearch, deferred_section
from orchestrator.mcp.naming import qualified_name, unusable_reason
from orchestrator.mcp.tools import McpTool
from orchestrator.policy import matches_any
from orchestrator.tools import TOOL_SEARCH_NAME, Tool

if TYPE_CHECKING:
    from orchestrator.mcp.pool import McpPool

__all__ = ["DEFERRED_SECTION", "McpFinish", "McpScope", "scope_mcp"]

DEFERRED_SECTION: Final = "mcp_deferred_tools"
_GLOB_CHARS: Final = frozenset("*?[")


@dataclass(frozen=True, slots=True, kw_only=True)
class McpFinish:
    """The MCP part of a finished registry: tools, which are deferred, prompt sections."""

    tools: dict[str, Tool]
    deferred: frozenset[str]
    sections: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class McpScope:
    """One agent's gated MCP tools and pinned resources, before the seam's final filters."""

    eager: Mapping[str, McpTool] = field(default_factory=lambda: MappingProxyType({}))
    deferred: Mapping[str, McpTool] = field(default_factory=lambda: MappingProxyType({}))
    pinned: PinnedResources | None = None
    # Bundle servers with no listing yet (connecting, or down): their tools are not granted
    # now, and a call to one is told the server is unavailable, not that it is forbidden.
    unavailable: frozenset[str] = frozenset()

    def tools(self) -> dict[str, Tool]:
        """Return every gated tool, plus `tool_search` when some are deferred."""
        tools: dict[str, Tool] = {**self.eager, **self.deferred}
        if self.deferred:
            tools[TOOL_SEARCH_NAME] = ToolSearch(t.spec for t in self.deferred.values())
        return tools

    def finish(self, filtered: Mapping[str, Tool]) -> McpFinish:
        """Settle the deferred tools against the seam's filtered tool set (see module doc)."""
        tools = dict(filtered)
        kept = {n: t for n, t in tools.items() if n in self.deferred}
        if isinstance(tools.get(TOOL_SEARCH_NAME), ToolSearch) and kept:
            tools[TOOL_SEARCH_NAME] = ToolSearch(t.spec for t in kept.values())
            section = deferred_section(t.spec for t in kept.values())
            return McpFinish(tools=tools, deferred=frozenset(kept), sections=((DEFERRED_SECTION, section),))
        # No way to find them: deferred tools are not callable without their search.
        for name in kept:
            del tools[name]
        if isinstance(tools.get(TOOL_SEARCH_NAME), ToolSearch):
            del tools[TOOL_SEARCH_NAME]
        return McpFinish(tools=tools, deferred=frozenset(), sections=())


def scope_mcp(bundles: Sequence[McpBundleConfig], *, pool: McpPool, agent: str) -> McpScope:
    """Gate each bundle's servers and tools for `agent` over the pool's current listings."""
    eager: dict[str, McpTool] = {}
    deferred: dict[str, McpTool] = {}
    pinned: dict[tuple[str, str], None] = {}
    unavailable: set[str] = set()
    for bundle in bundles:
        for server in bundle.servers:
            offer = pool.offer(server, agent)
            if offer is None:
                unavailable.add(server)
                continue  # not connected: nothing to grant from it (never a guess)
            patterns = bundle.tools.get(server, ())
            for remote in offer.tools:
                if not matches_any(remote.name, patterns):
                    continue
                name = qualified_name(server, remote.name)
                if name is None or unusable_reason(server, remote) is not None:
                    continue  # logged once per listing by the connection, reported by check --connect
                tool = McpTool.bind(pool=pool, server=server, agent=agent, remote=remote, name=name)
                if bundle.mode == "eager":
                    eager[name] = tool
                    deferred.pop(name, None)
                elif name not in eager:
                    deferred[name] = tool
            listed = [r.uri for r in offer.resources]
            for entry in bundle.pinned_resources.get(server, ()):
                for uri in _pinned_uris(entry, listed):
                    pinned[(server, uri)] = None
    return McpScope(
        eager=MappingProxyType(eager),
        deferred=MappingProxyType(deferred),
        pinned=PinnedResources(pool=pool, agent=agent, entries=tuple(pinned)) if pinned else None,
        unavailable=frozenset(unavailable),
    )


def _pinned_uris(entry: str, listed: Iterable[str]) -> list[str]:
    # A glob pins the listed resources it matches; an exact URI is pinned as written
    # (resource templates produce URIs a server does not list).
    if _GLOB_CHARS & set(entry):
        return sorted(u for u in listed if matches_any(u, (entry,)))
    return [entry]
