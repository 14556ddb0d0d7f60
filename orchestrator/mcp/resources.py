"""PinnedResources: an agent's gated MCP resources, read once at the start of every turn."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loguru import logger

from orchestrator.errors import ToolFailure

if TYPE_CHECKING:
    from orchestrator.mcp.pool import McpPool

__all__ = ["PinnedResources"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PinnedResources:
    """Reads `(server, uri)` entries for one agent; the engine wraps each as untrusted data."""

    pool: McpPool
    agent: str
    entries: tuple[tuple[str, str], ...]

    async def read(self) -> Sequence[tuple[str, str]]:
        """Return `(source, text)` per entry; a failed read is reported in its text, never raised."""
        async with asyncio.TaskGroup() as group:
            reads = [group.create_task(self._read_one(server, uri)) for server, uri in self.entries]
        return [(f"mcp:{server}:{uri}", task.result()) for (server, uri), task in zip(self.entries, reads)]

    async def _read_one(self, server: str, uri: str) -> str:
        try:
            return await self.pool.read_resource(server, self.agent, uri)
        except ToolFailure as exc:
            logger.warning("pinned resource {} of MCP server {!r} unavailable: {}", uri, server, exc.reason)
            return f"[this pinned resource could not be read: {exc.reason}]"
