"""`forgetful`: a handshake-era MCP server on streamable HTTP that can forget its sessions.

Serves in-process on 127.0.0.1 (`async with ForgetfulMcp() as server:`, then `server.url`).
It speaks the 2025-06-18 transport: `initialize` opens a session named in the
`Mcp-Session-Id` response header, and every later request must carry it. `forget()` drops
every session, as a restarted server or an expired session does; a request naming an unknown
session is then answered as the spec says (404, with a JSON-RPC error body as the Python and
TypeScript SDK servers send) or, with `unknown_session_status=400`, the way some servers do.
Nothing here imports the MCP SDK: it is an independent implementation of the wire protocol.

Evidence: `calls` counts each tool call that ran, `initializes` the sessions opened and
`refused` the requests answered with the unknown-session status.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from types import TracebackType
from typing import Any, Final

from aiohttp import web

from tests.fakes.loopback import start_app

__all__ = ["ForgetfulMcp"]

PROTOCOL_VERSION: Final = "2025-06-18"
_TOOLS: Final = [
    {"name": "echo", "description": "Echo the text back.", "inputSchema": {
        "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
    {"name": "session", "description": "Report the session this call ran in.",
     "inputSchema": {"type": "object", "properties": {}}},
]


class ForgetfulMcp:
    """The server; `forget()` makes it lose every session it knows."""

    def __init__(self, *, unknown_session_status: int = 404) -> None:
        self.unknown_session_status = unknown_session_status
        self.calls: Counter[str] = Counter()
        self.initializes = 0
        self.refused = 0
        self._sessions: set[str] = set()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> ForgetfulMcp:
        app = web.Application()
        app.router.add_post("/mcp", self._post)
        app.router.add_get("/mcp", self._get)
        app.router.add_delete("/mcp", self._delete)
        self._runner, port = await start_app(app)
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def forget(self) -> None:
        """Drop every session (a restart or an expiry)."""
        self._sessions.clear()

    async def _post(self, request: web.Request) -> web.StreamResponse:
        try:
            message = json.loads(await request.read())
        except ValueError:
            return _error(None, -32700, "Parse error", status=400)
        if not isinstance(message, dict):
            return _error(None, -32600, "batches are not supported", status=400)
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            session = secrets.token_hex(16)
            self._sessions.add(session)
            self.initializes += 1
            result = {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "forgetful", "version": "1"},
            }
            return _result(ident, result, headers={"Mcp-Session-Id": session})
        session = request.headers.get("Mcp-Session-Id")
        if session is None:
            if method == "server/discover":  # the modern era's probe: this server predates it
                return _error(ident, -32601, "Method not found")
            return _error(ident, -32000, "Bad Request: No valid session ID provided", status=400)
        if session not in self._sessions:
            self.refused += 1
            return _error(ident, -32001, "Session not found", status=self.unknown_session_status)
        if ident is None:  # a notification
            return web.Response(status=202)
        if method == "tools/list":
            return _result(ident, {"tools": _TOOLS})
        if method == "ping":
            return _result(ident, {})
        if method == "tools/call":
            params = message.get("params") or {}
            name, arguments = params.get("name"), params.get("arguments") or {}
            if name == "echo":
                self.calls["echo"] += 1
                return _result(ident, _text(str(arguments.get("text", ""))))
            if name == "session":
                self.calls["session"] += 1
                return _result(ident, _text(session))
            return _error(ident, -32602, f"Unknown tool: {name}")
        return _error(ident, -32601, "Method not found")

    async def _get(self, request: web.Request) -> web.StreamResponse:
        return web.Response(status=405)  # no server-initiated stream (allowed by the spec)

    async def _delete(self, request: web.Request) -> web.StreamResponse:
        self._sessions.discard(request.headers.get("Mcp-Session-Id", ""))
        return web.Response(status=200)


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _result(ident: Any, result: dict[str, Any], *, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": ident, "result": result}, headers=headers)


def _error(ident: Any, code: int, message: str, *, status: int = 200) -> web.Response:
    body = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return web.json_response(body, status=status)
