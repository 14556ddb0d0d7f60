"""The Agent Client Protocol path: `orchestrator acp --agent A` serves one agent on stdio."""

from orchestrator.acp.server import AcpServer, serve_acp

__all__ = ["AcpServer", "serve_acp"]
