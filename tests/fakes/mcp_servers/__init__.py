"""Real MCP servers (built on `mcp.server.mcpserver.MCPServer`) that the tests connect to."""
