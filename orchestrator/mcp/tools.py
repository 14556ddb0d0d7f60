"""McpTool: the Tool adapter for one MCP server tool, bound to the pool, the server and one agent."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from orchestrator.mcp.offer import RemoteTool
from orchestrator.tools import ToolSource, ToolSpec

if TYPE_CHECKING:
    from orchestrator.mcp.pool import McpPool

__all__ = ["SEPARATOR", "McpTool", "qualified_name", "unusable_reason"]

SEPARATOR: Final = "__"
# What OpenAI-compatible APIs accept as a function name.
_FUNCTION_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")


def qualified_name(server: str, tool: str) -> str | None:
    """Return `<server>__<tool>`, or None when that is not a valid function name."""
    name = f"{server}{SEPARATOR}{tool}"
    return name if _FUNCTION_NAME.fullmatch(name) else None


def unusable_reason(server: str, remote: RemoteTool) -> str | None:
    """Return why `remote` cannot be offered to a model (None when it can)."""
    if qualified_name(server, remote.name) is None:
        return (
            f"'{server}{SEPARATOR}{remote.name}' is not a valid function name "
            "(letters, digits, '_' and '-', at most 64)"
        )
    if remote.task_required:
        return "it runs only as an MCP task (execution.taskSupport = \"required\"), which is not supported yet"
    return None


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
