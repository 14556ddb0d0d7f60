"""`odd`: a real MCP server offering tools this client cannot use, over stdio.

Run as ``python -m tests.fakes.mcp_servers.odd``. It offers `fine` (usable), `bad name!`
(not a valid function name once qualified) and `job`, which a middleware lists with
`execution.taskSupport = "required"` (callable only as an MCP task, which this client does
not support yet). `counts` reports how often each tool ran.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from mcp.server.mcpserver import MCPServer


def build() -> MCPServer:
    """Return the server; see the module docstring."""
    app: MCPServer = MCPServer("odd", log_level="WARNING")
    calls: Counter[str] = Counter()

    @app.tool()
    def fine() -> str:
        """A tool anyone can call."""
        calls["fine"] += 1
        return "fine"

    @app.tool(name="bad name!")
    def bad_name() -> str:
        """A tool whose name cannot be a function name."""
        calls["bad name!"] += 1
        return "bad"

    @app.tool()
    def job() -> str:
        """A long job the server runs only as a task."""
        calls["job"] += 1
        return "job ran"

    @app.tool()
    def counts() -> str:
        """How often each tool ran in this process."""
        return ",".join(f"{k}={v}" for k, v in sorted(calls.items())) or "none"

    async def task_required(ctx: Any, call_next: Any) -> Any:
        result = await call_next(ctx)
        if ctx.method == "tools/list" and isinstance(result, dict):
            for tool in result.get("tools", []):
                if tool.get("name") == "job":
                    tool["execution"] = {"taskSupport": "required"}
        return result

    app.middleware.append(task_required)
    return app


if __name__ == "__main__":
    build().run()
