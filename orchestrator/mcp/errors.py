"""Errors of the MCP surface; each keeps its structured fields as attributes."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.errors import OrchestratorError

__all__ = ["McpServerUnavailable"]


class McpServerUnavailable(OrchestratorError):
    """One or more MCP servers could not be connected; `failures` holds (server, reason) pairs."""

    def __init__(self, failures: Sequence[tuple[str, str]]) -> None:
        self.failures = tuple(failures)
        super().__init__(
            "\n".join(
                f"MCP server {server!r} is unavailable: {reason} "
                f"(check [mcp.servers.{server}], or run `orchestrator check --connect`)"
                for server, reason in self.failures
            )
        )
