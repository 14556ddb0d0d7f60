"""MCP: pooled server connections (stdio, streamable HTTP), per-agent gating, tool_search, pinned resources.

Importing this package is cheap: the `mcp` SDK is imported only when a connection starts.
"""

from orchestrator.mcp.check import McpProbe, bundle_problems, probe_mcp
from orchestrator.mcp.connection import Backoff, ConnectionState
from orchestrator.mcp.errors import McpServerUnavailable
from orchestrator.mcp.offer import RemoteResource, RemoteTool, ServerOffer
from orchestrator.mcp.pool import ConnectionStatus, McpPool
from orchestrator.mcp.resources import PinnedResources
from orchestrator.mcp.scoping import DEFERRED_SECTION, McpFinish, McpScope, scope_mcp
from orchestrator.mcp.tool_search import ToolSearch
from orchestrator.mcp.naming import qualified_name
from orchestrator.mcp.tools import McpTool

__all__ = [
    "DEFERRED_SECTION",
    "Backoff",
    "ConnectionState",
    "ConnectionStatus",
    "McpFinish",
    "McpPool",
    "McpProbe",
    "McpScope",
    "McpServerUnavailable",
    "McpTool",
    "PinnedResources",
    "RemoteResource",
    "RemoteTool",
    "ServerOffer",
    "ToolSearch",
    "bundle_problems",
    "probe_mcp",
    "qualified_name",
    "scope_mcp",
]
