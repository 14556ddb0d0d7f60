"""McpPool: one connection per MCP server for the whole daemon (per (server, agent) when isolated).

Lifecycle::

    async with McpPool(config) as pool:                 # owns one task per connection
        await pool.ensure_connected(["github"], agent="ops")
        ...                                              # resolve() reads pool.offer(...)
    # every session is closed and every server process stopped here

`resolve()`/`assemble()` stay synchronous: they read `offer()`, the last listing of each
server. `generation` changes whenever any listing changes (a connect, a list-changed
refresh), so cached executions are re-resolved and each agent's gating re-applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from orchestrator.config import Config, McpServerConfig
from orchestrator.errors import ToolFailure
from orchestrator.lifecycle import Lifecycle
from orchestrator.mcp.connection import Backoff, ConnectionState, McpConnection
from orchestrator.mcp.content import render_call_result, render_resource
from orchestrator.mcp.errors import McpServerUnavailable
from orchestrator.mcp.offer import ServerOffer

__all__ = ["ConnectionStatus", "McpPool"]

_CONNECT_TIMEOUT_S: Final = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionStatus:
    """One connection as `orchestrator check --connect` and logs report it."""

    server: str
    agent: str | None
    state: ConnectionState
    last_error: str | None
    offer: ServerOffer | None
    lifecycle: Lifecycle = Lifecycle.CONNECTING  # the one state value `/health`, metrics and status show
    since: float = 0.0  # wall-clock seconds when it entered `lifecycle`


class McpPool:
    """Owns every MCP connection of one daemon; an async context manager."""

    def __init__(
        self,
        config: Config,
        *,
        connect_timeout_s: float = _CONNECT_TIMEOUT_S,
        backoff: Backoff | None = None,
    ) -> None:
        self._servers: Mapping[str, McpServerConfig] = config.mcp.servers
        self._base: Path | None = config.source.parent if config.source else None
        self._connect_timeout_s = connect_timeout_s
        self._backoff = backoff or Backoff()
        self._connections: dict[tuple[str, str | None], McpConnection] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._group: asyncio.TaskGroup | None = None
        self._generation = 0

    @property
    def generation(self) -> int:
        """Return a number that changes whenever any server's listing changes."""
        return self._generation

    async def __aenter__(self) -> McpPool:
        group = asyncio.TaskGroup()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # Close gracefully even when the body failed (each session runs the transport's own
        # shutdown: stdin closed, the process waited for, then killed); the body's exception
        # then propagates unwrapped instead of inside the group's ExceptionGroup.
        for connection, task in zip(self._connections.values(), self._tasks):
            connection.close()
            if connection.connecting:
                task.cancel()  # do not wait out a connect timeout on the way down
        group, self._group = self._group, None
        if group is not None:
            await group.__aexit__(None, None, None)

    async def ensure_connected(self, servers: Iterable[str], *, agent: str | None = None) -> None:
        """Connect `servers` (for `agent` where a server is isolated per agent) and wait.

        Returns once each is ready; raises `McpServerUnavailable` naming every server
        whose first attempt failed (it keeps retrying in the background).
        """
        connections = [self._connection(server, agent) for server in dict.fromkeys(servers)]
        for connection in connections:
            await connection.settled()
        failures = [
            (c.server, c.last_error or c.state.value)
            for c in connections
            if c.state is not ConnectionState.READY
        ]
        if failures:
            raise McpServerUnavailable(failures)

    async def first_connects(self, servers: Iterable[str], *, agent: str | None = None) -> None:
        """Wait, up to each one's `ready_wait_s`, for those of `servers` still on their first connect.

        A turn that starts while the daemon's servers are still coming up (the first turn
        after READY) calls this before it resolves, so the tools of a server that connects
        within the wait are offered to it; it never raises (a server not up in time is left
        out of that turn, as before).
        """
        connections = [
            found for server in dict.fromkeys(servers)
            if (found := self._connections.get(self._key(server, agent))) is not None
        ]
        if connections:
            await asyncio.gather(*(connection.first_connect() for connection in connections))

    def offer(self, server: str, agent: str | None) -> ServerOffer | None:
        """Return what `server` last listed for `agent`, or None when it never connected."""
        connection = self._connections.get(self._key(server, agent))
        return connection.offer if connection is not None else None

    def status(self) -> tuple[ConnectionStatus, ...]:
        """Return every connection's state, in creation order."""
        return tuple(
            ConnectionStatus(
                server=server, agent=agent, state=c.state, last_error=c.last_error, offer=c.offer,
                lifecycle=c.lifecycle.state, since=c.lifecycle.since,
            )
            for (server, agent), c in self._connections.items()
        )

    async def call_tool(
        self, server: str, agent: str | None, tool: str, arguments: Mapping[str, Any], *, display: str
    ) -> str:
        """Call `tool` on `server` as `agent` and return its text; raises `ToolFailure`."""
        connection = self._existing(server, agent, display)
        result = await connection.call_tool(tool, arguments, display=display)
        return render_call_result(display, result)

    async def read_resource(self, server: str, agent: str | None, uri: str) -> str:
        """Read `uri` from `server` as `agent` and return its text; raises `ToolFailure`."""
        display = f"{server}:{uri}"
        connection = self._existing(server, agent, display)
        return render_resource(await connection.read_resource(uri, display=display))

    def _key(self, server: str, agent: str | None) -> tuple[str, str | None]:
        config = self._servers.get(server)
        isolated = config is not None and config.isolation == "per_agent"
        return (server, agent if isolated else None)

    def _existing(self, server: str, agent: str | None, display: str) -> McpConnection:
        connection = self._connections.get(self._key(server, agent))
        if connection is None or self._group is None:
            raise ToolFailure(display, f"MCP server {server!r} is not connected")
        return connection

    def _connection(self, server: str, agent: str | None) -> McpConnection:
        if self._group is None:
            raise RuntimeError("McpPool is not running; use `async with McpPool(config) as pool:`")
        key = self._key(server, agent)
        connection = self._connections.get(key)
        if connection is None:
            config = self._servers.get(server)
            if config is None:
                raise McpServerUnavailable([(server, "it is not configured under [mcp.servers]")])
            connection = McpConnection(
                server=server,
                config=config,
                base=self._base,
                connect_timeout_s=self._connect_timeout_s,
                backoff=self._backoff,
                on_offer=self._bump,
            )
            self._connections[key] = connection
            self._tasks.append(
                self._group.create_task(connection.run(), name=f"mcp:{server}:{key[1] or '*'}")
            )
        return connection

    def _bump(self) -> None:
        self._generation += 1
