"""McpTool: the Tool adapter for one MCP server tool, bound to the pool, the server and one agent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from orchestrator.mcp.offer import RemoteTool
from orchestrator.tools import ToolSource, ToolSpec

if TYPE_CHECKING:
    from orchestrator.mcp.pool import McpPool

__all__ = ["McpTool"]

@dataclass(frozen=True, slots=True, kw_only=True)
class McpTool:
    """Calls one tool on one server as one agent; output is untrusted data."""

    spec: ToolSpec
    pool: McpPool
    server: str
    agent: str
    remote: str

    @classmethod
    def bind(cls, *, pool: McpPool, server: str, agent: str, remote: RemoteTool, name: str) -> McpTool:
        """Return the adapter for `remote` registered as `name`."""
        spec = ToolSpec(
            name=name,
            description=remote.description or f"Tool {remote.name!r} of MCP server {server!r}.",
            parameters=remote.input_schema,
            read_only=remote.read_only,
            untrusted_output=True,
            source=ToolSource.MCP,
        )
        return cls(spec=spec, pool=pool, server=server, agent=agent, remote=remote.name)

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Call the tool through the pool; raises `ToolFailure` for any fault."""
        return await self.pool.call_tool(
            self.server, self.agent, self.remote, arguments, display=self.spec.name
        )
